package engine

import (
	"context"
	"sync"

	"github.com/locktorture/locktorture/verdict"
)

// RunUnstarved runs o as Run does and, when that run starved, once more,
// alone on the machine: a starved run is evidence neither way, and what ran
// beside it is the likeliest reason it starved. logf (a test's Logf, say;
// not nil) is told of the starved run, kept in its directory, before the
// second one starts; a second starve is returned as it is and matches
// nothing.
func RunUnstarved(ctx context.Context, o Options, logf func(format string, args ...any)) (*Result, error) {
	tries, err := RunTries(ctx, o, logf)
	return tries[len(tries)-1], err
}

// RunTries is RunUnstarved, returning each try: the run, and, when it
// starved, the one alone after it (last). What each held of the room is
// its SeatSeconds.
func RunTries(ctx context.Context, o Options, logf func(format string, args ...any)) ([]*Result, error) {
	res, err := Run(ctx, o)
	if err != nil || res.Outcome != verdict.Starved {
		return []*Result{res}, err
	}
	logf("%s / %s starved (%s); its run is kept in %s; running it once more, alone", res.Scenario, res.Lock, res.Starved, res.Dir)
	o.Alone = true
	again, err := Run(ctx, o)
	return []*Result{res, again}, err
}

// Spread calls run(i) for i from 0 to n-1, at most parallel at once, and
// returns when every call it started has returned; once ctx ends it starts
// no more. A matrix, an exploration and a sweep spread their runs over the
// machine's seats with it (each run still takes its seat in the room).
func Spread(ctx context.Context, parallel, n int, run func(i int)) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(parallel, 1))
	for i := 0; i < n; i++ {
		slots <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			run(i)
		}()
	}
	wg.Wait()
}

// Serialized is logf (nil: a log that drops everything) made safe to call
// from runs side by side: their lines never interleave.
func Serialized(logf func(format string, args ...any)) func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		if logf != nil {
			mu.Lock()
			defer mu.Unlock()
			logf(format, args...)
		}
	}
}
