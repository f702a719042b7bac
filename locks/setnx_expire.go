package locks

import (
	"context"

	"github.com/locktorture/locktorture/fault"
)

func registerSetNXExpire(register func(Info)) {
	register(Info{
		Name:   "setnx-expire",
		Traits: Traits{Ends: Expires, Release: OwnerBlind, Clock: ServerWall, ExpirySeparate: true},
		Claims: without(LeaseClaims, fault.ClientPause),
		Summary: "SETNX then EXPIRE as two commands, DEL release. BROKEN: a client that dies between the two " +
			"leaves a key that never expires (deadlock, S1), and DEL releases whoever holds the lock now",
		Broken: true,
		New:    func(c Config) Lock { return &setnxExpire{cfg: c} },
	})
}

// setnxExpire is the lock from the early Redis docs and countless blog
// posts, kept as a counter-example: the lease is set by a second round trip
// that a crash can skip.
type setnxExpire struct{ cfg Config }

func (l *setnxExpire) Acquire(ctx context.Context, key string) (Lease, error) {
	c := l.cfg.Clients[0]
	return Retry(ctx, l.cfg, func() (Lease, bool, error) {
		token := newToken()
		start := l.cfg.Clock.Now()
		ok, err := c.SetNX(ctx, key, token, 0).Result()
		if err != nil {
			return Lease{}, false, unknown("SETNX", err)
		}
		if !ok {
			return Lease{}, false, nil
		}
		if err := c.PExpire(ctx, key, l.cfg.TTL).Err(); err != nil {
			return Lease{}, false, unknown("EXPIRE", err)
		}
		return Lease{Key: key, Token: token, ValidUntil: start.Add(l.cfg.TTL)}, true, nil
	})
}

func (l *setnxExpire) Release(ctx context.Context, lease Lease) error {
	return del(ctx, l.cfg.Clients[0], lease.Key)
}
