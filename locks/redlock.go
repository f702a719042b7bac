package locks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/fault"
)

func registerRedLock(register func(Info)) {
	register(Info{
		Name:   "redlock",
		Traits: Traits{Ends: Expires, Release: OwnerChecked, Clock: ServerWall, Validity: true, Retracts: true},
		// A minority of nodes may be cut off, paused or slow; a client may
		// read its replies late (the validity check). No claim when a node
		// loses keys (crash, clock jump: Kleppmann's K4, K5).
		Claims: LeaseClaims,
		Summary: "RedLock on 5 independent masters: same key and token on all, per-node timeout << TTL, majority, " +
			"validity = TTL − elapsed − drift (0.01·TTL + 2 ms); releases everywhere on failure and on release",
		Nodes:       5,
		NodeTimeout: true,
		New:         func(c Config) Lock { return &redlock{cfg: c, checkValidity: true} },
	})
	register(Info{
		Name:   "redlock-novalidity",
		Traits: Traits{Ends: Expires, Release: OwnerChecked, Clock: ServerWall, Retracts: true},
		Claims: without(LeaseClaims, fault.ClientPause),
		Summary: "RedLock without the elapsed-time validity check. BROKEN: a client paused between sending " +
			"its SETs and reading the replies believes a lock that already expired (K6)",
		Broken:      true,
		Nodes:       5,
		NodeTimeout: true,
		New:         func(c Config) Lock { return &redlock{cfg: c} },
	})
}

// redlock is the algorithm of the Redis distlock page. It takes no notice
// of clock jumps on the nodes (K4) or of nodes that restart empty (K5):
// those are the arguments against it the scenarios reproduce.
type redlock struct {
	cfg           Config
	checkValidity bool
}

func (l *redlock) quorum() int { return len(l.cfg.Clients)/2 + 1 }

// drift is the distlock page's clock drift allowance.
func (l *redlock) drift() time.Duration {
	return time.Duration(float64(l.cfg.TTL)*0.01) + 2*time.Millisecond
}

func (l *redlock) Acquire(ctx context.Context, key string) (Lease, error) {
	return Retry(ctx, l.cfg, func() (Lease, bool, error) {
		token := newToken()
		start := l.cfg.Clock.Now()
		ok := l.onAll(ctx, func(ctx context.Context, c redis.UniversalClient) (bool, error) {
			return c.SetNX(ctx, key, token, l.cfg.TTL).Result()
		})
		elapsed := l.cfg.Clock.Now().Sub(start)
		validity := l.cfg.TTL - elapsed - l.drift()
		if ok >= l.quorum() && (!l.checkValidity || validity > 0) {
			return Lease{Key: key, Token: token, ValidUntil: start.Add(l.cfg.TTL - l.drift())}, true, nil
		}
		// Failed: unlock everywhere, including nodes that did not answer,
		// so no minority keeps a key that blocks others until it expires.
		l.onAll(context.WithoutCancel(ctx), func(ctx context.Context, c redis.UniversalClient) (bool, error) {
			return true, compareAndDelete(ctx, c, Lease{Key: key, Token: token})
		})
		return Lease{}, false, nil
	})
}

// onAll runs f on every node at once, each bounded by the node timeout, and
// counts the nodes where it returned true without error.
func (l *redlock) onAll(ctx context.Context, f func(context.Context, redis.UniversalClient) (bool, error)) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, c := range l.cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, l.cfg.NodeTimeout)
			defer cancel()
			if ok, err := f(cctx, c); ok && err == nil {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

// Release deletes the key on every node whose value is still our token.
// Deleted on a majority: released. Deleted nowhere and no node in doubt: the
// lease had lapsed. Anything else leaves the outcome unknown.
func (l *redlock) Release(ctx context.Context, lease Lease) error {
	var mu sync.Mutex
	var unsure int
	deleted := l.onAll(ctx, func(ctx context.Context, c redis.UniversalClient) (bool, error) {
		err := compareAndDelete(ctx, c, lease)
		if errors.Is(err, ErrUnknown) {
			mu.Lock()
			unsure++
			mu.Unlock()
		}
		return err == nil, err
	})
	switch {
	case deleted >= l.quorum():
		return nil
	case unsure == 0:
		return ErrNotHeld
	}
	return unknown("release", errors.New("no majority of nodes confirmed the delete"))
}
