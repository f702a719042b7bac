package engine

import (
	"context"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
)

// A story's time limit leaves room for a slow machine; on a quick one the
// rest after its faults repeats fault-free cycles that the baseline story
// already judges. So a run ends early once its story is over, unless
// Options.FullTime, and says so (Result.EndedEarly, Played). A run whose
// story did not happen (a trap that never sprang), whose fault is still on
// or whose lock is not handing its keys on runs to its time limit and is
// judged as before.

// endsEarly says the run may end before its time limit: a story with a
// fault it requires, told without FullTime.
func (r *runner) endsEarly() bool {
	return !r.o.FullTime && len(r.s.Requires) > 0
}

// overState is what endWhenOver remembers between looks, so that the
// history is copied only when it may tell something new.
type overState struct {
	// settledFor is the last nemesis op for which the faults were found
	// settled or not (settled); vacuityAt is when the evidence was last
	// looked for.
	settledFor int64
	settled    bool
	vacuityAt  int64
}

// over says the story is over at now (harness ns):
//   - nothing of the fault is left to come: the gate has no trap armed or
//     springing and no client paused, no action the plan put off is still
//     at work (Env.Busy), and every fault the run started has ended
//     (fault.Settled);
//   - the checkers' allowance and a TTL have passed since the last fault
//     op;
//   - every key tried has been granted since that op and within the last
//     TTL: the lock is handing it on, so no stall is cut short (a lock
//     that deadlocks runs to its time limit, and reads as it did);
//   - the history holds the evidence and the traffic the story requires
//     (verdict.Vacuity), looked for at most once a TTL.
func (r *runner) over(now int64, st *overState) bool {
	lastOp, tail := r.rec.LastNemesis(), Allowance(r.s, r.info, r.o.TTL)+r.o.TTL
	if lastOp == 0 || time.Duration(now-lastOp) < tail || r.env.Busy() || !r.env.Gate.Idle() {
		return false
	}
	for _, at := range r.rec.Grants() {
		if at < lastOp || time.Duration(now-at) > r.o.TTL {
			return false
		}
	}
	if st.settledFor == lastOp && !st.settled || time.Duration(now-st.vacuityAt) < r.o.TTL {
		return false
	}
	ops := r.rec.Ops()
	last, settled := fault.Settled(ops)
	st.settledFor, st.settled = lastOp, settled
	// A fault op recorded since LastNemesis was read is in the copy.
	if !settled || time.Duration(now-last) < tail {
		return false
	}
	st.vacuityAt = now
	return verdict.Vacuity(r.s.Requires, r.s.TrafficOf(r.o.Params), ops) == ""
}

// endWhenOver calls end once the story is over, looking every tenth of a
// TTL, until stop ends (the time limit, an abort). The schedule has taken
// its last step when it is called.
func (r *runner) endWhenOver(stop context.Context, end func()) {
	tick := time.NewTicker(max(r.o.TTL/10, 10*time.Millisecond))
	defer tick.Stop()
	st := overState{vacuityAt: -int64(r.o.TTL)}
	for {
		select {
		case <-stop.Done():
			return
		case <-tick.C:
			now := r.rec.Now()
			if !r.over(now, &st) {
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
