package checker

import (
	"fmt"
	"sort"

	"github.com/locktorture/locktorture/history"
)

// Promise checks the lock against its own word, apart from what clients
// believed: each successful acquire that came with a validity deadline
// promised the key to its process from the acquire's return until that
// deadline, or until the release that gave the key back, if sooner. Only a
// release ends a promise: a holder that crashed, or was retired by an
// unknown outcome, gave nothing back, so its key is still promised to it
// until the deadline. Two such promises on one key that overlap mean the
// lock itself broke (a node's clock jumped, a node restarted empty, a
// failover lost the key, a key lapsed before its lease did), not merely
// that a client outlived its lease (K1, where the promise held and the
// belief did not). So does a release refused before the deadline
// (lease-lost): the lock says the key is not its holder's while it still
// promises that it is.
type Promise struct{}

// Name is PromiseName.
func (Promise) Name() Name { return PromiseName }

// promised is a span during which the lock promised a key to a process.
type promised struct {
	key        string
	process    int
	start, end int64
}

// Check reports overlapping promises.
func (Promise) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: PromiseName, Valid: Valid}
	holds, refusals := holdsOf(ops)
	var promises []promised
	for i := range holds {
		promises = append(promises, promisesOf(&holds[i])...)
	}
	v.Details.Promises = len(promises)
	if len(promises) == 0 && len(refusals) == 0 {
		v.Details.Note = "the lock gives no validity deadlines: nothing to check"
		return v
	}
	sort.SliceStable(promises, func(i, j int) bool { return promises[i].start < promises[j].start })
	count := 0
	for i, a := range promises {
		for _, b := range promises[i+1:] {
			if b.start >= a.end {
				break
			}
			if a.key != b.key || a.process == b.process {
				continue
			}
			count++
			to := min(a.end, b.end)
			v.add(Anomaly{Kind: "promise-broken", Key: a.key, Processes: []int{a.process, b.process}, Start: b.start, End: to,
				Text: fmt.Sprintf("the lock promised %q to processes %d and %d at once, from %s to %s (%s), each within its validity",
					a.key, a.process, b.process, seconds(b.start), seconds(to), span(to-b.start))})
		}
	}
	v.Details.BrokenPromises = count
	for _, r := range refusals {
		v.add(Anomaly{Kind: "lease-lost", Key: r.Key, Processes: []int{r.Process}, Start: r.Sent, End: r.Deadline,
			Text: fmt.Sprintf("process %d's release of %q at %s was refused, %s before the deadline the lock had promised it: the lock lost the key under its holder",
				r.Process, r.Key, seconds(r.Sent), span(r.Deadline-r.Returned))})
	}
	if len(refusals) > 0 {
		v.Details.LeasesLost = len(refusals)
	}
	return v
}

// promisesOf is what the lock promised in h: each lease from its return
// to its deadline, cut where a release ended the hold, joined where they
// meet (a reentrant holder's leases overlap one another).
func promisesOf(h *hold) []promised {
	var out []promised
	for _, l := range h.leases {
		end := l.deadline
		if h.Released {
			end = min(end, h.End)
		}
		if end <= l.at {
			continue // no deadline, or none left before the release
		}
		if n := len(out); n > 0 && l.at <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, end)
			continue
		}
		out = append(out, promised{key: h.Key, process: h.Process, start: l.at, end: end})
	}
	return out
}

// Refusal is a release the lock refused (not held) while the lease it
// gave back was still promised: the whole release, sent and answered,
// lay before the validity deadline, so the key cannot have lapsed in Redis
// yet.
type Refusal struct {
	// Hold is the hold the release belonged to.
	Hold
	// Sent and Returned are when the release was sent and refused;
	// Deadline is the latest the hold's leases promised by then.
	Sent, Returned, Deadline int64
}

// Refused lists the releases refused within their lease's promise.
func Refused(ops []history.Op) []Refusal {
	_, rs := holdsOf(ops)
	return rs
}
