package verdict

import (
	"fmt"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Traffic is the least traffic a story needs around its fault, as etcd's
// robustness tests want a minimal rate: lock attempts that completed (ok or
// fail) before the fault, while it lasted (pauses and stalls, whose length
// the history records), and after it. Too little, and a clean verdict says
// nothing.
type Traffic struct {
	Before int `json:"before,omitempty"`
	During int `json:"during,omitempty"`
	After  int `json:"after,omitempty"`
}

// defaultTraffic holds for every story that states none.
var defaultTraffic = Traffic{Before: 3, During: 1, After: 3}

// Vacuity says, in one line, why the run in ops did not tell the story
// whose evidence is requires, or "" when it did. requires[0] is the
// story's fault: traffic (zero: the default floor) is counted around its
// first occurrence.
func Vacuity(requires []fault.Evidence, traffic Traffic, ops []history.Op) string {
	var first *history.Op
	for i, e := range requires {
		op := e.First(ops)
		if op == nil {
			return fmt.Sprintf("required fault never happened: %s", e)
		}
		if i == 0 {
			first = op
		}
	}
	if first == nil {
		return ""
	}
	floor := traffic
	if floor == (Traffic{}) {
		floor = defaultTraffic
	}
	start := first.Time
	end := start
	if spec, _ := fault.Lookup(fault.Op(first.F)); spec.Shape == fault.Span && first.Value != nil {
		end += first.Value.Duration
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
			return fmt.Sprintf("too little traffic %s %s: %d lock attempts completed, the story needs %d", c.when, requires[0], c.got, c.want)
		}
	}
	return ""
}
