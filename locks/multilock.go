package locks

import (
	"context"
	"errors"
	"time"
)

func registerMultiLock(register func(Info)) {
	register(Info{
		Name:      "multilock",
		Traits:    Traits{Ends: Renewed, Release: OwnerChecked, Clock: ServerWall, OtherKeys: true, Notified: true},
		Claims:    WatchdogClaims,
		Reentrant: true,
		Summary: "Redisson MultiLock: a reentrant lock on each of 3 nodes, all or none; a failed member " +
			"rolls back the ones taken and the attempt starts over while time remains",
		Nodes: 3,
		New: func(c Config) Lock {
			m := &multiLock{cfg: c}
			for _, cl := range c.Clients {
				m.subs = append(m.subs, newReentrant(c, cl))
			}
			return m
		},
	})
}

// multiLock holds key on every node or on none. Each member is a reentrant
// lock with its own watchdog; the lease is the set.
type multiLock struct {
	cfg  Config
	subs []*hashLock
}

func (m *multiLock) Acquire(ctx context.Context, key string) (Lease, error) {
	deadline := time.Now().Add(m.cfg.Wait)
	for {
		var taken []*hashLock
		var failed error
		for _, s := range m.subs {
			// Share what is left of the wait among the members still to
			// take, so one busy member cannot eat the whole wait.
			per := max(time.Until(deadline)/time.Duration(len(m.subs)), time.Millisecond)
			if _, err := s.acquire(ctx, key, per); err != nil {
				if errors.Is(err, ErrUnknown) {
					taken = append(taken, s) // it may hold: roll it back too
				}
				failed = err
				break
			}
			taken = append(taken, s)
		}
		if failed == nil {
			return Lease{Key: key, Token: m.cfg.Owner}, nil
		}
		if err := m.rollback(ctx, key, taken); err != nil {
			return Lease{}, err
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return Lease{}, ErrNotAcquired
		}
	}
}

// rollback releases the members taken in a failed attempt. If one of them
// cannot be released for sure, the set may be partly held: unknown.
func (m *multiLock) rollback(ctx context.Context, key string, taken []*hashLock) error {
	var unsure error
	for _, s := range taken {
		err := s.Release(ctx, Lease{Key: key, Token: m.cfg.Owner})
		if errors.Is(err, ErrUnknown) {
			unsure = err
		}
	}
	if unsure != nil {
		return errors.Join(errors.New("multilock rollback"), unsure)
	}
	return nil
}

// Release releases every member. One that was already lost makes the whole
// release ErrNotHeld; one whose outcome is unknown makes it unknown.
func (m *multiLock) Release(ctx context.Context, lease Lease) error {
	var notHeld, unsure error
	for _, s := range m.subs {
		switch err := s.Release(ctx, lease); {
		case errors.Is(err, ErrUnknown):
			unsure = err
		case err != nil:
			notHeld = err
		}
	}
	if unsure != nil {
		return unsure
	}
	return notHeld
}
