package nemesis_test

import (
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
	rc, err := e.cl.AddRedisCluster(ctx, cluster.RedisClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := rc.Client("c1", cluster.ClientOptions{})
	defer c.Close()
	e.must(c.Set(ctx, "lock", "held", time.Minute).Err())
	master, _, err := rc.Owner(ctx, "lock")
	e.must(err)
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
