package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/sweep"
)

// sweepMode runs one story over a range of one parameter. Its locks are
// the ones -lock names, not a -service's, and its faults its story's, so
// it takes no -service and no -probe.
var sweepMode = mode{flag: "sweep", does: "runs one story over a range of one parameter",
	takes: slices.Concat(runFlags, []string{"scenario", "shard", "runs"}),
	run: func(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
		if len(split(f.scenarios)) != 1 || f.scenarios == "all" {
			fmt.Fprintln(stderr, "run: -sweep runs one story: name it with -scenario")
			return 2
		}
		base := f.runOptions(stdout)
		base.Scenario = f.scenarios
		return runSweep(ctx, base, f.sweep, f.runs, split(f.lockNames), f.shard, f.parallel, stdout, stderr)
	}}

// runSweep runs package sweep for one story and the locks named, and
// prints its table. Exit status: 0 the sweep ran and every run was
// judged, 1 some run could not be judged (its cell says why), 2 bad
// usage, 130 interrupted.
func runSweep(ctx context.Context, base engine.Options, spec string, runs int, locks []string, shard string, parallel int, stdout, stderr io.Writer) int {
	sp, err := sweep.ParseSpec(spec)
	if err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 2
	}
	if len(locks) == 0 {
		fmt.Fprintln(stderr, "run: -sweep needs -lock (one or more locks, one curve each)")
		return 2
	}
	s, err := scenario.Lookup(base.Scenario)
	if err != nil {
		fmt.Fprintf(stderr, "run: -sweep: %v\n", err)
		return 2
	}
	p, ok := sweep.ParamOf(s, sp.Param, base.TTL)
	switch {
	case !ok:
		fmt.Fprintf(stderr, "run: -sweep: scenario %s has no parameter %q (it has: %s)\n", s.Name, sp.Param, strings.Join(sweepParams(s), ", "))
		return 2
	case sp.From < p.Min || sp.To > p.Max:
		fmt.Fprintf(stderr, "run: -sweep %s: scenario %s is told with %s from %g to %g %s\n", spec, s.Name, p.Name, p.Min, p.Max, p.Unit)
		return 2
	}
	// Every lock at every point must resolve before a run starts (a node
	// count must be odd at each, a count of keys or clients whole).
	for _, l := range locks {
		for _, v := range sp.Values() {
			if err := sweep.CheckAt(s, sp.Param, v); err != nil {
				fmt.Fprintf(stderr, "run: -sweep %s: %v\n", spec, err)
				return 2
			}
			o := sweep.RunAt(s, base, sp.Param, v)
			o.Lock = l
			if _, err := engine.Resolve(o); err != nil {
				fmt.Fprintf(stderr, "run: -sweep %s=%g: %v\n", sp.Param, v, err)
				return 2
			}
		}
	}
	o := sweep.Options{Run: base, Locks: locks, Spec: sp, Runs: runs, Parallel: parallel,
		Logf: func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }}
	if shard != "" {
		if o.Shard, o.Shards, err = parseShard(shard, getenv); err != nil {
			fmt.Fprintf(stderr, "run: -shard %s: %v\n", shard, err)
			return 2
		}
	}
	sw, err := sweep.Run(ctx, o)
	if ctx.Err() != nil {
		_ = report.WriteIndex(base.Out)
		return 130
	}
	if err != nil {
		fmt.Fprintf(stderr, "run: -sweep: %v\n", err)
		return 1
	}
	return printSweep(sw, stdout, base.Out)
}

// sweepParams names what a sweep of s can vary: its parameters, the TTL
// and the workload's (hold, think, keys, clients).
func sweepParams(s scenario.Scenario) []string {
	var out []string
	for _, p := range s.Params {
		out = append(out, p.Name)
	}
	out = append(out, sweep.TTLParam)
	for _, w := range sweep.WorkloadParams {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// printSweep prints a sweep's table and where its files are.
func printSweep(sw *sweep.Sweep, stdout io.Writer, out string) int {
	var b strings.Builder
	sw.Table(&b)
	fmt.Fprintf(stdout, "\n%s\nplots and table in %s (sweep.png: P(violation); sweep-figures.png: writes lost and time double-held; sweep.md)\n", b.String(), sw.Dir)
	_ = report.WriteIndex(out)
	for _, c := range sw.Cells {
		if len(c.Unjudged) > 0 {
			return 1
		}
	}
	return 0
}
