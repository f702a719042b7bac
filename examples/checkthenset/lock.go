// Package checkthenset is an example of putting your own lock under test
// with locktest: a lock someone might well write, GET to see whether the key
// is free and then SET it, with a compare-then-DEL release. Its test says
// what the harness should find.
package checkthenset

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/locks"
)

// New builds one client's handle; it is the locktest.Lock New function.
func New(cfg locks.Config) locks.Lock { return &lock{cfg: cfg, c: cfg.Clients[0]} }

type lock struct {
	cfg locks.Config
	c   redis.UniversalClient
}

// Acquire checks, then sets: two clients can both see the key free and
// both set it. The race is the point of the example.
func (l *lock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	deadline := time.Now().Add(l.cfg.Wait)
	for {
		_, err := l.c.Get(ctx, key).Result()
		switch {
		case errors.Is(err, redis.Nil):
			token := rand.Text()
			if err := l.c.Set(ctx, key, token, l.cfg.TTL).Err(); err != nil {
				return locks.Lease{}, errors.Join(locks.ErrUnknown, err)
			}
			return locks.Lease{Key: key, Token: token, ValidUntil: l.cfg.Clock.Now().Add(l.cfg.TTL)}, nil
		case err != nil:
			return locks.Lease{}, errors.Join(locks.ErrNotAcquired, err)
		}
		if time.Now().After(deadline) {
			return locks.Lease{}, locks.ErrNotAcquired
		}
		time.Sleep(l.cfg.RetryDelay)
	}
}

// Release deletes the key if it still holds our token (GET then DEL: not
// atomic either, but the window is small).
func (l *lock) Release(ctx context.Context, lease locks.Lease) error {
	v, err := l.c.Get(ctx, lease.Key).Result()
	if errors.Is(err, redis.Nil) || (err == nil && v != lease.Token) {
		return locks.ErrNotHeld
	}
	if err != nil {
		return errors.Join(locks.ErrUnknown, err)
	}
	if err := l.c.Del(ctx, lease.Key).Err(); err != nil {
		return errors.Join(locks.ErrUnknown, err)
	}
	return nil
}
