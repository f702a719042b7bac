// Command run runs named failure scenarios against named lock algorithms on
// real Redis and says whether each behaved as expected.
//
//	go run ./cmd/run -scenario paused-holder -lock set-nx-px
//
// Each pair gets one line as it ends (its place, verdict, time and the time
// left); the block behind a verdict (log, checkers, files) is printed for a
// pair that did not match, or for every pair with -v. On a terminal a status
// line shows the pairs running now.
//
// Exit status: 0 every outcome matched its expectation, 1 some did not (or a
// run could not be carried out), 2 bad usage, 130 interrupted.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/sweep"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/worker"
)

func main() {
	register()
	// Started as a client worker (-client-procs): serve the lock, then exit.
	worker.ServeIfWorker(locks.Lookup)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: flags in, exit code out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		scenarios  = fs.String("scenario", "all", "scenario name(s), comma-separated, or all")
		lockNames  = fs.String("lock", "", "lock name(s), comma-separated (default: every lock the scenario has an expectation for)")
		services   = fs.String("service", "", "run only the locks on these server kind(s), comma-separated: "+strings.Join(cluster.Kinds(), ", ")+" (default: every kind)")
		clients    = fs.Int("clients", 0, "number of clients (default: the scenario's)")
		ttl        = fs.Duration("ttl", 0, "lease time (default: the scenario's)")
		timeLimit  = fs.Duration("time-limit", 0, "how long clients keep working (default: the scenario's)")
		seed       = fs.Int64("seed", 0, "random seed, stored with the run (default: from the clock)")
		out        = fs.String("out", "results", "results directory")
		list       = fs.Bool("list", false, "list scenarios and locks, then exit")
		backend    = fs.String("backend", cluster.Local, "which `backend` runs the Redis nodes: "+strings.Join(cluster.Backends(), " or ")+" (docker: containers from a local image that make setup builds)")
		procs      = fs.Bool("client-procs", false, "run every client as an OS process of its own (pauses are SIGSTOP, crashes SIGKILL)")
		parallel   = fs.Int("parallel", runtime.NumCPU(), "pairs run at once; a timing-sensitive story runs alone")
		shard      = fs.String("shard", "", "run only slice i of n of the pairs (i/n, 1-based), for spreading a matrix over machines; auto[/n] takes i (and n) from a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) or a CI's parallel job (CI_NODE_INDEX, CI_NODE_TOTAL)")
		check      = fs.String("check", "", "judge every run stored under `DIR` (one run, or a results tree) again with today's checkers and rewrite its verdict and report, starting nothing, then exit")
		merge      = fs.String("merge", "", "join the summaries and runs of shard result directories (comma-separated) into -out, then exit")
		probe      = fs.String("probe", "", "scenario boundary's one fault: \"pause|crash OP before|after COMMAND#N\", as -explore lists them")
		explore    = fs.Bool("explore", false, "explore every command boundary of each -lock: learn its commands in a fault-free warm-up, then pause a client past its lease, and crash one, at each boundary; a finding is a promise broken under a fault the lock claims to survive")
		sweepSpec  = fs.String("sweep", "", "run one -scenario across a range of one of its parameters, or of ttl (the lease in ms, the story's parameters held at their length in time), `PARAM=FROM..TO[:STEPS]`, -runs times a point for each -lock, and plot P(violation) with 95% Wilson intervals")
		runs       = fs.Int("runs", 10, "runs a point of a -sweep gets, for each lock; with -shrink, replays a candidate gets (default 4)")
		shrinkDir  = fs.String("shrink", "", "shrink the finding (or the violation) of the run stored in `DIR` (a random run, a sweep point's, a scenario file's) to a smaller schedule that still shows it, replaying each candidate -runs times (default 4); writes results/shrinks/...")
		printStory = fs.String("print-scenario", "", "print the built-in scenario `NAME` as a scenario file (JSON), then exit")
		storyFiles = fs.String("scenario-file", "", "run the stories of these scenario `FILE`s (comma-separated; -print-scenario writes one) instead of -scenario, each with the locks it expects something of (or -lock)")
		verbose    = fs.Bool("v", false, "print every pair's block (its log, verdicts and files), not only the blocks of pairs that did not match")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: run [-scenario S[,S]] [-lock L[,L]] [-service K[,K]] [-clients N] [-ttl D] [-time-limit D] [-seed N] [-out DIR] [-backend local|docker] [-client-procs] [-parallel N] [-shard I/N] [-merge DIR,DIR] [-check DIR] [-probe P] [-explore] [-sweep P=A..B[:N] [-runs N]] [-print-scenario NAME] [-scenario-file F[,F]] [-shrink DIR [-runs N]] [-v] [-list]")
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "run: %v (see -h)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "run: unexpected argument %q (see -h)\n", fs.Arg(0))
		return 2
	}
	if *list {
		printList(stdout)
		return 0
	}
	if *printStory != "" {
		return printScenario(*printStory, stdout, stderr)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// A flag given with a zero or empty value is a typo, not a wish for
	// the default: the default is what an omitted flag means.
	var bad string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case bad != "":
		case f.Name == "clients" && *clients <= 0, f.Name == "ttl" && *ttl <= 0, f.Name == "time-limit" && *timeLimit <= 0,
			f.Name == "parallel" && *parallel < 1, f.Name == "runs" && *runs < 1:
			bad = fmt.Sprintf("-%s %s: want a value above zero (omit the flag for the default)", f.Name, f.Value)
		case (f.Name == "lock" || f.Name == "scenario" || f.Name == "service" || f.Name == "out" || f.Name == "backend" || f.Name == "scenario-file") && strings.TrimSpace(f.Value.String()) == "":
			bad = fmt.Sprintf("-%s is empty (omit the flag for the default)", f.Name)
		}
	})
	if bad != "" {
		fmt.Fprintf(stderr, "run: %s\n", bad)
		return 2
	}
	if *check != "" {
		return checkStored(*check, stdout, stderr)
	}
	if err := writable(*out); err != nil {
		fmt.Fprintf(stderr, "run: -out %s: %v\n", *out, err)
		return 2
	}
	if *shrinkDir != "" {
		replays := 0
		if given["runs"] {
			replays = *runs
		}
		return shrinkRun(ctx, *shrinkDir, replays, *parallel, *out, stdout, stderr)
	}
	if *merge != "" {
		isSweep, err := sweepShards(split(*merge))
		if err != nil {
			fmt.Fprintf(stderr, "run: -merge: %v\n", err)
			return 2
		}
		if dirs := split(*merge); isSweep {
			sw, err := sweep.Merge(dirs, *out)
			if err != nil {
				fmt.Fprintf(stderr, "run: -merge: %v\n", err)
				return 1
			}
			return printSweep(sw, stdout, *out)
		}
		return mergeShards(split(*merge), *out, stdout, stderr)
	}
	if gone, err := cluster.RemoveLeftovers(""); err == nil && len(gone) > 0 {
		fmt.Fprintf(stdout, "removed %d temp dir(s) left by runs that were killed: %s\n", len(gone), strings.Join(gone, " "))
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	base := engine.Options{Clients: *clients, TTL: *ttl, TimeLimit: *timeLimit, Seed: *seed, Out: *out, ClientProcs: *procs, Backend: *backend}
	if *probe != "" {
		p, err := scenario.ParseProbe(*probe)
		if err != nil {
			fmt.Fprintf(stderr, "run: -probe: %v\n", err)
			return 2
		}
		base.Probe = &p
	}
	var told map[string]*scenario.Scenario
	if *storyFiles != "" {
		if given["scenario"] || given["explore"] || given["probe"] || given["sweep"] {
			fmt.Fprintln(stderr, "run: -scenario-file names the stories to run: drop -scenario, -explore, -probe and -sweep")
			return 2
		}
		var err error
		if told, *scenarios, err = readStories(split(*storyFiles)); err != nil {
			fmt.Fprintf(stderr, "run: -scenario-file %v\n", err)
			return 2
		}
	}
	if given["runs"] && *sweepSpec == "" {
		fmt.Fprintln(stderr, "run: -runs counts a -sweep's runs a point: give -sweep too")
		return 2
	}
	if *sweepSpec != "" {
		if given["explore"] || given["probe"] || given["service"] {
			fmt.Fprintln(stderr, "run: -sweep runs one story over a range of one parameter: drop -explore, -probe and -service")
			return 2
		}
		if len(split(*scenarios)) != 1 || *scenarios == "all" {
			fmt.Fprintln(stderr, "run: -sweep runs one story: name it with -scenario")
			return 2
		}
		base.Scenario = *scenarios
		return runSweep(ctx, base, *sweepSpec, *runs, split(*lockNames), *shard, *parallel, stdout, stderr)
	}
	if *explore {
		if given["scenario"] || given["probe"] || given["shard"] {
			fmt.Fprintln(stderr, "run: -explore picks its own runs (scenario boundary at each boundary it learns): drop -scenario, -probe and -shard")
			return 2
		}
		return exploreBoundaries(ctx, base, split(*lockNames), *parallel, stdout, stderr)
	}
	pairs, err := plan(*scenarios, *lockNames, *services, told)
	if err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 2
	}
	// The whole matrix, or a shard of a selection, is what summary.json
	// and the index's grid show; an ad-hoc selection leaves them alone.
	full := *scenarios == "all" && *lockNames == "" && told == nil || *shard != ""
	if *shard != "" {
		given := *shard
		i, n, err := parseShard(given, getenv)
		if err != nil {
			fmt.Fprintf(stderr, "run: -shard %s: %v\n", given, err)
			return 2
		}
		if *shard = fmt.Sprintf("%d/%d", i, n); *shard != given {
			fmt.Fprintf(stdout, "-shard %s: shard %s, from the environment\n", given, *shard)
		}
		var mine [][2]string
		for k, p := range pairs {
			if k%n == i-1 {
				mine = append(mine, p)
			}
		}
		if pairs = mine; len(pairs) == 0 {
			fmt.Fprintf(stderr, "run: -shard %s: no pair falls in this shard\n", *shard)
			return 2
		}
	}
	// Check every pair before starting any, so a typo fails in a second;
	// what Resolve fills in is what the time left is estimated from.
	seats := engine.Seats()
	plans := make([]pairPlan, len(pairs))
	for k, p := range pairs {
		o := base
		o.Scenario, o.Lock, o.Story = p[0], p[1], told[p[0]]
		plan, err := engine.Resolve(o)
		if err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
			return 2
		}
		plans[k] = pairPlan{scenario: p[0], lock: p[1], limit: plan.Options.TimeLimit, alone: plan.Alone()}
	}
	// Say what each omitted flag came to, so a run is never a surprise.
	from := func(name, dflt string) string {
		if given[name] {
			return ""
		}
		return " (" + dflt + ")"
	}
	var sizes []string
	for _, name := range []string{"clients", "ttl", "time-limit"} {
		if given[name] {
			sizes = append(sizes, "-"+name+" "+fs.Lookup(name).Value.String())
		}
	}
	fmt.Fprintf(stdout, "seed %d%s; %d pair(s), %d at a time%s; clients, ttl and time limit: %s\n",
		*seed, from("seed", "from the clock"), len(pairs), *parallel, from("parallel", "the core count"),
		cmp.Or(strings.Join(sizes, ", "), "each scenario's own (a run's block and its results.json say them)"))
	// One pair asked for by name is looked at, not tallied: its block is
	// printed as with -v.
	tr := newTracker(stdout, stderr, plans, *parallel, seats, isTerminal(stdout), *verbose || len(pairs) == 1)
	if len(pairs) > 1 {
		alone := ""
		if slices.ContainsFunc(plans, func(p pairPlan) bool { return p.alone }) {
			alone = ", the stories that run alone by themselves"
		}
		fmt.Fprintf(stdout, "about %s to go: each pair's time limit and ~%.1f s to start and judge it, %d at a time%s\n",
			minSec(tr.estimate()), priorOverhead.total().Seconds(), min(*parallel, seats), alone)
	}
	matrix := report.Matrix{Started: time.Now(), Seed: *seed, Shard: *shard}
	matrix.Entries = make([]report.Entry, len(pairs))
	var (
		noting      sync.Mutex
		interrupted []string
	)
	// runPair runs pair i and puts its entry in the matrix. What the run
	// logs goes to its block, which the tracker prints whole when the run
	// ends (if it did not match, or with -v), so runs side by side do not
	// interleave.
	runPair := func(i int) {
		p := pairs[i]
		o := base
		o.Scenario, o.Lock, o.Story = p[0], p[1], told[p[0]]
		var log bytes.Buffer
		o.Log = &log
		o.Progress = tr.progress(i)
		tr.begin(i)
		res, err := engine.Run(ctx, o)
		// Run gives its seats up as it returns: what it held ends here.
		freed := time.Now()
		if errors.Is(err, engine.ErrInterrupted) {
			// Not judged, but listed: the index shows it was cut short.
			tr.forget(i)
			res.Outcome = verdict.Interrupted
			_ = res.Save()
			noting.Lock()
			interrupted = append(interrupted, res.Dir)
			noting.Unlock()
			return
		}
		if err == nil {
			err = report.Write(res)
		}
		tr.finish(i, res, err, log.Bytes(), freed)
		matrix.Entries[i] = report.EntryOf(p[0], p[1], res, err)
	}
	// At most -parallel runs at once. A story whose verdict hangs on
	// timing waits for the machine alone in engine.Run, whatever runs
	// beside it.
	engine.Spread(ctx, *parallel, len(pairs), runPair)
	// A starved run is no evidence either way: the machine, not the lock,
	// ran late. It runs once more, after the others and one at a time, and
	// says so; its first run stays in -out for anyone who asks why.
	var rerun []string
	var starved []int
	for i, e := range matrix.Entries {
		if e.Outcome == verdict.Starved {
			starved = append(starved, i)
		}
	}
	if len(starved) > 0 && ctx.Err() == nil {
		tr.runAgain(starved)
	}
	for _, i := range starved {
		if ctx.Err() != nil {
			break
		}
		e := matrix.Entries[i]
		tr.printf("%s / %s was starved (see above): running it once more, one at a time, now that the other runs are done\n", e.Scenario, e.Lock)
		rerun = append(rerun, fmt.Sprintf("%s/%s (first run: %s)", e.Scenario, e.Lock, e.Dir))
		runPair(i)
	}
	tr.stop()
	wall := time.Since(matrix.Started)
	if len(interrupted) > 0 || ctx.Err() != nil {
		for _, dir := range interrupted {
			fmt.Fprintf(stderr, "run: interrupted; partial history in %s/history.jsonl\n", dir)
		}
		_ = report.WriteIndex(*out)
		return 130
	}
	if len(pairs) > 1 {
		fmt.Fprintln(stdout)
		seatTable(stdout, plans, tr.use, seats, wall)
		// Each pair had its line as it ended; the table repeats, in the
		// matrix's order, those a reader must look at again (all of them
		// with -v), last, where the tail of a long log still shows them.
		shown := matrix.Entries
		if !*verbose {
			shown = slices.DeleteFunc(slices.Clone(shown), func(e report.Entry) bool { return e.Matched && e.Late == "" })
		}
		if len(shown) > 0 {
			fmt.Fprintln(stdout)
			report.MatrixTable(stdout, shown)
		}
	}
	if full {
		if err := report.WriteSummary(*out, matrix); err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
			return 1
		}
		if err := writeSeats(*out, plans, tr.use, seats, wall, matrix.Started); err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
			return 1
		}
	}
	if err := report.WriteIndex(*out); err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 1
	}
	matrix.Count()
	fmt.Fprintf(stdout, "%d of %d runs matched their expectation; open %s\n", matrix.Matched, matrix.Total, filepath.Join(*out, "index.html"))
	if matrix.Starved > 0 {
		fmt.Fprintf(stdout, "%d run(s) starved again: the machine ran too late for their verdicts to be evidence (see their lines and blocks above)\n", matrix.Starved)
	}
	if matrix.Late > 0 {
		fmt.Fprintf(stdout, "%d fault-free run(s) ran late and kept their passing verdict (see the table above)\n", matrix.Late)
	}
	if len(rerun) > 0 {
		fmt.Fprintf(stdout, "%d starved run(s) ran again, and the counts are of the second runs: %s\n", len(rerun), strings.Join(rerun, "; "))
	}
	if matrix.Matched < matrix.Total {
		return 1
	}
	return 0
}

// plan expands the -scenario and -lock lists into (scenario, lock) pairs.
// A lock named explicitly must apply to every scenario named; with no -lock,
// each scenario runs every lock it has an expectation for. A story in told
// (a scenario file's) is taken from there, not from the catalogue.
func plan(scenarioList, lockList, serviceList string, told map[string]*scenario.Scenario) ([][2]string, error) {
	var names []string
	kinds := split(serviceList)
	for _, k := range kinds {
		if _, err := cluster.LookupKind(k); err != nil {
			return nil, fmt.Errorf("-service %s: no such server kind (one of %s)", k, strings.Join(cluster.Kinds(), ", "))
		}
	}
	if slices.Contains(split(scenarioList), "all") && scenarioList != "all" {
		return nil, errors.New(`-scenario all runs every story and cannot be combined with other names`)
	}
	if scenarioList == "all" {
		// Every story; exploration (random) is asked for by name.
		for _, n := range scenario.Names() {
			if s, _ := scenario.Lookup(n); !s.Exploration {
				names = append(names, n)
			}
		}
	} else {
		names = split(scenarioList)
	}
	if len(names) == 0 {
		return nil, errors.New("-scenario is empty")
	}
	var pairs [][2]string
	for _, sn := range names {
		s, err := scenario.Lookup(sn)
		if t := told[sn]; t != nil {
			s, err = *t, nil
		}
		if err != nil {
			return nil, err
		}
		ls := split(lockList)
		if len(ls) == 0 && s.Exploration {
			return nil, fmt.Errorf("-scenario %s explores one lock at a time: name it with -lock (one of %s)", sn, strings.Join(locks.Names(), ", "))
		}
		if len(ls) == 0 {
			ls = s.Locks()
		}
		for _, l := range ls {
			lk, err := locks.Lookup(l)
			if err != nil {
				return nil, err
			}
			if _, ok := s.Expect[l]; !ok && scenarioList == "all" {
				continue
			}
			if len(kinds) > 0 && !slices.Contains(kinds, lk.ServerKind()) {
				continue
			}
			pairs = append(pairs, [2]string{sn, l})
		}
	}
	if len(pairs) == 0 {
		if len(kinds) > 0 {
			return nil, fmt.Errorf("no scenario in %q applies to a lock on %s", scenarioList, serviceList)
		}
		return nil, fmt.Errorf("no scenario in %q applies to lock %q", scenarioList, lockList)
	}
	return pairs, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func printList(w io.Writer) {
	fmt.Fprintln(w, "scenarios:")
	for _, n := range scenario.Names() {
		s, _ := scenario.Lookup(n)
		fmt.Fprintf(w, "  %-18s %s\n", n, s.Story)
		if len(s.Requires) > 0 {
			var needs []string
			for _, e := range s.Requires {
				needs = append(needs, e.String())
			}
			fmt.Fprintf(w, "  %-18s   needs (else vacuous): %s\n", "", strings.Join(needs, "; "))
		}
		for _, l := range s.Locks() {
			fmt.Fprintf(w, "  %-18s   %-18s expect %s\n", "", l, s.Expect[l])
		}
		for _, p := range s.Params {
			fmt.Fprintf(w, "  %-18s   param %s (%s; %g, from %g to %g): %s\n", "", p.Name, p.Unit, p.Default, p.Min, p.Max, p.Help)
		}
		for _, k := range slices.Sorted(maps.Keys(s.NotFor)) {
			fmt.Fprintf(w, "  %-18s   not for %s locks: %s\n", "", k, s.NotFor[k])
		}
	}
	fmt.Fprintln(w, "actions a scenario file's schedule can take (-print-scenario NAME shows them in use; times and lengths in TTLs):")
	for _, n := range scenario.ActionNames() {
		a, _ := scenario.LookupAction(n)
		args := strings.Join(a.Needs, ", ")
		if len(a.Takes) > 0 {
			args = strings.TrimPrefix(args+", optional "+strings.Join(a.Takes, ", "), ", ")
		}
		fmt.Fprintf(w, "  %-18s %s", n, a.Help)
		if args != "" {
			fmt.Fprintf(w, " (%s)", args)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "nodes by role in a scenario file:")
	for _, r := range slices.Sorted(maps.Keys(scenario.NodeRoles)) {
		fmt.Fprintf(w, "  %-18s %s\n", r, scenario.NodeRoles[r])
	}
	fmt.Fprintln(w, "locks:")
	for _, n := range locks.Names() {
		info, _ := locks.Lookup(n)
		broken := ""
		if info.Broken {
			broken = " [BROKEN ON PURPOSE]"
		}
		fmt.Fprintf(w, "  %-18s %s%s\n", n, info.Summary, broken)
		fmt.Fprintf(w, "  %-18s claims its promise under: %s\n", "", info.ClaimList())
	}
}

// isTerminal says whether w is a terminal: a status line redrawn in place
// is for people watching, not for CI logs and pipes, which get plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// writable checks that dir can be made and written to before anything
// starts, so a bad -out costs one line, not a matrix of errors.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Unwrap(err)
	}
	f, err := os.CreateTemp(dir, ".writable-*")
	if err != nil {
		return errors.Unwrap(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// getenv is where -shard auto reads its index: the process's environment.
var getenv = os.Getenv

// parseShard reads "i/n" with 1 ≤ i ≤ n, or "auto" or "auto/n", whose
// index comes from the engine that started this copy: a Kubernetes
// Indexed Job's JOB_COMPLETION_INDEX (from 0), or a CI's parallel job's
// CI_NODE_INDEX (from 1, GitLab's), whose CI_NODE_TOTAL is n when the
// flag does not say it. The matrix is then spread by the engine users
// already run, with no coordinator of ours.
func parseShard(s string, getenv func(string) string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	if a == "auto" {
		var i int
		var err error
		switch {
		case getenv("JOB_COMPLETION_INDEX") != "":
			i, err = strconv.Atoi(getenv("JOB_COMPLETION_INDEX"))
			i++
		case getenv("CI_NODE_INDEX") != "":
			i, err = strconv.Atoi(getenv("CI_NODE_INDEX"))
			if !ok {
				b, ok = getenv("CI_NODE_TOTAL"), getenv("CI_NODE_TOTAL") != ""
			}
		default:
			return 0, 0, errors.New("no shard index in the environment: set JOB_COMPLETION_INDEX (a Kubernetes Indexed Job does) or CI_NODE_INDEX and CI_NODE_TOTAL (a CI's parallel job), or give i/n")
		}
		if err != nil {
			return 0, 0, fmt.Errorf("the shard index in the environment is not a number: %v", err)
		}
		if !ok {
			return 0, 0, errors.New("auto needs the shard count: auto/n (or CI_NODE_TOTAL beside CI_NODE_INDEX)")
		}
		a = strconv.Itoa(i)
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, errors.New("want i/n with 1 ≤ i ≤ n, e.g. 2/3, or auto[/n] with the index from the environment")
	}
	return i, n, nil
}

// mergeShards joins the summaries of shard result directories into out:
// their run directories are copied under out so the index's links resolve,
// the entries are joined into one summary and grid, and a shard missing
// from the set (or given twice) is an error, so a merged matrix is never
// silently short.
func mergeShards(dirs []string, out string, stdout, stderr io.Writer) int {
	merged, err := report.Merge(dirs, out)
	if err != nil {
		fmt.Fprintf(stderr, "run: -merge: %v\n", err)
		return 1
	}
	report.MatrixTable(stdout, merged.Entries)
	if err := report.WriteIndex(out); err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "merged %d shard(s): %d of %d runs matched their expectation; open %s\n",
		len(dirs), merged.Matched, merged.Total, filepath.Join(out, "index.html"))
	if merged.Matched < merged.Total {
		return 1
	}
	return 0
}
