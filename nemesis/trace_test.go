package nemesis_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// The trace has every command of a hooked client with what its process
// was doing and its reply, and when it was issued and answered: a command
// before the first op, an acquire's, a renewal's between ops answered
// after a pause of the client, a replaced process's, a refused one's
// error.
func TestTraceKeepsEachCommandWithItsOpAndReply(t *testing.T) {
	e := newEnv(t, names("n1")...)
	g := nemesis.NewGate(e.rec)
	old := e.hooked(g, 0, 0, time.Second)
	c := e.hooked(g, 0, 5, time.Second) // the client's process after 0

	if err := c.Exists(ctx, "Lock").Err(); err != nil {
		t.Fatal(err)
	}
	opCtx := g.Begin(ctx, 0, 5, history.Acquire)
	if ok, err := c.SetNX(opCtx, "Lock", "tok", time.Minute).Result(); err != nil || !ok {
		t.Fatalf("SET NX: %v %v", ok, err)
	}
	g.End(0, 5)
	paused := e.rec.Now()
	g.PauseClient(0, 300*time.Millisecond)
	if err := c.PExpire(ctx, "Lock", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_ = old.Get(ctx, "Lock").Err()
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
	want := []struct {
		process            int
		op, command, reply string
	}{
		{5, "setup", "EXISTS", "0"},
		{5, history.Acquire, "SET NX", "true"},
		{5, nemesis.Renewal, "PEXPIRE", "true"},
		{0, "retired", "GET", "tok"},
		{5, nemesis.Renewal, "NOSUCHCOMMAND", "error: ERR unknown command"},
	}
	if dropped != 0 || len(cmds) != len(want) {
		t.Fatalf("traced %d commands (%d dropped), want %d: %+v", len(cmds), dropped, len(want), all)
	}
	for i, w := range want {
		got := cmds[i]
		if got.Process != w.process || got.Op != w.op || got.Command != w.command || !strings.HasPrefix(got.Reply, w.reply) ||
			got.Issued == 0 || got.Answered < got.Issued || (got.Key != "Lock" && i < 4) {
			t.Errorf("command %d: %+v, want process %d, op %s, %s on Lock answered %q", i, got, w.process, w.op, w.command, w.reply)
		}
	}
	if late := time.Duration(cmds[2].Answered - paused); late < 300*time.Millisecond {
		t.Errorf("the paused client's PEXPIRE was answered %v after the pause began, want its 300 ms", late)
	}
	var b bytes.Buffer
	if err := nemesis.WriteTrace(&b, all, dropped); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(all)+1 || !strings.HasPrefix(lines[0], "issued\t") || !strings.Contains(b.String(), "\tc0\t5\tacquire\tSET NX\tLock\ttrue\n") {
		t.Errorf("WriteTrace:\n%s", b.String())
	}
}
