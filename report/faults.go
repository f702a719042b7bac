package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/locktorture/locktorture/history"
)

// Fault is one nemesis fault as it lasted: from the action that started it
// to the one that ended it (or the end of the run). Instantaneous actions
// (a crash, a promotion) have End == Start.
type Fault struct {
	Kind   string
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

// Faults pairs the nemesis actions of a history into faults.
func Faults(ops []history.Op) []Fault {
	var out []Fault
	open := map[string]int{} // fault key → index in out
	var end int64
	if len(ops) > 0 {
		end = ops[len(ops)-1].Time
	}
	begin := func(key, kind, target string, at int64) {
		open[key] = len(out)
		out = append(out, Fault{Kind: kind, Target: target, Start: at, End: -1})
	}
	finish := func(key string, at int64) {
		if i, ok := open[key]; ok {
			out[i].End = at
			delete(open, key)
		}
	}
	// offset: the target's clock is now off by dur; that replaces any
	// offset it had, and zero means it is back to true time.
	offset := func(key, kind, target string, dur, at int64) {
		finish(key, at)
		if dur != 0 {
			begin(key, kind, fmt.Sprintf("%s %+.3fs", target, float64(dur)/1e9), at)
		}
	}
	finishPrefix := func(prefix string, at int64) {
		for k := range open {
			if strings.HasPrefix(k, prefix) {
				finish(k, at)
			}
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
		t := op.Time
		switch op.F {
		case history.Pause, "stall":
			begin("pause "+target, op.F, target, t)
		case history.Resume:
			finish("pause "+target, t)
		case "partition-start":
			begin("partition "+target, "partition", target, t)
		case "partition-end":
			// Heal undoes every cut and every delay.
			finishPrefix("partition ", t)
			finishPrefix("latency ", t)
		case "latency-start":
			link := strings.Fields(target)[0]
			finish("latency "+link, t)
			begin("latency "+link, "latency", target, t)
		case "latency-end":
			finish("latency "+strings.Fields(target)[0], t)
		case "node-pause":
			begin("node-pause "+target, "node pause", target, t)
		case "node-resume":
			finish("node-pause "+target, t)
		case "kill", "power-loss":
			begin("down "+target, op.F, target, t)
		case "restart":
			finish("down "+target, t)
		case "clock-bump":
			offset("clock "+target, "clock", target, dur, t)
		case "clock-reset":
			finishPrefix("clock ", t)
		case "clock-strobe-start":
			begin("strobe "+target, "clock strobe", target, t)
		case "clock-strobe-end":
			finishPrefix("strobe "+target, t)
		case "clock-skew":
			offset("skew "+target, "client clock", target, dur, t)
		case history.Starved:
			// The gate's word on the run (the summary's starved line), not
			// a fault.
		default:
			out = append(out, Fault{Kind: op.F, Target: target, Start: t, End: t})
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
