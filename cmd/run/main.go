// Command run runs named failure scenarios against named lock algorithms on
// real Redis and says whether each behaved as expected.
//
//	go run ./cmd/run -scenario paused-holder -lock set-nx-px
//
// Exit status: 0 every outcome matched its expectation, 1 some did not (or a
// run could not be carried out), 2 bad usage, 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

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
		procs     = fs.Bool("client-procs", false, "run every client as an OS process of its own (pauses are SIGSTOP, crashes SIGKILL)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: run [-scenario S[,S]] [-lock L[,L]] [-clients N] [-ttl D] [-time-limit D] [-seed N] [-out DIR] [-client-procs] [-list]")
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
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	pairs, err := plan(*scenarios, *lockNames)
	if err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 2
	}
	base := scenario.Options{Clients: *clients, TTL: *ttl, TimeLimit: *timeLimit, Seed: *seed, Out: *out, Log: stdout, ClientProcs: *procs}
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
	fmt.Fprintf(stdout, "seed %d\n", *seed)
	matrix := report.Matrix{Started: time.Now(), Seed: *seed}
	for _, p := range pairs {
		o := base
		o.Scenario, o.Lock = p[0], p[1]
		res, err := scenario.Run(ctx, o)
		if o.Progress != nil {
			fmt.Fprint(stdout, "\r\033[K")
		}
		if errors.Is(err, scenario.ErrInterrupted) {
			fmt.Fprintf(stderr, "run: interrupted; partial history in %s/history.jsonl\n", res.Dir)
			return 130
		}
		if err != nil {
			fmt.Fprintf(stderr, "run: %s/%s: %v\n", p[0], p[1], err)
		} else if err = report.Write(res); err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
		}
		if res != nil && res.Outcome != "" {
			report.Summary(stdout, res)
		}
		matrix.Entries = append(matrix.Entries, report.EntryOf(p[0], p[1], res, err))
	}
	if len(pairs) > 1 {
		fmt.Fprintln(stdout)
		report.MatrixTable(stdout, matrix.Entries)
		if err := report.WriteSummary(*out, matrix); err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
			return 1
		}
	}
	if err := report.WriteIndex(*out); err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 1
	}
	failed := 0
	for _, e := range matrix.Entries {
		if !e.Matched {
			failed++
		}
	}
	fmt.Fprintf(stdout, "%d of %d runs matched their expectation; results under %s/\n", len(pairs)-failed, len(pairs), *out)
	if failed > 0 {
		return 1
	}
	return 0
}

// plan expands the -scenario and -lock lists into (scenario, lock) pairs.
// A lock named explicitly must apply to every scenario named; with no -lock,
// each scenario runs every lock it has an expectation for.
func plan(scenarioList, lockList string) ([][2]string, error) {
	var names []string
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
