package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/fault"
)

func registerGetSet(register func(Info)) {
	register(Info{
		Name:   "getset",
		Traits: Traits{Ends: Expires, Release: ClockChecked, Clock: ClientWall},
		Claims: without(LeaseClaims, fault.ClientClock),
		Summary: "the timestamp lock: value = client-clock expiry; SETNX, else GET and, if expired, GETSET and compare. " +
			"BROKEN: trusts client clocks (a fast clock steals a live lock, S2) and losers of a GETSET race overwrite the winner's timestamp",
		Broken: true,
		New:    func(c Config) Lock { return &getset{cfg: c} },
	})
}

// getset is the lock from the old SETNX documentation. The key holds the
// holder's expiry time in ms on the holder's clock and has no Redis TTL;
// every client judges expiry with its own clock.
type getset struct{ cfg Config }

func (l *getset) Acquire(ctx context.Context, key string) (Lease, error) {
	c := l.cfg.Clients[0]
	return Retry(ctx, l.cfg, func() (Lease, bool, error) {
		now := l.cfg.Clock.Now()
		// The key holds whole milliseconds and every client judges expiry by
		// them, so that, truncated, is all the lease promises.
		ms := now.Add(l.cfg.TTL + time.Millisecond).UnixMilli()
		val := strconv.FormatInt(ms, 10)
		won := Lease{Key: key, Token: val, ValidUntil: time.UnixMilli(ms)}
		ok, err := c.SetNX(ctx, key, val, 0).Result()
		if err != nil {
			return Lease{}, false, unknown("SETNX", err)
		}
		if ok {
			return won, true, nil
		}
		cur, err := c.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return Lease{}, false, nil // released in between: try again
		}
		if err != nil {
			// A read changed nothing: this attempt definitely failed.
			return Lease{}, false, fmt.Errorf("%w: GET: %v", ErrNotAcquired, err)
		}
		if ms, perr := strconv.ParseInt(cur, 10, 64); perr == nil && ms > now.UnixMilli() {
			return Lease{}, false, nil // live lock, by this client's clock
		}
		// GETSET, deprecated since Redis 6.2 (SET ... GET), is the command
		// this lock is defined by (the seed article's timestamp lock), kept
		// on purpose. go-redis marks it deprecated on *redis.Client only,
		// and locks are handed redis.UniversalClient, so no lint directive
		// is needed.
		old, err := c.GetSet(ctx, key, val).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Lease{}, false, unknown("GETSET", err)
		}
		if old == cur || errors.Is(err, redis.Nil) {
			return won, true, nil
		}
		// Another client's GETSET got there first; ours has just overwritten
		// its timestamp with our own. The published algorithm lets that be.
		return Lease{}, false, nil
	})
}

// Release deletes the key only while the lease has not expired by this
// client's clock, as the algorithm prescribes; it never checks whose
// timestamp the key holds.
func (l *getset) Release(ctx context.Context, lease Lease) error {
	if !l.cfg.Clock.Now().Before(lease.ValidUntil) {
		return ErrNotHeld
	}
	return del(ctx, l.cfg.Clients[0], lease.Key)
}
