package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/locktorture/locktorture/explore"
	"github.com/locktorture/locktorture/report"
)

// checkMode judges stored runs again, and starts none: what it reads is
// under its own DIR, and what it rewrites is there too.
var checkMode = mode{flag: "check", does: "judges the runs stored under its DIR again, starting nothing",
	run: func(_ context.Context, f *flags, stdout, stderr io.Writer) int {
		return checkStored(f.check, stdout, stderr)
	}}

// checkStored judges the runs stored under dir again (report.Check), points
// the explorations stored there at their runs' new verdicts, and says, run
// by run, what changed. Exit status: 0 every run judged again
// met its expectation, 1 some did not or could not be judged, 2 no run
// stored there.
func checkStored(dir string, stdout, stderr io.Writer) int {
	if _, err := os.Stat(dir); err != nil {
		fmt.Fprintf(stderr, "run: -check %s: %v\n", dir, errors.Unwrap(err))
		return 2
	}
	runs, err := report.Check(dir)
	if len(runs) == 0 {
		fmt.Fprintf(stderr, "run: -check: %v\n", err)
		return 2
	}
	code, changed := 0, 0
	for _, r := range runs {
		switch {
		case r.Err != nil:
			code = 1
			fmt.Fprintf(stdout, "%s: left as it was: %v\n", r.Dir, r.Err)
		case r.Changed():
			changed++
			fmt.Fprintf(stdout, "%s / %s: was %s (%s), now %s (%s)  %s\n", r.Scenario, r.Lock, r.Before, matchWord(r.WasMatched), r.After, matchWord(r.Matched), r.Dir)
		}
		if r.Err == nil && !r.Matched {
			code = 1
		}
	}
	explorations, rerr := explore.Revise(dir, runs)
	if err = errors.Join(err, rerr); err != nil {
		fmt.Fprintf(stderr, "run: -check: %v\n", err)
		code = 1
	}
	fmt.Fprintf(stdout, "judged %d stored run(s) again: %d changed verdict\n", len(runs), changed)
	if explorations > 0 {
		fmt.Fprintf(stdout, "rewrote the coverage of %d boundary exploration(s) with their runs' verdicts\n", explorations)
	}
	return code
}

func matchWord(m bool) string {
	if m {
		return "matched"
	}
	return "did not match"
}
