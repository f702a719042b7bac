package checker

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Fairness compares grant order with arrival order: a client that started
// waiting for a key clearly (by more than Margin) after another, yet was
// granted it while the other still waited, overtook it, whether the other
// was served later or gave up (its acquire failed when its wait ran out).
// A fair (FIFO) lock shows no overtaking.
type Fairness struct {
	// Margin is how much earlier an arrival must be to count as earlier:
	// the harness stamps the invoke a little before the lock's first
	// command reaches Redis.
	Margin time.Duration
}

// Name is FairnessName.
func (Fairness) Name() Name { return FairnessName }

// Check reports overtakings.
func (f Fairness) Check(ops []history.Op) Verdict {
	v, _ := f.judge(ops, nil, true)
	return v
}

// wait is one acquire that ended in a grant or a give-up, or, in a
// Stream's segment that is not the last, is still waiting at its end.
type wait struct {
	process     int
	key         string
	arrive, end int64
	granted     bool
	pending     bool
}

// fairnessCarry is what fairness carries from a Stream's segment to the
// next: the grants that overtook a wait still in flight at the cut, by its
// process, counted once the wait ends in a grant or a give-up (a wait that
// never ends, or ends in an unknown outcome, is not judged, as in a whole
// history).
type fairnessCarry struct {
	overtaken map[int][]wait
}

// judge judges ops after what before (nil: nothing) carries; a wait with
// no outcome is carried unless last.
func (f Fairness) judge(ops []history.Op, before *fairnessCarry, last bool) (Verdict, *fairnessCarry) {
	v := Verdict{Checker: FairnessName, Valid: Valid}
	carried := map[int][]wait{}
	if before != nil {
		carried = before.overtaken
	}
	next := &fairnessCarry{overtaken: map[int][]wait{}}
	var ws []wait
	grants := 0
	count := 0
	overtake := func(a, b wait) {
		count++
		text := fmt.Sprintf("process %d arrived %s after process %d but was granted %q %s before it",
			b.process, span(b.arrive-a.arrive), a.process, a.key, span(a.end-b.end))
		if !a.granted {
			text = fmt.Sprintf("process %d arrived %s after process %d and was granted %q while process %d waited; process %d gave up %s later",
				b.process, span(b.arrive-a.arrive), a.process, a.key, a.process, a.process, span(a.end-b.end))
		}
		v.add(Anomaly{Kind: "overtaken", Key: a.key, Processes: []int{a.process, b.process}, Start: b.end, End: a.end, Text: text})
	}
	for _, p := range history.Pairs(ops) {
		if p.Invoke.F != history.Acquire || p.Invoke.Process < 0 {
			continue
		}
		w := wait{process: p.Invoke.Process, key: p.Invoke.Key, arrive: p.Invoke.Time}
		switch {
		case p.Completion == nil:
			if last {
				continue
			}
			w.pending, w.end = true, math.MaxInt64
			next.overtaken[w.process] = slices.Clone(carried[w.process])
		case p.Completion.Type == history.OK:
			grants++
			w.end, w.granted = p.Completion.Time, true
		case p.Completion.Type == history.Fail:
			w.end = p.Completion.Time
		default:
			continue
		}
		if !w.pending {
			// The grants that overtook it while it waited across a cut.
			for _, b := range carried[w.process] {
				overtake(w, b)
			}
		}
		delete(carried, w.process)
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].arrive < ws[j].arrive })
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if b.arrive >= a.end {
				break // b arrived after a was served or gave up: not waiting together
			}
			if !b.granted || b.key != a.key || b.arrive <= a.arrive+int64(f.Margin) || b.end >= a.end {
				continue
			}
			if a.pending {
				next.overtaken[a.process] = append(next.overtaken[a.process], b)
				continue
			}
			overtake(a, b)
		}
	}
	v.Details.Grants = grants
	v.Details.Overtakings = count
	return v, next
}
