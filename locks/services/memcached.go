package services

import (
	"context"
	"errors"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

func memcachedLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:   "memcached-add",
		Traits: locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerMonotonic},
		Summary: "memcached: add key token exptime; release by gets then cas with a past expiry (a CAS-checked delete); " +
			"github.com/bradfitz/gomemcache",
		Server: "memcached",
		MinTTL: memcachedMinTTL,
		// A lease with an honest deadline: the item stays until then
		// whatever the links, the holder or its clock do, and memcached's
		// clock is CLOCK_MONOTONIC, which runs on through a SIGSTOP, so a
		// paused node can only drop the item on time. Not a node crash:
		// memcached keeps nothing, so a restarted node forgets the lock
		// while its holder still holds it. Not a node clock: nothing here
		// claims what a faked clock does to its monotonic count.
		Claims: []fault.Kind{fault.Partition, fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock},
		New:    func(c locks.Config) locks.Lock { return &memcachedAdd{cfg: c} },
	})
}

// memcachedAdd is the lock memcached's users write: add succeeds only for
// a missing key, so it takes the lock; the item's expiry is the lease.
type memcachedAdd struct {
	cfg locks.Config
	mc  *memcache.Client
}

func (l *memcachedAdd) client() *memcache.Client {
	if l.mc == nil {
		l.mc = memcache.New(l.cfg.Addrs[0])
		// gomemcache sends nothing twice; a reply later than this is an
		// unknown outcome, and a lease's worth is far longer.
		l.mc.Timeout = max(l.cfg.TTL/4, 100*time.Millisecond)
	}
	return l.mc
}

// memcachedEarly is how much sooner than its exptime memcached 1.6 may
// drop an item. Its clock (memcached.c, clock_handler) is a whole-second
// count of CLOCK_MONOTONIC, refreshed by a libevent timer that fires
// about once a second at some phase within the second; an item stored
// with exptime N is stamped N past the count last refreshed, and is gone
// once a refresh makes the count reach that. So normally it lives more
// than N-1 s. But each timer interval runs a little over a second (here
// about 1 ms), so the phase creeps until it crosses a second boundary and
// one refresh advances the count by two: an item stored in the second
// before that lives only a little more than N-2 s.
const memcachedEarly = 2 * time.Second

// memcachedMinTTL leaves a lease a validity of two seconds after
// memcachedEarly: half its TTL, room for a story's pause of 0.3 TTL to
// end inside the lease, as the stories that pause a holder inside its
// lease need (at 3 s the validity is a third and they cannot fit it).
const memcachedMinTTL = 4 * time.Second

// expiry is the item's exptime for ttl, in memcached's whole seconds, and
// how long the item is sure to live.
func expiry(ttl time.Duration) (int32, time.Duration) {
	secs := int32((ttl + time.Second - 1) / time.Second)
	return secs, time.Duration(secs)*time.Second - memcachedEarly
}

func (l *memcachedAdd) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	exptime, sure := expiry(l.cfg.TTL)
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		token := newToken()
		start := l.cfg.Clock.Now()
		err := l.client().Add(&memcache.Item{Key: key, Value: []byte(token), Expiration: exptime})
		switch {
		case errors.Is(err, memcache.ErrNotStored):
			return locks.Lease{}, false, nil
		case err != nil:
			return locks.Lease{}, false, unknown("add", err)
		}
		return locks.Lease{Key: key, Token: token, ValidUntil: start.Add(sure)}, true, nil
	})
}

// Release reads the item with its CAS id and, if it is still this
// lease's, replaces it by one already expired, which only succeeds if no
// one wrote the key in between: a delete that cannot remove a successor's
// lock.
func (l *memcachedAdd) Release(ctx context.Context, lease locks.Lease) error {
	it, err := l.client().Get(lease.Key)
	switch {
	case errors.Is(err, memcache.ErrCacheMiss):
		return locks.ErrNotHeld
	case err != nil:
		return unknown("gets", err)
	case string(it.Value) != lease.Token:
		return locks.ErrNotHeld
	}
	it.Expiration = -1
	err = l.client().CompareAndSwap(it)
	switch {
	case errors.Is(err, memcache.ErrCASConflict), errors.Is(err, memcache.ErrNotStored), errors.Is(err, memcache.ErrCacheMiss):
		return locks.ErrNotHeld
	case err != nil:
		return unknown("cas", err)
	}
	return nil
}

// Close closes the client's idle connections.
func (l *memcachedAdd) Close() error {
	if l.mc == nil {
		return nil
	}
	return l.mc.Close()
}
