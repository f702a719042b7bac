package library

import (
	"context"
	"errors"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/locktorture/locktorture/locks"
)

func redsyncLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "redsync",
		Traits:  locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall, Validity: true, Retracts: true},
		Library: "github.com/go-redsync/redsync/v4",
		Summary: "go-redsync/redsync v4 on one node through its go-redis v9 pool: SET NX PX, Lua compare-and-delete, its own validity time",
		Claims:  locks.LeaseClaims,
		New:     newRedsync,
	})
	register(locks.Info{
		Name:        "redsync-redlock",
		Traits:      locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall, Validity: true, Retracts: true},
		Library:     "github.com/go-redsync/redsync/v4",
		Summary:     "go-redsync/redsync v4 over five independent nodes: RedLock as that library implements it (quorum 3, drift 1%), its per-node timeout the harness's RedLock bound",
		Nodes:       5,
		NodeTimeout: true,
		Claims:      locks.LeaseClaims,
		New:         newRedsync,
	})
}

// redsyncLock is one client's Redsync over every node it is handed, with
// a fresh Mutex per acquisition as the library's README makes one per name.
type redsyncLock struct {
	cfg locks.Config
	rs  *redsync.Redsync
}

func newRedsync(cfg locks.Config) locks.Lock {
	pools := make([]redsyncredis.Pool, len(cfg.Clients))
	for i, c := range cfg.Clients {
		pools[i] = goredis.NewPool(c)
	}
	return &redsyncLock{cfg: cfg, rs: redsync.New(pools...)}
}

func (l *redsyncLock) mutex(key string, extra ...redsync.Option) *redsync.Mutex {
	// The harness's wait and per-node bound, in the library's terms: tries
	// spaced by the retry delay, and the node timeout as a fraction of the
	// expiry (its default, 5%, is the 25 ms a busy machine misses).
	// Everything else is the library's default.
	tries := int(l.cfg.Wait/l.cfg.RetryDelay) + 1
	opts := append([]redsync.Option{redsync.WithExpiry(l.cfg.TTL), redsync.WithTries(tries), redsync.WithRetryDelay(l.cfg.RetryDelay),
		redsync.WithTimeoutFactor(float64(l.cfg.NodeTimeout) / float64(l.cfg.TTL))}, extra...)
	return l.rs.NewMutex(key, opts...)
}

func (l *redsyncLock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	m := l.mutex(key)
	if err := m.LockContext(ctx); err != nil {
		return locks.Lease{}, redsyncLockErr(err)
	}
	// Until is on the machine's clock; a lease's deadline is read on the
	// client's, which a nemesis may have skewed.
	until := l.cfg.Clock.Now().Add(time.Until(m.Until()))
	return locks.Lease{Key: key, Token: m.Value(), ValidUntil: until, Handle: m}, nil
}

func (l *redsyncLock) Release(ctx context.Context, lease locks.Lease) error {
	m, ok := lease.Handle.(*redsync.Mutex)
	if !ok {
		// A lease that crossed a process boundary: the value is all an
		// unlock needs.
		m = l.mutex(lease.Key, redsync.WithValue(lease.Token))
	}
	ok, err := m.UnlockContext(ctx)
	switch {
	case ok:
		return nil
	case redsyncTransport(err):
		return classified(locks.ErrUnknown, "redsync unlock", err)
	case err == nil:
		return locks.ErrNotHeld
	}
	return classified(locks.ErrNotHeld, "redsync unlock", err)
}

// redsyncLockErr sorts what LockContext returned. The library releases
// after every failed try, so a failure is "not acquired" unless the last
// try lost a command to a node (a RedisError: a timeout, a refused or cut
// connection): that SET NX may have landed, and the release after it may
// not have.
func redsyncLockErr(err error) error {
	if redsyncTransport(err) {
		return classified(locks.ErrUnknown, "redsync lock", err)
	}
	return classified(locks.ErrNotAcquired, "redsync lock", err)
}

// redsyncTransport reports whether err holds a node's command that did not
// get an answer, or the end of a context (which says nothing about where
// the last command got to).
func redsyncTransport(err error) bool {
	var re *redsync.RedisError
	return errors.As(err, &re) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
