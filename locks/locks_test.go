package locks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// env is n real nodes and a way to build handles on them.
type env struct {
	t     *testing.T
	cl    *cluster.Cluster
	conns []redis.UniversalClient
}

func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	cl, err := cluster.Start(context.Background(), cluster.Options{}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cl: cl}
	t.Cleanup(func() {
		for _, c := range e.conns {
			c.Close()
		}
		cl.Close()
	})
	return e
}

// clients dials every node directly (these tests need no faults).
func (e *env) clients() []redis.UniversalClient {
	var out []redis.UniversalClient
	for _, n := range e.cl.Nodes() {
		c := cluster.NewClient(n.Addr(), cluster.ClientOptions{})
		e.conns = append(e.conns, c)
		out = append(out, c)
	}
	return out
}

func (e *env) lock(name string, cfg locks.Config) locks.Lock {
	e.t.Helper()
	if cfg.Clients == nil {
		cfg.Clients = e.clients()
	}
	if cfg.TTL == 0 {
		cfg.TTL = time.Second
	}
	// These tests are about what a lock does, not how fast a node answers:
	// RedLock's default per-node timeout (50 ms at most) turns a reply that
	// a machine busy with stories delays past it into an unknown outcome.
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = time.Second
	}
	l, err := locks.New(name, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) admin(i int) redis.UniversalClient { return e.clients()[i] }

// redisLocks are the registered locks that keep their state in Redis: all
// but the two controls, which TestControls covers.
func redisLocks() []string {
	var out []string
	for _, n := range locks.Names() {
		if n != "none" && n != "mutex" {
			out = append(out, n)
		}
	}
	return out
}

// The controls do what the matrix relies on them to do: "none" lets every
// client in at once, "mutex" one at a time, and only its holder out.
func TestControls(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1)
	key := fmt.Sprintf("controls-%d", time.Now().UnixNano()) // the mutex's slots are process-wide
	for _, name := range []string{"none", "mutex"} {
		a := e.lock(name, locks.Config{Owner: "a:1"})
		b := e.lock(name, locks.Config{Owner: "b:1", Wait: 50 * time.Millisecond})
		lease, err := a.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = b.Acquire(ctx, key)
		if name == "none" {
			if err != nil {
				t.Fatalf("none must let a second client in at once, got %v", err)
			}
			continue
		}
		if !errors.Is(err, locks.ErrNotAcquired) {
			t.Fatalf("mutex let a second client in: %v", err)
		}
		if err := b.Release(ctx, locks.Lease{Key: key, Token: "forged"}); !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("mutex released for a non-holder: %v", err)
		}
		if err := a.Release(ctx, lease); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, key); err != nil {
			t.Fatalf("mutex after release: %v", err)
		}
	}
}

func nodesFor(name string) int {
	info, err := locks.Lookup(name)
	if err != nil {
		panic(err)
	}
	return info.Nodes
}

// Release by someone who does not hold the lock must be refused, except by
// the variants kept as counter-examples, whose test shows the damage.
func TestReleaseByNonOwner(t *testing.T) {
	ownerBlind := map[string]bool{"setnx-expire": true, "set-nx-px-del": true, "getset": true}
	ctx := context.Background()
	for _, name := range redisLocks() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nodesFor(name))
			a := e.lock(name, locks.Config{Owner: "a:1", TTL: 5 * time.Second})
			b := e.lock(name, locks.Config{Owner: "b:1", TTL: 5 * time.Second})
			lease, err := a.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			forged := locks.Lease{Key: "k", Token: "not-a's-token", ValidUntil: time.Now().Add(time.Minute)}
			err = b.Release(ctx, forged)
			exists, _ := e.admin(0).Exists(ctx, "k").Result()
			if ownerBlind[name] {
				if err != nil || exists != 0 {
					t.Fatalf("%s is documented as owner-blind: the forged release should delete a's lock (err %v, exists %d)", name, err, exists)
				}
				return
			}
			if !errors.Is(err, locks.ErrNotHeld) {
				t.Fatalf("release by non-owner: want ErrNotHeld, got %v", err)
			}
			if exists != 1 {
				t.Fatal("a non-owner's release deleted the lock")
			}
			if err := a.Release(ctx, lease); err != nil {
				t.Fatalf("owner's release: %v", err)
			}
		})
	}
}

func TestTakenLockIsNotAcquired(t *testing.T) {
	ctx := context.Background()
	for _, name := range redisLocks() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nodesFor(name))
			a := e.lock(name, locks.Config{Owner: "a:1", TTL: 5 * time.Second})
			b := e.lock(name, locks.Config{Owner: "b:1", TTL: 5 * time.Second, Wait: 100 * time.Millisecond})
			if _, err := a.Acquire(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatalf("want ErrNotAcquired while a holds it, got %v", err)
			}
		})
	}
}

func TestReentrantCountsUpAndDown(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"reentrant", "fair"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			l := e.lock(name, locks.Config{Owner: "a:1"})
			admin := e.admin(0)
			var lease locks.Lease
			for i := 1; i <= 3; i++ {
				var err error
				if lease, err = l.Acquire(ctx, "k"); err != nil {
					t.Fatal(err)
				}
				if n, _ := admin.HGet(ctx, "k", "a:1").Int(); n != i {
					t.Fatalf("after %d entries the count is %d", i, n)
				}
			}
			for i := 2; i >= 0; i-- {
				if err := l.Release(ctx, lease); err != nil {
					t.Fatal(err)
				}
				exists, _ := admin.Exists(ctx, "k").Result()
				if i == 0 && exists != 0 {
					t.Fatal("key still there after the last exit")
				}
				if n, _ := admin.HGet(ctx, "k", "a:1").Int(); i > 0 && n != i {
					t.Fatalf("count %d, want %d", n, i)
				}
			}
		})
	}
}

func TestWatchdogKeepsLiveHolderAndLetsDeadOneGo(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1)
	// A second: a renewal every third of it has 600 ms of room on a
	// machine busy with stories.
	ttl := time.Second
	// The holder's own connection: closing it is the process dying.
	own := e.clients()
	l := e.lock("reentrant", locks.Config{Owner: "a:1", TTL: ttl, Clients: own})
	if _, err := l.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)
	if n, _ := e.admin(0).Exists(ctx, "k").Result(); n != 1 {
		t.Fatal("watchdog let a live holder's lock expire")
	}
	own[0].Close()
	// A renewal already under way when the connection closed may land.
	time.Sleep(ttl + time.Second)
	if n, _ := e.admin(0).Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("lock outlived its crashed holder by more than a TTL and a second")
	}
}

func TestReleaseWakesWaiterThroughPubSub(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"reentrant", "fair"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			// A 10 s TTL: a waiter that polled on the TTL would wait seconds.
			a := e.lock(name, locks.Config{Owner: "a:1", TTL: 10 * time.Second})
			b := e.lock(name, locks.Config{Owner: "b:1", TTL: 10 * time.Second, Wait: 5 * time.Second})
			lease, err := a.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				if _, err := b.Acquire(ctx, "k"); err != nil {
					t.Error(err)
				}
				got <- time.Now()
			}()
			time.Sleep(200 * time.Millisecond) // b is subscribed and waiting
			released := time.Now()
			if err := a.Release(ctx, lease); err != nil {
				t.Fatal(err)
			}
			// Without the message the waiter would sleep out its 5 s wait
			// (the TTL is longer); a second leaves room for a loaded machine.
			if d := (<-got).Sub(released); d > time.Second {
				t.Fatalf("waiter woke %v after the release, want well under its 5 s wait", d)
			}
		})
	}
}

func TestFairLockGrantsInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1)
	admin := e.admin(0)
	holder := e.lock("fair", locks.Config{Owner: "holder:1", TTL: 10 * time.Second})
	lease, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		w := e.lock("fair", locks.Config{Owner: fmt.Sprintf("w%d:1", i), TTL: 10 * time.Second, Wait: 20 * time.Second})
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := w.Acquire(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			if err := w.Release(ctx, l); err != nil {
				t.Error(err)
			}
		}()
		// Arrival order is queue order: wait until waiter i has joined.
		deadline := time.Now().Add(2 * time.Second)
		for n, _ := admin.LLen(ctx, locks.FairQueueKey("k")).Result(); n != int64(i+1); n, _ = admin.LLen(ctx, locks.FairQueueKey("k")).Result() {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never joined the queue (length %d)", i, n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := holder.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("grant order %v, want arrival order 0..9", order)
		}
	}
	if len(order) != 10 {
		t.Fatalf("only %d of 10 waiters were granted", len(order))
	}
}

func TestMultiLockNeverLeavesAPartialSet(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	// Someone else holds the member on the middle node.
	other := e.lock("reentrant", locks.Config{Owner: "other:1", Clients: e.clients()[1:2], TTL: 10 * time.Second})
	if _, err := other.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	m := e.lock("multilock", locks.Config{Owner: "m:1", TTL: 10 * time.Second, Wait: 300 * time.Millisecond})
	if _, err := m.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("want ErrNotAcquired, got %v", err)
	}
	for i, c := range e.clients() {
		if n, _ := c.HExists(ctx, "k", "m:1").Result(); n {
			t.Fatalf("failed multilock left its member held on node %d", i+1)
		}
	}
}

func TestMultiLockOverlappingSetsStayExclusive(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 3)
	all := e.clients()
	// Two multilocks over {n1,n2} and {n2,n3}, and their holders' count in
	// the shared member must never exceed one.
	sets := [][]redis.UniversalClient{all[0:2], all[1:3]}
	var inside, worst int32
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for i := 0; i < 6; i++ {
		m := e.lock("multilock", locks.Config{Owner: fmt.Sprintf("m%d:1", i), Clients: sets[i%2], TTL: 2 * time.Second, Wait: 200 * time.Millisecond})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				l, err := m.Acquire(ctx, "k")
				if err != nil {
					continue
				}
				mu.Lock()
				inside++
				worst = max(worst, inside)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				if err := m.Release(ctx, l); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if worst != 1 {
		t.Fatalf("%d multilock holders at once", worst)
	}
}

func TestRedLockNeedsAMajority(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 5)
	l := e.lock("redlock", locks.Config{Owner: "a:1", Wait: 200 * time.Millisecond})
	nodes := e.cl.Nodes()
	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("3 of 5 nodes up: want the lock, got %v", err)
	}
	if err := l.Release(ctx, lease); err != nil {
		t.Fatalf("release on 3 of 5: %v", err)
	}
	if err := nodes[2].Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("2 of 5 nodes up: want ErrNotAcquired, got %v", err)
	}
}

// hookFunc is a go-redis hook around each command, standing where the
// harness's gate stands, so a test can do to a lock what a nemesis would.
type hookFunc func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (h hookFunc) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hookFunc) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return h(ctx, cmd, next) }
}
func (h hookFunc) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hooked dials every node with h on each client.
func (e *env) hooked(h hookFunc) []redis.UniversalClient {
	cs := e.clients()
	for _, c := range cs {
		c.AddHook(h)
	}
	return cs
}

func TestRedLockValidityRejectsALateRead(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 5)
	ttl := 200 * time.Millisecond
	// Every SET's reply reaches the lock after the TTL (K6).
	late := hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		err := next(ctx, cmd)
		if cmd.Name() == "set" {
			time.Sleep(ttl + 50*time.Millisecond)
		}
		return err
	})
	checked := e.lock("redlock", locks.Config{Owner: "a:1", TTL: ttl, Wait: time.Millisecond, Clients: e.hooked(late)})
	if _, err := checked.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("replies read after the TTL: redlock must refuse, got %v", err)
	}
	unchecked := e.lock("redlock-novalidity", locks.Config{Owner: "b:1", TTL: ttl, Wait: time.Millisecond, Clients: e.hooked(late)})
	if _, err := unchecked.Acquire(ctx, "k"); err != nil {
		t.Fatalf("redlock-novalidity believes the expired lock, as documented; got %v", err)
	}
}

func TestSetnxExpireCrashBetweenCommandsNeverExpires(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1)
	// The client dies once SETNX has taken the key: nothing after it leaves.
	died := false
	crash := hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if died {
			cmd.SetErr(errors.New("killed"))
			return cmd.Err()
		}
		err := next(ctx, cmd)
		died = cmd.Name() == "set" // go-redis sends SetNX as SET NX
		return err
	})
	l := e.lock("setnx-expire", locks.Config{Owner: "a:1", Clients: e.hooked(crash)})
	if _, err := l.Acquire(ctx, "k"); !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("a crash mid-protocol is an unknown outcome, got %v", err)
	}
	if ttl, _ := e.admin(0).PTTL(ctx, "k").Result(); ttl != -1 {
		t.Fatalf("key should exist with no TTL (PTTL -1 means forever), got %v", ttl)
	}
}

func TestUnknownLockNameListsValidOnes(t *testing.T) {
	_, err := locks.New("nope", locks.Config{})
	if err == nil || !strings.Contains(err.Error(), "set-nx-px") {
		t.Fatalf("want the valid names in the error, got %v", err)
	}
}

func TestWatchdogTellsTheHolderItsLeaseIsLostOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 1)
	ttl := time.Second
	quiet := e.lock("reentrant", locks.Config{Owner: "a:1", TTL: ttl, Clients: e.clients()})
	l, err := quiet.Acquire(ctx, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	if l.Lost != nil {
		t.Fatal("reentrant tells losses: it is Redisson's RLock, which does not")
	}
	teller := e.lock("reentrant-lost", locks.Config{Owner: "b:1", TTL: ttl, Clients: e.clients()})
	l, err = teller.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost:
		t.Fatal("a live holder's lease was said lost")
	case <-time.After(ttl):
	}
	// Someone else takes the key (an expiry and a new holder, in one):
	// the next renewal finds it gone.
	e.admin(0).Del(ctx, "k")
	e.admin(0).HSet(ctx, "k", "c:1", 1)
	select {
	case <-l.Lost:
	case <-time.After(ttl):
		t.Fatal("the watchdog's renewal failed and the holder was not told within a TTL")
	}
}

// A caller that gives up as Redis answers the script that took the lock
// hears only its context's error. reentrant ran the script under that
// context and starts nothing, so the key expires within a TTL;
// reentrant-async, whose script runs apart and starts the watchdog when
// Redis answers (Redisson's tryAcquireAsync), keeps renewing a key nobody
// holds (redisson#7272).
func TestInterruptedAcquireLeavesAWatchdogOnlyWhenDetached(t *testing.T) {
	e := newEnv(t, 1)
	// A TTL of a second leaves the watchdog (renewing every TTL/3) two
	// thirds of a second of scheduling stall before the key expires under
	// it: make test runs two packages at a time beside the matrix.
	ttl := time.Second
	for _, tc := range []struct {
		lock     string
		outlives bool
	}{{"reentrant", false}, {"reentrant-async", true}} {
		ctx, cancel := context.WithCancel(context.Background())
		// The caller gives up once the first script's reply is back,
		// before the lock hears it: the reply the script returned is
		// replaced by the cancellation, as the gate's Cancel trap does.
		giveUp := hookFunc(func(cctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
			err := next(cctx, cmd)
			if strings.HasPrefix(cmd.Name(), "eval") {
				cancel()
			}
			if cctx.Err() != nil {
				cmd.SetErr(cctx.Err())
				return cctx.Err()
			}
			return err
		})
		key := "interrupted-" + tc.lock
		l := e.lock(tc.lock, locks.Config{Owner: "a:1", TTL: ttl, Clients: e.hooked(giveUp)})
		if _, err := l.Acquire(ctx, key); !errors.Is(err, locks.ErrUnknown) {
			t.Fatalf("%s: a caller that gave up hears an unknown outcome, got %v", tc.lock, err)
		}
		time.Sleep(3 * ttl)
		n, err := e.admin(0).Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := n == 1; got != tc.outlives {
			t.Fatalf("%s: the key exists 3 TTLs after the interrupted acquire: %v, want %v", tc.lock, got, tc.outlives)
		}
	}
}
