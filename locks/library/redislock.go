package library

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"

	"github.com/locktorture/locktorture/locks"
)

func redislockLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "redislock",
		Traits:  locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall},
		Library: "github.com/bsm/redislock",
		Summary: "bsm/redislock: Obtain with a linear-backoff retry, Release; SET NX PX and Lua compare-and-delete",
		Claims:  locks.LeaseClaims,
		New:     func(c locks.Config) locks.Lock { return &redisLock{cfg: c, client: redislock.New(c.Clients[0])} },
	})
	register(locks.Info{
		Name:    "redislock-refresh",
		Traits:  locks.Traits{Ends: locks.Renewed, Release: locks.OwnerChecked, Clock: locks.ServerWall},
		Library: "github.com/bsm/redislock",
		Summary: "bsm/redislock with the holder calling Refresh every TTL/3, as its README extends a lock: " +
			"a watchdog that users write themselves",
		Claims: locks.WatchdogClaims,
		New: func(c locks.Config) locks.Lock {
			return &redisLock{cfg: c, client: redislock.New(c.Clients[0]), refresh: true}
		},
	})
}

// redisLock is one client's redislock.Client.
type redisLock struct {
	cfg     locks.Config
	client  *redislock.Client
	refresh bool
}

// redislockHandle is what a lease carries: the library's Lock and, when
// refreshing, what stops the refresher.
type redislockHandle struct {
	lock *redislock.Lock
	stop func()
}

func (l *redisLock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	// The library retries until the context ends or its strategy gives up;
	// the strategy ends first, so running out of tries says ErrNotObtained
	// and a context deadline can only mean a command cut short.
	tries := int(l.cfg.Wait / l.cfg.RetryDelay)
	retry := &notedRetry{RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(l.cfg.RetryDelay), tries), clock: l.cfg.Clock}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Wait+l.cfg.TTL)
	defer cancel()
	retry.asked = l.cfg.Clock.Now()
	lock, err := l.client.Obtain(ctx, key, l.cfg.TTL, &redislock.Options{RetryStrategy: retry})
	if err != nil {
		return locks.Lease{}, redislockObtainErr(err)
	}
	lease := locks.Lease{Key: key, Token: lock.Token()}
	h := &redislockHandle{lock: lock, stop: func() {}}
	if l.refresh {
		// Renewed leases promise no deadline: the key is the holder's for
		// as long as its refresher runs, which a paused process stops.
		h.stop = l.refresher(lock)
	} else {
		// The library computes no deadline; its users read the TTL they
		// asked for as one. Counted from the start of the try that took
		// the key (after the last backoff asked for), the earliest it can
		// have been set, the promise judged is never longer than the key's
		// life, and no shorter for a wait spent retrying.
		lease.ValidUntil = retry.asked.Add(l.cfg.TTL)
	}
	lease.Handle = h
	return lease, nil
}

// notedRetry is the retry strategy handed to Obtain, noting when the
// library last asked it for a backoff: every try comes after the call or
// after its latest backoff. Obtain asks from its own goroutine, and the
// note is read once it has returned.
type notedRetry struct {
	redislock.RetryStrategy
	clock locks.Clock
	// asked is when the call began or a backoff was last asked for.
	asked time.Time
}

func (r *notedRetry) NextBackoff() time.Duration {
	r.asked = r.clock.Now()
	return r.RetryStrategy.NextBackoff()
}

// refresher calls Refresh every TTL/3 until stopped or refused, and
// returns what stops it (waiting for a Refresh in flight to finish, so
// nothing of the lease's outlives its release).
func (l *redisLock) refresher(lock *redislock.Lock) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(l.cfg.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := lock.Refresh(ctx, l.cfg.TTL, nil); errors.Is(err, redislock.ErrNotObtained) {
				return // the key is gone or someone else's: nothing left to keep
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func (l *redisLock) Release(ctx context.Context, lease locks.Lease) error {
	h, ok := lease.Handle.(*redislockHandle)
	if !ok {
		// The library releases only a Lock it handed out; a worker keeps
		// each lease it returned, handle and all, so this is a harness bug.
		return fmt.Errorf("%w: a lease without its redislock.Lock", locks.ErrUnknown)
	}
	h.stop()
	err := h.lock.Release(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrLockNotHeld):
		return classified(locks.ErrNotHeld, "redislock release", err)
	}
	return classified(locks.ErrUnknown, "redislock release", err)
}

// redislockObtainErr sorts what Obtain returned: ErrNotObtained when its
// retries ran out; anything else is a command without an answer (a
// timeout, a cut connection, the context ending mid-command).
func redislockObtainErr(err error) error {
	if errors.Is(err, redislock.ErrNotObtained) {
		return classified(locks.ErrNotAcquired, "redislock obtain", err)
	}
	return classified(locks.ErrUnknown, "redislock obtain", err)
}
