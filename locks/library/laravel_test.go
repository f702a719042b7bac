package library_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/worker"
)

// Laravel's cache lock, its real worker on real Redis: a second client is
// refused, a release releases, a lapsed lease's release is not-held (the
// script answered 0, release() false), a stopped node is unknown both
// ways, and a crash at the reply of the SET NX that took the key (a
// command trap, through the worker's traced php-redis client) leaves the
// key to its EX.
func TestLaravelWorker(t *testing.T) {
	needPHP(t, "Illuminate/Cache/RedisLock.php", "Illuminate/Redis/Connections/PhpRedisConnection.php")
	ctx := context.Background()
	h := start(t, "laravel")

	before := time.Now()
	lease, err := h.a.Acquire(ctx, "k")
	is(t, "first acquire", err, nil)
	// A TTL of one second is EX 1: the lease ends a second after the SET.
	if lease.ValidUntil.Before(before.Add(ttl)) || lease.ValidUntil.After(time.Now().Add(ttl)) {
		t.Fatalf("valid until %v: want a second after the SET, sent between %v and now", lease.ValidUntil, before)
	}
	is(t, "release", h.a.Release(ctx, lease), nil)
	is(t, "release again (restoreLock)", h.a.Release(ctx, lease), locks.ErrNotHeld)

	// block(1) tries every 250 ms until the clock's second turns, up to
	// 0.75 s after its first try and later on a busy machine: a's lease
	// (EX 1) may lapse meanwhile, and then b may take the key, but never
	// before a's lease ends. So a is released only once it has lapsed.
	lease, err = h.a.Acquire(ctx, "k")
	is(t, "acquire after release", err, nil)
	if _, err = h.b.Acquire(ctx, "k"); err == nil {
		if now := time.Now(); now.Before(lease.ValidUntil) {
			t.Fatalf("b took the key %v before a's lease ended", lease.ValidUntil.Sub(now))
		}
	} else {
		is(t, "acquire while a holds it", err, locks.ErrNotAcquired)
	}
	time.Sleep(2 * ttl)
	is(t, "release of a lapsed lease", h.a.Release(ctx, lease), locks.ErrNotHeld)

	lease, err = h.a.Acquire(ctx, "k")
	is(t, "acquire before the node stops", err, nil)
	pauseAll(t, h.nodes, func() {
		is(t, "release to a stopped node", h.a.Release(ctx, lease), locks.ErrUnknown)
		_, err = h.b.Acquire(ctx, "k2")
		is(t, "acquire from a stopped node", err, locks.ErrUnknown)
	})

	crashAtTakingSET(t, "laravel", h, "k3", "k3", ttl)
}

// needPHP skips a test on a machine without PHP, php-redis or the
// library's files (under /usr/share/php), which make setup installs.
func needPHP(t *testing.T, files ...string) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/php"); err != nil {
		t.Skip("php-cli not installed (make setup)")
	}
	if err := exec.Command("/usr/bin/php", "-r", "exit(class_exists('Redis') ? 0 : 1);").Run(); err != nil {
		t.Skip("php-redis not installed (make setup)")
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join("/usr/share/php", f)); err != nil {
			t.Skipf("the library is not installed (make setup): %v", err)
		}
	}
}

// pauseAll stops every node (SIGSTOP) while during runs.
func pauseAll(t *testing.T, nodes []*cluster.Node, during func()) {
	t.Helper()
	for _, n := range nodes {
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, n := range nodes {
			if err := n.Resume(); err != nil {
				t.Fatal(err)
			}
		}
	}()
	during()
}

// crashAtTakingSET starts one more worker of lock on h's nodes, under a
// gate armed to kill it at the reply of the first SET NX that succeeded
// (S1's trap): the trap can only spring if the worker reports its command
// boundaries. The acquire is unknown, and the key (redisKey in Redis) is
// left on the first node with its expiry, at most keyLife.
func crashAtTakingSET(t *testing.T, lock string, h *handles, key, redisKey string, keyLife time.Duration) {
	t.Helper()
	ctx := context.Background()
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	gate := nemesis.NewGate(rec)
	hello := worker.Hello{Lock: lock, Store: h.store.Addr(), TTLNS: int64(ttl), WaitNS: int64(ttl / 3), Owner: "c"}
	for _, n := range h.nodes {
		hello.Nodes = append(hello.Nodes, n.Addr())
	}
	p := startWorker(t, hello, worker.Options{Gate: gate, Client: 0, Process: 0, Clock: &nemesis.ClientClock{}})
	gate.Arm(nemesis.Trap{Client: nemesis.AnyClient, Crash: true,
		Command: &nemesis.Command{In: history.Acquire, Match: "SET NX", Reply: true, Succeeded: true}})
	gate.Begin(ctx, 0, 0, history.Acquire)
	_, err = p.Acquire(ctx, key)
	crashed := gate.End(0, 0)
	if !crashed {
		t.Fatalf("the trap at the SET NX's reply did not spring (acquire: %v): the worker reported no command boundary", err)
	}
	is(t, "acquire through a worker killed at its SET's reply", err, locks.ErrUnknown)
	c := cluster.NewClient(h.nodes[0].Addr(), cluster.ClientOptions{Timeout: ttl})
	defer c.Close()
	if pttl := c.PTTL(ctx, redisKey).Val(); pttl <= 0 || pttl > keyLife {
		t.Fatalf("PTTL of %s after the crash: %v, want the key left with its expiry (0, %v]", redisKey, pttl, keyLife)
	}
	fmt.Fprintf(os.Stderr, "%s: the trap sprang at the SET NX's reply; %s left to its expiry\n", lock, redisKey)
}
