// Package locktest runs the built-in failure stories against your own lock
// from your own `go test`, on real Redis, and fails the test when the lock
// does not behave as you say it should.
//
//	func TestMyLockUnderFaults(t *testing.T) {
//		locktest.Expect(t, locktest.Lock{Name: "mylock", New: mylock.New},
//			map[string]string{"baseline": "safe", "paused-holder": "unsafe"})
//	}
//
// Your lock implements locks.Lock; New builds one client's handle from a
// locks.Config (its Redis clients, TTL, wait, clock and owner id). Talk to
// Redis only through Config.Clients: the scenarios pause and crash your
// client through hooks on those connections, without any call from your
// code.
// The machine needs redis-server (and, for clock scenarios, libfaketime and
// a libc-allocator redis-server): `go run
// github.com/locktorture/locktorture/cmd/setup` installs what is missing,
// and a test stops with one line naming it before any story starts.
package locktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/worker"
)

// Lock describes your lock to the harness.
type Lock struct {
	// Name labels it in results.
	Name string
	// Nodes is how many independent Redis nodes to give it (default 1).
	Nodes int
	// Fenced: its leases carry fencing tokens (Lease.Fence), which the
	// protected store then checks. Reentrant: the holder may acquire again.
	// Queued: waiters hold places in a queue (a dead one may stall it for
	// up to the waiter timeout).
	Fenced, Reentrant, Queued bool
	// Claims is the lock's fault model: the faults under which it claims
	// to keep its promise; the random scenario holds it to these.
	Claims []fault.Kind
	// New builds one client's handle.
	New func(locks.Config) locks.Lock
	// Server is the kind of server the lock runs against (cluster.Kinds;
	// empty: Redis). A lock of another kind dials Config.Addrs itself.
	Server string
	// Program, instead of New, starts one client of a lock written in
	// another language as a worker process speaking the worker protocol
	// (package worker); every run then uses client processes.
	Program func() *exec.Cmd
}

func (l Lock) info() *locks.Info {
	return &locks.Info{Name: l.Name, Nodes: l.Nodes, Fenced: l.Fenced, Reentrant: l.Reentrant, Queued: l.Queued,
		Claims: l.Claims, Server: l.Server, New: l.New, Program: l.Program}
}

// Run runs one scenario against l and returns everything it found; o's
// Scenario, Lock and Custom are set from the arguments, the rest (TTL,
// clients, time limit, out dir, client processes) are yours to tune. With
// o.ClientProcs, o.Worker must start a program that serves l: Worker(t)
// starts the calling test again, in which this same call serves l.
func Run(ctx context.Context, l Lock, scenarioName string, want verdict.Expectation, o engine.Options) (*engine.Result, error) {
	if err := serveIfWorker(l); err != nil {
		return nil, err
	}
	return engine.Run(ctx, l.options(scenarioName, want, o))
}

// options are o with the scenario, l and what it must show set, as Run
// and check run them.
func (l Lock) options(scenarioName string, want verdict.Expectation, o engine.Options) engine.Options {
	o.Scenario, o.Lock, o.Custom, o.Expect = scenarioName, l.Name, l.info(), &want
	return o
}

// Worker starts the running test again as a client worker (see package
// worker): the test binary with -test.run naming only t, and the worker
// environment variable naming the lock. There, the test's own call of
// Run or Expect for that lock serves it and exits instead of running
// stories, so a user's lock needs nothing more to run as real processes.
func Worker(t testing.TB) func(lock string) *exec.Cmd {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	pattern := strings.Join(parts, "/")
	// A worker runs the test function up to the call that serves and then
	// exits without its cleanups, so what it made before (a t.TempDir) is
	// made inside this test's own temp dir, which this test removes.
	tmp := t.TempDir()
	return func(lock string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run="+pattern)
		cmd.Env = append(os.Environ(), worker.Env+"="+lock, "TMPDIR="+tmp)
		return cmd
	}
}

// errOtherLock is what a call for another lock gets in a worker: the
// worker serves one lock and runs no stories.
var errOtherLock = errors.New("locktest: this test binary is a worker for another lock")

// serveIfWorker serves l and exits when this process is a worker for l.
// Every entry point calls it first, so it also quiets go-redis's log, in
// the test and in its workers: a story's partitions make go-redis log
// every failed dial, and the verdict and the kept run say what happened.
func serveIfWorker(l Lock) error {
	cluster.QuietRedisLog()
	name := os.Getenv(worker.Env)
	switch name {
	case "":
		return nil
	case l.Name:
		err := worker.Serve(os.Stdin, os.Stdout, func(string) (locks.Info, error) { return *l.info(), nil })
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	return errOtherLock
}

// Env names the directory where a failing run is kept (default
// testdata/locktest-runs under the package being tested).
const Env = "LOCKTORTURE_RUNS"

// Expect runs every scenario in want against l and marks t failed for each
// whose outcome differs, naming the anomalies; it stops the test if any
// did. want maps a scenario to an expectation in the words the matrix
// prints: an outcome (safe, unsafe, lock-unsafe, deadlock, unfair), then
// observations that must be seen ("+promise-broken") or must not be
// ("-foreign-release"). An unknown scenario, outcome or observation stops
// the test before anything runs, with the valid words.
//
// Each passing run logs its verdict line (go test -v shows them) and is
// deleted; a failing run's directory is kept, report and all, under the
// directory $LOCKTORTURE_RUNS names, else o.Out, else testdata/locktest-runs.
func Expect(t testing.TB, l Lock, want map[string]string) {
	t.Helper()
	ExpectWith(t, l, want, engine.Options{})
}

// ExpectWith is Expect with options for every run: TTL, clients, time
// limit, Out (see Expect), and ClientProcs, which runs every client as an
// OS process of its own (this test binary started again through Worker,
// unless o.Worker says otherwise).
func ExpectWith(t testing.TB, l Lock, want map[string]string, o engine.Options) {
	t.Helper()
	if !prepare(t, l, &o) {
		return
	}
	names := slices.Sorted(maps.Keys(want))
	expect := map[string]verdict.Expectation{}
	for _, n := range names {
		if _, err := scenario.Lookup(n); err != nil {
			t.Fatalf("locktest: unknown scenario %q (valid: %s)", n, strings.Join(scenario.Names(), ", "))
		}
		e, err := verdict.ParseExpectation(want[n])
		if err != nil {
			t.Fatalf("locktest: %s: %v", n, err)
		}
		expect[n] = e
	}
	requireMachine(t, o, names...)
	root := runsRoot(t, &o)
	for _, n := range names {
		o.Scenario = n
		check(t, l, expect[n], o, root)
	}
	finish(t, root)
}

// ExpectStory runs a story of your own, composed in Go from the nemesis
// pieces its Schedule gets (partitions, pauses, traps at command
// boundaries, kills, clocks), against l, and fails t unless l shows want
// (in Expect's words). Runs are kept or removed as Expect's are.
func ExpectStory(t testing.TB, l Lock, story scenario.Scenario, want string, o engine.Options) {
	t.Helper()
	if !prepare(t, l, &o) {
		return
	}
	e, err := verdict.ParseExpectation(want)
	if err != nil {
		t.Fatalf("locktest: %s: %v", story.Name, err)
	}
	o.Told = &story
	requireMachine(t, o)
	root := runsRoot(t, &o)
	check(t, l, e, o, root)
	finish(t, root)
}

// prepare serves l and says false when this process is a worker for
// another lock (the test is then skipped), and points client processes at
// this test binary.
func prepare(t testing.TB, l Lock, o *engine.Options) bool {
	t.Helper()
	if errors.Is(serveIfWorker(l), errOtherLock) {
		t.SkipNow()
		return false
	}
	if o.ClientProcs && o.Worker == nil {
		o.Worker = Worker(t)
	}
	return true
}

// runsRoot is where t's failing runs are kept, and points o there.
func runsRoot(t testing.TB, o *engine.Options) string {
	root := cmp.Or(os.Getenv(Env), o.Out, defaultRuns)
	o.Out = filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	return root
}

// check runs one story and marks t failed, keeping the run with its
// report, unless l showed e; a passing run logs its verdict and goes.
func check(t testing.TB, l Lock, e verdict.Expectation, o engine.Options, root string) {
	t.Helper()
	name := o.Scenario
	if o.Told != nil {
		name = o.Told.Name
	}
	if err := serveIfWorker(l); err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	// The machine, not the lock, may run late: a starved run is no
	// evidence either way, and runs once more, alone, as a matrix's does.
	res, err := engine.RunUnstarved(context.Background(), l.options(o.Scenario, e, o), t.Logf)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if !res.Matched {
		var b strings.Builder
		report.Summary(&b, res)
		kept := "the run is kept in " + res.Dir
		if err := report.Write(res); err != nil {
			kept += " (its report could not be written: " + err.Error() + ")"
		}
		t.Errorf("%s: %s showed %s, want %s; %s\n%s", name, l.Name, res.Outcome, e, kept, b.String())
		return
	}
	t.Logf("%s: %s showed %s, as expected (%s)", name, l.Name, res.Outcome, e)
	_ = os.RemoveAll(res.Dir)
	removeEmpty(filepath.Dir(res.Dir), root)
}

// finish tidies the default runs directory and stops t if it failed.
func finish(t testing.TB, root string) {
	t.Helper()
	if root == defaultRuns {
		_ = os.Remove(filepath.Dir(root)) // testdata, if the runs made it and left it empty
	}
	if t.Failed() {
		t.FailNow()
	}
}

// defaultRuns is where failing runs are kept unless told otherwise: under
// the tested package, beside its other test files.
var defaultRuns = filepath.Join("testdata", "locktest-runs")

// removeEmpty removes dir and its parents up to root while they are empty,
// so passing tests leave no trace.
func removeEmpty(dir, root string) {
	for {
		if os.Remove(dir) != nil || dir == root {
			return
		}
		dir = filepath.Dir(dir)
	}
}
