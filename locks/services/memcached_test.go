package services

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// memcachedNode starts one real memcached in a cluster the test closes.
func memcachedNode(t *testing.T) *cluster.Node {
	t.Helper()
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Skip("memcached not installed (apt-get install memcached)")
	}
	c, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n, err := c.AddNode(context.Background(), cluster.NodeOptions{Name: "m1", Kind: "memcached"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mcClient builds the lock for one client, dialling the client's own
// link, with the lock's own Close run when the test ends.
func mcClient(t *testing.T, n *cluster.Node, name string, cfg locks.Config) (locks.Lock, *cluster.Link) {
	t.Helper()
	link, err := n.Link(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addrs = []string{link.Addr()}
	l, err := locks.Build(info(t, "memcached-add"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.(interface{ Close() error }).Close(); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return l, link
}

// holder reads who holds key straight from the node, past every link.
func holder(t *testing.T, n *cluster.Node, key string) string {
	t.Helper()
	c := memcache.New(n.Addr())
	defer c.Close()
	it, err := c.Get(key)
	if errors.Is(err, memcache.ErrCacheMiss) {
		return ""
	}
	if err != nil {
		t.Fatalf("get %s from the node: %v", key, err)
	}
	return string(it.Value)
}

func TestMemcachedAddExclusion(t *testing.T) {
	n := memcachedNode(t)
	ctx := context.Background()
	cfg := locks.Config{TTL: 3 * time.Second, Wait: 200 * time.Millisecond, RetryDelay: 20 * time.Millisecond}
	a, _ := mcClient(t, n, "c1", cfg)
	b, _ := mcClient(t, n, "c2", cfg)

	la, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := holder(t, n, "k"); got != la.Token {
		t.Fatalf("the node holds %q for k, want c1's token %q", got, la.Token)
	}
	start := time.Now()
	if _, err := b.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("c2 acquired a held lock: %v", err)
	}
	if waited := time.Since(start); waited < cfg.Wait {
		t.Errorf("c2 gave up after %s, before its wait of %s", waited, cfg.Wait)
	}
	// A non-owner's release, with a token that is not the holder's,
	// removes nothing.
	forged := la
	forged.Token = "not-c1"
	if err := b.Release(ctx, forged); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a non-owner's release: %v, want ErrNotHeld", err)
	}
	if got := holder(t, n, "k"); got != la.Token {
		t.Fatalf("after a non-owner's release the node holds %q, want c1's token", got)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Fatalf("the owner's release: %v", err)
	}
	if got := holder(t, n, "k"); got != "" {
		t.Fatalf("after the owner's release the node still holds %q", got)
	}
	if err := a.Release(ctx, la); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a second release: %v, want ErrNotHeld", err)
	}
	lb, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("c2 after c1's release: %v", err)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// A holder whose item expired releases nothing of its successor's.
func TestMemcachedAddReleaseAfterExpiry(t *testing.T) {
	n := memcachedNode(t)
	ctx := context.Background()
	// c1's lease is one second: below the lock's MinTTL (locks.Build does
	// not refuse it), so its item is gone within about a second. c2's is
	// the lock's shortest, 4 s: an item whose exptime is one second may
	// go at once (memcachedEarly), and c2's must outlive the check.
	cfg := locks.Config{TTL: time.Second, Wait: 3 * time.Second, RetryDelay: 20 * time.Millisecond}
	a, _ := mcClient(t, n, "c1", cfg)
	cfg.TTL = memcachedMinTTL
	b, _ := mcClient(t, n, "c2", cfg)
	la, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("c2 after c1's item expired: %v", err)
	}
	if err := a.Release(ctx, la); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("release after expiry: %v, want ErrNotHeld", err)
	}
	if got := holder(t, n, "k"); got != lb.Token {
		t.Fatalf("after c1's late release the node holds %q, want c2's token %q", got, lb.Token)
	}
}

// The deadline is honest: every item outlives the ValidUntil its add was
// given. Several keys, added a fifth of a second apart so they meet
// memcached's clock at different phases, are polled until they vanish;
// the reply that first misses an item came after it expired, so it must
// not come before ValidUntil.
func TestMemcachedAddDeadlineHonest(t *testing.T) {
	n := memcachedNode(t)
	ctx := context.Background()
	cfg := locks.Config{TTL: 3 * time.Second, Wait: time.Second, RetryDelay: 20 * time.Millisecond}
	l, _ := mcClient(t, n, "c1", cfg)
	const keys = 5
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		lost []time.Duration
	)
	for i := range keys {
		lease, err := l.Acquire(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		acquired := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := memcache.New(n.Addr())
			defer c.Close()
			for {
				_, err := c.Get(lease.Key)
				seen := time.Now()
				if err == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case !errors.Is(err, memcache.ErrCacheMiss):
					errs = append(errs, err)
				case seen.Before(lease.ValidUntil):
					errs = append(errs, fmt.Errorf("%s gone %s before its ValidUntil", lease.Key, lease.ValidUntil.Sub(seen)))
				case seen.Sub(acquired) > cfg.TTL+1500*time.Millisecond:
					errs = append(errs, fmt.Errorf("%s lived %s on an exptime of %s", lease.Key, seen.Sub(acquired), cfg.TTL))
				}
				lost = append(lost, seen.Sub(acquired))
				return
			}
		}()
		time.Sleep(200 * time.Millisecond)
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("lives of items added with exptime %s (ValidUntil %s after the add was sent): %v", cfg.TTL, cfg.TTL-memcachedEarly, lost)
}

// memcached keeps nothing: a restarted node has forgotten the lock, and a
// second client takes it while the first still holds a valid lease. This
// is why the lock does not claim node crashes.
func TestMemcachedAddRestartForgets(t *testing.T) {
	n := memcachedNode(t)
	ctx := context.Background()
	cfg := locks.Config{TTL: 10 * time.Second, Wait: 500 * time.Millisecond, RetryDelay: 20 * time.Millisecond}
	a, _ := mcClient(t, n, "c1", cfg)
	b, _ := mcClient(t, n, "c2", cfg)
	la, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("c2 on the restarted node: %v", err)
	}
	if now := time.Now(); !now.Before(la.ValidUntil) {
		t.Fatalf("c2 acquired only %s after c1's lease ran out: the restart proved nothing", now.Sub(la.ValidUntil))
	}
	// c1's pooled connection died with the old process, so its release
	// may fail on the wire; either way it must not remove c2's item.
	if err := a.Release(ctx, la); !errors.Is(err, locks.ErrNotHeld) && !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("c1's release on the restarted node: %v", err)
	}
	if got := holder(t, n, "k"); got != lb.Token {
		t.Fatalf("the node holds %q, want c2's token %q", got, lb.Token)
	}
}

// A reply lost on the link is an unknown outcome, not a refusal: the add
// landed, and the key is held by the client that was told nothing.
func TestMemcachedAddLostReplyIsUnknown(t *testing.T) {
	n := memcachedNode(t)
	ctx := context.Background()
	cfg := locks.Config{TTL: 3 * time.Second, Wait: 100 * time.Millisecond, RetryDelay: 20 * time.Millisecond}
	a, link := mcClient(t, n, "c1", cfg)
	b, _ := mcClient(t, n, "c2", cfg)
	if err := link.CutDirection("downstream"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, "k"); !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("add with its reply cut: %v, want ErrUnknown", err)
	}
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := holder(t, n, "k"); got == "" {
		t.Fatal("the add whose reply was cut did not land; the test shows nothing")
	}
	if _, err := b.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("c2 while c1's unacknowledged add holds k: %v, want ErrNotAcquired", err)
	}
}
