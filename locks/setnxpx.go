package locks

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

func registerSetNXPX(register func(Info)) {
	register(Info{
		Name:    "set-nx-px",
		Traits:  Traits{Ends: Expires, Release: OwnerChecked, Clock: ServerWall},
		Claims:  LeaseClaims,
		Summary: "SET key token NX PX ttl; release by Lua compare-and-delete (the distlock single-instance lock)",
		New:     func(c Config) Lock { return &setNXPX{cfg: c} },
	})
}

// releaseScript deletes the key only if it still holds this lease's token,
// so a client whose lease lapsed cannot delete its successor's lock.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// setNXPX is the lock the Redis docs recommend for a single instance. It is
// safe against other clients' releases but, like every lease, not against a
// holder that stalls past its TTL (K1).
type setNXPX struct{ cfg Config }

func (l *setNXPX) Acquire(ctx context.Context, key string) (Lease, error) {
	c := l.cfg.Clients[0]
	return Retry(ctx, l.cfg, func() (Lease, bool, error) {
		token := newToken()
		start := l.cfg.Clock.Now()
		ok, err := c.SetNX(ctx, key, token, l.cfg.TTL).Result()
		if err != nil {
			return Lease{}, false, unknown("SET NX PX", err)
		}
		if !ok {
			return Lease{}, false, nil
		}
		return Lease{Key: key, Token: token, ValidUntil: start.Add(l.cfg.TTL)}, true, nil
	})
}

func (l *setNXPX) Release(ctx context.Context, lease Lease) error {
	return compareAndDelete(ctx, l.cfg.Clients[0], lease)
}

func compareAndDelete(ctx context.Context, c redis.UniversalClient, lease Lease) error {
	n, err := releaseScript.Run(ctx, c, []string{lease.Key}, lease.Token).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unknown("release script", err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}
