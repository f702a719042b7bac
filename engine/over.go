package engine

import (
	"context"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
)

// A story's run has nothing left to show once its faults are over and the
// checkers' allowance has passed: the time limit's tail after that only
// repeats the fault-free cycles the baseline story already judges. So a
// run ends early there, unless Options.FullTime, and says so (Result.
// EndedEarly, Played); a run whose story never happened (a trap that never sprang, a
// fault still in force) runs to its time limit, as before.

// endsEarly says the run may end before its time limit: a story with a
// fault it requires, told without FullTime.
func (r *runner) endsEarly() bool {
	return !r.o.FullTime && len(r.s.Requires) > 0
}

// over says the story is over at now (harness ns): the gate has no trap
// or pause left, every fault the run started has ended, and the allowance
// and a TTL have passed since the last fault op, time for a stuck key to
// read as a deadlock (Liveness needs a failed try after the allowance);
// and the history holds the evidence and traffic the story requires. The
// history is read only when the cheap signs say it may be over and have
// changed since it was last read (looked).
func (r *runner) over(now int64, looked *[2]int64) bool {
	lastOp, attempts := r.rec.LastNemesis(), int64(r.rec.Attempts())
	tail := Allowance(r.s, r.info, r.o.TTL) + r.o.TTL
	if lastOp == 0 || time.Duration(now-lastOp) < tail || *looked == [2]int64{lastOp, attempts} || !r.env.Gate.Idle() {
		return false
	}
	*looked = [2]int64{lastOp, attempts}
	ops := r.rec.Ops()
	if _, settled := fault.Settled(ops); !settled {
		return false
	}
	return verdict.Vacuity(r.s.Requires, r.s.TrafficOf(r.o.Params), ops) == ""
}

// endWhenOver calls end once the story is over, looking every tenth of a
// TTL, until stop ends (the time limit, an abort). The schedule has taken
// its last step when it is called.
func (r *runner) endWhenOver(stop context.Context, end func()) {
	tick := time.NewTicker(max(r.o.TTL/10, 10*time.Millisecond))
	defer tick.Stop()
	var looked [2]int64
	for {
		select {
		case <-stop.Done():
			return
		case <-tick.C:
			now := r.rec.Now()
			if !r.over(now, &looked) {
				continue
			}
			// The time limit may have ended the run meanwhile.
			if r.early = r.ended.CompareAndSwap(0, now); r.early {
				r.logf("story over at %.1fs of its %s time limit: the run ends early", float64(now-r.res.Ready)/1e9, r.o.TimeLimit)
			}
			end()
			return
		}
	}
}
