package nemesis

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/history"
)

// Past twice traceMax commands the trace lets the oldest go and keeps the
// latest traceMax or more; a reply finds its command however many came
// after it, and one whose command was let go changes nothing.
func TestTraceKeepsTheLatestCommands(t *testing.T) {
	g := NewGate(history.NewRecorder(nil, 0))
	ok := func() []redis.Cmder {
		cmd := redis.NewStatusCmd(context.Background(), "set")
		cmd.SetVal("OK")
		return []redis.Cmder{cmd}
	}
	send := func(key string) int { return g.traceSend(0, 0, [][]string{{"set", key, "v"}}) }
	first := send("first")
	for i := range 2*traceMax - 2 {
		g.traceReply(send("k"+strconv.Itoa(i)), ok(), nil)
	}
	waiting := send("waiting") // the last before the trace lets older ones go
	n := 20
	for i := range n {
		g.traceReply(send("k"+strconv.Itoa(i)), ok(), nil)
	}
	g.traceReply(first, ok(), nil)
	g.traceReply(waiting, ok(), nil)
	cmds, dropped := g.Trace()
	if total := 2*traceMax + n; dropped == 0 || dropped+len(cmds) != total || len(cmds) < traceMax || len(cmds) > 2*traceMax {
		t.Fatalf("kept %d, dropped %d of %d", len(cmds), dropped, total)
	}
	kept := false
	for _, c := range cmds {
		if c.Key == "first" {
			t.Fatalf("the first command is still kept: %+v", c)
		}
		if c.Reply != "OK" || c.Answered == 0 {
			t.Fatalf("a kept command without its reply: %+v", c)
		}
		kept = kept || c.Key == "waiting"
	}
	if !kept {
		t.Errorf("the command answered after the trace let older ones go is not kept")
	}
	if last := cmds[len(cmds)-1]; last.Key != "k"+strconv.Itoa(n-1) {
		t.Errorf("the latest command kept: %+v", last)
	}
}

// BenchmarkTrace is what the trace adds to each command of a lock's
// connection: its note as issued and as answered.
//
//	go test -run '^$' -bench Trace ./nemesis/
func BenchmarkTrace(b *testing.B) {
	g := NewGate(history.NewRecorder(nil, 0))
	cmd := redis.NewStatusCmd(context.Background(), "set", "lock", "token", "nx", "px", "500")
	args := [][]string{{"set", "lock", "token", "nx", "px", "500"}}
	cmd.SetVal("OK")
	for b.Loop() {
		g.traceReply(g.traceSend(0, 0, args), []redis.Cmder{cmd}, nil)
	}
}
