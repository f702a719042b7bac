package observe_test

import (
	"context"
	"testing"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/observe"
)

// The observer records a node's key only when it changes, each change with
// the time its previous read was sent: the old owner still held the key
// then, and a checker must not look for what removed it any earlier.
func TestObservationsCarryTheirPreviousRead(t *testing.T) {
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := cl.Nodes()[0]
	c := cluster.NewClient(n.Addr(), cluster.ClientOptions{})
	defer c.Close()
	rec := history.NewRecorder(nil, 0)
	ob := observe.Start(observe.Options{Nodes: []*cluster.Node{n}, Keys: []string{"lock"}, Rec: rec, Interval: 5 * time.Millisecond})
	time.Sleep(60 * time.Millisecond)
	setAt := rec.Now()
	if err := c.Set(ctx, "lock", "A", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	changedAt := rec.Now()
	if err := c.Set(ctx, "lock", "B", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	ob.Stop()

	obs := checker.ObservationsOf(rec.Ops())[n.Name]
	var owners []string
	for _, o := range obs {
		owners = append(owners, o.Owner)
	}
	if len(obs) != 3 || obs[0].Owner != "" || obs[1].Owner != "A" || obs[2].Owner != "B" {
		t.Fatalf("want the absent key, then A, then B, recorded once each, got %q", owners)
	}
	if obs[0].Prior != 0 {
		t.Errorf("the first read has no read before it, got prior %d", obs[0].Prior)
	}
	a, b := obs[1], obs[2]
	// B's previous read found A: it was sent after A was set (and so
	// after A's first read), before B was, and long after A's first
	// read, which is all a checker knew of A before.
	if b.Prior <= setAt || b.Prior >= b.At || b.Prior > changedAt {
		t.Errorf("B's previous read was sent at %d: want it after A was set (%d), by the time B was (%d) and before B was read (%d)",
			b.Prior, setAt, changedAt, b.At)
	}
	if b.Prior-a.At < int64(50*time.Millisecond) {
		t.Errorf("A was held 100 ms, read every 5 ms: its last read (%d) should be long after its first (%d)", b.Prior, a.At)
	}
}
