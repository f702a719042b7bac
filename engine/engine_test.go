package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// run runs a pair on real Redis with a short time limit.
func run(t *testing.T, scen, lock string, limit time.Duration) *Result {
	t.Helper()
	res, err := RunUnstarved(context.Background(), Options{Scenario: scen, Lock: lock, TimeLimit: limit, Out: t.TempDir()}, t.Logf)
	if err != nil {
		t.Fatalf("%s/%s: %v", scen, lock, err)
	}
	return res
}

// Every lock, 16 clients on one key, no faults: the harness's own checkers
// must find mutual exclusion and the register must keep moving. (The
// control "none" is the exception that proves the checkers; its baseline row
// is in every matrix.) A 1 s TTL gives RedLock its longest per-node
// timeout, 50 ms: 16 clients on 2 cores shared with other test packages
// do not always answer within less, and a lock that cannot reach a quorum
// makes no progress. The time
// limit stays longer than the liveness allowance, so a stall still fails.
//
// The Redis locks only: a service's run starts its own servers (three
// JVMs for ZooKeeper), and its locks' exclusion is its own tests'
// (locks/services) and make run's baseline.
func TestBaselineEveryLockSixteenClients(t *testing.T) {
	for _, lock := range locks.Names() {
		if info, _ := locks.Lookup(lock); lock == "none" || info.ServerKind() != locks.ServerRedis {
			continue
		}
		t.Run(lock, func(t *testing.T) {
			// A lock the baseline leaves out has no fault-free run to
			// hold it to (portalocker's racing acquire, docs/stories.md).
			baseline, _ := scenario.Lookup("baseline")
			info, _ := locks.Lookup(lock)
			if j := baseline.Judge(info); j.Expect == nil {
				t.Skip("the baseline leaves it out: " + j.Skipped)
			}
			t.Parallel() // the machine's room seats them, a core each
			res, err := RunUnstarved(context.Background(), Options{Scenario: "baseline", Lock: lock, Clients: 16,
				TTL: time.Second, TimeLimit: 2500 * time.Millisecond, Out: t.TempDir()}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Matched || res.Outcome != verdict.Safe {
				t.Fatalf("baseline of %s: outcome %s (starved: %q), verdicts %+v", lock, res.Outcome, res.Starved, res.Verdicts)
			}
			// How fast is the benchmarks' business (locks/bench_test.go);
			// here a stall is what fails, as liveness judged above, and a
			// register that never moved.
			v, _ := res.Verdict(checker.ResourceName)
			if v.Details.WritesAccepted == 0 {
				t.Fatalf("no increment in %s: no progress", res.TimeLimit)
			}
		})
	}
}

func TestPausedHolderReproduces(t *testing.T) {
	res := run(t, "paused-holder", "set-nx-px", 4*time.Second)
	if !res.Matched || res.Outcome != verdict.Unsafe {
		t.Fatalf("outcome %s, want %s: %+v", res.Outcome, verdict.Unsafe, res.Verdicts)
	}
	iv, _ := res.Verdict(checker.IntervalsName)
	// The paused process is the one the nemesis named; it must be one of
	// the double holders, not some bystander.
	paused := -2
	for _, op := range res.Ops {
		if op.Process == history.NemesisProcess && op.F == string(fault.Pause) && op.Type == history.Invoke {
			if _, err := fmt.Sscanf(op.Value.Target, "process %d", &paused); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := iv.Anomalies[0]
	if a.Processes[0] != paused && a.Processes[1] != paused {
		t.Fatalf("double holder %v does not involve paused process %d", a.Processes, paused)
	}
}

func TestPausedHolderFencedKeepsResource(t *testing.T) {
	res := run(t, "paused-holder", "set-nx-px-fenced", 4*time.Second)
	if !res.Matched || res.Outcome != verdict.LockUnsafe {
		t.Fatalf("outcome %s, want %s: %+v", res.Outcome, verdict.LockUnsafe, res.Verdicts)
	}
	rv, _ := res.Verdict(checker.ResourceName)
	if rv.Valid != checker.Valid || rv.Details.StaleWritesRejected < 1 {
		t.Fatalf("fenced store must reject the stale write: %+v", rv)
	}
	// Stored and read back, the run is judged again to the same verdict:
	// the stale write it must show is read from the stored details.
	if err := res.Save(); err != nil {
		t.Fatal(err)
	}
	stored, err := Load(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	// The verdicts as stored say what they said (typed details survive
	// JSON: the rejected stale write is still a count, not a float).
	if got := verdict.Observations(stored.Verdicts); !slices.Equal(got, res.Observations) {
		t.Fatalf("observations read back from results.json: %v, judged %v", got, res.Observations)
	}
	if err := Rejudge(stored); err != nil {
		t.Fatal(err)
	}
	if stored.Outcome != res.Outcome || stored.Matched != res.Matched || !slices.Equal(stored.Observations, res.Observations) ||
		stored.Starved != res.Starved || stored.Vacuous != res.Vacuous {
		t.Fatalf("judged again from disk: %s %v matched %v (starved %q); first judged %s %v matched %v",
			stored.Outcome, stored.Observations, stored.Matched, stored.Starved, res.Outcome, res.Observations, res.Matched)
	}
}

// A run judged as a stream (as every run of StreamAfter or longer is)
// holds only the nemesis's ops, gets the verdict a held history gets, and
// is judged again from its file the same way.
func TestAStreamedRunIsJudgedFromItsFile(t *testing.T) {
	res, err := RunUnstarved(context.Background(), Options{Scenario: "paused-holder", Lock: "set-nx-px-fenced", TimeLimit: 4 * time.Second,
		Stream: true, Out: t.TempDir()}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Streamed || !res.Matched || res.Outcome != verdict.LockUnsafe {
		t.Fatalf("streamed %v, outcome %s matched %v, want a streamed lock-unsafe: %+v", res.Streamed, res.Outcome, res.Matched, res.Verdicts)
	}
	nemesisOnly := func(ops []history.Op) bool {
		return len(ops) > 0 && !slices.ContainsFunc(ops, func(op history.Op) bool { return op.Process != history.NemesisProcess })
	}
	if !nemesisOnly(res.Ops) || res.Recorded <= len(res.Ops) {
		t.Fatalf("a streamed run keeps the nemesis's ops only: %d kept of %d recorded", len(res.Ops), res.Recorded)
	}
	if err := res.Save(); err != nil {
		t.Fatal(err)
	}
	stored, err := Load(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := Rejudge(stored); err != nil {
		t.Fatal(err)
	}
	if stored.Outcome != res.Outcome || stored.Matched != res.Matched || !slices.Equal(stored.Observations, res.Observations) || !nemesisOnly(stored.Ops) {
		t.Fatalf("judged again from disk: %s %v matched %v, %d ops kept; first judged %s %v matched %v",
			stored.Outcome, stored.Observations, stored.Matched, len(stored.Ops), res.Outcome, res.Observations, res.Matched)
	}
}

// noFaults is the schedule of a story that injects nothing.
func noFaults(*scenario.Env) (nemesis.Schedule, error) { return nil, nil }

// oneNodeLock stands in for a user's lock where only its Info is judged.
func oneNodeLock(c locks.Config) locks.Lock { l, _ := locks.New("set-nx-px", c); return l }

func TestResolveRejectsBadOptions(t *testing.T) {
	cases := []Options{
		{Scenario: "nope", Lock: "set-nx-px"},
		{Scenario: "baseline", Lock: "nope"},
		{Scenario: "baseline", Lock: "set-nx-px", Clients: 1},
		{Scenario: "baseline", Lock: "set-nx-px", TTL: time.Millisecond},
		{Scenario: "paused-holder", Lock: "set-nx-px", TimeLimit: time.Second},
		// A story told on five nodes, a lock on one: refused before any
		// node starts, not three seconds in with "no node n4".
		{Scenario: "redlock-clock-jump", Lock: "check-then-set", Custom: &locks.Info{New: oneNodeLock},
			Expect: &verdict.Expectation{Outcome: verdict.Safe}},
		{Scenario: "failover", Lock: "five-nodes", Custom: &locks.Info{Nodes: 5, New: oneNodeLock},
			Expect: &verdict.Expectation{Outcome: verdict.Safe}},
		// The RedLock split needs a middle node, and a whole one.
		{Scenario: "redlock-crash-restart", Lock: "redlock", Params: map[string]float64{"nodes": 4}},
		{Scenario: "redlock-crash-restart", Lock: "redlock", Params: map[string]float64{"nodes": 6.5}},
		// A user's own story may not take a built-in's name, nor lack a
		// schedule.
		{Lock: "set-nx-px", Expect: &verdict.Expectation{Outcome: verdict.Safe},
			Told: &scenario.Scenario{Name: "baseline", Schedule: func(*scenario.Env) (nemesis.Schedule, error) { return nil, nil }}},
		{Lock: "set-nx-px", Expect: &verdict.Expectation{Outcome: verdict.Safe}, Told: &scenario.Scenario{Name: "mine"}},
		// Nor give it two ways, of which one would be silently ignored.
		{Lock: "set-nx-px", Expect: &verdict.Expectation{Outcome: verdict.Safe},
			Told: &scenario.Scenario{Name: "mine", Plan: scenario.Plan{}, Schedule: noFaults}},
		// A story whose fault takes seconds of its own refuses a lease
		// shorter than its own minimum.
		{Lock: "set-nx-px", TTL: time.Second, Expect: &verdict.Expectation{Outcome: verdict.Safe},
			Told: &scenario.Scenario{Name: "mine", MinTTL: 3 * time.Second, Schedule: noFaults}},
		// Sentinel watches a replicated master: without one there is
		// nothing for it to watch.
		{Lock: "set-nx-px", Expect: &verdict.Expectation{Outcome: verdict.Safe},
			Told: &scenario.Scenario{Name: "mine", Topology: scenario.Topology{Sentinel: true}, Schedule: noFaults}},
	}
	for _, o := range cases {
		_, err := Resolve(o)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%+v: want a usage error, got %v", o, err)
		}
	}
}

// A RedLock story's nodes parameter sets how many nodes the lock runs on,
// and only a lock of as many nodes as the story's default follows it.
func TestNodesParameterSetsTheLocksNodes(t *testing.T) {
	p, err := Resolve(Options{Scenario: "redlock-crash-restart", Lock: "redsync-redlock", Params: map[string]float64{"nodes": 7}})
	if err != nil || p.Lock.Nodes != 7 {
		t.Fatalf("nodes=7: %d nodes, %v", p.Lock.Nodes, err)
	}
	if p, err := Resolve(Options{Scenario: "redlock-crash-restart", Lock: "redlock"}); err != nil || p.Lock.Nodes != 5 {
		t.Fatalf("the default: %d nodes, %v", p.Lock.Nodes, err)
	}
}

// server-crash pauses the holder inside its lease after its server's
// restart: a lock whose holds end at a deadline is told at a lease the
// restart fits in (etcd's second of recovery over the 0.6 of a lease the
// story leaves it, in etcd's whole seconds), a session's lock and a Redis
// lock at the story's own.
func TestServerCrashLeaseFitsTheRestart(t *testing.T) {
	for lock, want := range map[string]time.Duration{"etcd3": 2 * time.Second, "etcd3-fenced": 2 * time.Second,
		"kazoo": time.Second, "set-nx-px": 500 * time.Millisecond} {
		p, err := Resolve(Options{Scenario: "server-crash", Lock: lock})
		if err != nil {
			t.Fatal(err)
		}
		if p.Options.TTL != want {
			t.Errorf("server-crash / %s: TTL %s, want %s", lock, p.Options.TTL, want)
		}
	}
	if p, err := Resolve(Options{Scenario: "baseline", Lock: "etcd3"}); err != nil || p.Options.TTL != time.Second {
		t.Errorf("baseline / etcd3: TTL %s (%v), want its MinTTL, 1s: no restart to fit", p.Options.TTL, err)
	}
}

// ttlCase is a story and a lock, and the lease the pair resolves to.
type ttlCase struct {
	story, lock string
	want        time.Duration
}

// resolvesTTL resolves each case's pair with no -ttl and checks its lease.
func resolvesTTL(t *testing.T, cases []ttlCase) {
	t.Helper()
	for _, c := range cases {
		p, err := Resolve(Options{Scenario: c.story, Lock: c.lock})
		if err != nil {
			t.Fatal(err)
		}
		if p.Options.TTL != c.want {
			t.Errorf("%s / %s: TTL %s, want %s", c.story, c.lock, p.Options.TTL, c.want)
		}
	}
}

// A story that kills a member tells etcd's session lock at the lease its
// client keeps through its own failover (FailoverTTL); a story that kills
// none, and a lock without the field, at their own; a -ttl below it is
// the user's to ask for.
func TestMemberKillTellsTheClientsFailoverLease(t *testing.T) {
	resolvesTTL(t, []ttlCase{
		{"server-crash", "etcd", 3 * time.Second},
		{"leader-failover", "etcd-fenced", 3 * time.Second},
		{"baseline", "etcd", time.Second},
		{"paused-holder", "etcd", time.Second},
		{"leader-failover", "zk", time.Second},
	})
	if p, err := Resolve(Options{Scenario: "server-crash", Lock: "etcd", TTL: time.Second}); err != nil || p.Options.TTL != time.Second {
		t.Errorf("server-crash / etcd -ttl 1s: TTL %s (%v), want 1s as asked", p.Options.TTL, err)
	}
}

// A story that waits for an unrenewed lease to end tells a lock whose
// server ends leases late (etcd's lessor) at a lease its lag takes at
// most the story's share of, in the lock's grain; a session on the same
// server, a Redis lease and another story keep their own.
func TestLateExpiryTellsTheStoryAtALongerLease(t *testing.T) {
	resolvesTTL(t, []ttlCase{
		{"delayed-write", "etcd3", 2 * time.Second},
		{"delayed-write", "etcd3-fenced", 2 * time.Second},
		{"delayed-write", "etcd", time.Second},
		{"delayed-write", "set-nx-px", 500 * time.Millisecond},
		{"paused-holder", "etcd3", time.Second},
	})
	if p, err := Resolve(Options{Scenario: "delayed-write", Lock: "etcd3", TTL: time.Second}); err != nil || p.Options.TTL != time.Second {
		t.Errorf("delayed-write / etcd3 -ttl 1s: TTL %s (%v), want 1s as asked", p.Options.TTL, err)
	}
}

// A lock whose attempts on a split majority need a longer lease than the
// story's (SplitTTL: Symfony's CombinedStore asks its nodes in turn) is
// told at that lease in a story that splits its nodes, and at the
// story's own anywhere else; a lock without one keeps the story's.
func TestASplitStoryTellsTheLocksSplitLease(t *testing.T) {
	resolvesTTL(t, []ttlCase{
		{"redlock-crash-restart", "symfony-redlock5", time.Second},
		{"redlock-clock-jump", "symfony-redlock5", time.Second},
		{"redlock-crash-restart", "redlock", 500 * time.Millisecond},
		{"paused-holder", "symfony-redlock5", 500 * time.Millisecond},
	})
}

func TestInterruptedRunKeepsHistory(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancelled once clients are at work, however long the run waited
	// for a seat in the machine's room.
	cancelAtWork := func(p Progress) {
		if p.Ops >= 10 {
			cancel()
		}
	}
	res, err := Run(ctx, Options{Scenario: "baseline", Lock: "set-nx-px", TimeLimit: time.Minute, Out: t.TempDir(), Progress: cancelAtWork})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("want ErrInterrupted, got %v", err)
	}
	ops, err := history.LoadFile(res.Dir + "/history.jsonl")
	if err != nil || len(ops) < 10 {
		t.Fatalf("partial history: %d ops, %v", len(ops), err)
	}
}
