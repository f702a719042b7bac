package report

import (
	"fmt"
	"sort"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Fault is one nemesis fault as it lasted: from the action that started it
// to the one that ended it (or the end of the run). Instantaneous actions
// (a crash, a promotion) have End == Start.
type Fault struct {
	// Kind is what a person calls the fault: its op's label in the fault
	// table ("partition", "node pause"), or the op itself where the table
	// does not know it.
	Kind string
	// Target is where it acted, in the words the history records.
	Target string
	Start  int64
	End    int64
}

// Text says what the fault was, for a person.
func (f Fault) Text() string {
	if f.Target == "" {
		return f.Kind
	}
	return f.Kind + " " + f.Target
}

// Faults pairs the nemesis actions of a history into faults, shaped as the
// fault table says: an interval or a span lasts from its op to the op that
// ends it at the same place (or an end on every place: a heal, a clock
// reset), a clock offset until the next one at its place, an instant is
// over at its time. A second start at a place where one is still on ends
// the first there: it is what the place is under from then on.
func Faults(ops []history.Op) []Fault {
	type key struct {
		op    fault.Op
		place string
	}
	var out []Fault
	open := map[key]int{} // → index in out
	var end int64
	if len(ops) > 0 {
		end = ops[len(ops)-1].Time
	}
	begin := func(k key, kind, target string, at int64) {
		open[k] = len(out)
		out = append(out, Fault{Kind: kind, Target: target, Start: at, End: -1})
	}
	finish := func(k key, at int64) {
		if i, ok := open[k]; ok {
			out[i].End = at
			delete(open, k)
		}
	}
	for _, op := range ops {
		if op.Process != history.NemesisProcess || op.Type != history.OK {
			continue
		}
		target := ""
		var dur int64
		if op.Value != nil {
			target, dur = op.Value.Target, op.Value.Duration
		}
		f := fault.Op(op.F)
		spec, known := fault.Lookup(f)
		k := key{f, fault.Place(op)}
		t := op.Time
		switch {
		case !known:
			out = append(out, Fault{Kind: op.F, Target: target, Start: t, End: t})
		case spec.Shape == fault.Note:
			// The gate's word on the run (the summary's starved line), not
			// a fault.
		case spec.Shape == fault.Instant:
			out = append(out, Fault{Kind: spec.Label, Target: target, Start: t, End: t})
		case spec.Shape == fault.End:
			every := op.Site().All
			for _, started := range fault.EndedBy(f) {
				if !every {
					finish(key{started, k.place}, t)
					continue
				}
				for o := range open {
					if o.op == started {
						finish(o, t)
					}
				}
			}
		case spec.Shape == fault.Offset:
			// The clock is now off by dur: that replaces any offset it
			// had, and zero means it is back to true time.
			finish(k, t)
			if dur != 0 {
				begin(k, spec.Label, fmt.Sprintf("%s %+.3fs", target, float64(dur)/1e9), t)
			}
		default: // an interval or a span
			finish(k, t)
			begin(k, spec.Label, target, t)
		}
	}
	for i := range out {
		if out[i].End < 0 {
			out[i].End = end
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// During lists the faults active at some point in [from, to], or that
// happened in it, in words.
func During(faults []Fault, from, to int64) []string {
	var out []string
	for _, f := range faults {
		if f.Start <= to && f.End >= from {
			out = append(out, fmt.Sprintf("%s (%s–%s)", f.Text(), secs(f.Start), secs(f.End)))
		}
	}
	return out
}

func secs(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }
