package engine

import (
	"context"

	"github.com/locktorture/locktorture/verdict"
)

// RunUnstarved runs o as Run does and, when that run starved, once more,
// alone on the machine: a starved run is evidence neither way, and what ran
// beside it is the likeliest reason it starved. logf (a test's Logf, say;
// not nil) is told of the starved run, kept in its directory, before the
// second one starts; a second starve is returned as it is and matches
// nothing.
func RunUnstarved(ctx context.Context, o Options, logf func(format string, args ...any)) (*Result, error) {
	res, err := Run(ctx, o)
	if err != nil || res.Outcome != verdict.Starved {
		return res, err
	}
	logf("%s / %s starved (%s); its run is kept in %s; running it once more, alone", res.Scenario, res.Lock, res.Starved, res.Dir)
	o.Alone = true
	return Run(ctx, o)
}
