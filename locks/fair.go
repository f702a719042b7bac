package locks

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

func registerFair(register func(Info)) {
	register(Info{
		Name:      "fair",
		Traits:    Traits{Ends: Renewed, Release: OwnerChecked, Clock: ServerWall, OtherKeys: true, Notified: true},
		Claims:    WatchdogClaims,
		Reentrant: true,
		Queued:    true,
		Summary: "Redisson FairLock: lock hash + waiter queue (list) + waiter timeouts (zset, client-clock ms); " +
			"grants in arrival order, drops waiters silent past their timeout",
		New: func(c Config) Lock { return newFair(c, c.Clients[0]) },
	})
}

// dropStaleWaiters is the prologue of both fair scripts: pop waiters from
// the head of the queue whose timeout (client-clock ms) has passed, so a
// waiter that gave up or died cannot block the queue for ever.
const dropStaleWaiters = `
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if first == false then break end
  local timeout = tonumber(redis.call('zscore', KEYS[3], first))
  if timeout == nil or timeout <= tonumber(ARGV[4]) then
    redis.call('zrem', KEYS[3], first)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
`

// fairLockScript. KEYS: lock, queue, timeouts. ARGV: lease ms, owner,
// waiter timeout ms, now ms. nil: acquired; otherwise ms to wait at most.
var fairLockScript = redis.NewScript(dropStaleWaiters + `
if redis.call('exists', KEYS[1]) == 0 and
   (redis.call('exists', KEYS[2]) == 0 or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  -- our turn: leave the queue, and give everyone behind one wait less
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  local waiters = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #waiters do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiters[i])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine ~= false then
  return tonumber(mine) - tonumber(ARGV[3]) - tonumber(ARGV[4])
end
-- join the queue: our timeout is the previous waiter's (or the lock's
-- remaining time) plus one waiter timeout
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl`)

// fairUnlockScript. KEYS: lock, queue, timeouts, channel prefix. ARGV:
// message, lease ms, owner, now ms. 1 released, 0 still held, -1 not held
// (the next waiter is woken either way when the lock is free).
var fairUnlockScript = redis.NewScript(dropStaleWaiters + `
if redis.call('exists', KEYS[1]) == 0 then
  local next = redis.call('lindex', KEYS[2], 0)
  if next ~= false then redis.call('publish', KEYS[4] .. ':' .. next, ARGV[1]) end
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return -1
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
local next = redis.call('lindex', KEYS[2], 0)
if next ~= false then redis.call('publish', KEYS[4] .. ':' .. next, ARGV[1]) end
return 1`)

// fairGiveUpScript removes a waiter that stopped waiting. If it was at the
// head, everyone behind gets one wait less, as on a grant. KEYS: queue,
// timeouts. ARGV: owner, waiter timeout ms.
var fairGiveUpScript = redis.NewScript(`
if redis.call('lindex', KEYS[1], 0) == ARGV[1] then
  local waiters = redis.call('zrange', KEYS[2], 0, -1)
  for i = 1, #waiters do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), waiters[i])
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return 1`)

type fairProto struct {
	cfg Config
	c   redis.UniversalClient
}

func newFair(cfg Config, c redis.UniversalClient) *hashLock {
	return newHashLock(cfg, c, &fairProto{cfg: cfg, c: c})
}

// FairQueueKey and FairTimeoutKey name the fair lock's waiter structures.
func FairQueueKey(key string) string { return "redisson_lock_queue:{" + key + "}" }

// FairTimeoutKey is the zset of waiter timeouts of fair lock key.
func FairTimeoutKey(key string) string { return "redisson_lock_timeout:{" + key + "}" }

func (p *fairProto) keys(key string) []string {
	return []string{key, FairQueueKey(key), FairTimeoutKey(key)}
}

// channel is per waiter: an unlock wakes only the head of the queue.
func (p *fairProto) channel(key string) string {
	return "redisson_lock__channel:{" + key + "}:" + p.cfg.Owner
}

func (p *fairProto) now() int64 { return p.cfg.Clock.Now().UnixMilli() }

func (p *fairProto) try(ctx context.Context, key string) (bool, time.Duration, error) {
	ms, acquired, err := scriptInt(ctx, fairLockScript, p.c, p.keys(key),
		p.cfg.TTL.Milliseconds(), p.cfg.Owner, p.cfg.WaiterTimeout.Milliseconds(), p.now())
	return acquired, time.Duration(ms) * time.Millisecond, err
}

func (p *fairProto) unlock(ctx context.Context, key string) (int64, error) {
	keys := append(p.keys(key), "redisson_lock__channel:{"+key+"}")
	n, _, err := scriptInt(ctx, fairUnlockScript, p.c, keys, unlockMessage, p.cfg.TTL.Milliseconds(), p.cfg.Owner, p.now())
	return n, err
}

func (p *fairProto) giveUp(ctx context.Context, key string) {
	_ = fairGiveUpScript.Run(ctx, p.c, []string{FairQueueKey(key), FairTimeoutKey(key)},
		p.cfg.Owner, p.cfg.WaiterTimeout.Milliseconds()).Err()
}
