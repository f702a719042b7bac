package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hashProtocol is what differs between Redisson's reentrant and fair locks;
// hashLock does the rest (reentrancy count, watchdog, waiting on pub/sub).
type hashProtocol interface {
	// try attempts once. held: acquired (or re-entered); otherwise ttl is
	// how long to wait at most before trying again (negative: unknown).
	try(ctx context.Context, key string) (held bool, ttl time.Duration, err error)
	// channel is where an unlock that may let this client in is published.
	channel(key string) string
	// unlock runs the unlock script: 1 released, 0 still held (count > 0),
	// -1 not held by this owner.
	unlock(ctx context.Context, key string) (int64, error)
	// giveUp tells Redis this client stopped waiting (fair queue); may be
	// a no-op.
	giveUp(ctx context.Context, key string)
}

// renewScript is the watchdog's renewal: extend only if still the owner.
var renewScript = redis.NewScript(`
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0`)

// hashLock is a Redisson-style lock: a hash {owner → count} with a TTL that
// a watchdog renews every TTL/3 while the lock is held, so a live holder
// never loses it to expiry and a dead one loses it within one TTL.
type hashLock struct {
	cfg   Config
	c     redis.UniversalClient
	proto hashProtocol
	// tellsLoss closes a lease's Lost when its watchdog's renewal fails.
	tellsLoss bool
	// detached runs each try apart from its caller (tryDetached).
	detached bool

	mu   sync.Mutex
	held map[string]*hold
}

type hold struct {
	count int
	stop  chan struct{}
	lost  chan struct{} // closed by the watchdog when a renewal fails; nil unless tellsLoss
}

func newHashLock(cfg Config, c redis.UniversalClient, p hashProtocol) *hashLock {
	return &hashLock{cfg: cfg, c: c, proto: p, held: map[string]*hold{}}
}

func (l *hashLock) Acquire(ctx context.Context, key string) (Lease, error) {
	return l.acquire(ctx, key, l.cfg.Wait)
}

// acquire tries once, then subscribes to the unlock channel and retries on
// every message or when the holder's TTL runs out, whichever comes first,
// until wait has passed. No blind polling: a release wakes the waiter.
func (l *hashLock) acquire(ctx context.Context, key string, wait time.Duration) (Lease, error) {
	deadline := time.Now().Add(wait)
	lease, _, err := l.try(ctx, key)
	if err != nil {
		return Lease{}, unknown("lock script", err)
	}
	if lease != nil {
		return *lease, nil
	}
	sub := l.c.Subscribe(ctx, l.proto.channel(key))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		l.proto.giveUp(ctx, key)
		return Lease{}, fmt.Errorf("%w: subscribe: %v", ErrNotAcquired, err)
	}
	msgs := sub.Channel()
	var ttl time.Duration
	for {
		// Try again after subscribing: an unlock published between the first
		// try and the subscription would otherwise be missed.
		lease, ttl, err = l.try(ctx, key)
		if err != nil {
			return Lease{}, unknown("lock script", err)
		}
		if lease != nil {
			return *lease, nil
		}
		rest := time.Until(deadline)
		if rest <= 0 {
			l.proto.giveUp(ctx, key)
			return Lease{}, ErrNotAcquired
		}
		d := rest
		if ttl >= 0 && ttl < d {
			d = ttl
		}
		select {
		case <-msgs:
		case <-time.After(d):
		case <-ctx.Done():
			l.proto.giveUp(context.WithoutCancel(ctx), key)
			return Lease{}, ErrNotAcquired
		}
	}
}

// try attempts once and, when it took the lock, counts the entry: the
// lease, or how long to wait before trying again.
func (l *hashLock) try(ctx context.Context, key string) (*Lease, time.Duration, error) {
	if l.detached {
		return l.tryDetached(ctx, key)
	}
	held, ttl, err := l.proto.try(ctx, key)
	if err != nil || !held {
		return nil, ttl, err
	}
	lease := l.acquired(key)
	return &lease, ttl, nil
}

// tryDetached is try as Redisson's tryAcquireAsync makes it: the script
// runs apart from the caller, whose cancellation does not reach it, and
// the entry is counted (the watchdog started) when Redis answers, in a
// callback on that answer; the caller waits for the answer or gives up
// with its context. A caller that gives up as the lock is taken leaves a
// watchdog renewing a key nobody holds (redisson#2714, #4368, #7272).
func (l *hashLock) tryDetached(ctx context.Context, key string) (*Lease, time.Duration, error) {
	type answer struct {
		lease *Lease
		ttl   time.Duration
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		held, ttl, err := l.proto.try(context.WithoutCancel(ctx), key)
		a := answer{ttl: ttl, err: err}
		if err == nil && held {
			lease := l.acquired(key)
			a.lease = &lease
		}
		done <- a
	}()
	select {
	case a := <-done:
		return a.lease, a.ttl, a.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// acquired counts the entry and starts the watchdog on the first one.
func (l *hashLock) acquired(key string) Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[key]
	if h == nil {
		h = &hold{stop: make(chan struct{})}
		if l.tellsLoss {
			h.lost = make(chan struct{})
		}
		l.held[key] = h
		go l.watchdog(key, h)
	}
	h.count++
	// With a watchdog the lock promises no fixed deadline: it lasts as long
	// as renewals succeed.
	lease := Lease{Key: key, Token: l.cfg.Owner}
	if h.lost != nil {
		lease.Lost = h.lost
	}
	return lease
}

func (l *hashLock) watchdog(key string, h *hold) {
	t := time.NewTicker(l.cfg.TTL / 3)
	defer t.Stop()
	ctx := context.Background()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		n, err := renewScript.Run(ctx, l.c, []string{key}, l.cfg.TTL.Milliseconds(), l.cfg.Owner).Int()
		if err != nil || n == 0 {
			// As Redisson does: a failed renewal ends the watchdog, and
			// the holder is not told (S4) unless the lock tells losses.
			if h.lost != nil {
				close(h.lost)
			}
			return
		}
	}
}

func (l *hashLock) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[key]; h != nil {
		close(h.stop)
		delete(l.held, key)
	}
}

func (l *hashLock) Release(ctx context.Context, lease Lease) error {
	n, err := l.proto.unlock(ctx, lease.Key)
	if err != nil {
		l.forget(lease.Key)
		return unknown("unlock script", err)
	}
	switch n {
	case 1:
		l.forget(lease.Key)
		return nil
	case 0:
		l.mu.Lock()
		if h := l.held[lease.Key]; h != nil {
			h.count--
		}
		l.mu.Unlock()
		return nil
	}
	l.forget(lease.Key)
	return ErrNotHeld
}

// scriptInt runs a script whose nil reply means "acquired" (or another
// distinguished answer): it returns nilReply=true for nil.
func scriptInt(ctx context.Context, s *redis.Script, c redis.UniversalClient, keys []string, args ...any) (n int64, nilReply bool, err error) {
	n, err = s.Run(ctx, c, keys, args...).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, true, nil
	}
	return n, false, err
}
