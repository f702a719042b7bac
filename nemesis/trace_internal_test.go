package nemesis

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/history"
)

// Past twice traceMax commands the trace lets the oldest go, keeps the
// latest traceMax or more, and a reply still finds its command.
func TestTraceKeepsTheLatestCommands(t *testing.T) {
	g := NewGate(history.NewRecorder(nil, 0))
	n := 2*traceMax + 10
	for i := range n {
		key := "k" + strconv.Itoa(i)
		cmd := redis.NewStatusCmd(context.Background(), "set", key, "v")
		id := g.traceSend(0, 0, [][]string{{"set", key, "v"}})
		cmd.SetVal("OK")
		g.traceReply(id, []redis.Cmder{cmd}, nil)
	}
	cmds, dropped := g.Trace()
	if dropped+len(cmds) != n || len(cmds) < traceMax || len(cmds) > 2*traceMax {
		t.Fatalf("kept %d, dropped %d of %d", len(cmds), dropped, n)
	}
	for _, c := range []Traced{cmds[0], cmds[len(cmds)-1]} {
		if c.Reply != "OK" || c.Answered == 0 {
			t.Errorf("a kept command without its reply: %+v", c)
		}
	}
	if last := cmds[len(cmds)-1]; last.Key != "k"+strconv.Itoa(n-1) {
		t.Errorf("the latest command kept: %+v", last)
	}
}

// BenchmarkTrace is what the trace adds to each command of a lock's
// connection: its note as sent and as answered.
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
