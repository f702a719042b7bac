package locks

import (
	"context"
	"sync"
	"time"

	"github.com/locktorture/locktorture/fault"
)

// The two controls, as rbranson/lockcheck has them: every matrix runs them,
// so every matrix proves its checkers again. "none" must be caught in the
// baseline (or the checkers see nothing); "mutex" must come out safe
// wherever no client crashes (or the checkers see things that are not
// there).
func registerControls(register func(Info)) {
	register(Info{
		Name:    "none",
		Traits:  Traits{Ends: Never, Release: OwnerBlind, Local: true, LocksNothing: true},
		Summary: "CONTROL: every acquire succeeds at once and nothing is locked; the checkers must see two holders without any fault",
		Broken:  true,
		New:     func(Config) Lock { return noLock{} },
	})
	register(Info{
		Name:   "mutex",
		Traits: Traits{Ends: Never, Release: OwnerChecked, Local: true},
		// Nothing in Redis to lose; a dead holder never lets go, which is a
		// stall, not two holders.
		Claims: fault.Kinds,
		Summary: "CONTROL: a mutex shared by the clients in this process, no Redis at all: a correct lock while clients are " +
			"goroutines (it has no lease, so pauses only make others wait; a crashed holder never lets go)",
		New: func(c Config) Lock { return &mutexLock{cfg: c} },
	})
}

type noLock struct{}

func (noLock) Acquire(_ context.Context, key string) (Lease, error) {
	return Lease{Key: key, Token: newToken()}, nil
}

func (noLock) Release(context.Context, Lease) error { return nil }

// mutexes holds one slot per key for every mutex handle in the process.
// Runs side by side in one process share them, which only makes them wait
// for each other: never less exclusion.
var mutexes sync.Map

// slot is one key's mutex: a token in taken means held; holder says whose.
type slot struct {
	taken  chan struct{}
	mu     sync.Mutex
	holder string
}

type mutexLock struct{ cfg Config }

func (l *mutexLock) slot(key string) *slot {
	s, _ := mutexes.LoadOrStore(key, &slot{taken: make(chan struct{}, 1)})
	return s.(*slot)
}

func (l *mutexLock) Acquire(ctx context.Context, key string) (Lease, error) {
	s := l.slot(key)
	t := time.NewTimer(l.cfg.Wait)
	defer t.Stop()
	select {
	case s.taken <- struct{}{}:
		token := newToken()
		s.mu.Lock()
		s.holder = token
		s.mu.Unlock()
		return Lease{Key: key, Token: token}, nil
	case <-t.C:
	case <-ctx.Done():
	}
	return Lease{}, ErrNotAcquired
}

// Release lets go only of the holder's own hold.
func (l *mutexLock) Release(_ context.Context, lease Lease) error {
	s := l.slot(lease.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != lease.Token {
		return ErrNotHeld
	}
	s.holder = ""
	<-s.taken
	return nil
}
