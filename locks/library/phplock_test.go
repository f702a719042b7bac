package library_test

import (
	"context"
	"testing"
	"time"

	"github.com/locktorture/locktorture/locks"
)

// php-lock's PHPRedisMutex, its real worker on real Redis, on one node and
// as RedLock on five: a second client is refused (after the whole
// timeout, its only wait), a release releases, a lease held past the
// timeout is refused by unlock() (ExecutionOutsideLockException: not-held),
// stopped nodes are unknown both ways (LockAcquireException; a failed
// release that lost nodes), two stopped nodes of five still lock, and a
// crash at the reply of a SET NX that took a node (a command trap, through
// the traced php-redis clients) leaves that node's key to its EX, the
// timeout plus a second.
func TestPHPLockWorker(t *testing.T) {
	needPHP(t, "Malkusch/Lock/classes/mutex/PHPRedisMutex.php")
	for _, name := range []string{"php-lock-redis", "php-lock-redlock"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h := start(t, name)

			before := time.Now()
			lease, err := h.a.Acquire(ctx, "k")
			is(t, "first acquire", err, nil)
			// The library's own deadline: its timeout from before the try.
			if lease.ValidUntil.Before(before.Add(ttl)) || lease.ValidUntil.After(time.Now().Add(ttl)) {
				t.Fatalf("valid until %v: want the timeout after the try began, after %v", lease.ValidUntil, before)
			}
			is(t, "release", h.a.Release(ctx, lease), nil)

			// The library's wait is its timeout: b's try outlasts a's lease,
			// and a's unlock() then refuses to release.
			lease, err = h.a.Acquire(ctx, "k")
			is(t, "acquire after release", err, nil)
			_, err = h.b.Acquire(ctx, "k")
			is(t, "acquire while a holds it", err, locks.ErrNotAcquired)
			is(t, "release past the timeout", h.a.Release(ctx, lease), locks.ErrNotHeld)
			// Its key lives on a second past the timeout: other keys next.

			if len(h.nodes) > 1 {
				minority := h.nodes[:(len(h.nodes)-1)/2]
				pauseAll(t, minority, func() {
					lease, err = h.b.Acquire(ctx, "k1")
					is(t, "acquire with a minority of nodes stopped", err, nil)
					is(t, "release with a minority of nodes stopped", h.b.Release(ctx, lease), nil)
				})
			}

			lease, err = h.a.Acquire(ctx, "k2")
			is(t, "acquire before the nodes stop", err, nil)
			pauseAll(t, h.nodes, func() {
				is(t, "release to stopped nodes", h.a.Release(ctx, lease), locks.ErrUnknown)
				_, err = h.b.Acquire(ctx, "k3")
				is(t, "acquire from stopped nodes", err, locks.ErrUnknown)
			})

			crashAtTakingSET(t, name, h, "k4", "lock_k4", 2*ttl)
		})
	}
}
