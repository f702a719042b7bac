package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/explore"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
)

// exploreMode explores each -lock's command boundaries. It picks its own
// stories and faults, so of the flags it takes only those that shape each
// run (runFlags).
var exploreMode = mode{flag: "explore", does: "picks its own runs (scenario boundary at each boundary it learns)", takes: runFlags,
	run: func(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
		return exploreBoundaries(ctx, f.runOptions(stdout), split(f.lockNames), f.parallel, stdout, stderr)
	}}

// exploreBoundaries runs package explore over each lock named, one lock
// after another (each spreads its runs over the seats), and prints each
// lock's coverage as it ends. Exit status: 0 no finding and every run
// carried out, 1 a finding or a run that failed, 2 bad usage, 130
// interrupted.
func exploreBoundaries(ctx context.Context, base engine.Options, names []string, parallel int, stdout, stderr io.Writer) int {
	if len(names) == 0 {
		fmt.Fprintf(stderr, "run: -explore needs -lock (one or more of %s)\n", strings.Join(locks.Names(), ", "))
		return 2
	}
	for _, n := range names {
		info, err := locks.Lookup(n)
		if err != nil {
			fmt.Fprintf(stderr, "run: %v\n", err)
			return 2
		}
		if info.ServerKind() != locks.ServerRedis {
			fmt.Fprintf(stderr, "run: -explore: lock %s talks to its %s server through a client of its own, whose commands the harness does not see: it has no command boundaries to explore\n", n, info.ServerKind())
			return 2
		}
		// Both stories must take the flags before the warm-up starts; any
		// probe stands for the ones it will learn.
		o := base
		o.Scenario, o.Lock = "warm-up", n
		b := o
		b.Scenario, b.Probe = "boundary", &scenario.Probe{At: nemesis.Boundary{In: history.Acquire, Command: "SET", Nth: 1}}
		for _, o := range []engine.Options{o, b} {
			if _, err := engine.Resolve(o); err != nil {
				fmt.Fprintf(stderr, "run: %v\n", err)
				return 2
			}
		}
	}
	code := 0
	for _, n := range names {
		o := base
		o.Lock = n
		cov, err := explore.Boundaries(ctx, explore.Options{Run: o, Parallel: parallel,
			Logf: func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }})
		if ctx.Err() != nil {
			_ = report.WriteIndex(base.Out)
			return 130
		}
		if err != nil {
			fmt.Fprintf(stderr, "run: %s: %v\n", n, err)
			code = 1
			continue
		}
		fmt.Fprintln(stdout)
		cov.Text(stdout)
		fmt.Fprintf(stdout, "coverage in %s\n\n", filepath.Join(cov.Dir, "coverage.txt"))
		if len(cov.Findings()) > 0 || len(cov.Failed()) > 0 {
			code = 1
		}
	}
	if err := report.WriteIndex(base.Out); err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 1
	}
	return code
}
