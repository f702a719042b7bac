package locks

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/fault"
)

func registerSetNXPXDel(register func(Info)) {
	register(Info{
		Name:   "set-nx-px-del",
		Traits: Traits{Ends: Expires, Release: OwnerBlind, Clock: ServerWall},
		Claims: without(LeaseClaims, fault.ClientPause),
		Summary: "SET NX PX with a plain DEL release. BROKEN: a client whose lease lapsed deletes its " +
			"successor's lock, letting a third client in (S3)",
		Broken: true,
		New:    func(c Config) Lock { return &setNXPXDel{setNXPX{cfg: c}} },
	})
}

// setNXPXDel acquires exactly like set-nx-px and releases without checking
// the token: the seed articles' releaseLock1, kept as a counter-example.
type setNXPXDel struct{ setNXPX }

func (l *setNXPXDel) Release(ctx context.Context, lease Lease) error {
	return del(ctx, l.cfg.Clients[0], lease.Key)
}

// del is the owner-blind release: it reports ErrNotHeld only when there was
// nothing to delete, and happily deletes anyone else's lock.
func del(ctx context.Context, c redis.UniversalClient, key string) error {
	n, err := c.Del(ctx, key).Result()
	if err != nil {
		return unknown("DEL", err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}
