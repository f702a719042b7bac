// Package mutants holds locks with one real-world mistake each, written as
// a user would write them: plain go-redis on the clients they are handed,
// no named points, nothing from the harness but the lock interface. They
// are not registered and not offered to users: they exist to prove that
// the stories catch locks that never cooperate with the harness, each by
// the anomaly that is its signature (mutants_test.go).
package mutants

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/verdict"
)

// Mutant is a broken lock and the story that catches it.
type Mutant struct {
	// Name labels the mutant in results.
	Name string
	// Mistake says what is wrong, as a code reviewer would.
	Mistake string
	// Nodes is how many independent nodes it runs on.
	Nodes int
	// Story is the scenario that catches it; Outcome and Signature what it
	// must show there (the observation that names the mistake; the
	// stories' correct locks never show it). A GET-then-DEL release shows
	// promise-broken, not foreign-release: its release began before the
	// successor's hold did, so the history cannot say which key its DEL
	// deleted, only that the lock then let a third client in while the
	// successor's lease was still promised.
	Story, Signature string
	Outcome          verdict.Outcome
	// Inside, for a mistake that lives inside one op, lists the probes
	// (scenario.Probe) at which boundary exploration finds it: each pause
	// there, and none elsewhere in that op, breaks a promise a lock like it
	// claims to keep. A mistake no story tells has no Story.
	Inside []string
	// New builds one client's handle.
	New func(locks.Config) locks.Lock
}

// All lists every mutant.
var All = []Mutant{
	{Name: "get-then-del", Nodes: 1, Story: "paused-release", Outcome: verdict.Unsafe, Signature: "promise-broken",
		Inside:  []string{"pause release after GET#1", "pause release before DEL#1"},
		Mistake: "release reads the key, compares the token in the client, then DELs: two commands, so the key can change hands between them",
		New:     func(c locks.Config) locks.Lock { return &single{cfg: c, release: getThenDel} }},
	{Name: "clock-checked-del", Nodes: 1, Inside: []string{"pause release before DEL#1"},
		Mistake: "release checks the lease's deadline on the client's own clock, then DELs without comparing the token: a client stopped between the check and the DEL deletes the next holder's lock",
		New:     func(c locks.Config) locks.Lock { return &single{cfg: c, clockChecked: true} }},
	{Name: "set-nx-then-pexpire", Nodes: 1, Story: "setnx-crash", Outcome: verdict.Deadlock, Signature: "deadlock",
		Mistake: "SET NX without PX, then PEXPIRE: a client that dies between them leaves a key that never expires",
		New:     func(c locks.Config) locks.Lock { return &single{cfg: c, twoStep: true, release: compareAndDel} }},
	{Name: "shared-token", Nodes: 1, Story: "unsafe-release", Outcome: verdict.Unsafe, Signature: "foreign-release",
		Mistake: "the token is the host's name, the same for every client on it, so compare-and-delete deletes a neighbour's lock",
		New:     func(c locks.Config) locks.Lock { return &single{cfg: c, token: "host-1", release: compareAndDel} }},
	{Name: "ttl-in-microseconds", Nodes: 1, Story: "setnx-crash", Outcome: verdict.Deadlock, Signature: "deadlock",
		Mistake: "PX is given the TTL in microseconds: a 500 ms lease lives 500 s, so a crashed holder blocks everyone",
		New:     func(c locks.Config) locks.Lock { return &single{cfg: c, pxMicros: true, release: compareAndDel} }},
	{Name: "redlock-late-start", Nodes: 5, Story: "redlock-paused-replies", Outcome: verdict.Unsafe, Signature: "double-holder",
		Mistake: "RedLock measures elapsed time from after the SETs returned, so a client that read its replies late sees a fresh lock",
		New:     func(c locks.Config) locks.Lock { return &redlock{cfg: c, lateStart: true} }},
	{Name: "redlock-half-quorum", Nodes: 5, Story: "redlock-crash-restart-delayed", Outcome: verdict.Unsafe, Signature: "promise-broken",
		Mistake: "RedLock's quorum is n/2 instead of n/2+1: two clients on either side of a partition both win",
		New:     func(c locks.Config) locks.Lock { return &redlock{cfg: c, halfQuorum: true} }},
}

// Correct is the single-node lock the mutants are written on, with no
// mistake switched on: a SET NX PX lock with a compare-and-delete script.
func Correct(c locks.Config) locks.Lock { return &single{cfg: c, release: compareAndDel} }

func token() string { return rand.Text() }

// single is a SET NX lock on one node with one mistake switched on.
type single struct {
	cfg      locks.Config
	token    string // fixed token (shared-token); empty: a fresh one each time
	twoStep  bool   // SET NX, then PEXPIRE
	pxMicros bool   // PX in microseconds
	// clockChecked releases with a DEL once the client's clock says the
	// lease is still valid; release is then unused.
	clockChecked bool
	release      func(ctx context.Context, c redis.UniversalClient, key, token string) (bool, error)
}

func (l *single) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	c := l.cfg.Clients[0]
	deadline := time.Now().Add(l.cfg.Wait)
	for {
		tok := l.token
		if tok == "" {
			tok = token()
		}
		start := l.cfg.Clock.Now()
		var ok bool
		var err error
		switch {
		case l.twoStep:
			if ok, err = c.SetNX(ctx, key, tok, 0).Result(); err == nil && ok {
				err = c.PExpire(ctx, key, l.cfg.TTL).Err()
			}
		case l.pxMicros:
			err = c.SetArgs(ctx, key, tok, redis.SetArgs{Mode: "NX", TTL: time.Duration(l.cfg.TTL.Microseconds()) * time.Millisecond}).Err()
			ok = err == nil
			if errors.Is(err, redis.Nil) {
				err = nil
			}
		default:
			ok, err = c.SetNX(ctx, key, tok, l.cfg.TTL).Result()
		}
		if err != nil {
			return locks.Lease{}, fmt.Errorf("%w: %v", locks.ErrUnknown, err)
		}
		if ok {
			return locks.Lease{Key: key, Token: tok, ValidUntil: start.Add(l.cfg.TTL)}, nil
		}
		if !retry(ctx, l.cfg, deadline) {
			return locks.Lease{}, locks.ErrNotAcquired
		}
	}
}

// retry waits the retry delay before another attempt, and reports whether
// one is due: false once the wait has run out or ctx ended.
func retry(ctx context.Context, cfg locks.Config, deadline time.Time) bool {
	if time.Now().After(deadline) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(cfg.RetryDelay):
		return true
	}
}

func (l *single) Release(ctx context.Context, lease locks.Lease) error {
	if l.clockChecked {
		if !l.cfg.Clock.Now().Before(lease.ValidUntil) {
			return locks.ErrNotHeld
		}
		if err := l.cfg.Clients[0].Del(ctx, lease.Key).Err(); err != nil {
			return fmt.Errorf("%w: %v", locks.ErrUnknown, err)
		}
		return nil
	}
	ok, err := l.release(ctx, l.cfg.Clients[0], lease.Key, lease.Token)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", locks.ErrUnknown, err)
	case !ok:
		return locks.ErrNotHeld
	}
	return nil
}

var cad = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

// compareAndDel is the right release: one script, compare and delete.
func compareAndDel(ctx context.Context, c redis.UniversalClient, key, tok string) (bool, error) {
	n, err := cad.Run(ctx, c, []string{key}, tok).Int()
	return n == 1, err
}

// getThenDel is the same check written as two commands.
func getThenDel(ctx context.Context, c redis.UniversalClient, key, tok string) (bool, error) {
	v, err := c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) || (err == nil && v != tok) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := c.Del(ctx, key).Result()
	return n == 1, err
}

// redlock is RedLock over every client it is handed, with one mistake.
type redlock struct {
	cfg        locks.Config
	lateStart  bool
	halfQuorum bool
}

func (l *redlock) quorum() int {
	if l.halfQuorum {
		return len(l.cfg.Clients) / 2
	}
	return len(l.cfg.Clients)/2 + 1
}

// onAll runs f on every node in parallel, each bounded by the node timeout,
// and counts the successes.
func (l *redlock) onAll(ctx context.Context, f func(context.Context, redis.UniversalClient) bool) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, c := range l.cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, l.cfg.NodeTimeout)
			defer cancel()
			if f(cctx, c) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

func (l *redlock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	deadline := time.Now().Add(l.cfg.Wait)
	for {
		tok := token()
		start := l.cfg.Clock.Now()
		ok := l.onAll(ctx, func(ctx context.Context, c redis.UniversalClient) bool {
			set, err := c.SetNX(ctx, key, tok, l.cfg.TTL).Result()
			return err == nil && set
		})
		if l.lateStart {
			start = l.cfg.Clock.Now()
		}
		validity := l.cfg.TTL - l.cfg.Clock.Now().Sub(start) - l.cfg.TTL/100
		if ok >= l.quorum() && validity > 0 {
			return locks.Lease{Key: key, Token: tok, ValidUntil: start.Add(l.cfg.TTL - l.cfg.TTL/100)}, nil
		}
		l.unlock(ctx, key, tok)
		if !retry(ctx, l.cfg, deadline) {
			return locks.Lease{}, locks.ErrNotAcquired
		}
	}
}

func (l *redlock) unlock(ctx context.Context, key, tok string) int {
	return l.onAll(context.WithoutCancel(ctx), func(ctx context.Context, c redis.UniversalClient) bool {
		ok, err := compareAndDel(ctx, c, key, tok)
		return err == nil && ok
	})
}

func (l *redlock) Release(ctx context.Context, lease locks.Lease) error {
	if l.unlock(ctx, lease.Key, lease.Token) >= l.quorum() {
		return nil
	}
	return locks.ErrNotHeld
}
