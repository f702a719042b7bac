package nemesis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/nemesis"
)

// The nemesis never promotes a replica Sentinel watches: it waits for
// Sentinel to, and records the promotion only when it has happened. A
// promotion that does not come is a failed op and an error, so a run
// whose failover never happened cannot pass for one that did.
func TestSentinelPromotionIsAwaitedNotMade(t *testing.T) {
	e := newEnv(t, names("m", "r")...)
	m := e.cl.Node("m")
	e.must(e.cl.Node("r").ReplicaOf(ctx, m))
	s, err := e.cl.AddSentinels(ctx, cluster.SentinelOptions{Master: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nem.AwaitSentinelPromotion(ctx, s, "r", 300*time.Millisecond); err == nil {
		t.Fatal("a promotion was seen while the master lives")
	}
	if role, _ := e.cl.Node("r").Role(ctx); role != "slave" {
		t.Fatalf("waiting for Sentinel changed the replica: it says %q", role)
	}
	// Replication is cut first, as the story cuts it: Sentinel still
	// promotes the replica, whose link goes down only with the master.
	e.must(e.nem.Partition(nemesis.Grudge{cluster.ReplicationPeer("r"): {"m"}}))
	e.must(e.nem.KillNode("m"))
	if err := e.nem.AwaitSentinelPromotion(ctx, s, "r", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var failed, promoted int
	for _, op := range e.rec.Ops() {
		if op.Process != history.NemesisProcess || op.F != string(fault.Promote) {
			continue
		}
		if op.Value == nil || op.Value.Target != "r (by sentinel)" || op.Value.Site == nil || op.Value.Site.Node != "r" {
			t.Fatalf("promote op %+v: want target %q at node r", op.Value, "r (by sentinel)")
		}
		switch op.Type {
		case history.Fail:
			failed++
		case history.OK:
			promoted++
		}
	}
	if failed != 1 || promoted != 1 {
		t.Fatalf("%d failed and %d ok promote ops recorded, want one of each", failed, promoted)
	}
	if role, _ := e.cl.Node("r").Role(ctx); role != "master" {
		t.Fatalf("after the recorded promotion the replica says %q", role)
	}
	// A promotion later than the story allows is a note the run is judged
	// starved by, not a fault.
	if u := lateness.Unfitted(e.rec.Ops()); u != "" {
		t.Fatalf("a promotion in time left a note: %s", u)
	}
	e.must(e.nem.Late("r", 5900*time.Millisecond, 3*time.Second))
	if u := lateness.Unfitted(e.rec.Ops()); !strings.Contains(u, "the promotion of r came 5.9s after the wait began, and the story allows 3s") {
		t.Fatalf("a late promotion: the run's note is %q", u)
	}
}
