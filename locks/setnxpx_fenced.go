package locks

import (
	"context"

	"github.com/redis/go-redis/v9"
)

func registerSetNXPXFenced(register func(Info)) {
	register(Info{
		Name:    "set-nx-px-fenced",
		Traits:  Traits{Ends: Expires, Release: OwnerChecked, Clock: ServerWall, OtherKeys: true},
		Claims:  LeaseClaims,
		Summary: "set-nx-px plus a per-key fencing token (INCR in the same script) that the protected store checks",
		Fenced:  true,
		New:     func(c Config) Lock { return &fencedSetNXPX{cfg: c} },
	})
}

// fencedAcquireScript takes the lock and draws the next fencing token in one
// atomic step, so a token is only ever issued with a lease and tokens order
// leases the way Redis granted them. Returns 0 when the lock is taken.
var fencedAcquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)

// FenceKey is where the fencing counter of lock key lives: in key's hash
// slot (for a key without braces), so the acquire script's two keys share
// a node in a Redis Cluster too, as Redisson names its locks' side keys.
func FenceKey(key string) string { return "{" + key + "}:fence" }

// fencedSetNXPX is Kleppmann's remedy: the lease is no safer than set-nx-px,
// but a store that refuses tokens not greater than the last it accepted
// stays consistent when two clients believe they hold the lock.
type fencedSetNXPX struct{ cfg Config }

func (l *fencedSetNXPX) Acquire(ctx context.Context, key string) (Lease, error) {
	c := l.cfg.Clients[0]
	return Retry(ctx, l.cfg, func() (Lease, bool, error) {
		token := newToken()
		start := l.cfg.Clock.Now()
		fence, err := fencedAcquireScript.Run(ctx, c, []string{key, FenceKey(key)}, token, l.cfg.TTL.Milliseconds()).Int64()
		if err != nil {
			return Lease{}, false, unknown("fenced acquire script", err)
		}
		if fence == 0 {
			return Lease{}, false, nil
		}
		return Lease{Key: key, Token: token, Fence: fence, ValidUntil: start.Add(l.cfg.TTL)}, true, nil
	})
}

func (l *fencedSetNXPX) Release(ctx context.Context, lease Lease) error {
	return compareAndDelete(ctx, l.cfg.Clients[0], lease)
}
