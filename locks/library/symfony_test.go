package library_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// symfonyCase is one of Symfony's stores under test.
type symfonyCase struct {
	lock string
	// needs is PHP that must run for the case's store to load (an
	// extension, Predis), with what to install when it does not.
	needs, install string
	// binary is the server the nodes run.
	binary string
	// ttl is the lease the workers are told (the lock's MinTTL or more).
	ttl time.Duration
	// expires says the lease has a deadline and lapses at it.
	expires bool
	// stopped checks what a's release and b's acquire say with every
	// node stopped or killed.
	stopped func(t *testing.T, s *symfonyPair)
	// trapped says the worker reports Redis command boundaries.
	trapped bool
	// killedKeeps says a holder's killed worker leaves its lock held until
	// its expiry: the lock is a row, which no connection's end deletes.
	killedKeeps bool
}

// symfonyPair is two workers of one lock on the same nodes.
type symfonyPair struct {
	info  locks.Info
	ttl   time.Duration
	nodes []*cluster.Node
	store *cluster.Node
	a, b  *worker.Proc
}

// Symfony's Lock in real PHP workers on real servers: each store sorts
// Symfony's answers (a second client refused, a release, a lapsed lease's
// release, stopped or killed nodes), and on Redis a trap at a command's
// reply springs in the worker.
func TestSymfonyWorkers(t *testing.T) {
	if _, err := os.Stat("/usr/bin/php"); err != nil {
		t.Skip("php not installed (apt-get install php-cli php-symfony-lock)")
	}
	if out, err := exec.Command("/usr/bin/php", "-r", "require 'Symfony/Component/Lock/autoload.php';").CombinedOutput(); err != nil {
		t.Skipf("Symfony Lock not installed (apt-get install php-symfony-lock): %v: %s", err, out)
	}
	cases := []symfonyCase{
		{lock: "symfony-redis", needs: "extension_loaded('redis')", install: "php-redis", binary: "redis-server",
			ttl: time.Second, expires: true, stopped: symfonyStoppedIsUnknown, trapped: true},
		{lock: "symfony-predis", needs: "(include_once 'Predis/autoload.php') && class_exists('Predis\\Client')", install: "php-nrk-predis", binary: "redis-server",
			ttl: time.Second, expires: true, stopped: symfonyStoppedIsUnknown, trapped: true},
		{lock: "symfony-redlock3", needs: "extension_loaded('redis')", install: "php-redis", binary: "redis-server",
			ttl: time.Second, expires: true, stopped: symfonyStoppedIsSwallowed, trapped: true},
		{lock: "symfony-redlock5", needs: "extension_loaded('redis')", install: "php-redis", binary: "redis-server",
			ttl: time.Second, expires: true},
		{lock: "symfony-postgres", needs: "extension_loaded('pdo_pgsql')", install: "php-pgsql",
			binary: "/usr/lib/postgresql/15/bin/postgres", ttl: time.Second, stopped: symfonyPostgresStopped},
		// Two seconds: a row's expiry is whole seconds of the server's
		// clock, rounded (see TestSymfonyPdoStoreEndsLeasesEarly), so a
		// TTL of N lives more than N-1 s.
		{lock: "symfony-pdo-pg", needs: "extension_loaded('pdo_pgsql')", install: "php-pgsql",
			binary: "/usr/lib/postgresql/15/bin/postgres", ttl: 2 * time.Second, expires: true, stopped: symfonyPostgresStopped},
		// Three seconds: the row's expiry is UNIX_TIMESTAMP() + ttl, whole
		// seconds truncated (see TestSymfonyPdoStoreMySQLEndsLeasesEarly), so a TTL of
		// N lives more than N-1 s on the server, which a killed holder's
		// row must outlive while b is refused. PDO bounds no query: the
		// same answers as PostgreSQL's to a stopped or killed server.
		{lock: "symfony-pdo-mysql", needs: "extension_loaded('pdo_mysql')", install: "php-mysql",
			binary: "/usr/sbin/mariadbd", ttl: 3 * time.Second, expires: true, killedKeeps: true, stopped: symfonyPostgresStopped},
		// Three seconds: memcached may drop an item up to two seconds
		// before its exptime (services.memcachedEarly).
		{lock: "symfony-memcached", needs: "extension_loaded('memcached')", install: "php-memcached", binary: "memcached",
			ttl: 3 * time.Second, expires: true, stopped: symfonyStoppedIsSwallowed},
	}
	for _, tc := range cases {
		t.Run(tc.lock, func(t *testing.T) {
			s := symfonyStart(t, tc)
			symfonyExclusive(t, tc, s)
			if tc.expires {
				symfonyLapse(t, tc, s)
			}
			if tc.killedKeeps {
				symfonyKilledHolder(t, s)
			}
			if tc.trapped {
				symfonyTrap(t, s)
			}
			if tc.stopped != nil {
				tc.stopped(t, s)
			}
		})
	}
}

// symfonyStart skips a case whose PHP or server is missing, and starts its
// nodes, a store and two workers, a and b.
func symfonyStart(t *testing.T, tc symfonyCase) *symfonyPair {
	t.Helper()
	if out, err := exec.Command("/usr/bin/php", "-r", "exit(("+tc.needs+") ? 0 : 1);").CombinedOutput(); err != nil {
		t.Skipf("%s needs %s (apt-get install %s): %v %s", tc.lock, tc.needs, tc.install, err, out)
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
	c, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &symfonyPair{info: info, ttl: tc.ttl}
	if s.store, err = c.AddNode(ctx, cluster.NodeOptions{Name: "store"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= info.Nodes; i++ {
		n, err := c.AddNode(ctx, cluster.NodeOptions{Name: fmt.Sprintf("n%d", i), Kind: info.ServerKind()})
		if err != nil {
			t.Fatal(err)
		}
		s.nodes = append(s.nodes, n)
	}
	s.a, s.b = s.open(t, "a", nil), s.open(t, "b", nil)
	return s
}

// open starts one worker of the pair's lock, under gate when there is one.
func (s *symfonyPair) open(t *testing.T, owner string, gate *nemesis.Gate) *worker.Proc {
	t.Helper()
	hello := worker.Hello{Lock: s.info.Name, Store: s.store.Addr(), TTLNS: int64(s.ttl), WaitNS: int64(s.ttl / 3), Owner: owner}
	for _, n := range s.nodes {
		hello.Nodes = append(hello.Nodes, n.Addr())
	}
	var o worker.Options
	if gate != nil {
		o.Gate, o.Clock = gate, &nemesis.ClientClock{}
	}
	return startWorker(t, hello, o)
}

// symfonyExclusive: a holds, b is refused, a releases, b takes it. A lease
// of an expiring store has Symfony's deadline, at most a TTL (memcached's
// whole seconds: rounded up) after the acquire was sent; PostgreSqlStore's
// has none.
func symfonyExclusive(t *testing.T, tc symfonyCase, s *symfonyPair) {
	t.Helper()
	ctx := context.Background()
	before := time.Now()
	la, err := s.a.Acquire(ctx, "k")
	is(t, "first acquire", err, nil)
	switch {
	case !tc.expires && !la.ValidUntil.IsZero():
		t.Fatalf("PostgreSqlStore keeps no deadline, the lease says %v", la.ValidUntil)
	case tc.expires && (la.ValidUntil.Before(before.Add(tc.ttl)) && la.ValidUntil.Before(time.Now()) || la.ValidUntil.After(time.Now().Add(tc.ttl.Round(time.Second)+10*time.Millisecond))):
		t.Fatalf("the lease's deadline %v is not Symfony's, a TTL (%s) from the acquire (%v)", la.ValidUntil, tc.ttl, before)
	}
	_, err = s.b.Acquire(ctx, "k")
	is(t, "acquire while a holds", err, locks.ErrNotAcquired)
	is(t, "release", s.a.Release(ctx, la), nil)
	lb, err := s.b.Acquire(ctx, "k")
	is(t, "b's acquire after a's release", err, nil)
	is(t, "b's release", s.b.Release(ctx, lb), nil)
}

// symfonyLapse: a's lease runs out, b takes the lock, and a's release of
// its lapsed lease is released, as Symfony says (its delete ignores what
// it deleted, Lock::release asks only whether the key is still a's), while
// b's lock stays: a cannot take it.
func symfonyLapse(t *testing.T, tc symfonyCase, s *symfonyPair) {
	t.Helper()
	ctx := context.Background()
	la, err := s.a.Acquire(ctx, "lapse")
	is(t, "acquire before the lapse", err, nil)
	time.Sleep(time.Until(la.ValidUntil) + 100*time.Millisecond)
	lb, err := s.b.Acquire(ctx, "lapse")
	is(t, "b's acquire once a's lease lapsed", err, nil)
	is(t, "a's release of its lapsed lease (Symfony: released)", s.a.Release(ctx, la), nil)
	_, err = s.a.Acquire(ctx, "lapse")
	is(t, "a's acquire after its lapsed release: b still holds", err, locks.ErrNotAcquired)
	is(t, "b's release", s.b.Release(ctx, lb), nil)
}

// symfonyKilledHolder: d takes the lock and is killed (SIGKILL,
// Proc.Close). Its row stays (the docs: "Expiring stores ... guarantee that
// the lock is acquired only for the defined duration of time"; nothing
// deletes it early), so b is refused right after, and takes the lock once
// Symfony's deadline for d has passed, by which the server's whole-second
// expiry has passed too.
func symfonyKilledHolder(t *testing.T, s *symfonyPair) {
	t.Helper()
	ctx := context.Background()
	d := s.open(t, "d", nil)
	ld, err := d.Acquire(ctx, "killed")
	is(t, "the doomed holder's acquire", err, nil)
	d.Close()
	_, err = s.b.Acquire(ctx, "killed")
	// Symfony counts d's TTL from just before the statement that set it;
	// the server keeps the row more than TTL-1 s from then.
	if since := time.Since(ld.ValidUntil.Add(-s.ttl)); since > s.ttl-time.Second {
		t.Fatalf("b's acquire ended %s after d's TTL was set, past the %s the server surely keeps d's row", since, s.ttl-time.Second)
	}
	is(t, "b's acquire right after the holder was killed", err, locks.ErrNotAcquired)
	time.Sleep(time.Until(ld.ValidUntil) + 100*time.Millisecond)
	lb, err := s.b.Acquire(ctx, "killed")
	is(t, "b's acquire past the killed holder's deadline", err, nil)
	is(t, "b's release", s.b.Release(ctx, lb), nil)
}

// symfonyTrap starts one more worker under a gate armed to kill it at the
// reply of its acquire's second EVAL that succeeded: the first is
// RedisStore's probe of TIME in scripts (getNowCode, once per store), the
// second save()'s. The trap springs only if the worker reports its
// commands; the key it leaves on the first node lives the store's
// $initialTtl (300 s), not the lock's TTL, which only the refresh() that
// never came would have set.
func symfonyTrap(t *testing.T, s *symfonyPair) {
	t.Helper()
	ctx := context.Background()
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	gate := nemesis.NewGate(rec)
	p := s.open(t, "c", gate)
	gate.Arm(nemesis.Trap{Client: nemesis.AnyClient, Crash: true,
		Command: &nemesis.Command{In: history.Acquire, Match: "EVAL", Nth: 2, Reply: true, Succeeded: true}})
	gate.Begin(ctx, 0, 0, history.Acquire)
	_, err = p.Acquire(ctx, "trapped")
	if !gate.End(0, 0) {
		t.Fatalf("the trap at save()'s EVAL reply did not spring (acquire: %v): the worker reported no command boundary", err)
	}
	is(t, "acquire through a worker killed at save()'s reply", err, locks.ErrUnknown)
	c := cluster.NewClient(s.nodes[0].Addr(), cluster.ClientOptions{Timeout: time.Second})
	defer c.Close()
	if pttl := c.PTTL(ctx, "trapped").Val(); pttl < 250*time.Second || pttl > 300*time.Second {
		t.Fatalf("PTTL of the key save() took before the crash: %v, want RedisStore's initial 300 s", pttl)
	}
}

// during runs a's release of a fresh lease and b's acquire of another key
// together (each waits out its own timeouts), with the nodes made unable
// to answer by stop, and put right by mend afterwards.
func (s *symfonyPair) during(t *testing.T, stop, mend func(*cluster.Node) error, check func(releaseErr, acquireErr error)) {
	t.Helper()
	ctx := context.Background()
	la, err := s.a.Acquire(ctx, "stopped")
	is(t, "acquire before the nodes stop", err, nil)
	for _, n := range s.nodes {
		if err := stop(n); err != nil {
			t.Fatal(err)
		}
	}
	var acqErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, acqErr = s.b.Acquire(ctx, "stopped-2")
	}()
	relErr := s.a.Release(ctx, la)
	wg.Wait()
	if mend != nil {
		for _, n := range s.nodes {
			if err := mend(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	check(relErr, acqErr)
}

// symfonyStoppedIsUnknown: one RedisStore on a stopped node: the client's
// read timeout (RedisException, Predis's ConnectionException) reaches the
// caller as LockReleasingException and LockAcquiringException: unknown.
func symfonyStoppedIsUnknown(t *testing.T, s *symfonyPair) {
	s.during(t, (*cluster.Node).Pause, (*cluster.Node).Resume, func(rel, acq error) {
		is(t, "release to a stopped node", rel, locks.ErrUnknown)
		is(t, "acquire from a stopped node", acq, locks.ErrUnknown)
	})
}

// symfonyStoppedIsSwallowed: CombinedStore counts a store's error as a
// no, and MemcachedStore reads a failed get as someone else's item: with
// every node stopped, Symfony reports the acquire conflicted (not-acquired)
// and the release done, though neither reached a node.
func symfonyStoppedIsSwallowed(t *testing.T, s *symfonyPair) {
	s.during(t, (*cluster.Node).Pause, (*cluster.Node).Resume, func(rel, acq error) {
		is(t, "release to stopped nodes (Symfony: released)", rel, nil)
		is(t, "acquire from stopped nodes (Symfony: conflicted)", acq, locks.ErrNotAcquired)
	})
}

// symfonyPostgresStopped: PDO bounds no query, so on a stopped server a
// release waits until it runs again, and then succeeds; a killed server
// closes the connections, which Symfony reports as LockReleasingException
// and LockAcquiringException: unknown.
func symfonyPostgresStopped(t *testing.T, s *symfonyPair) {
	t.Helper()
	ctx := context.Background()
	la, err := s.a.Acquire(ctx, "paused")
	is(t, "acquire before the server stops", err, nil)
	if err := s.nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.a.Release(ctx, la) }()
	select {
	case err := <-done:
		t.Fatalf("the release returned (%v) while the server was stopped", err)
	case <-time.After(time.Second):
	}
	if err := s.nodes[0].Resume(); err != nil {
		t.Fatal(err)
	}
	is(t, "release once the server runs again", <-done, nil)

	s.during(t, (*cluster.Node).Kill, nil, func(rel, acq error) {
		is(t, "release to a killed server", rel, locks.ErrUnknown)
		is(t, "acquire from a killed server", acq, locks.ErrUnknown)
		if !strings.Contains(rel.Error(), "PDOException") {
			t.Errorf("the release failed otherwise than on the dead connection: %v", rel)
		}
	})
}

// PdoStore's expiry is whole seconds of PostgreSQL's clock, rounded both
// when it is written (putOffExpiration: CAST(EXTRACT(epoch FROM NOW()) AS
// INT) + ttl, an integer column) and when it is compared (expiration <=
// the same rounded now), while Symfony's Key counts the TTL from
// microtime(true): a lease of 1 s taken at .3 of a second ends on the
// server at .5 of it, 0.8 s before the deadline Symfony gives its holder
// (Lock::getRemainingLifetime), and another client takes the lock then.
// The server runs on this machine, on its clock.
func TestSymfonyPdoStoreEndsLeasesEarly(t *testing.T) {
	if _, err := os.Stat("/usr/bin/php"); err != nil {
		t.Skip("php not installed (apt-get install php-cli php-symfony-lock)")
	}
	s := symfonyStart(t, symfonyCase{lock: "symfony-pdo-pg", needs: "extension_loaded('pdo_pgsql') && (include_once 'Symfony/Component/Lock/autoload.php')",
		install: "php-pgsql php-symfony-lock", binary: "/usr/lib/postgresql/15/bin/postgres", ttl: time.Second})
	ctx := context.Background()
	// Warm both workers (a connection each, the table made).
	for _, p := range []*worker.Proc{s.a, s.b} {
		l, err := p.Acquire(ctx, "warm")
		is(t, "warm-up acquire", err, nil)
		is(t, "warm-up release", p.Release(ctx, l), nil)
	}
	for try := 1; ; try++ {
		now := time.Now()
		sec := now.Truncate(time.Second)
		if frac := now.Sub(sec); frac < 200*time.Millisecond || frac > 350*time.Millisecond {
			time.Sleep(sec.Add(1200*time.Millisecond).Sub(now) % time.Second)
			continue
		}
		key := fmt.Sprintf("early-%d", try)
		la, err := s.a.Acquire(ctx, key)
		is(t, "a's acquire", err, nil)
		if la.ValidUntil.Sub(sec) > 1450*time.Millisecond {
			// Its refresh() came too late in the second: try another.
			if try == 3 {
				t.Fatalf("three acquires in a row set their TTL after .45 of a second (the last: %v)", la.ValidUntil.Sub(sec))
			}
			continue
		}
		var lb locks.Lease
		for time.Now().Before(sec.Add(900 * time.Millisecond)) {
			if lb, err = s.b.Acquire(ctx, key); err == nil {
				break
			}
		}
		took := time.Now()
		is(t, "b's acquire while a's lease is within Symfony's deadline", err, nil)
		if !took.Before(la.ValidUntil) {
			t.Fatalf("b took the lock at %v, after a's deadline %v", took, la.ValidUntil)
		}
		t.Logf("a's lease, taken at %s of a second, was Symfony's until %s; b took the lock %s before that",
			la.ValidUntil.Add(-time.Second).Sub(sec), la.ValidUntil.Sub(sec), la.ValidUntil.Sub(took).Round(time.Millisecond))
		is(t, "b's release", s.b.Release(ctx, lb), nil)
		return
	}
}

// PdoStore's expiry on MySQL is UNIX_TIMESTAMP() + ttl: whole seconds,
// truncated, both when it is written (putOffExpiration) and when it is
// compared (expiration <= UNIX_TIMESTAMP()), while Symfony's Key counts the
// TTL from microtime(true): a lease of 1 s whose TTL was set at .6 of a
// second ends on the server at the next whole second, 0.6 s before the
// deadline Symfony gives its holder (Lock::getRemainingLifetime), and
// another client takes the lock then. The server runs on this machine, on
// its clock.
func TestSymfonyPdoStoreMySQLEndsLeasesEarly(t *testing.T) {
	if _, err := os.Stat("/usr/bin/php"); err != nil {
		t.Skip("php not installed (apt-get install php-cli php-symfony-lock)")
	}
	s := symfonyStart(t, symfonyCase{lock: "symfony-pdo-mysql", needs: "extension_loaded('pdo_mysql') && (include_once 'Symfony/Component/Lock/autoload.php')",
		install: "php-mysql php-symfony-lock", binary: "/usr/sbin/mariadbd", ttl: time.Second})
	ctx := context.Background()
	// Warm both workers (a connection each, the table made).
	for _, p := range []*worker.Proc{s.a, s.b} {
		l, err := p.Acquire(ctx, "warm")
		is(t, "warm-up acquire", err, nil)
		is(t, "warm-up release", p.Release(ctx, l), nil)
	}
	for try := 1; ; try++ {
		now := time.Now()
		sec := now.Truncate(time.Second)
		if frac := now.Sub(sec); frac < 500*time.Millisecond || frac > 650*time.Millisecond {
			time.Sleep(sec.Add(1550*time.Millisecond).Sub(now) % time.Second)
			continue
		}
		key := fmt.Sprintf("early-%d", try)
		la, err := s.a.Acquire(ctx, key)
		is(t, "a's acquire", err, nil)
		if set := la.ValidUntil.Add(-time.Second).Sub(sec); set > 850*time.Millisecond {
			// Its refresh() came too late in the second: try another.
			if try == 3 {
				t.Fatalf("three acquires in a row set their TTL after .85 of a second (the last: %v)", set)
			}
			continue
		}
		var lb locks.Lease
		for time.Now().Before(sec.Add(1400 * time.Millisecond)) {
			if lb, err = s.b.Acquire(ctx, key); err == nil {
				break
			}
		}
		took := time.Now()
		is(t, "b's acquire while a's lease is within Symfony's deadline", err, nil)
		if !took.Before(la.ValidUntil) {
			t.Fatalf("b took the lock at %v, after a's deadline %v", took, la.ValidUntil)
		}
		t.Logf("a's lease, taken at %s of a second, was Symfony's until %s; b took the lock %s before that",
			la.ValidUntil.Add(-time.Second).Sub(sec), la.ValidUntil.Sub(sec), la.ValidUntil.Sub(took).Round(time.Millisecond))
		is(t, "b's release", s.b.Release(ctx, lb), nil)
		return
	}
}
