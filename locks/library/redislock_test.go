package library_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// redislock promises the TTL from the try that took the key: a waiter whose
// Obtain retried while another client held the key for half a TTL gets a
// promise that ends about a TTL after the release, not a TTL after its call
// (which a loaded machine's slow tries can make a promise of a few ms), and
// never later than the key can live.
func TestRedislockPromisesTheTTLFromTheTryThatTookTheKey(t *testing.T) {
	ctx := context.Background()
	info, err := locks.Lookup("redislock")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Start(ctx, cluster.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	open := func(owner string) locks.Lock {
		c := cluster.NewClient(cl.Nodes()[0].Addr(), cluster.ClientOptions{Timeout: ttl / 2})
		t.Cleanup(func() { c.Close() })
		l, err := locks.Build(info, locks.Config{TTL: ttl, Wait: 2 * ttl, RetryDelay: ttl / 20, Owner: owner, Clients: []redis.UniversalClient{c}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	promisesFromTheTakingTry(t, open("a"), open("b"))
}

// promisesFromTheTakingTry has a hold a's key for half a TTL while b's
// acquire waits, and b's promise end about a TTL after a's release, no
// later than a TTL after its acquire returned.
func promisesFromTheTakingTry(t *testing.T, a, b locks.Lock) {
	t.Helper()
	ctx := context.Background()
	held, err := a.Acquire(ctx, "k")
	is(t, "a's acquire", err, nil)
	time.AfterFunc(ttl/2, func() { _ = a.Release(ctx, held) })
	called := time.Now()
	lease, err := b.Acquire(ctx, "k")
	returned := time.Now()
	is(t, "b's acquire once a released", err, nil)
	if early := called.Add(ttl + ttl/4); lease.ValidUntil.Before(early) {
		t.Fatalf("b's promise ends %v after its call, returned after %v: it must count from a try after the release at %v",
			lease.ValidUntil.Sub(called), returned.Sub(called), ttl/2)
	}
	if late := returned.Add(ttl); lease.ValidUntil.After(late) {
		t.Fatalf("b's promise ends %v after its acquire returned: longer than the key it set can live", lease.ValidUntil.Sub(returned))
	}
}
