package scenario

import "context"

// RunUnstarved runs o as Run does and, when that run starved, once more,
// alone on the machine: a starved run is evidence neither way, and what ran
// beside it is the likeliest reason it starved. note, if not nil, is told
// of the starved run (kept in its directory) before the second one starts,
// so a caller can say that it ran twice; a second starve is returned as it
// is and matches nothing.
func RunUnstarved(ctx context.Context, o Options, note func(starved *Result)) (*Result, error) {
	res, err := Run(ctx, o)
	if err != nil || res.Outcome != Starved {
		return res, err
	}
	if note != nil {
		note(res)
	}
	o.Alone = true
	return Run(ctx, o)
}
