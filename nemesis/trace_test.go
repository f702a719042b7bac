package nemesis_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// The trace has every command of a hooked client with its op, its reply
// and when it was sent and answered: an acquire's, a renewal's between
// ops, a retired process's, a failed one's error, and a paused client's
// command answered after the pause.
func TestTraceKeepsEachCommandWithItsOpAndReply(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	c := e.hooked(g, 0, 0, time.Second)
	old := e.hooked(g, 0, 7, time.Second)

	g.End(0, 0) // no op yet: what follows is the client's, between ops
	opCtx := g.Begin(ctx, 0, 0, history.Acquire)
	if ok, err := c.SetNX(opCtx, "lock", "tok", time.Minute).Result(); err != nil || !ok {
		t.Fatalf("SET NX: %v %v", ok, err)
	}
	g.End(0, 0)
	g.PauseClient(0, 300*time.Millisecond)
	if err := c.PExpire(ctx, "lock", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_ = old.Get(ctx, "lock").Err() // process 7's goroutine, replaced by process 0
	_ = c.Do(ctx, "NOSUCHCOMMAND").Err()

	// A connection's set-up (HELLO, as go-redis dials) is traced too,
	// inside the command that dialled.
	all, dropped := g.Trace()
	var cmds []nemesis.Traced
	for _, c := range all {
		if c.Command != "HELLO" {
			cmds = append(cmds, c)
		}
	}
	if dropped != 0 || len(cmds) != 4 || len(all) != 6 {
		t.Fatalf("traced %d commands (%d dropped), want 4: %+v", len(cmds), dropped, cmds)
	}
	want := []struct{ op, command, reply string }{
		{history.Acquire, "SET NX", "true"},
		{nemesis.Renewal, "PEXPIRE", "true"},
		{"retired", "GET", "tok"},
		{nemesis.Renewal, "NOSUCHCOMMAND", "error: ERR unknown command"},
	}
	for i, w := range want {
		got := cmds[i]
		if got.Op != w.op || got.Command != w.command || !strings.HasPrefix(got.Reply, w.reply) || got.Answered < got.Sent || got.Sent == 0 {
			t.Errorf("command %d: %+v, want op %s, %s answered %q", i, got, w.op, w.command, w.reply)
		}
	}
	if took := time.Duration(cmds[1].Answered - cmds[1].Sent); took < 250*time.Millisecond {
		t.Errorf("the paused client's PEXPIRE was answered %v after it was sent, want the pause's 300 ms", took)
	}
	var b bytes.Buffer
	if err := g.WriteTrace(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "sent\t") || !strings.Contains(lines[1], "\tc0\t0\tacquire\tSET NX\tlock\ttrue") {
		t.Errorf("WriteTrace:\n%s", b.String())
	}
}
