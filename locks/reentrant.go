package locks

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

func registerReentrant(register func(Info)) {
	register(Info{
		Name:      "reentrant",
		Traits:    Traits{Ends: Renewed, Release: OwnerChecked, Clock: ServerWall, OtherKeys: true, Notified: true},
		Claims:    WatchdogClaims,
		Reentrant: true,
		Summary: "Redisson RLock: hash {owner → count} with PEXPIRE, re-entry counts up and down, " +
			"watchdog renews every TTL/3, waiters wake on the unlock channel",
		New: func(c Config) Lock { return newReentrant(c, c.Clients[0]) },
	})
}

// reentrantLockScript: take a free key, or re-enter one this owner holds;
// otherwise return the holder's remaining PTTL (nil means acquired).
var reentrantLockScript = redis.NewScript(`
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])`)

// reentrantUnlockScript: count one exit; at zero delete the key and publish
// on the channel so a waiter wakes at once. nil: not held by this owner.
var reentrantUnlockScript = redis.NewScript(`
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1`)

// unlockMessage is what Redisson publishes on unlock.
const unlockMessage = "0"

type reentrantProto struct {
	cfg Config
	c   redis.UniversalClient
}

func newReentrant(cfg Config, c redis.UniversalClient) *hashLock {
	return newHashLock(cfg, c, &reentrantProto{cfg: cfg, c: c})
}

func (p *reentrantProto) channel(key string) string { return "redisson_lock__channel:{" + key + "}" }

func (p *reentrantProto) try(ctx context.Context, key string) (bool, time.Duration, error) {
	pttl, acquired, err := scriptInt(ctx, reentrantLockScript, p.c, []string{key}, p.cfg.TTL.Milliseconds(), p.cfg.Owner)
	return acquired, time.Duration(pttl) * time.Millisecond, err
}

func (p *reentrantProto) unlock(ctx context.Context, key string) (int64, error) {
	n, notHeld, err := scriptInt(ctx, reentrantUnlockScript, p.c, []string{key, p.channel(key)},
		unlockMessage, p.cfg.TTL.Milliseconds(), p.cfg.Owner)
	if notHeld {
		return -1, err
	}
	return n, err
}

func (p *reentrantProto) giveUp(context.Context, string) {}
