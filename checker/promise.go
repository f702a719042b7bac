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
// So does a release refused before the deadline (lease-lost): the lock
// says the key is not its holder's while it still promises that it is.
type Promise struct{}

// Name is "promise".
func (Promise) Name() string { return "promise" }

// Check reports overlapping promises.
func (Promise) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: "promise", Valid: Valid, Details: map[string]any{}}
	dl := deadlines(ops)
	var promises []Hold
	for _, h := range Holds(ops) {
		d, ok := dl[procTime{h.Process, h.Start}]
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
	lost := 0
	for _, r := range Refused(ops) {
		lost++
		v.add(Anomaly{Kind: "lease-lost", Key: r.Key, Processes: []int{r.Process}, Start: r.End, End: r.Deadline,
			Text: fmt.Sprintf("process %d's release of %q at %s was refused, %s before the deadline the lock had promised it: the lock lost the key under its holder",
				r.Process, r.Key, seconds(r.End), span(r.Deadline-r.Returned))})
	}
	if lost > 0 {
		v.Details["leases_lost"] = lost
	}
	return v
}

// Refusal is a release the lock refused (not held) while the lease it
// ended was still promised: the whole release, sent and answered, lay
// before the validity deadline, so the key cannot have lapsed in Redis yet.
type Refusal struct {
	Hold
	// Returned is when the refusal came back; Deadline the lease's.
	Returned, Deadline int64
}

// procTime names an op of a process by its time: a hold by its start or end.
type procTime struct {
	p int
	t int64
}

// deadlines maps each successful acquire that promised a deadline, by its
// process and return time (a hold's start), to that deadline.
func deadlines(ops []history.Op) map[procTime]int64 {
	dl := map[procTime]int64{}
	for _, op := range ops {
		if op.F == history.Acquire && op.Type == history.OK && op.Value != nil && op.Value.Deadline > 0 {
			dl[procTime{op.Process, op.Time}] = op.Value.Deadline
		}
	}
	return dl
}

// Refused lists the releases refused within their lease's promise.
func Refused(ops []history.Op) []Refusal {
	dl := deadlines(ops)
	byEnd := map[procTime]Hold{}
	for _, h := range Holds(ops) {
		if d, ok := dl[procTime{h.Process, h.Start}]; ok && !h.Open && h.End < d {
			byEnd[procTime{h.Process, h.End}] = h
		}
	}
	var out []Refusal
	for _, p := range history.Pairs(ops) {
		inv, c := p.Invoke, p.Completion
		if inv.F != history.Release || c == nil || c.Type != history.Fail {
			continue
		}
		h, ok := byEnd[procTime{inv.Process, inv.Time}]
		if d := dl[procTime{h.Process, h.Start}]; ok && c.Time < d {
			out = append(out, Refusal{Hold: h, Returned: c.Time, Deadline: d})
		}
	}
	return out
}
