package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Fairness compares grant order with arrival order: a client that started
// waiting for a key clearly (by more than Margin) after another, yet was
// granted it first, overtook it. A fair (FIFO) lock shows no overtaking.
type Fairness struct {
	// Margin is how much earlier an arrival must be to count as earlier:
	// the harness stamps the invoke a little before the lock's first
	// command reaches Redis.
	Margin time.Duration
}

// Name is "fairness".
func (Fairness) Name() string { return "fairness" }

// Check reports overtakings.
func (f Fairness) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: "fairness", Valid: Valid, Details: map[string]any{}}
	type grant struct {
		process       int
		key           string
		arrive, grant int64
	}
	var gs []grant
	for _, p := range history.Pairs(ops) {
		if p.Invoke.F == history.Acquire && p.Completion != nil && p.Completion.Type == history.OK {
			gs = append(gs, grant{p.Invoke.Process, p.Invoke.Key, p.Invoke.Time, p.Completion.Time})
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].arrive < gs[j].arrive })
	count := 0
	for i, a := range gs {
		for _, b := range gs[i+1:] {
			if b.arrive >= a.grant {
				break // b arrived after a was served: not waiting together
			}
			if b.key != a.key || b.arrive <= a.arrive+int64(f.Margin) || b.grant >= a.grant {
				continue
			}
			count++
			v.add(Anomaly{Kind: "overtaken", Key: a.key, Processes: []int{a.process, b.process}, Start: b.grant, End: a.grant,
				Text: fmt.Sprintf("process %d arrived %s after process %d but was granted %q %s before it",
					b.process, span(b.arrive-a.arrive), a.process, a.key, span(a.grant-b.grant))})
		}
	}
	v.Details["grants"] = len(gs)
	v.Details["overtakings"] = count
	return v
}
