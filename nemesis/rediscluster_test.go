package nemesis_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// As with Sentinel, the nemesis waits for the cluster to fail a master
// over and records the promotion only once every live node sees it; a
// migration records where the slot went and how many keys moved with it.
func TestClusterPromotionAwaitedAndMigrationRecorded(t *testing.T) {
	e := newEnv(t)
	rc, master := clusterHolding(t, e)
	to := rc.Masters[0]
	if to == master {
		to = rc.Masters[1]
	}
	e.must(e.nem.MigrateStart(ctx, rc, "lock", to.Name))
	e.must(e.nem.MigrateEnd(ctx, rc, "lock", to.Name))
	if m, _, err := rc.Owner(ctx, "lock"); err != nil || m != to {
		t.Fatalf("the slot's master after the migration: %v %v, want %s", m, err, to.Name)
	}
	master, replica := to, rc.Partner(to)
	if err := e.nem.AwaitClusterPromotion(ctx, rc, replica.Name, 300*time.Millisecond); err == nil {
		t.Fatal("a promotion was seen while the master lives")
	}
	e.must(e.nem.KillNode(master.Name))
	e.must(e.nem.AwaitClusterPromotion(ctx, rc, replica.Name, 10*time.Second))
	count := map[string]int{}
	for _, op := range e.rec.Ops() {
		if op.Process != history.NemesisProcess || op.Type == history.Invoke {
			continue
		}
		count[op.F+"/"+string(op.Type)]++
		if op.F == string(fault.MigrateEnd) && !strings.Contains(op.Value.Target, "1 key(s) moved") {
			t.Errorf("migrate-end %q: want the one key moved", op.Value.Target)
		}
	}
	want := map[string]int{"migrate-start/ok": 1, "migrate-end/ok": 1, "promote/fail": 1, "promote/ok": 1, "kill/ok": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s ops recorded, want %d (all: %v)", count[k], k, n, count)
		}
	}
}

// clusterHolding starts a Redis Cluster on e whose key "lock" is set, and
// returns it and the master of the key's slot.
func clusterHolding(t *testing.T, e *env) (*cluster.RedisCluster, *cluster.Node) {
	t.Helper()
	rc, err := e.cl.AddRedisCluster(ctx, cluster.RedisClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := rc.Client("c1", cluster.ClientOptions{})
	defer c.Close()
	e.must(c.Set(ctx, "lock", "held", time.Minute).Err())
	master, _, err := rc.Owner(ctx, "lock")
	e.must(err)
	return rc, master
}

// A slot's second move waits for the first to be handed over, and then
// starts from the master the first left the slot on: a plan's steps timed
// for an idle machine do not overlap two moves of one slot on a loaded
// one.
func TestASlotsSecondMoveWaitsForTheFirst(t *testing.T) {
	e := newEnv(t)
	rc, master := clusterHolding(t, e)
	var others []*cluster.Node
	for _, m := range rc.Masters {
		if m != master {
			others = append(others, m)
		}
	}
	first, second := others[0], others[1]
	e.must(e.nem.MigrateStart(ctx, rc, "lock", first.Name))
	started := make(chan error, 1)
	go func() { started <- e.nem.MigrateStart(ctx, rc, "lock", second.Name) }()
	select {
	case err := <-started:
		t.Fatalf("the second move started while the first was under way: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	e.must(e.nem.MigrateEnd(ctx, rc, "lock", first.Name))
	e.must(<-started)
	e.must(e.nem.MigrateEnd(ctx, rc, "lock", second.Name))
	if m, _, err := rc.Owner(ctx, "lock"); err != nil || m != second {
		t.Fatalf("the slot's master after both moves: %v %v, want %s", m, err, second.Name)
	}
	var moves []string
	for _, op := range e.rec.Ops() {
		if op.Process == history.NemesisProcess && op.Type == history.OK {
			moves = append(moves, op.F+" "+op.Value.Target)
		}
	}
	want := fmt.Sprintf("%s→%s", first.Name, second.Name)
	if len(moves) != 4 || !strings.Contains(moves[2], want) || !strings.Contains(moves[3], want) {
		t.Fatalf("want the second move from %s, after the first ended: %q", first.Name, moves)
	}
}
