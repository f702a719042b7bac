// Command run runs named failure scenarios against named lock algorithms on
// real Redis and says whether each behaved as expected.
//
//	go run ./cmd/run -scenario paused-holder -lock set-nx-px
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
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/worker"
)

func main() {
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
		scenarios = fs.String("scenario", "all", "scenario name(s), comma-separated, or all")
		lockNames = fs.String("lock", "", "lock name(s), comma-separated (default: every lock the scenario has an expectation for)")
		clients   = fs.Int("clients", 0, "number of clients (default: the scenario's)")
		ttl       = fs.Duration("ttl", 0, "lease time (default: the scenario's)")
		timeLimit = fs.Duration("time-limit", 0, "how long clients keep working (default: the scenario's)")
		seed      = fs.Int64("seed", 0, "random seed, stored with the run (default: from the clock)")
		out       = fs.String("out", "results", "results directory")
		list      = fs.Bool("list", false, "list scenarios and locks, then exit")
		backend   = fs.String("backend", cluster.Local, "which `backend` runs the Redis nodes: "+strings.Join(cluster.Backends(), " or ")+" (docker: containers from a local image that make setup builds)")
		procs     = fs.Bool("client-procs", false, "run every client as an OS process of its own (pauses are SIGSTOP, crashes SIGKILL)")
		parallel  = fs.Int("parallel", runtime.NumCPU(), "pairs run at once; a timing-sensitive story runs alone")
		shard     = fs.String("shard", "", "run only slice i of n of the pairs (i/n, 1-based), for spreading a matrix over machines")
		merge     = fs.String("merge", "", "join the summaries and runs of shard result directories (comma-separated) into -out, then exit")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: run [-scenario S[,S]] [-lock L[,L]] [-clients N] [-ttl D] [-time-limit D] [-seed N] [-out DIR] [-backend local|docker] [-client-procs] [-parallel N] [-shard I/N] [-merge DIR,DIR] [-list]")
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
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// A flag given with a zero or empty value is a typo, not a wish for
	// the default: the default is what an omitted flag means.
	var bad string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case bad != "":
		case f.Name == "clients" && *clients <= 0, f.Name == "ttl" && *ttl <= 0, f.Name == "time-limit" && *timeLimit <= 0,
			f.Name == "parallel" && *parallel < 1:
			bad = fmt.Sprintf("-%s %s: want a value above zero (omit the flag for the default)", f.Name, f.Value)
		case (f.Name == "lock" || f.Name == "scenario" || f.Name == "out" || f.Name == "backend") && strings.TrimSpace(f.Value.String()) == "":
			bad = fmt.Sprintf("-%s is empty (omit the flag for the default)", f.Name)
		}
	})
	if bad != "" {
		fmt.Fprintf(stderr, "run: %s\n", bad)
		return 2
	}
	if err := writable(*out); err != nil {
		fmt.Fprintf(stderr, "run: -out %s: %v\n", *out, err)
		return 2
	}
	if *merge != "" {
		return mergeShards(split(*merge), *out, stdout, stderr)
	}
	if gone, err := cluster.RemoveLeftovers(""); err == nil && len(gone) > 0 {
		fmt.Fprintf(stdout, "removed %d temp dir(s) left by runs that were killed: %s\n", len(gone), strings.Join(gone, " "))
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	pairs, err := plan(*scenarios, *lockNames)
	if err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 2
	}
	// The whole matrix, or a shard of a selection, is what summary.json
	// and the index's grid show; an ad-hoc selection leaves them alone.
	full := *scenarios == "all" && *lockNames == "" || *shard != ""
	if *shard != "" {
		i, n, err := parseShard(*shard)
		if err != nil {
			fmt.Fprintf(stderr, "run: -shard %s: %v\n", *shard, err)
			return 2
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
	base := scenario.Options{Clients: *clients, TTL: *ttl, TimeLimit: *timeLimit, Seed: *seed, Out: *out, Log: stdout, ClientProcs: *procs, Backend: *backend}
	if isTerminal(stdout) {
		base.Progress = statusLine(stdout)
	}
	// Check every pair before starting any, so a typo fails in a second.
	for _, p := range pairs {
		o := base
		o.Scenario, o.Lock = p[0], p[1]
		if _, _, err := scenario.Resolve(o); err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
			return 2
		}
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
		cmp.Or(strings.Join(sizes, ", "), "each scenario's own (each run's first line says them)"))
	if *parallel > 1 {
		// Status lines of runs side by side would overwrite each other.
		base.Progress = nil
	}
	matrix := report.Matrix{Started: time.Now(), Seed: *seed, Shard: *shard}
	matrix.Entries = make([]report.Entry, len(pairs))
	var (
		printing    sync.Mutex
		interrupted []string
		wg          sync.WaitGroup
	)
	// runPair runs pair i and puts its entry in the matrix; quiet runs
	// print their log whole when they end, so runs side by side do not
	// interleave.
	runPair := func(i int, quiet bool) {
		p := pairs[i]
		o := base
		o.Scenario, o.Lock = p[0], p[1]
		var out bytes.Buffer
		if quiet {
			o.Log = &out
		} else {
			o.Log = stdout
		}
		res, err := scenario.Run(ctx, o)
		if err == nil {
			err = report.Write(res)
		}
		printing.Lock()
		defer printing.Unlock()
		stdout.Write(out.Bytes())
		if o.Progress != nil {
			fmt.Fprint(stdout, "\r\033[K")
		}
		if errors.Is(err, scenario.ErrInterrupted) {
			// Not judged, but listed: the index shows it was cut short.
			res.Outcome = "interrupted"
			_ = report.WriteResults(res)
			interrupted = append(interrupted, res.Dir)
			return
		}
		if err != nil {
			fmt.Fprintf(stderr, "run: %s/%s: %v\n", p[0], p[1], err)
		}
		if res != nil && res.Outcome != "" {
			report.Summary(stdout, res)
		}
		matrix.Entries[i] = report.EntryOf(p[0], p[1], res, err)
	}
	// At most -parallel runs at once.
	slots := make(chan struct{}, *parallel)
	for i := range pairs {
		// A story whose verdict hangs on timing waits for the machine
		// alone in scenario.Run, whatever runs beside it.
		slots <- struct{}{}
		if ctx.Err() != nil {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			runPair(i, *parallel > 1)
		}()
	}
	wg.Wait()
	// A starved run is no evidence either way: the machine, not the lock,
	// ran late. It runs once more, after the others and one at a time, and
	// says so; its first run stays in -out for anyone who asks why.
	var rerun []string
	for i, e := range matrix.Entries {
		if e.Outcome != scenario.Starved || ctx.Err() != nil {
			continue
		}
		fmt.Fprintf(stdout, "\n%s / %s was starved (see above): running it once more, one at a time, now that the other runs are done\n", e.Scenario, e.Lock)
		rerun = append(rerun, fmt.Sprintf("%s/%s (first run: %s)", e.Scenario, e.Lock, e.Dir))
		runPair(i, false)
	}
	if len(interrupted) > 0 || ctx.Err() != nil {
		for _, dir := range interrupted {
			fmt.Fprintf(stderr, "run: interrupted; partial history in %s/history.jsonl\n", dir)
		}
		_ = report.WriteIndex(*out)
		return 130
	}
	if len(pairs) > 1 {
		fmt.Fprintln(stdout)
		report.MatrixTable(stdout, matrix.Entries)
	}
	if full {
		if err := report.WriteSummary(*out, matrix); err != nil {
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
		fmt.Fprintf(stdout, "%d run(s) starved again: the machine ran too late for their verdicts to be evidence (see each run's starved line)\n", matrix.Starved)
	}
	if matrix.Late > 0 {
		fmt.Fprintf(stdout, "%d fault-free run(s) ran late and kept their passing verdict (see each run's late line)\n", matrix.Late)
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
// each scenario runs every lock it has an expectation for.
func plan(scenarioList, lockList string) ([][2]string, error) {
	var names []string
	if slices.Contains(split(scenarioList), "all") && scenarioList != "all" {
		return nil, errors.New(`-scenario all runs every story and cannot be combined with other names`)
	}
	if scenarioList == "all" {
		// Every story; exploration (random) is asked for by name.
		for _, n := range scenario.Names() {
			if s, _ := scenario.Lookup(n); !s.Random {
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
		if err != nil {
			return nil, err
		}
		ls := split(lockList)
		if len(ls) == 0 && s.Random {
			return nil, fmt.Errorf("-scenario %s explores one lock at a time: name it with -lock (one of %s)", sn, strings.Join(locks.Names(), ", "))
		}
		if len(ls) == 0 {
			ls = s.Locks()
		}
		for _, l := range ls {
			if _, err := locks.Lookup(l); err != nil {
				return nil, err
			}
			if _, ok := s.Expect[l]; !ok && scenarioList == "all" {
				continue
			}
			pairs = append(pairs, [2]string{sn, l})
		}
	}
	if len(pairs) == 0 {
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

// isTerminal says whether w is a terminal: progress lines are for people
// watching, not for CI logs.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// statusLine redraws one line in place: elapsed/limit, ops, nemesis.
func statusLine(w io.Writer) func(scenario.Progress) {
	return func(p scenario.Progress) {
		nem := p.Nemesis
		if nem == "" {
			nem = "quiet"
		}
		if len(nem) > 50 {
			nem = nem[:50] + "…"
		}
		fmt.Fprintf(w, "\r\033[K  %5.1fs / %.1fs  %7d ops  nemesis: %s", p.Elapsed.Seconds(), p.TimeLimit.Seconds(), p.Ops, nem)
	}
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

// parseShard reads "i/n" with 1 ≤ i ≤ n.
func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, errors.New("want i/n with 1 ≤ i ≤ n, e.g. 2/3")
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
