package checker

import (
	"fmt"
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
	v := Verdict{Checker: FairnessName, Valid: Valid}
	// wait is one acquire that ended in a grant or a give-up.
	type wait struct {
		process     int
		key         string
		arrive, end int64
		granted     bool
	}
	var ws []wait
	grants := 0
	for _, p := range history.Pairs(ops) {
		if p.Invoke.F != history.Acquire || p.Completion == nil {
			continue
		}
		switch p.Completion.Type {
		case history.OK:
			grants++
			ws = append(ws, wait{p.Invoke.Process, p.Invoke.Key, p.Invoke.Time, p.Completion.Time, true})
		case history.Fail:
			ws = append(ws, wait{p.Invoke.Process, p.Invoke.Key, p.Invoke.Time, p.Completion.Time, false})
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].arrive < ws[j].arrive })
	count := 0
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if b.arrive >= a.end {
				break // b arrived after a was served or gave up: not waiting together
			}
			if !b.granted || b.key != a.key || b.arrive <= a.arrive+int64(f.Margin) || b.end >= a.end {
				continue
			}
			count++
			text := fmt.Sprintf("process %d arrived %s after process %d but was granted %q %s before it",
				b.process, span(b.arrive-a.arrive), a.process, a.key, span(a.end-b.end))
			if !a.granted {
				text = fmt.Sprintf("process %d arrived %s after process %d and was granted %q while process %d waited; process %d gave up %s later",
					b.process, span(b.arrive-a.arrive), a.process, a.key, a.process, a.process, span(a.end-b.end))
			}
			v.add(Anomaly{Kind: "overtaken", Key: a.key, Processes: []int{a.process, b.process}, Start: b.end, End: a.end, Text: text})
		}
	}
	v.Details.Grants = grants
	v.Details.Overtakings = count
	return v
}
