package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/locktorture/locktorture/history"
)

// Hold is one span during which a process believed it held a key: from the
// return of its successful acquire until it invoked release, was retired by
// an unknown outcome, or the history ended.
type Hold struct {
	Key     string
	Process int
	Start   int64
	End     int64
	// Open is true when the history ended with the hold still believed.
	Open bool
}

// Holds extracts every belief interval from a history.
func Holds(ops []history.Op) []Hold {
	var out []Hold
	type at struct {
		key   string
		start int64
	}
	open := map[int]at{}
	var last int64
	closeHold := func(p int, end int64) {
		if h, ok := open[p]; ok {
			out = append(out, Hold{Key: h.key, Process: p, Start: h.start, End: end})
			delete(open, p)
		}
	}
	for _, op := range ops {
		last = op.Time
		if op.Process == history.NemesisProcess {
			continue
		}
		switch {
		case op.F == history.Acquire && op.Type == history.OK:
			open[op.Process] = at{key: op.Key, start: op.Time}
		case op.F == history.Release && op.Type == history.Invoke:
			closeHold(op.Process, op.Time)
		case op.Type == history.Info:
			// A retired process is gone; whatever it believed ends here.
			closeHold(op.Process, op.Time)
		}
	}
	for p, h := range open {
		out = append(out, Hold{Key: h.key, Process: p, Start: h.start, End: last, Open: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Overlap is a span during which two processes held one key: A's hold
// (begun at AStart) was still on when B's began.
type Overlap struct {
	Key        string
	A, B       int
	AStart     int64
	Start, End int64
}

// Overlaps finds every pair of holds of different processes on one key
// that overlap in time, ordered by key, then by the earlier hold's start.
func Overlaps(holds []Hold) []Overlap {
	byKey := map[string][]Hold{}
	for _, h := range holds {
		byKey[h.Key] = append(byKey[h.Key], h)
	}
	var out []Overlap
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		hs := byKey[k]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Start < hs[j].Start })
		for i := range hs {
			for j := i + 1; j < len(hs) && hs[j].Start < hs[i].End; j++ {
				a, b := hs[i], hs[j]
				if a.Process != b.Process {
					out = append(out, Overlap{Key: k, A: a.Process, B: b.Process, AStart: a.Start, Start: b.Start, End: min(a.End, b.End)})
				}
			}
		}
	}
	return out
}

// Intervals finds mutual-exclusion violations as plainly as possible: two
// processes whose belief intervals on one key overlap in real time, whatever
// Redis believed. It names both holders and the span they shared.
type Intervals struct{}

// Name is "intervals".
func (Intervals) Name() string { return "intervals" }

// Check reports every overlapping pair of holds.
func (Intervals) Check(ops []history.Op) Verdict {
	holds := Holds(ops)
	v := Verdict{Checker: "intervals", Valid: Valid, Details: map[string]any{"holds": len(holds)}}
	count := 0
	var overlap int64
	for _, o := range Overlaps(holds) {
		count++
		overlap += o.End - o.Start
		v.add(Anomaly{
			Kind: "double-holder", Key: o.Key, Processes: []int{o.A, o.B},
			Start: o.Start, End: o.End,
			Text: fmt.Sprintf("processes %d and %d both held %q from %s to %s (%s)",
				o.A, o.B, o.Key, seconds(o.Start), seconds(o.End), span(o.End-o.Start)),
		})
	}
	if count > 0 {
		v.Details["double_holders"] = count
		v.Details["overlap_ns"] = overlap
	}
	if n := foreignReleases(ops, holds, &v); n > 0 {
		v.Details["foreign_releases"] = n
	}
	return v
}

// foreignReleases finds releases that succeeded while another process,
// which acquired the key after the releaser did, still held it: the
// release deleted someone else's lock (S3, owner-blind DEL). Two shapes:
//   - the other's hold began before the release was sent and was still on
//     when it was sent;
//   - the other's acquire returned while the release was in flight (its
//     SET may have landed before the DEL), and its own release was then
//     refused while its lease was still promised (Refused): the key it was
//     promised was gone, and the DEL in flight is what took it.
//
// The history cannot say what a DEL deleted: the text says what the
// history shows, and claims the deletion only with the refusal as witness.
func foreignReleases(ops []history.Op, holds []Hold, v *Verdict) int {
	type end struct {
		process int
		key     string
		at      int64
	}
	ended := map[end]Hold{} // a hold by the release invoke that ended it
	byKey := map[string][]Hold{}
	for _, h := range holds {
		ended[end{h.Process, h.Key, h.End}] = h
		byKey[h.Key] = append(byKey[h.Key], h)
	}
	for _, hs := range byKey {
		sort.Slice(hs, func(i, j int) bool { return hs[i].Start < hs[j].Start })
	}
	refused := map[end]Refusal{} // by the release invoke that ended the hold
	for _, r := range Refused(ops) {
		refused[end{r.Process, r.Key, r.End}] = r
	}
	n := 0
	for _, p := range history.Pairs(ops) {
		inv := p.Invoke
		if inv.F != history.Release || p.Completion == nil || p.Completion.Type != history.OK {
			continue
		}
		mine, ok := ended[end{inv.Process, inv.Key, inv.Time}]
		if !ok {
			continue
		}
		hs := byKey[inv.Key]
		// Holds that began after mine and before my release returned...
		i := sort.Search(len(hs), func(i int) bool { return hs[i].Start > mine.Start })
		for ; i < len(hs) && hs[i].Start < p.Completion.Time; i++ {
			q := hs[i]
			if q.Process == inv.Process || q.End <= inv.Time {
				continue
			}
			r, wasRefused := refused[end{q.Process, q.Key, q.End}]
			var text string
			switch {
			case q.Start < inv.Time && wasRefused:
				// ...still on when it was sent, and the victim's own
				// release later refused within its lease;
				text = fmt.Sprintf("process %d's release at %s succeeded while process %d held %q; process %d's own release at %s, "+
					"within its lease, was refused: the key had been deleted from under it",
					inv.Process, seconds(inv.Time), q.Process, inv.Key, q.Process, seconds(r.End))
			case q.Start < inv.Time:
				// ...still on when it was sent;
				text = fmt.Sprintf("process %d's release at %s succeeded while process %d held %q: if it deleted anything, it was process %d's lock",
					inv.Process, seconds(inv.Time), q.Process, inv.Key, q.Process)
			case wasRefused:
				// ...or begun while it was in flight, with the victim's
				// release refused within its lease.
				text = fmt.Sprintf("process %d acquired %q at %s while process %d's release (sent at %s) was in flight; process %d's own release at %s, "+
					"%s later and within its lease, was refused: the release in flight deleted process %d's lock",
					q.Process, inv.Key, seconds(q.Start), inv.Process, seconds(inv.Time), q.Process, seconds(r.End), span(r.End-q.Start), q.Process)
			default:
				continue
			}
			n++
			v.add(Anomaly{Kind: "foreign-release", Key: inv.Key, Processes: []int{inv.Process, q.Process},
				Start: inv.Time, End: p.Completion.Time, Text: text})
		}
	}
	return n
}
