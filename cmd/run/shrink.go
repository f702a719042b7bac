package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/shrink"
)

// shrinkMode shrinks a stored run's finding. The run's own story, lock and
// options are what it replays, so it takes only how many replays, how many
// at once, and where to write.
var shrinkMode = mode{flag: "shrink", does: "replays the run stored in its DIR as that run was told", takes: []string{"runs", "parallel", "out"},
	run: func(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
		// Unset, shrink picks its own default (4), not -sweep's 10.
		replays := 0
		if f.has("runs") {
			replays = f.runs
		}
		return shrinkRun(ctx, f.shrink, replays, f.parallel, f.out, stdout, stderr)
	}}

// shrinkRun shrinks the finding of the run stored in dir (package
// shrink): exit 0 with the smallest schedule written, 1 when the shrink
// failed, 2 when dir holds no run with a finding to shrink.
func shrinkRun(ctx context.Context, dir string, replays, parallel int, out string, stdout, stderr io.Writer) int {
	logf := engine.Serialized(func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) })
	res, err := shrink.Run(ctx, shrink.Options{Dir: dir, Replays: replays, Parallel: parallel, Out: out, Logf: logf})
	if err != nil {
		fmt.Fprintf(stderr, "run: -shrink %v\n", err)
		if res == nil && ctx.Err() == nil {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s / %s: from %d faults and %d clients to %d faults and %d clients, %d tries; the smallest showed %s in %d of %d replays\n",
		res.Story, res.Lock, shrink.Faults(res.From), res.ClientsFrom, shrink.Faults(res.To), res.ClientsTo, len(res.Tries), res.Shows, res.Shown, res.Final)
	for _, w := range res.Removed {
		fmt.Fprintf(stdout, "  %s\n", w)
	}
	fmt.Fprintf(stdout, "wrote %s and %s; replay: run -scenario-file %s -lock %s\n",
		filepath.Join(res.Dir, "scenario.json"), filepath.Join(res.Dir, "shrink.md"), filepath.Join(res.Dir, "scenario.json"), res.Lock)
	return 0
}
