package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/sweep"
)

// mergeMode joins what shards wrote, and runs nothing.
var mergeMode = mode{flag: "merge", does: "joins the results of shards that already ran", takes: []string{"out"},
	run: func(_ context.Context, f *flags, stdout, stderr io.Writer) int {
		return mergeDirs(split(f.merge), f.out, stdout, stderr)
	}}

// mergeDirs joins shard directories into out: a sweep's shards into one
// sweep, a matrix's into one matrix (sweepShards tells which).
func mergeDirs(dirs []string, out string, stdout, stderr io.Writer) int {
	isSweep, err := sweepShards(dirs)
	if err != nil {
		fmt.Fprintf(stderr, "run: -merge: %v\n", err)
		return 2
	}
	if !isSweep {
		return mergeShards(dirs, out, stdout, stderr)
	}
	sw, err := sweep.Merge(dirs, out)
	if err != nil {
		fmt.Fprintf(stderr, "run: -merge: %v\n", err)
		return 1
	}
	return printSweep(sw, stdout, out)
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

// sweepShards says whether every one of dirs holds a sweep (its -out, or
// the sweep's own directory), so -merge joins them as a sweep; a matrix
// shard holds a summary.json. Some of each, or neither, is an error.
func sweepShards(dirs []string) (bool, error) {
	sweeps := 0
	for _, d := range dirs {
		nested, _ := filepath.Glob(filepath.Join(d, "sweeps", "*", "*", "sweep.json"))
		own, _ := filepath.Glob(filepath.Join(d, "sweep.json"))
		summary, _ := filepath.Glob(filepath.Join(d, "summary.json"))
		switch {
		case len(nested)+len(own) > 0 && len(summary) > 0:
			return false, fmt.Errorf("%s holds both a matrix (summary.json) and a sweep: give each its own -out", d)
		case len(nested)+len(own) > 0:
			sweeps++
		}
	}
	if sweeps > 0 && sweeps < len(dirs) {
		return false, errors.New("some directories hold a sweep and some do not: merge a sweep's shards or a matrix's, not both")
	}
	return sweeps > 0, nil
}
