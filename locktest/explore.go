package locktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/explore"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// ExploreOptions tunes Explore: which boundaries are tried, how many
// random runs, and what every run starts from.
type ExploreOptions struct {
	// Run is what every run starts from: TTL, Clients, Out (default: a
	// temporary directory, Exploration.Root), Backend, ClientProcs and
	// Worker (see Run). Scenario, Lock, Custom, Expect, Seed and Probe
	// are set per run.
	Run engine.Options
	// Ops limits boundary exploration to these op kinds (acquire,
	// release, renewal) and Faults to these faults (pause, crash); empty:
	// all of them.
	Ops, Faults []string
	// NoBoundaries leaves boundary exploration out: random runs only.
	NoBoundaries bool
	// Seeds are random runs' seeds, a run each; Runs adds that many runs
	// seeded from the clock. Each is judged against the lock's claims.
	Seeds []int64
	Runs  int
	// RandomTimeLimit is how long each random run lasts (0: the story's
	// 30 TTLs); Run.TimeLimit would stretch the boundary runs too.
	RandomTimeLimit time.Duration
	// Parallel is how many runs go at once (0: the machine's seats).
	Parallel int
	// Logf, when set, hears of each run as it ends (a test's t.Logf).
	Logf func(format string, args ...any)
}

// Exploration is what Explore tried and found.
type Exploration struct {
	Lock string `json:"lock"`
	// Root is the results root every run was written under, with an
	// index.html listing them; Dir holds exploration.txt and .json.
	Root string `json:"root"`
	Dir  string `json:"dir"`
	// Boundaries is the boundary exploration (nil with NoBoundaries): its
	// warm-up, each op kind's commands and runs, and coverage.txt and
	// .json in its own Dir, as cmd/run -explore writes them.
	Boundaries *explore.Coverage `json:"boundaries,omitempty"`
	// Runs are every run tried: the boundary runs, then the random ones.
	Runs []ExploredRun `json:"runs"`
	// SeatSeconds is what the runs held of the machine's room (a second
	// of one seat; a run alone holds every seat), Elapsed the wall time.
	SeatSeconds float64       `json:"seat_seconds"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	// Starved are first tries that starved on a busy machine, each run
	// again alone; kept, and removed by Remove.
	Starved  []string `json:"starved,omitempty"`
	madeRoot bool
}

// ExploredRun is one run of an exploration: a boundary run (Probe) or a
// random one (Seed), and what it showed.
type ExploredRun struct {
	Scenario string `json:"scenario"`
	Probe    string `json:"probe,omitempty"`
	Seed     int64  `json:"seed,omitempty"`
	// Dir is the run, its report (index.html) and history.
	Dir     string          `json:"dir,omitempty"`
	Outcome verdict.Outcome `json:"outcome,omitempty"`
	// Finding says how the lock broke its promise under faults it claims
	// to survive; Explained, why a broken promise or an anomaly is not
	// one (an unclaimed fault, a client that outlived its lease).
	Finding   string `json:"finding,omitempty"`
	Explained string `json:"explained,omitempty"`
	// NotReached: a boundary run whose client never got to the boundary,
	// evidence of nothing. Err: the run could not be carried out.
	NotReached bool   `json:"not_reached,omitempty"`
	Err        string `json:"error,omitempty"`
}

// Findings are the runs that found a broken promise.
func (x *Exploration) Findings() []ExploredRun {
	return slices.DeleteFunc(slices.Clone(x.Runs), func(r ExploredRun) bool { return r.Finding == "" })
}

// Failed are the runs that could not be carried out or judged: no
// evidence either way, so a clean exploration has none.
func (x *Exploration) Failed() []ExploredRun {
	return slices.DeleteFunc(slices.Clone(x.Runs), func(r ExploredRun) bool {
		return r.Err == "" && (r.NotReached || r.Outcome.Judged())
	})
}

// String is the run in one line: what was done, what it showed, where it
// is; Replay runs it again.
func (r ExploredRun) String() string {
	what := fmt.Sprintf("random seed %d", r.Seed)
	if r.Probe != "" {
		what = r.Probe
	}
	var shows string
	switch {
	case r.Err != "":
		shows = "error: " + r.Err
	case r.NotReached:
		shows = "not reached"
	case r.Finding != "":
		shows = "FINDING: " + r.Finding
	case r.Explained != "":
		shows = string(r.Outcome) + ", expected: " + r.Explained
	default:
		shows = string(r.Outcome)
	}
	if r.Dir == "" {
		return what + ": " + shows
	}
	return fmt.Sprintf("%s: %s (%s)", what, shows, r.Dir)
}

// Explore explores l outside the registry, judged against l.Claims as
// the built-in locks are against theirs: boundary exploration (package
// explore: a fault-free warm-up learns each op kind's commands, then a
// short run pauses or crashes the first client at each boundary) and
// o.Seeds and o.Runs random runs. Every run is written under o.Run.Out
// with its report, the coverage as cmd/run -explore writes it, and the
// whole as exploration.txt and .json in the returned Dir. A finding is a
// run in Findings, not an error; the error is for options refused before
// anything ran (one line) or an exploration cut short (what ran is
// returned). With o.Run.ClientProcs, o.Run.Worker must serve l, as for
// Run: Worker(t).
func Explore(ctx context.Context, l Lock, o ExploreOptions) (*Exploration, error) {
	if err := serveIfWorker(l); err != nil {
		return nil, err
	}
	if err := o.check(l); err != nil {
		return nil, fmt.Errorf("locktest: %w", err)
	}
	x := &Exploration{Lock: l.Name, Root: o.Run.Out}
	if x.Root == "" {
		root, err := os.MkdirTemp("", "locktest-explore-")
		if err != nil {
			return nil, fmt.Errorf("locktest: %w", err)
		}
		x.Root, x.madeRoot = root, true
	}
	started := time.Now()
	err := x.explore(ctx, l, o)
	x.Elapsed = time.Since(started)
	if err = errors.Join(err, x.write(started)); err != nil {
		return x, fmt.Errorf("locktest: %s: %w", l.Name, err)
	}
	return x, nil
}

// explore runs the boundaries, then the random runs, into x.
func (x *Exploration) explore(ctx context.Context, l Lock, o ExploreOptions) error {
	base := o.runOptions(l)
	base.Out = x.Root
	if !o.NoBoundaries {
		cov, err := explore.Boundaries(ctx, explore.Options{Run: base, Parallel: o.Parallel, Ops: o.Ops, Faults: o.Faults, Logf: o.Logf})
		if cov != nil {
			x.Boundaries = cov
			x.count(explore.Cost{SeatSeconds: cov.SeatSeconds})
			x.Starved = append(x.Starved, cov.Starved...)
			for _, k := range cov.Kinds {
				for _, r := range k.Runs {
					x.Runs = append(x.Runs, ExploredRun{Scenario: "boundary", Probe: r.Probe.String(), Dir: r.Dir, Outcome: r.Outcome,
						Finding: r.Finding, Explained: r.Explained, NotReached: !r.Reached && r.Err == "", Err: r.Err})
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return x.random(ctx, base, o)
}

// random runs one random run per seed of o, spread over the seats.
func (x *Exploration) random(ctx context.Context, base engine.Options, o ExploreOptions) error {
	seeds := slices.Clone(o.Seeds)
	for i := range o.Runs {
		seeds = append(seeds, time.Now().UnixNano()+int64(i))
	}
	runs := make([]ExploredRun, len(seeds))
	costs := make([]explore.Cost, len(seeds))
	logf := engine.Serialized(o.Logf)
	engine.Spread(ctx, cmp.Or(o.Parallel, engine.Seats()), len(seeds), func(i int) {
		res, cost, err := explore.RunOne(ctx, o.randomRun(base, seeds[i]), logf)
		costs[i], runs[i] = cost, ExploredRun{Scenario: "random", Seed: seeds[i]}
		if err == nil {
			err = report.Write(res)
		}
		runs[i].record(res, err)
		logf("%s %s", base.Lock, runs[i])
	})
	for i := range runs {
		x.count(costs[i])
		if runs[i].Dir != "" || runs[i].Err != "" {
			x.Runs = append(x.Runs, runs[i]) // not started once ctx ended: left out
		}
	}
	return ctx.Err()
}

// count adds what a run cost to the exploration's.
func (x *Exploration) count(c explore.Cost) {
	x.SeatSeconds += c.SeatSeconds
	if c.Starved != "" {
		x.Starved = append(x.Starved, c.Starved)
	}
}

// record keeps what a random run showed.
func (r *ExploredRun) record(res *engine.Result, err error) {
	if res != nil {
		r.Dir, r.Outcome, r.Finding, r.Explained = res.Dir, res.Outcome, res.Finding, res.Explained
	}
	if err != nil {
		r.Err = err.Error()
	}
}

// check says, in one line, what is wrong with o for l before anything
// runs.
func (o ExploreOptions) check(l Lock) error {
	switch {
	case l.Name == "":
		return errors.New("the lock needs a Name")
	case (l.New == nil) == (l.Program == nil):
		return fmt.Errorf("lock %s: give one of New and Program", l.Name)
	case len(l.Claims) == 0:
		return fmt.Errorf("lock %s states no Claims: exploration judges a lock against the faults it claims to survive, and with none nothing can be a finding (e.g. Claims: locks.LeaseClaims)", l.Name)
	case o.Runs < 0:
		return fmt.Errorf("runs %d: want 0 or more (ExploreOptions.Runs)", o.Runs)
	case o.RandomTimeLimit < 0:
		return fmt.Errorf("random time limit %s: want 0 (the story's) or more (ExploreOptions.RandomTimeLimit)", o.RandomTimeLimit)
	case o.NoBoundaries && len(o.Seeds)+o.Runs == 0:
		return errors.New("nothing to explore: NoBoundaries with no Seeds and no Runs")
	}
	for _, k := range l.Claims {
		if !slices.Contains(fault.Kinds, k) {
			return fmt.Errorf("lock %s claims %q, no kind of fault (one of %s)", l.Name, k, kindList())
		}
	}
	base := o.runOptions(l)
	if !o.NoBoundaries {
		if err := explore.Check(explore.Options{Run: base, Parallel: o.Parallel, Ops: o.Ops, Faults: o.Faults}); err != nil {
			return err
		}
	}
	if len(o.Seeds)+o.Runs > 0 {
		if _, err := engine.Resolve(o.randomRun(base, 0)); err != nil {
			return err
		}
	}
	return nil
}

// runOptions is o.Run for a run of l that each story judges by its own
// rules (no Expect of the caller's: a lock of the user's own takes what
// the rules say of its traits).
func (o ExploreOptions) runOptions(l Lock) engine.Options {
	base := l.options("", verdict.Expectation{}, o.Run)
	base.Expect = nil
	return base
}

// randomRun is base for the random run of seed, in RandomTimeLimit where
// o sets one.
func (o ExploreOptions) randomRun(base engine.Options, seed int64) engine.Options {
	base.Scenario, base.Seed = "random", seed
	if o.RandomTimeLimit > 0 {
		base.TimeLimit = o.RandomTimeLimit
	}
	return base
}

func kindList() string {
	s := make([]string, len(fault.Kinds))
	for i, k := range fault.Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Text writes the exploration as a person reads it: the boundaries'
// coverage, each random run, the findings with how to replay them, and
// what it cost.
func (x *Exploration) Text(w io.Writer) {
	if x.Boundaries != nil {
		x.Boundaries.Text(w)
	}
	for _, r := range x.Runs {
		if r.Scenario == "random" {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	starved := ""
	if n := len(x.Starved); n > 0 {
		starved = fmt.Sprintf(" (%d first tries starved and ran again alone)", n)
	}
	fmt.Fprintf(w, "%s: %d run(s), %d finding(s), %d not carried out or judged; %.1f seat-seconds in %s%s\n",
		x.Lock, len(x.Runs), len(x.Findings()), len(x.Failed()), x.SeatSeconds, x.Elapsed.Round(100*time.Millisecond), starved)
	for _, r := range x.Findings() {
		fmt.Fprintf(w, "  %s\n    replay: locktest.Replay(ctx, lock, %s, options)\n", r, r.replayArg())
	}
}

// replayArg is r as Replay needs it, in Go.
func (r ExploredRun) replayArg() string {
	if r.Probe != "" {
		return fmt.Sprintf("locktest.ExploredRun{Scenario: %q, Probe: %q}", r.Scenario, r.Probe)
	}
	return fmt.Sprintf("locktest.ExploredRun{Scenario: %q, Seed: %d}", r.Scenario, r.Seed)
}

// write writes exploration.txt and .json under Root/explorations/<lock>/
// <time>, and the root's index.html, as cmd/run's modes leave them.
func (x *Exploration) write(started time.Time) error {
	x.Dir = filepath.Join(x.Root, "explorations", x.Lock, started.UTC().Format("20060102T150405.000Z"))
	return errors.Join(report.WriteTextAndJSON(x.Dir, "exploration.txt", x.Text, "exploration.json", x),
		report.WriteIndex(x.Root))
}

// Remove deletes what the exploration wrote: every run, the warm-up, the
// coverage and the exploration's own files, and the root too when Explore
// made it or nothing else is left in it.
func (x *Exploration) Remove() error {
	if x.madeRoot {
		return os.RemoveAll(x.Root)
	}
	dirs := append([]string{x.Dir}, x.Starved...)
	if c := x.Boundaries; c != nil {
		dirs = append(dirs, c.WarmUp, c.Dir)
	}
	for _, r := range x.Runs {
		dirs = append(dirs, r.Dir)
	}
	var errs []error
	for _, d := range dirs {
		if d != "" {
			errs = append(errs, os.RemoveAll(d))
			removeEmpty(filepath.Dir(d), x.Root)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(x.Root, "*", "*", "*", "results.json")); len(left) == 0 {
		_ = os.Remove(filepath.Join(x.Root, "index.html"))
		_ = os.Remove(x.Root)
	} else {
		errs = append(errs, report.WriteIndex(x.Root))
	}
	return errors.Join(errs...)
}

// Replay runs r, a run of an exploration of l, once more: its probe at
// its boundary, or its seed's random schedule, judged as it was. o are
// the exploration's options, whose Run (TTL, clients) and RandomTimeLimit
// shape the run; it is written under o.Run.Out (default: results) with
// its report.
func Replay(ctx context.Context, l Lock, r ExploredRun, o ExploreOptions) (*engine.Result, error) {
	if err := serveIfWorker(l); err != nil {
		return nil, err
	}
	ro := o.runOptions(l)
	switch r.Scenario {
	case "boundary":
		p, err := scenario.ParseProbe(r.Probe)
		if err != nil {
			return nil, fmt.Errorf("locktest: %w", err)
		}
		ro.Scenario, ro.Probe = r.Scenario, &p
	case "random":
		ro = o.randomRun(ro, r.Seed)
	default:
		return nil, fmt.Errorf("locktest: %q is no exploration's scenario (boundary, random)", r.Scenario)
	}
	res, _, err := explore.RunOne(ctx, ro, func(string, ...any) {}) // a starved try is kept, as any run's
	if err == nil {
		err = report.Write(res)
	}
	return res, err
}

// ExpectNoFindings explores l as Explore does and fails t for each
// finding, and for each run that could not be carried out or judged (no
// evidence either way), naming its probe or seed and its directory; it
// logs the exploration, seat-seconds included, and stops the test if it
// failed. A clean exploration is deleted and returned; one that failed is
// kept, report and all, where a failing story's run is (under
// $LOCKTORTURE_RUNS, else o.Run.Out, else testdata/locktest-runs). Bad
// options stop the test in one line before anything runs.
func ExpectNoFindings(t testing.TB, l Lock, o ExploreOptions) *Exploration {
	t.Helper()
	if !prepare(t, l, &o.Run) {
		return nil
	}
	if err := o.check(l); err != nil {
		t.Fatalf("locktest: %v", err)
	}
	requireMachine(t, o.Run)
	root := runsRoot(t, &o.Run)
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	x, err := Explore(context.Background(), l, o)
	if x != nil {
		var b strings.Builder
		x.Text(&b)
		t.Log(b.String())
	}
	switch {
	case err != nil:
		t.Errorf("%v", err)
	case len(x.Findings()) > 0 || len(x.Failed()) > 0:
		for _, r := range append(x.Findings(), x.Failed()...) {
			t.Errorf("%s: %s", l.Name, r)
		}
		t.Errorf("%s: the exploration is kept in %s", l.Name, x.Dir)
	default:
		_ = x.Remove()
		removeEmpty(filepath.Dir(x.Root), root)
	}
	finish(t, root)
	return x
}
