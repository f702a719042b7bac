package explore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
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
	warm, b := o.Run, o.Run
	warm.Scenario, warm.Probe = "warm-up", nil
	b.Scenario, b.Probe = "boundary", &scenario.Probe{At: nemesis.Boundary{In: history.Acquire, Command: "SET", Nth: 1}}
	for _, ro := range []engine.Options{warm, b} {
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

// Cost is what one run took of the machine's room: the seat-seconds it
// held (a second of one seat; a run alone holds every seat), a first try
// that starved included, and that try's directory, kept as
// engine.RunUnstarved keeps it ("" when there was none).
type Cost struct {
	SeatSeconds float64
	Starved     string
}

// RunOne runs o as engine.RunUnstarved does and says what it cost: the
// seats each try held (Result.SeatSeconds), and the starved first try's
// directory where there was one.
func RunOne(ctx context.Context, o engine.Options, logf func(format string, args ...any)) (*engine.Result, Cost, error) {
	tries, err := engine.RunTries(ctx, o, logf)
	var c Cost
	for _, t := range tries {
		c.SeatSeconds += t.SeatSeconds()
	}
	if len(tries) > 1 {
		c.Starved = tries[0].Dir
	}
	return tries[len(tries)-1], c, err
}
