package explore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// Faults are the faults a probe does at a boundary, as Options.Faults
// names them.
var Faults = []string{"pause", "crash"}

// Check says, in one line, what is wrong with o before anything runs: an
// op kind or a fault it does not know, a share outside [0, 1), or run
// options the warm-up or the boundary story refuses (engine.Resolve), or
// a lock whose commands the gate cannot see. An exploration that would
// fail only after its warm-up wastes the warm-up.
func Check(o Options) error {
	if o.Run.Lock == "" {
		return fmt.Errorf("no lock to explore (Run.Lock is empty)")
	}
	for _, op := range o.Ops {
		if !slices.Contains(OpKinds, op) {
			return fmt.Errorf("op kind %q: want one of %s", op, strings.Join(OpKinds, ", "))
		}
	}
	for _, f := range o.Faults {
		if !slices.Contains(Faults, f) {
			return fmt.Errorf("fault %q: want one of %s", f, strings.Join(Faults, ", "))
		}
	}
	if !(o.Share >= 0 && o.Share < 1) { // NaN too
		return fmt.Errorf("share %g: want a fraction of an op kind's ops from 0 to below 1", o.Share)
	}
	if o.Parallel < 0 {
		return fmt.Errorf("parallel %d: want 0 (the machine's seats) or more", o.Parallel)
	}
	// Any probe stands for the ones the warm-up will learn.
	b := storyRun("boundary", o.Run)
	b.Probe = &scenario.Probe{At: nemesis.Boundary{In: history.Acquire, Command: "SET", Nth: 1}}
	for _, ro := range []engine.Options{storyRun("warm-up", o.Run), b} {
		p, err := engine.Resolve(ro)
		if err != nil {
			return err
		}
		if kind := p.Lock.ServerKind(); kind != locks.ServerRedis {
			return fmt.Errorf("lock %s talks to its %s server through a client of its own, whose commands the harness does not see: it has no command boundaries to explore", o.Run.Lock, kind)
		}
	}
	return nil
}

// storyRun is o for a run of the story named. A lock of the user's own
// (Custom) with no Expect is judged by what the story's rules say of its
// traits (engine.Resolve): every exploration story's one rule
// (PromiseKept, against the lock's claims) picks every lock.
func storyRun(story string, o engine.Options) engine.Options {
	o.Scenario = story
	return o
}

// Cost is what one run took of the machine's room: the seat-seconds it
// held (a second of one seat; a run alone holds every seat), a first try
// that starved included, and that try's directory, kept as
// engine.RunUnstarved keeps it ("" when there was none).
type Cost struct {
	SeatSeconds float64
	Starved     string
}

// RunOne runs o as engine.RunUnstarved does and says what it cost: from
// when each try had its seats (Result.Started) until it gave them up,
// times the seats it took.
func RunOne(ctx context.Context, o engine.Options, logf func(format string, args ...any)) (*engine.Result, Cost, error) {
	res, held, err := runSeated(ctx, o)
	if err != nil || res.Outcome != verdict.Starved {
		return res, Cost{SeatSeconds: held}, err
	}
	logf("%s / %s starved (%s); its run is kept in %s; running it once more, alone", res.Scenario, res.Lock, res.Starved, res.Dir)
	o.Alone = true
	again, more, err := runSeated(ctx, o)
	return again, Cost{SeatSeconds: held + more, Starved: res.Dir}, err
}

// runSeated is one engine.Run and the seat-seconds it held.
func runSeated(ctx context.Context, o engine.Options) (*engine.Result, float64, error) {
	res, err := engine.Run(ctx, o)
	if res == nil || res.Started.IsZero() {
		return res, 0, err
	}
	// Run gives its seats up as it returns.
	return res, time.Since(res.Started).Seconds() * float64(res.Seats), err
}
