package library_test

import (
	"testing"

	"github.com/locktorture/locktorture/worker"
)

// redis-py's worker promises the TTL from the SET that took the key: its
// acquire() sends SET NX PX every 10 ms while the key is taken, and a
// promise counted from the call would end up to a wait's worth before the
// key does, hiding a successor let in during the key's life.
func TestRedisPyPromisesTheTTLFromTheSetThatTookTheKey(t *testing.T) {
	node, store := redisAndStore(t)
	open := func(owner string) *worker.Proc {
		return startWorker(t, worker.Hello{Lock: "redis-py", Nodes: []string{node.Addr()}, Store: store.Addr(),
			TTLNS: int64(ttl), WaitNS: int64(2 * ttl), Owner: owner}, worker.Options{})
	}
	promisesFromTheTakingTry(t, open("a"), open("b"))
}
