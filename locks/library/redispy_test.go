package library_test

import (
	"context"
	"testing"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/worker"
)

// redis-py's worker promises the TTL from the SET that took the key: its
// acquire() sends SET NX PX every 10 ms while the key is taken, and a
// promise counted from the call would end up to a wait's worth before the
// key does, hiding a successor let in during the key's life.
func TestRedisPyPromisesTheTTLFromTheSetThatTookTheKey(t *testing.T) {
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	store, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	open := func(owner string) *worker.Proc {
		return startWorker(t, worker.Hello{Lock: "redis-py", Nodes: []string{cl.Nodes()[0].Addr()}, Store: store.Addr(),
			TTLNS: int64(ttl), WaitNS: int64(2 * ttl), Owner: owner}, worker.Options{})
	}
	promisesFromTheTakingTry(t, open("a"), open("b"))
}
