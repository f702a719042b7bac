// Package joblock is a user's lock, written outside locktorture: the
// nightly-job guard a team built on github.com/bsm/redislock, which keeps
// its lease alive with Refresh while the job runs. It is here to show how
// such a lock is put under locktorture's stories from its own module.
package joblock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/locktorture/locktorture/locks"
)

// Guard is one worker's guard. The team's settings: retry every 20 ms,
// refresh at half the TTL.
type Guard struct {
	cfg    locks.Config
	locker *redislock.Client
}

// New builds a guard on the first Redis the harness hands it; the harness
// reaches every command boundary through that client, so the guard needs
// nothing else to be faulted.
func New(cfg locks.Config) locks.Lock {
	return &Guard{cfg: cfg, locker: redislock.New(cfg.Clients[0])}
}

// held is what a lease carries: the library's lock and the refresher's stop.
type held struct {
	lock *redislock.Lock
	stop context.CancelFunc
	done chan struct{}
}

// Acquire obtains the lock, or says which of locktorture's three errors
// the library's answer means.
func (g *Guard) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Wait+g.cfg.TTL)
	defer cancel()
	retry := redislock.LimitRetry(redislock.LinearBackoff(20*time.Millisecond), int(g.cfg.Wait/(20*time.Millisecond)))
	l, err := g.locker.Obtain(ctx, key, g.cfg.TTL, &redislock.Options{RetryStrategy: retry})
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		return locks.Lease{}, locks.ErrNotAcquired
	case err != nil:
		return locks.Lease{}, fmt.Errorf("%w: %v", locks.ErrUnknown, err)
	}
	rctx, stop := context.WithCancel(context.Background())
	h := &held{lock: l, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			select {
			case <-rctx.Done():
				return
			case <-time.After(g.cfg.TTL / 2):
			}
			if l.Refresh(rctx, g.cfg.TTL, nil) != nil {
				return
			}
		}
	}()
	return locks.Lease{Key: key, Token: l.Token(), Handle: h}, nil
}

// Release stops the refresher and releases the lock.
func (g *Guard) Release(ctx context.Context, lease locks.Lease) error {
	h := lease.Handle.(*held)
	h.stop()
	<-h.done
	err := h.lock.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrLockNotHeld):
		return locks.ErrNotHeld
	}
	return fmt.Errorf("%w: %v", locks.ErrUnknown, err)
}
