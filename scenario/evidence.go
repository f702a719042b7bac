package scenario

import (
	"fmt"
	"strings"

	"github.com/locktorture/locktorture/history"
)

// Evidence is a nemesis action a story needs to have happened, as the
// history records it: an op of the nemesis process with function F that
// completed ok, whose target contains Target. A story whose evidence is
// missing did not happen, and its run proves nothing either way.
type Evidence struct {
	// F is the nemesis op's function: "pause", "stall", "crash",
	// "clock-bump", "kill", "restart", "partition-start", ...
	F string
	// Target, if set, must be part of the op's target ("before-write",
	// "n3", "in release").
	Target string
}

func (e Evidence) String() string {
	if e.Target == "" {
		return e.F
	}
	return fmt.Sprintf("%s at %q", e.F, e.Target)
}

// Traffic is the least traffic a story needs around its fault, as etcd's
// robustness tests want a minimal rate: lock attempts that completed (ok or
// fail) before the fault, while it lasted (pauses and stalls, whose length
// the history records), and after it. Too little, and a clean verdict says
// nothing.
type Traffic struct {
	Before, During, After int
}

// defaultTraffic holds for every story that states none.
var defaultTraffic = Traffic{Before: 3, During: 1, After: 3}

// Vacuous is the outcome of a run whose story did not happen: a required
// fault never fired, or too few clients were at work around it. It never
// matches an expectation.
const Vacuous = "vacuous"

// vacuity says, in one line, why the run in ops did not tell the story s
// tells, or "" when it did. Requires[0] is the story's fault: traffic is
// counted around its first occurrence.
func vacuity(s Scenario, ops []history.Op) string {
	var fault *history.Op
	for i, e := range s.Requires {
		op := find(ops, e)
		if op == nil {
			return fmt.Sprintf("required fault never happened: %s", e)
		}
		if i == 0 {
			fault = op
		}
	}
	if fault == nil {
		return ""
	}
	floor := s.Traffic
	if floor == (Traffic{}) {
		floor = defaultTraffic
	}
	start := fault.Time
	end := start
	if (fault.F == history.Pause || fault.F == "stall") && fault.Value != nil {
		end += fault.Value.Duration
	}
	var before, during, after int
	for _, op := range ops {
		if op.F != history.Acquire || (op.Type != history.OK && op.Type != history.Fail) {
			continue
		}
		switch {
		case op.Time < start:
			before++
		case op.Time <= end:
			during++
		default:
			after++
		}
	}
	counts := []struct {
		when      string
		got, want int
	}{{"before", before, floor.Before}, {"during", during, floor.During}, {"after", after, floor.After}}
	for _, c := range counts {
		if c.when == "during" && end == start {
			continue
		}
		if c.got < c.want {
			return fmt.Sprintf("too little traffic %s %s: %d lock attempts completed, the story needs %d", c.when, s.Requires[0], c.got, c.want)
		}
	}
	return ""
}

// find returns the first nemesis op that is evidence e, or nil.
func find(ops []history.Op, e Evidence) *history.Op {
	for i, op := range ops {
		if op.Process != history.NemesisProcess || op.Type != history.OK || op.F != e.F {
			continue
		}
		if e.Target != "" && (op.Value == nil || !strings.Contains(op.Value.Target, e.Target)) {
			continue
		}
		return &ops[i]
	}
	return nil
}
