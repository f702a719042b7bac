package nemesis

import (
	"context"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
)

// A process whose client is closed leaves the gate's books: long runs
// retire thousands of processes, and every pause walks what is there.
func TestClosedConnectionsLeaveTheBooks(t *testing.T) {
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	g := NewGate(history.NewRecorder(nil, 0))
	for p := 0; p < 3; p++ {
		c := cluster.NewClient(cl.Nodes()[0].Addr(), cluster.ClientOptions{})
		c.AddHook(g.Hook(0, p, true))
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	live := cluster.NewClient(cl.Nodes()[0].Addr(), cluster.ClientOptions{})
	live.AddHook(g.Hook(0, 3, true))
	defer live.Close()
	if err := live.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	n := len(g.procs)
	g.mu.Unlock()
	if n != 1 {
		t.Fatalf("the gate keeps %d processes, want only the live one", n)
	}
	g.freeze(0, 10*time.Millisecond) // walks only the live connection
}
