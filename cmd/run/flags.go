package main

// The flags, parsed once for every mode. Their names, defaults and
// meanings are what users and scripts type, so they live in one place;
// which of them a mode reads is that mode's declaration (modes.go).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/workloads"
)

// flags holds every flag's value after parsing.
type flags struct {
	scenarios, lockNames, services string
	languages, pairs               string
	clients, parallel, runs        int
	ttl, timeLimit                 time.Duration
	fullTime                       bool
	spawnWorkers                   bool
	seed                           int64
	out, backend, shard, probe     string
	check, merge, sweep, shrink    string
	printStory, storyFiles         string
	list, procs, explore, verbose  bool
	fresh                          bool
	// The user's system: the workload's shape and faults on an interval.
	hold, think, faultEvery, faultFor workloads.Dist
	keys                              int
	fenceReads                        bool
	faults                            []string

	set *flag.FlagSet
	// given names the flags set on the command line. A boolean set to
	// false is left out: false is what its absence means too.
	given []string
}

// usageLine is the first line -h prints, above every flag's own.
const usageLine = "usage: run [-scenario S[,S]] [-lock L[,L]] [-service K[,K]] [-language L[,L]] [-pairs S/L[,S/L]] [-clients N] [-ttl D] [-time-limit D] [-full-time] [-spawn-workers] [-seed N] [-hold D] [-think D] [-keys N] [-fence-reads] [-faults K[,K] -fault-every D -fault-for D] [-out DIR] [-backend local|docker] [-client-procs] [-parallel N] [-fresh] [-shard I/N] [-merge DIR,DIR] [-check DIR] [-probe P] [-explore] [-sweep P=A..B[:N] [-runs N]] [-print-scenario NAME] [-scenario-file F[,F]] [-shrink DIR [-runs N]] [-v] [-list]"

// newFlags declares every flag on a set of its own, for one parse.
func newFlags() *flags {
	f := &flags{set: flag.NewFlagSet("run", flag.ContinueOnError)}
	fs := f.set
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.scenarios, "scenario", "all", "scenario name(s), comma-separated, or all")
	fs.StringVar(&f.lockNames, "lock", "", "lock name(s), comma-separated (default: every lock the scenario has an expectation for)")
	fs.StringVar(&f.services, "service", "", "run only the locks on these server kind(s), comma-separated: "+strings.Join(cluster.Kinds(), ", ")+" (default: every kind)")
	fs.StringVar(&f.languages, "language", "", "run only the locks whose clients are written in these language(s), comma-separated: Go (this repository's own locks and the Go libraries), Python, PHP, Java (default: every language)")
	fs.StringVar(&f.pairs, "pairs", "", "story/lock pairs, comma-separated, instead of -scenario and -lock: exactly these, in one matrix (all on either side: every story, or every lock, with an expectation)")
	fs.IntVar(&f.clients, "clients", 0, "number of clients (default: the scenario's)")
	fs.DurationVar(&f.ttl, "ttl", 0, "lease time (default: the scenario's)")
	fs.DurationVar(&f.timeLimit, "time-limit", 0, "how long clients keep working (default: the scenario's)")
	fs.BoolVar(&f.spawnWorkers, "spawn-workers", false, "start every worker as an interpreter of its own (default: a Python library's workers are forks of one interpreter that imported it once)")
	fs.BoolVar(&f.fullTime, "full-time", false, "keep every run's clients working to its time limit (default: a story's run ends once its faults are over, its evidence is in and the checkers' allowance has passed)")
	fs.Int64Var(&f.seed, "seed", 0, "random seed, stored with the run (default: from the clock)")
	fs.StringVar(&f.out, "out", "results", "results directory")
	fs.BoolVar(&f.list, "list", false, "list scenarios and locks, then exit")
	fs.StringVar(&f.backend, "backend", cluster.Local, "which `backend` runs the Redis nodes: "+strings.Join(cluster.Backends(), " or ")+" (docker: containers from a local image that make setup builds)")
	fs.BoolVar(&f.procs, "client-procs", false, "run every client as an OS process of its own (pauses are SIGSTOP, crashes SIGKILL)")
	fs.IntVar(&f.parallel, "parallel", engine.Seats(), "pairs run at once (default: the room's seats, three per core); each takes its seats, a third of a core for a light pair, two thirds else, the machine for a timing-sensitive story")
	fs.BoolVar(&f.fresh, "fresh", false, "start every pair's servers afresh (default: a lock service's servers, ZooKeeper's, etcd's, PostgreSQL's, MariaDB's, that a pair left unfaulted and answering are reset and kept for the next pair of the same topology)")
	fs.StringVar(&f.shard, "shard", "", "run only slice i of n of the pairs (i/n, 1-based), for spreading a matrix over machines; auto[/n] takes i (and n) from a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) or a CI's parallel job (CI_NODE_INDEX, CI_NODE_TOTAL)")
	fs.StringVar(&f.check, "check", "", "judge every run stored under `DIR` (one run, or a results tree) again with today's checkers and rewrite its verdict and report, starting nothing, then exit")
	fs.StringVar(&f.merge, "merge", "", "join the summaries and runs of shard result directories (comma-separated) into -out, then exit")
	fs.StringVar(&f.probe, "probe", "", "scenario boundary's one fault: \"pause|crash OP before|after COMMAND#N\", as -explore lists them")
	fs.BoolVar(&f.explore, "explore", false, "explore every command boundary of each -lock: learn its commands in a fault-free warm-up, then pause a client past its lease, and crash one, at each boundary; a finding is a promise broken under a fault the lock claims to survive")
	fs.StringVar(&f.sweep, "sweep", "", "run one -scenario across a range of one of its parameters, of ttl (the lease in ms, the story's parameters held at their length in time), or of the workload's hold, think (ms, fixed at each point), keys or clients, `PARAM=FROM..TO[:STEPS]`, -runs times a point for each -lock; plot P(violation) with 95% Wilson intervals, and the lost writes and double-held time with 95% t intervals")
	fs.IntVar(&f.runs, "runs", 10, "runs a point of a -sweep gets, for each lock; with -shrink, replays a candidate gets (default 4)")
	fs.StringVar(&f.shrink, "shrink", "", "shrink the finding (or the violation) of the run stored in `DIR` (a random run, a sweep point's, a scenario file's) to a smaller schedule that still shows it, replaying each candidate -runs times (default 4); writes results/shrinks/...")
	fs.StringVar(&f.printStory, "print-scenario", "", "print the built-in scenario `NAME` as a scenario file (JSON), then exit")
	fs.StringVar(&f.storyFiles, "scenario-file", "", "run the stories of these scenario `FILE`s (comma-separated; -print-scenario writes one) instead of -scenario, each with the locks it expects something of (or -lock)")
	fs.Var(distFlag{&f.hold}, "hold", "the critical section's `length`, drawn each cycle: 200ms, a range 80ms..300ms, or exp:200ms (an exponential's mean) (default: the scenario's)")
	fs.Var(distFlag{&f.think}, "think", "the think time between a release and the next acquire, as -hold (default: 0..4ms)")
	fs.IntVar(&f.keys, "keys", 0, fmt.Sprintf("lock keys the clients contend for, each guarding a register of its own, 1 to %d (default: 1)", workloads.MaxKeys))
	fs.BoolVar(&f.fenceReads, "fence-reads", false, "the store checks a fenced lease's token on the read as well as the write (by default on the write alone); clients inside the harness only")
	fs.Var(faultsFlag{&f.faults}, "faults", "with -scenario interval: the fault `kinds` to apply, comma-separated: "+strings.Join(scenario.IntervalKinds(), "; "))
	fs.Var(distFlag{&f.faultEvery}, "fault-every", "with -scenario interval: the time from one fault's start to the next, as -hold (2s, 1s..3s, exp:2s)")
	fs.Var(distFlag{&f.faultFor}, "fault-for", "with -scenario interval: each fault's length, as -hold (500ms, 200ms..1s)")
	fs.BoolVar(&f.verbose, "v", false, "print every pair's block (its log, verdicts and files), not only the blocks of pairs that did not match")
	return f
}

// parseFlags parses args. With -h it prints the usage on stdout; on a
// parse error or a stray argument, one line on stderr. Either way it
// returns no flags and the exit code.
func parseFlags(args []string, stdout, stderr io.Writer) (*flags, int) {
	f := newFlags()
	if err := f.set.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.set.SetOutput(stdout)
			fmt.Fprintln(stdout, usageLine)
			f.set.PrintDefaults()
			return nil, 0
		}
		fmt.Fprintf(stderr, "run: %v (see -h)\n", err)
		return nil, 2
	}
	if f.set.NArg() > 0 {
		fmt.Fprintf(stderr, "run: unexpected argument %q (see -h)\n", f.set.Arg(0))
		return nil, 2
	}
	f.set.Visit(func(fl *flag.Flag) {
		if on, isBool := fl.Value.(flag.Getter).Get().(bool); !isBool || on {
			f.given = append(f.given, fl.Name)
		}
	})
	return f, 0
}

// has says whether the flag name was given.
func (f *flags) has(name string) bool { return slices.Contains(f.given, name) }

// positive names the flags whose zero is no count or length at all.
var positive = []string{"clients", "ttl", "time-limit", "parallel", "runs", "keys"}

// badValue says what is wrong with the first flag given a zero count or
// length, or an empty string, or "" when none was. Such a flag is a typo,
// not a wish for the default: the default is what an omitted flag means.
func (f *flags) badValue() string {
	for _, name := range f.given {
		fl := f.set.Lookup(name)
		switch v := fl.Value.(flag.Getter).Get().(type) {
		case int:
			if v < 1 && slices.Contains(positive, name) {
				return fmt.Sprintf("-%s %s: want a value above zero (omit the flag for the default)", name, fl.Value)
			}
		case time.Duration:
			if v <= 0 && slices.Contains(positive, name) {
				return fmt.Sprintf("-%s %s: want a value above zero (omit the flag for the default)", name, fl.Value)
			}
		case string:
			if strings.TrimSpace(v) == "" {
				return fmt.Sprintf("-%s is empty (omit the flag for the default)", name)
			}
		}
	}
	return ""
}

// runOptions is what every run these flags start shares. Runs start
// after it, so it first removes what runs killed earlier left behind
// (their nodes' temp dirs), saying so, and draws the seed from the clock
// when -seed is not given: the seed is stored with each run.
func (f *flags) runOptions(stdout io.Writer) engine.Options {
	if gone, err := cluster.RemoveLeftovers(""); err == nil && len(gone) > 0 {
		fmt.Fprintf(stdout, "removed %d temp dir(s) left by runs that were killed: %s\n", len(gone), strings.Join(gone, " "))
	}
	if f.seed == 0 {
		f.seed = time.Now().UnixNano()
	}
	return engine.Options{Clients: f.clients, TTL: f.ttl, TimeLimit: f.timeLimit, FullTime: f.fullTime, SpawnWorkers: f.spawnWorkers, Seed: f.seed, Out: f.out,
		ClientProcs: f.procs, Backend: f.backend, Workload: f.workload(), Interval: f.interval()}
}

// workload is the shape the flags give the clients' work.
func (f *flags) workload() workloads.Shape {
	return workloads.Shape{Hold: f.hold, Think: f.think, Keys: f.keys, FenceReads: f.fenceReads}
}

// interval is the faults on an interval the flags give, nil when none of
// its flags is (what is missing, the engine names in one line).
func (f *flags) interval() *scenario.Interval {
	if !f.has("faults") && !f.has("fault-every") && !f.has("fault-for") {
		return nil
	}
	return &scenario.Interval{Faults: f.faults, Every: f.faultEvery, For: f.faultFor}
}

// distFlag reads a workloads.Dist: a bad one is one line, as any flag's.
type distFlag struct{ d *workloads.Dist }

func (v distFlag) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v distFlag) Set(s string) error {
	d, err := workloads.ParseDist(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v distFlag) Get() any { return *v.d }

// faultsFlag reads a list of interval fault kinds.
type faultsFlag struct{ kinds *[]string }

func (v faultsFlag) String() string {
	if v.kinds == nil {
		return ""
	}
	return strings.Join(*v.kinds, ",")
}

func (v faultsFlag) Set(s string) error {
	kinds, err := scenario.ParseFaults(s)
	if err != nil {
		return err
	}
	*v.kinds = kinds
	return nil
}

func (v faultsFlag) Get() any { return *v.kinds }
