package nemesis_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/docker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

var ctx = context.Background()

type env struct {
	t   *testing.T
	cl  *cluster.Cluster
	rec *history.Recorder
	nem *nemesis.Nemesis
}

func newEnv(t *testing.T, nodes ...cluster.NodeOptions) *env {
	t.Helper()
	return newEnvOn(t, cluster.Local, nodes...)
}

// newEnvOn is newEnv on a named backend; docker is skipped, saying why,
// where no engine answers.
func newEnvOn(t *testing.T, backend string, nodes ...cluster.NodeOptions) *env {
	t.Helper()
	if backend == docker.Name {
		docker.Register()
		if _, err := docker.Pool(); err != nil {
			t.Skipf("docker backend not tested: %v", err)
		}
	}
	cl, err := cluster.New(cluster.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	for _, o := range nodes {
		if _, err := cl.AddNode(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	rec := history.NewRecorder(nil, 0)
	return &env{t: t, cl: cl, rec: rec, nem: nemesis.New(rec, cl)}
}

func names(ns ...string) []cluster.NodeOptions {
	var out []cluster.NodeOptions
	for _, n := range ns {
		out = append(out, cluster.NodeOptions{Name: n})
	}
	return out
}

// client is peer's connection to node through its own link.
func (e *env) client(peer, node string) *redis.Client {
	e.t.Helper()
	l, err := e.cl.Node(node).Link(peer)
	if err != nil {
		e.t.Fatal(err)
	}
	// A second: a reply that a machine busy with stories delays is not
	// what these tests are about; a cut link still fails within it.
	c := cluster.NewClient(l.Addr(), cluster.ClientOptions{Timeout: time.Second})
	e.t.Cleanup(func() { c.Close() })
	return c
}

// direct is the harness's own fault-free view of a node.
func (e *env) direct(node string) *redis.Client {
	c := cluster.NewClient(e.cl.Node(node).Addr(), cluster.ClientOptions{Timeout: time.Second})
	e.t.Cleanup(func() { c.Close() })
	return c
}

// recorded says whether the nemesis recorded an op of f.
func (e *env) recorded(f string) bool { return nemesisOps(e.rec, f) > 0 }

// nemesisOps counts the ops of f the nemesis recorded as done.
func nemesisOps(rec *history.Recorder, f string) int {
	n := 0
	for _, op := range rec.Ops() {
		if op.Process == history.NemesisProcess && op.F == f && op.Type == history.OK {
			n++
		}
	}
	return n
}

// waitRecorded waits until the nemesis has recorded n ops named f: a
// pause is on record only once it is in force.
func waitRecorded(t *testing.T, rec *history.Recorder, f string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if nemesisOps(rec, f) >= n {
			return
		}
	}
	t.Fatalf("%d %q op(s) never recorded", n, f)
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func TestPartitionCutsOnlyTheGrudgedLinksAndHeals(t *testing.T) {
	e := newEnv(t, names("n1", "n2")...)
	c1n1, c1n2, c2n1 := e.client("c1", "n1"), e.client("c1", "n2"), e.client("c2", "n1")
	e.must(e.nem.Partition(nemesis.Grudge{"c1": {"n1"}}))
	start := time.Now()
	if err := c1n1.Ping(ctx).Err(); err == nil {
		t.Fatal("c1 reached n1 across the partition")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("cut link took %v to fail, want about the 1s client timeout", d)
	}
	if err := c1n2.Ping(ctx).Err(); err != nil {
		t.Fatalf("c1→n2 is not in the grudge: %v", err)
	}
	if err := c2n1.Ping(ctx).Err(); err != nil {
		t.Fatalf("c2→n1 is not in the grudge: %v", err)
	}
	e.must(e.nem.Heal())
	if err := e.client("c1", "n1").Ping(ctx).Err(); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	if !e.recorded("partition-start") || !e.recorded("partition-end") {
		t.Fatal("partition not recorded in the history")
	}
}

func TestLatencyOnOneLink(t *testing.T) {
	e := newEnv(t, names("n1")...)
	slow, fast := e.client("c1", "n1"), e.client("c2", "n1")
	// 300 ms each way: far from both the client's timeout and what a
	// busy machine adds to an unslowed round trip.
	e.must(e.nem.Latency("c1", "n1", 300*time.Millisecond, 0))
	start := time.Now()
	e.must(slow.Ping(ctx).Err())
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Fatalf("PING through 300ms each way took %v", d)
	}
	start = time.Now()
	e.must(fast.Ping(ctx).Err())
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Fatalf("the other client's link was slowed too: %v", d)
	}
	e.must(e.nem.Latency("c1", "n1", 0, 0))
	start = time.Now()
	e.must(slow.Ping(ctx).Err())
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Fatalf("latency not removed: %v", d)
	}
	if !e.recorded("latency-start") || !e.recorded("latency-end") {
		t.Fatal("latency not recorded")
	}
}

func TestNodePauseAndResume(t *testing.T) {
	e := newEnv(t, names("n1")...)
	c := e.client("c1", "n1")
	e.must(e.nem.PauseNode("n1"))
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a SIGSTOPped node answered")
	}
	e.must(e.nem.ResumeNode("n1"))
	if err := e.client("c2", "n1").Ping(ctx).Err(); err != nil {
		t.Fatalf("after SIGCONT: %v", err)
	}
}

func faketimeAvailable(t *testing.T) {
	if _, err := os.Stat(cluster.FaketimeServerPath()); err != nil {
		t.Fatalf("the clock nemesis needs the libc-allocator redis-server at %s: run `make setup`", cluster.FaketimeServerPath())
	}
}

func TestClockBumpExpiresKeysOnThatNodeOnly(t *testing.T) {
	faketimeAvailable(t)
	var opts []cluster.NodeOptions
	for _, n := range []string{"a", "b", "c"} {
		opts = append(opts, cluster.NodeOptions{Name: n, Clock: true})
	}
	e := newEnv(t, opts...)
	for _, n := range []string{"a", "b", "c"} {
		e.must(e.direct(n).Set(ctx, "lock", "t", 5*time.Second).Err())
	}
	e.must(e.nem.BumpClock("c", 10*time.Second))
	deadline := time.Now().Add(2 * time.Second)
	for e.direct("c").Exists(ctx, "lock").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("c's clock jumped 10s past a 5s TTL but the key is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range []string{"a", "b"} {
		if e.direct(n).Exists(ctx, "lock").Val() != 1 {
			t.Fatalf("node %s lost its key though its clock did not move", n)
		}
	}
	// Backward: a 300ms key set before the clock falls 10s behind lives
	// on...
	e.must(e.direct("b").Set(ctx, "short", "t", 300*time.Millisecond).Err())
	e.must(e.nem.BumpClock("b", -10*time.Second))
	time.Sleep(600 * time.Millisecond)
	if e.direct("b").Exists(ctx, "short").Val() != 1 {
		t.Fatal("a backward clock should extend the key past its TTL")
	}
	// ...and goes once the clock is put back.
	e.must(e.nem.ResetClocks())
	deadline = time.Now().Add(2 * time.Second)
	for e.direct("b").Exists(ctx, "short").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("key outlived the clock reset")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !e.recorded("clock-bump") || !e.recorded("clock-reset") {
		t.Fatal("clock faults not recorded")
	}
}

func TestClockStrobeFlipsAndRestores(t *testing.T) {
	faketimeAvailable(t)
	e := newEnv(t, cluster.NodeOptions{Name: "a", Clock: true})
	e.must(e.direct("a").Set(ctx, "lock", "t", 5*time.Second).Err())
	// Windows of 250ms ahead: longer than Redis's 100ms active-expire cycle.
	e.must(e.nem.StrobeClock(ctx, "a", 10*time.Second, 250*time.Millisecond, 1100*time.Millisecond))
	if e.direct("a").Exists(ctx, "lock").Val() != 0 {
		t.Fatal("strobing 10s ahead should have expired a 5s key")
	}
	if off := e.cl.Node("a").ClockOffset(); off != 0 {
		t.Fatalf("strobe left the clock at %v", off)
	}
	e.must(e.direct("a").Set(ctx, "after", "t", 5*time.Second).Err())
	time.Sleep(100 * time.Millisecond)
	if e.direct("a").Exists(ctx, "after").Val() != 1 {
		t.Fatal("clock not restored after the strobe")
	}
}

func TestClientClockSkew(t *testing.T) {
	e := newEnv(t)
	c := &nemesis.ClientClock{Name: "c1"}
	e.must(e.nem.SkewClient(c, time.Hour))
	if d := time.Until(c.Now()); d < 59*time.Minute {
		t.Fatalf("skewed clock is only %v ahead", d)
	}
	e.must(e.nem.SkewClient(c, 0))
	if d := time.Until(c.Now()); d > time.Second || d < -time.Second {
		t.Fatalf("unskewed clock is %v off", d)
	}
	if !e.recorded("clock-skew") {
		t.Fatal("skew not recorded")
	}
}

func TestKillRestartAndPersistence(t *testing.T) {
	e := newEnv(t,
		cluster.NodeOptions{Name: "none"},
		cluster.NodeOptions{Name: "everysec", Persistence: cluster.AOFEverySec},
		cluster.NodeOptions{Name: "always", Persistence: cluster.AOFAlways})
	survives := map[string]bool{"none": false, "everysec": true, "always": true}
	for n := range survives {
		e.must(e.direct(n).Set(ctx, "lock", "t", time.Minute).Err())
		e.must(e.nem.KillNode(n))
		if err := e.direct(n).Ping(ctx).Err(); err == nil {
			t.Fatalf("%s answers after kill -9", n)
		}
		e.must(e.nem.RestartNode(ctx, n, 0))
		if got := e.direct(n).Exists(ctx, "lock").Val() == 1; got != survives[n] {
			t.Errorf("%s: key survived kill -9 and restart = %v, want %v", n, got, survives[n])
		}
	}
	// A power loss takes what fsync had not reached: everysec loses a write
	// younger than a second; always keeps it.
	for n, keeps := range map[string]bool{"everysec": false, "always": true} {
		e.must(e.direct(n).Set(ctx, "fresh", "t", time.Minute).Err())
		e.must(e.nem.PowerLossNode(n))
		e.must(e.nem.RestartNode(ctx, n, 50*time.Millisecond))
		if got := e.direct(n).Exists(ctx, "fresh").Val() == 1; got != keeps {
			t.Errorf("%s: fresh key survived a power loss = %v, want %v", n, got, keeps)
		}
	}
}

func TestManualFailoverLosesTheUnreplicatedLock(t *testing.T) {
	e := newEnv(t, names("m", "r")...)
	m, r := e.cl.Node("m"), e.cl.Node("r")
	e.must(r.ReplicaOf(ctx, m))
	primary := cluster.NewPrimary(m)
	c1 := primary.Client("c1", cluster.ClientOptions{Timeout: 200 * time.Millisecond})
	defer c1.Close()
	// Replication is cut: the master acknowledges, the replica never hears.
	e.must(e.nem.Partition(nemesis.Grudge{cluster.ReplicationPeer("r"): {"m"}}))
	if ok, err := c1.SetNX(ctx, "lock", "c1", time.Minute).Result(); err != nil || !ok {
		t.Fatalf("c1's lock on the master: %v %v", ok, err)
	}
	if n, _ := e.direct("m").Wait(ctx, 1, 100).Result(); n != 0 {
		t.Fatalf("WAIT counted %d replicas across a cut link", n)
	}
	e.must(e.nem.KillNode("m"))
	e.must(e.nem.Promote(ctx, primary, "r"))
	if role, _ := r.Role(ctx); role != "master" {
		t.Fatalf("promoted replica says it is %q", role)
	}
	c2 := primary.Client("c2", cluster.ClientOptions{Timeout: 200 * time.Millisecond})
	defer c2.Close()
	ok, err := c2.SetNX(ctx, "lock", "c2", time.Minute).Result()
	if err != nil || !ok {
		t.Fatalf("the new master should not have c1's lock: c2 got %v, %v", ok, err)
	}
}

// Real sentinels fail a killed master over, and go-redis's failover client
// follows them, on local processes and on containers alike.
func TestSentinelFailover(t *testing.T) {
	for _, backend := range []string{cluster.Local, docker.Name} {
		t.Run(backend, func(t *testing.T) { sentinelFailover(t, backend) })
	}
}

func sentinelFailover(t *testing.T, backend string) {
	e := newEnvOn(t, backend, names("m", "r1", "r2")...)
	m := e.cl.Node("m")
	e.must(e.cl.Node("r1").ReplicaOf(ctx, m))
	e.must(e.cl.Node("r2").ReplicaOf(ctx, m))
	s, err := e.cl.AddSentinels(ctx, cluster.SentinelOptions{Master: m})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client("c1", cluster.ClientOptions{Timeout: 300 * time.Millisecond})
	defer c.Close()
	e.must(c.Set(ctx, "before", "1", 0).Err())
	e.must(e.nem.KillNode("m"))
	deadline := time.Now().Add(15 * time.Second)
	var newMaster *cluster.Node
	for {
		if nm, err := s.Master(ctx); err == nil && nm != m {
			if role, _ := nm.Role(ctx); role == "master" {
				newMaster = nm
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sentinels did not fail over within 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// go-redis's failover client finds the new master through the sentinels.
	for {
		if err := c.Set(ctx, "after", "1", 0).Err(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failover client never reached the new master")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e.direct(newMaster.Name).Exists(ctx, "after").Val() != 1 {
		t.Fatalf("write did not land on the new master %s", newMaster.Name)
	}
}

func TestGatePausesStallsAndCrashesAtPoints(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	sprang := -1
	g.Arm(nemesis.Trap{Point: "p", Client: nemesis.AnyClient, Pause: 100 * time.Millisecond,
		Then: func(_ context.Context, client, _ int) error { sprang = client; return nil }})
	start := time.Now()
	if err := g.At(ctx, 0, 0, "p"); err != nil || time.Since(start) < 100*time.Millisecond || sprang != 0 {
		t.Fatalf("armed pause: %v after %v, Then saw client %d", err, time.Since(start), sprang)
	}
	start = time.Now()
	if err := g.At(ctx, 1, 1, "p"); err != nil || time.Since(start) >= 100*time.Millisecond {
		t.Fatal("a trap springs on one client only")
	}
	// A whole-client pause also holds the client's other goroutines. The
	// clock starts when the trap springs, and the watchdog moves only once
	// the pause is on record: a loaded machine may run either goroutine late.
	var sprangAt time.Time
	springAt := func(context.Context, int, int) error { sprangAt = time.Now(); return nil }
	g.Arm(nemesis.Trap{Point: "p", Client: 2, Pause: 150 * time.Millisecond, Then: springAt})
	go func() { _ = g.At(ctx, 2, 2, "p") }()
	waitRecorded(t, rec, string(fault.Pause), 2)
	_ = g.At(ctx, 2, 2, "watchdog-renew")
	if d := time.Since(sprangAt); d < 150*time.Millisecond {
		t.Fatalf("a paused client's watchdog went on %v into a 150 ms pause", d)
	}
	// A stall holds only the goroutine at the point.
	g.Arm(nemesis.Trap{Point: "p", Client: 3, Pause: 300 * time.Millisecond, Stall: true, Then: springAt})
	go func() { _ = g.At(ctx, 3, 3, "p") }()
	waitRecorded(t, rec, "stall", 1)
	_ = g.At(ctx, 3, 3, "watchdog-renew")
	if d := time.Since(sprangAt); d >= 300*time.Millisecond {
		t.Fatalf("a stalled client's watchdog was held too: it went on %v into a 300 ms stall", d)
	}
	g.Arm(nemesis.Trap{Point: "q", Client: nemesis.AnyClient, Crash: true})
	if err := g.At(ctx, 0, 0, "q"); !errors.Is(err, nemesis.ErrCrashed) {
		t.Fatalf("armed crash: %v", err)
	}
	if err := g.At(ctx, 0, 0, "p"); !errors.Is(err, nemesis.ErrCrashed) {
		t.Fatalf("a dead process passed a point: %v", err)
	}
	start = time.Now()
	g.PauseClient(4, 100*time.Millisecond)
	_ = g.At(ctx, 4, 4, "anywhere")
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("a paused client passed a point")
	}
	g.Arm(nemesis.Trap{Point: "r", Client: nemesis.AnyClient, Then: func(context.Context, int, int) error { return errors.New("no such node") }})
	_ = g.At(ctx, 5, 5, "r")
	if g.Err() == nil {
		t.Fatal("a failed Then must surface through Err")
	}
	count := map[string]int{}
	for _, op := range rec.Ops() {
		if op.Type == history.OK {
			count[op.F]++
		}
	}
	// Pauses: client 0, client 2, PauseClient(4); one stall; one crash.
	if count["pause"] != 3 || count["stall"] != 1 || count["crash"] != 1 {
		t.Fatalf("gate actions recorded as %v", count)
	}
}

// granted records process granted a lease of key k with left of it to run.
func granted(rec *history.Recorder, process int, left time.Duration) {
	inv := rec.Invoke(process, history.Acquire, "k", nil)
	rec.Complete(inv, history.OK, &history.Value{Deadline: rec.Now() + int64(left)}, nil)
}

// A pause told to end inside the holder's lease ends there however long
// the work before it took, and a pause cut below what its story needs is
// on record as starved.
func TestGatePauseEndsInsideTheHoldersLease(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	lease := func(process int, left time.Duration) { granted(rec, process, left) }
	// Seconds, not tens of milliseconds: the margins below leave room for
	// a machine busy with stories to run the work and the timers late.
	lease(0, 2*time.Second)
	// The work before the pause takes 300 ms of the 2 s lease: a 3 s
	// pause ending 500 ms inside the lease lasts about 1.2 s.
	slow := func(context.Context, int, int) error { time.Sleep(300 * time.Millisecond); return nil }
	g.Arm(nemesis.Trap{Point: "p", Client: 0, Pause: 3 * time.Second, InLease: 500 * time.Millisecond,
		MinPause: 200 * time.Millisecond, Then: slow})
	start := time.Now()
	if err := g.At(ctx, 0, 0, "p"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond+300*time.Millisecond {
		t.Errorf("the pause ran %v from the trap, past the lease's 1.5 s less its margin", d)
	}
	var pause *history.Op
	for _, op := range rec.Ops() {
		if op.F == string(fault.Starved) {
			t.Errorf("starved with 1 s of pause to spare: %s", op.Value.Target)
		}
		if op.F == string(fault.Pause) && op.Type == history.OK {
			pause = &op
		}
	}
	if pause == nil || time.Duration(pause.Value.Duration) > 1200*time.Millisecond || time.Duration(pause.Value.Duration) < 600*time.Millisecond {
		t.Fatalf("pause on record: %+v, want about 1.2 s", pause)
	}
	// Only 1.2 s are left after the work, and the story needs 1.5 s.
	lease(1, 2*time.Second)
	g.Arm(nemesis.Trap{Point: "p", Client: 1, Pause: 3 * time.Second, InLease: 500 * time.Millisecond,
		MinPause: 1500 * time.Millisecond, Then: slow})
	if err := g.At(ctx, 1, 1, "p"); err != nil {
		t.Fatal(err)
	}
	starved := 0
	for _, op := range rec.Ops() {
		if op.F == string(fault.Starved) && op.Type == history.OK {
			starved++
		}
	}
	if starved != 1 {
		t.Errorf("%d starved ops, want 1 for the pause that could not fit", starved)
	}
}

// A trap with no pause to cut but told to let its holder go on inside its
// lease (a slot moved while the holder waits at its write) is starved
// where its actions ran past that point, and not where they did not.
func TestATrapsActionsPastItsPointInTheLeaseStarveTheRun(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	lease := func(process int, left time.Duration) { granted(rec, process, left) }
	starved := func() int {
		n := 0
		for _, op := range rec.Ops() {
			if op.F == string(fault.Starved) && op.Type == history.OK {
				n++
			}
		}
		return n
	}
	slow := func(context.Context, int, int) error { time.Sleep(300 * time.Millisecond); return nil }
	// 300 ms of work, to end 500 ms inside the lease: in a 2 s lease with
	// room to spare, in a 600 ms one past that point.
	for process, c := range []struct {
		lease   time.Duration
		starved int
	}{{2 * time.Second, 0}, {600 * time.Millisecond, 1}} {
		lease(process, c.lease)
		g.Arm(nemesis.Trap{Point: "p", Client: process, InLease: 500 * time.Millisecond, Then: slow})
		if err := g.At(ctx, process, process, "p"); err != nil {
			t.Fatal(err)
		}
		if n := starved(); n != c.starved {
			t.Fatalf("in a %s lease: %d starved ops in all, want %d", c.lease, n, c.starved)
		}
	}
}

// An eviction fills the node past its maxmemory until it refuses a
// write: under volatile-lru it evicts the one key with a TTL (the lock's),
// never the counter without one, and takes its filler keys away after.
func TestEvictTakesTheKeyWithATTLAndLeavesTheRest(t *testing.T) {
	e := newEnv(t, cluster.NodeOptions{Name: "n1", Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"}})
	n1 := e.direct("n1")
	e.must(n1.Set(ctx, "lock", "holder", time.Minute).Err())
	e.must(n1.Set(ctx, "fence", 7, 0).Err())
	e.must(e.nem.Evict(ctx, "n1"))
	if n, err := n1.Exists(ctx, "lock").Result(); err != nil || n != 0 {
		t.Fatalf("the lock's key is still there (%d, %v)", n, err)
	}
	if v, err := n1.Get(ctx, "fence").Result(); err != nil || v != "7" {
		t.Fatalf("the counter without a TTL: %q, %v; want it kept", v, err)
	}
	if n, err := n1.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("%d keys after the eviction (%v), want the counter alone: the filler keys are deleted", n, err)
	}
	var target string
	for _, op := range e.rec.Ops() {
		if op.F == "evict" && op.Type == history.OK && op.Value != nil {
			target = op.Value.Target
		}
	}
	if !strings.Contains(target, ", 1 evicted)") {
		t.Fatalf("the eviction recorded %q, want 1 key evicted", target)
	}
}

// A node with no maxmemory evicts nothing: the fault says so rather than
// write 256 MiB into it.
func TestEvictRefusesANodeWithoutMaxmemory(t *testing.T) {
	e := newEnv(t, names("n1")...)
	if err := e.nem.Evict(ctx, "n1"); err == nil || !strings.Contains(err.Error(), "no maxmemory") {
		t.Fatalf("evict on a node without maxmemory: %v", err)
	}
}

// A held gate suspends a trap that fits before the story's traffic is
// there, and every chance inside the suspension passes, ready or not: the
// trap then springs at the first chance after it, not at the first after
// the traffic (Gate.Hold says why). Past max it springs as armed.
func TestHeldGateSuspendsATrapThatFitsTooEarly(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	var moved []time.Duration
	g.Hold(func() bool { return rec.Attempts() >= 1 }, 100*time.Millisecond, 150*time.Millisecond, func(d time.Duration) { moved = append(moved, d) })
	sprang := 0
	g.Arm(nemesis.Trap{Point: "p", Client: nemesis.AnyClient, Then: func(context.Context, int, int) error { sprang++; return nil }})
	start := time.Now()
	_ = g.At(ctx, 0, 0, "p")
	rec.Complete(rec.Invoke(0, history.Acquire, "k", nil), history.Fail, nil, nil)
	_ = g.At(ctx, 0, 0, "p")
	if sprang != 0 || len(moved) != 1 || moved[0] != 100*time.Millisecond {
		t.Fatalf("inside the suspension: sprang %d times, moved %v", sprang, moved)
	}
	time.Sleep(time.Until(start.Add(150 * time.Millisecond)))
	_ = g.At(ctx, 0, 0, "p")
	if sprang != 1 {
		t.Fatalf("the first chance after the suspension, ready: sprang %d times", sprang)
	}

	// Never ready: suspended while another suspension stays within max
	// (one of 100 ms in 150 ms), then armed.
	g2 := nemesis.NewGate(rec)
	moved = nil
	g2.Hold(func() bool { return false }, 100*time.Millisecond, 150*time.Millisecond, func(d time.Duration) { moved = append(moved, d) })
	g2.Arm(nemesis.Trap{Point: "p", Client: nemesis.AnyClient, Then: func(context.Context, int, int) error { sprang++; return nil }})
	for deadline := time.Now().Add(2 * time.Second); sprang == 1 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_ = g2.At(ctx, 0, 0, "p")
	}
	if sprang != 2 || len(moved) != 1 {
		t.Fatalf("never ready: sprang %d times after %d suspensions; want it to spring after 1", sprang-1, len(moved))
	}
}
