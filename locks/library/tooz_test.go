package library_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/worker"
)

// toozCase is one of tooz's drivers under test: its lock, the Python
// module its driver imports (Debian's package), and the server binary.
type toozCase struct {
	lock, module, binary string
	// ttl is the lease the workers are told (the lock's MinTTL or more).
	ttl time.Duration
	// lapses says a holder stopped past its TTL loses the lock, and what
	// its release then says (nil: tooz reports it released).
	lapses  bool
	lapsed  error
	stopped func(t *testing.T, a, b *worker.Proc, la locks.Lease)
	// started is what the acquire of a worker started while the server is
	// stopped says.
	started error
	// killedFrees says a holder's killed worker frees the lock: its
	// connection closes with it, and the server ends its session's locks.
	killedFrees bool
}

// tooz's locks in real workers on real servers, one server (or one-member
// ensemble) of each kind shared by the cases: each sorts tooz's answers
// (a second client refused, a released lease released again not-held), a
// holder stopped (SIGSTOP) past its lease loses the lock to the next
// client and its release says what tooz says, and a stopped server gives
// the unknown outcomes tooz's errors call for, or, where tooz never
// returns (postgresql, mysql, zookeeper), the worker's bound does; a worker
// started meanwhile still says hello, and takes the lock once the server
// runs again. The ensembles
// have one member: three JVMs cost tens of seconds here, and no case
// needs a quorum to survive.
func TestToozWorkers(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import tooz.coordination, redis").Run(); err != nil {
		t.Skipf("python3-tooz not installed (apt-get install python3-tooz): %v", err)
	}
	c, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	store, err := c.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []toozCase{
		{lock: "tooz-redis", module: "tooz.drivers.redis", binary: "redis-server", ttl: time.Second,
			lapses: true, lapsed: locks.ErrNotHeld, stopped: stoppedServerIsUnknown, started: locks.ErrNotAcquired},
		// The memcached coordinator starts on a stopped server: its start's
		// heartbeat is a set with pymemcache's default noreply=True
		// (MemcachedDriver.heartbeat), which waits for nothing. The add
		// then waits for its reply and times out, and it may land when the
		// server runs again: unknown.
		{lock: "tooz-memcached", module: "tooz.drivers.memcached", binary: "memcached", ttl: 4 * time.Second,
			lapses: true, lapsed: locks.ErrNotHeld, stopped: stoppedServerIsUnknown, started: locks.ErrUnknown},
		// The TTL means nothing to an advisory lock; a short one keeps the
		// worker's bound on a call tooz never returns from short.
		{lock: "tooz-postgres", module: "tooz.drivers.pgsql", binary: "/usr/lib/postgresql/15/bin/postgres", ttl: 200 * time.Millisecond,
			stopped: stoppedHangsUntilTheWorkersBound, started: locks.ErrNotAcquired},
		// GET_LOCK, as pg_try_advisory_lock: no TTL, a lock of the session.
		// PyMySQL waits for a stopped server's greeting and replies without
		// bound, so the worker's bound answers.
		{lock: "tooz-mysql", module: "tooz.drivers.mysql", binary: "/usr/sbin/mariadbd", ttl: 200 * time.Millisecond,
			stopped: stoppedHangsUntilTheWorkersBound, started: locks.ErrNotAcquired, killedFrees: true},
		// kazoo's release retries across the expired session and deletes
		// nothing: tooz, as kazoo, reports the lost lock released.
		{lock: "tooz-zookeeper", module: "tooz.drivers.zookeeper", binary: "java", ttl: time.Second,
			lapses: true, lapsed: nil, stopped: stoppedHangsUntilTheWorkersBound, started: locks.ErrNotAcquired},
		{lock: "tooz-etcd", module: "tooz.drivers.etcd3", binary: "etcd", ttl: time.Second,
			lapses: true, lapsed: locks.ErrNotHeld, stopped: stoppedServerIsUnknown, started: locks.ErrNotAcquired},
	}
	for _, tc := range cases {
		t.Run(tc.lock, func(t *testing.T) {
			if err := exec.Command("/usr/bin/python3", "-c", "import "+tc.module).Run(); err != nil {
				t.Skipf("%s cannot import %s (its Debian package is not installed): %v", tc.lock, tc.module, err)
			}
			if _, err := exec.LookPath(tc.binary); err != nil {
				t.Skipf("%s not installed", tc.binary)
			}
			info, err := locks.Lookup(tc.lock)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ttl < info.MinTTL {
				t.Fatalf("the case's TTL %s is below the lock's MinTTL %s", tc.ttl, info.MinTTL)
			}
			node := toozNode(t, c, info)
			a, b := toozWorker(t, info, node, store, "a", tc.ttl), toozWorker(t, info, node, store, "b", tc.ttl)
			toozExclusive(t, tc, a, b)
			if tc.lapses {
				toozLapse(t, tc, a, b)
			}
			if tc.killedFrees {
				toozKilledHolder(t, toozWorker(t, info, node, store, "d", tc.ttl), b)
			}
			if tc.stopped != nil {
				la, err := a.Acquire(ctx, "stopped")
				is(t, "acquire before the server stops", err, nil)
				if err := node.Pause(); err != nil {
					t.Fatal(err)
				}
				tc.stopped(t, a, b, la)
				// A client retired meanwhile goes on as a new worker: it says
				// hello though its coordinator cannot start, and its acquire,
				// which starts it again and sends no lock command, takes
				// nothing.
				c := toozWorker(t, info, node, store, "c", tc.ttl)
				_, err = c.Acquire(ctx, "k3")
				is(t, "acquire of a worker started while the server is stopped", err, tc.started)
				if err := node.Resume(); err != nil {
					t.Fatal(err)
				}
				lc, err := c.Acquire(ctx, "k4")
				is(t, "acquire once the server runs again", err, nil)
				is(t, "its release", c.Release(ctx, lc), nil)
			}
		})
	}
}

// toozExclusive: a holds, b is refused, a releases, and a second release
// of the same lease deletes nothing.
func toozExclusive(t *testing.T, tc toozCase, a, b *worker.Proc) {
	t.Helper()
	ctx := context.Background()
	la, err := a.Acquire(ctx, "k")
	is(t, "first acquire", err, nil)
	if la.Fence != 0 || !la.ValidUntil.IsZero() || la.Lost != nil {
		t.Fatalf("tooz gives no fence, deadline nor loss signal, the lease says otherwise: %+v", la)
	}
	began := time.Now()
	_, err = b.Acquire(ctx, "k")
	is(t, "acquire while a holds", err, locks.ErrNotAcquired)
	if took := time.Since(began); tc.lock == "tooz-etcd" && took > tc.ttl/6 {
		// Debian's python3-etcd3 0.12 and tenacity 8.2 do not fit: the
		// first retry after a refused transaction raises TypeError at
		// once, which put nothing, so the worker answers not-acquired
		// without waiting out its wait (TTL/3).
		t.Fatalf("the etcd driver's contended acquire took %s: it waited, as packaged it does not", took)
	}
	is(t, "release", a.Release(ctx, la), nil)
	is(t, "release again", a.Release(ctx, la), locks.ErrNotHeld)
	lb, err := b.Acquire(ctx, "k")
	is(t, "b's acquire after a's release", err, nil)
	is(t, "b's release", b.Release(ctx, lb), nil)
}

// toozLapse stops a's whole process past its lease: its heart stops with
// it, b takes the lock, and a's release, once a runs again, says what
// tooz says of a lock it lost.
func toozLapse(t *testing.T, tc toozCase, a, b *worker.Proc) {
	t.Helper()
	ctx := context.Background()
	key := "lapse"
	la, err := a.Acquire(ctx, key)
	is(t, "acquire before the stop", err, nil)
	var lb locks.Lease
	stop(t, a, tc.ttl+2*time.Second, func() {
		// The lease runs out at most a TTL after the last renewal
		// (memcached's item up to two seconds sooner, ZooKeeper's session a
		// session after the last ping); b tries until then.
		deadline := time.Now().Add(tc.ttl + 1500*time.Millisecond)
		for {
			if lb, err = b.Acquire(ctx, key); err == nil || time.Now().After(deadline) {
				break
			}
			is(t, "b's acquire while a's lease runs", err, locks.ErrNotAcquired)
			time.Sleep(100 * time.Millisecond)
		}
		is(t, "b's acquire once a's lease lapsed", err, nil)
	})
	is(t, "a's release of its lapsed lease", a.Release(ctx, la), tc.lapsed)
	is(t, "b's release", b.Release(ctx, lb), nil)
}

// toozKilledHolder: d takes the lock and is killed (SIGKILL, Proc.Close):
// its connection closes with the process, the server ends the session and
// the locks it held (drivers.rst: "automatically when the database
// session ends (for example if the program using the lock crashes)"), and
// b, refused while d lived, takes the lock soon after.
func toozKilledHolder(t *testing.T, d, b *worker.Proc) {
	t.Helper()
	ctx := context.Background()
	key := "killed"
	_, err := d.Acquire(ctx, key)
	is(t, "the doomed holder's acquire", err, nil)
	_, err = b.Acquire(ctx, key)
	is(t, "b's acquire while d holds", err, locks.ErrNotAcquired)
	d.Close()
	killed := time.Now()
	for {
		lb, err := b.Acquire(ctx, key)
		if err == nil {
			t.Logf("b took the killed holder's lock %s after the kill", time.Since(killed).Round(time.Millisecond))
			is(t, "b's release", b.Release(ctx, lb), nil)
			return
		}
		is(t, "b's acquire while d's session ends", err, locks.ErrNotAcquired)
		if time.Since(killed) > 5*time.Second {
			t.Fatal("the killed holder's lock was not freed within 5 s: its session outlived its process")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stoppedServerIsUnknown: with the server stopped, a command times out
// (the worker's URLs carry a one-second timeout), which tooz raises as
// ToozConnectionError or OperationTimedOut: unknown, for an acquire and a
// release alike.
func stoppedServerIsUnknown(t *testing.T, a, b *worker.Proc, la locks.Lease) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := b.Acquire(ctx, "k2")
		is(t, "acquire from a stopped server", err, locks.ErrUnknown)
	}()
	is(t, "release to a stopped server", a.Release(ctx, la), locks.ErrUnknown)
	wg.Wait()
}

// stoppedHangsUntilTheWorkersBound: tooz's postgresql and mysql drivers
// set no timeout on their connections, and the zookeeper driver's kazoo Lock waits
// for its connection to come back before it looks at its own timeout (a
// fresh Lock's ensure_path, then the create, are commands kazoo retries
// without end), so neither's calls to a stopped server return, whatever
// their blocking=; the worker calls them unknown after its bound (3 s, the
// wait and six TTLs), which the answer cannot come before.
func stoppedHangsUntilTheWorkersBound(t *testing.T, a, b *worker.Proc, la locks.Lease) {
	t.Helper()
	ctx := context.Background()
	begin := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := b.Acquire(ctx, "k2")
		is(t, "acquire from a stopped server", err, locks.ErrUnknown)
		if !strings.Contains(err.Error(), "has not returned") {
			t.Errorf("the acquire ended otherwise than by the worker's bound: %v", err)
		}
	}()
	err := a.Release(ctx, la)
	is(t, "release to a stopped server", err, locks.ErrUnknown)
	if !strings.Contains(err.Error(), "has not returned") {
		t.Errorf("the release ended otherwise than by the worker's bound: %v", err)
	}
	wg.Wait()
	if took := time.Since(begin); took < 3*time.Second {
		t.Fatalf("the calls ended after %s, before the worker's bound", took)
	}
}

// toozNode starts one node of the lock's server kind in c: a one-member
// ensemble for ZooKeeper and etcd.
func toozNode(t *testing.T, c *cluster.Cluster, info locks.Info) *cluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := cluster.NodeOptions{Name: info.Name, Kind: info.ServerKind()}
	if info.ServerKind() == "zookeeper" || info.ServerKind() == "etcd" {
		nodes, err := c.AddNodes(ctx, []cluster.NodeOptions{o})
		if err != nil {
			t.Fatal(err)
		}
		return nodes[0]
	}
	n, err := c.AddNode(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// toozWorker starts one worker of the lock, named owner, dialling node
// through a link of its own.
func toozWorker(t *testing.T, info locks.Info, node, store *cluster.Node, owner string, ttl time.Duration) *worker.Proc {
	t.Helper()
	l, err := node.Link(owner)
	if err != nil {
		t.Fatal(err)
	}
	hello := worker.Hello{Lock: info.Name, Nodes: []string{l.Addr()}, Store: store.Addr(), TTLNS: int64(ttl),
		WaitNS: int64(ttl / 3), Owner: owner, StoreTimeoutNS: int64(time.Second)}
	return startWorker(t, hello, worker.Options{})
}

// tooz's heart renews from a thread of its own, and the worker reports
// what it sends apart: a trap that names an op is not sprung by the heart
// (here on its PSETEX of the member's beat key while the op waits in a
// blocked acquire). Counted as the op's, a beat sent during a release took
// a release's trap in a make run, and the release's own command went
// through untrapped.
func TestToozHeartsCommandsAreNotTheOps(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import tooz.drivers.redis").Run(); err != nil {
		t.Skipf("python3-tooz not installed (apt-get install python3-tooz): %v", err)
	}
	ctx := context.Background()
	node, store := redisAndStore(t)
	hello := worker.Hello{Lock: "tooz-redis", Nodes: []string{node.Addr()}, Store: store.Addr(), TTLNS: int64(ttl),
		WaitNS: int64(2 * ttl), Owner: "a", StoreTimeoutNS: int64(time.Second)}
	a := startWorker(t, hello, worker.Options{})
	g := nemesis.NewGate(history.NewRecorder(nil, 0))
	hello.Owner = "b"
	b := startWorker(t, hello, worker.Options{Gate: g, Client: 1, Process: 1})
	if _, err := a.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	g.Arm(nemesis.Trap{Client: nemesis.AnyClient, Command: &nemesis.Command{In: history.Acquire, Match: "PSETEX"}, Crash: true})
	g.Begin(ctx, 1, 1, history.Acquire)
	_, err := b.Acquire(ctx, "k")
	g.End(1, 1)
	is(t, "b's acquire, waiting 2 TTLs (4 beats of its heart) for a's key", err, locks.ErrNotAcquired)
	if beats := g.Profile()[nemesis.Renewal]; beats == nil {
		t.Fatal("b's heart sent nothing while b waited: the test saw no beat to leave alone")
	}
}
