package checker

import (
	"fmt"
	"sort"

	"github.com/locktorture/locktorture/history"
)

// Promise checks the lock against its own word, apart from what clients
// believed: each successful acquire that came with a validity deadline
// promised the key to its process from the acquire's return until that
// deadline (or its release, if sooner). Two such promises on one key that
// overlap mean the lock itself broke (a node's clock jumped, a node
// restarted empty, a failover lost the key), not merely that a client
// outlived its lease (K1, where the promise held and the belief did not).
type Promise struct{}

// Name is "promise".
func (Promise) Name() string { return "promise" }

// Check reports overlapping promises.
func (Promise) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: "promise", Valid: Valid, Details: map[string]any{}}
	type key struct {
		p int
		t int64
	}
	dl := map[key]int64{}
	for _, op := range ops {
		if op.F == history.Acquire && op.Type == history.OK && op.Value != nil && op.Value.Deadline > 0 {
			dl[key{op.Process, op.Time}] = op.Value.Deadline
		}
	}
	var promises []Hold
	for _, h := range Holds(ops) {
		d, ok := dl[key{h.Process, h.Start}]
		if !ok {
			continue
		}
		// A hold still open when the history ends is promised to its
		// deadline; a released one only until its release.
		if h.Open {
			h.End = d
		} else {
			h.End = min(h.End, d)
		}
		if h.End > h.Start {
			promises = append(promises, h)
		}
	}
	v.Details["promises"] = len(promises)
	if len(promises) == 0 {
		v.Details["note"] = "the lock gives no validity deadlines: nothing to check"
		return v
	}
	sort.Slice(promises, func(i, j int) bool { return promises[i].Start < promises[j].Start })
	count := 0
	for i, a := range promises {
		for _, b := range promises[i+1:] {
			if b.Start >= a.End {
				break
			}
			if a.Key != b.Key || a.Process == b.Process {
				continue
			}
			count++
			to := min(a.End, b.End)
			v.add(Anomaly{Kind: "promise-broken", Key: a.Key, Processes: []int{a.Process, b.Process}, Start: b.Start, End: to,
				Text: fmt.Sprintf("the lock promised %q to processes %d and %d at once, from %s to %s (%s), each within its validity",
					a.Key, a.Process, b.Process, seconds(b.Start), seconds(to), span(to-b.Start))})
		}
	}
	v.Details["broken_promises"] = count
	return v
}
