package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/locktorture/locktorture/history"
)

// ErrStaleFence is the error text the protected store gives a write whose
// fencing token is not greater than the last one it accepted.
const ErrStaleFence = "stale fencing token"

// ErrLeaseLost is the error text of a write its holder withheld because
// its lock had said the lease was lost (locks.Lease.Lost).
const ErrLeaseLost = "lease lost: the lock said so before the write, which was not sent"

// Resource judges the protected register that clients increment inside the
// critical section: read r, write r+1. Two accepted writes of the same value
// mean one increment was lost; an accepted write whose fencing token is not
// greater than one accepted before it began means the fence failed.
type Resource struct{}

// Name is ResourceName.
func (Resource) Name() Name { return ResourceName }

type write struct {
	process    int
	key        string
	reg, fence int64
	call, ret  int64
}

// Check reports lost updates and stale writes.
func (Resource) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: ResourceName, Valid: Valid}
	var accepted []write
	unknown := map[string]int{} // writes of unknown outcome, by key
	rejected, withheld := 0, 0
	type read struct {
		at, value int64
	}
	lastRead := map[string]read{}
	lastWrite := map[string]int64{} // latest completion (or call, if none) of any write
	for _, p := range history.Pairs(ops) {
		inv, c := p.Invoke, p.Completion
		if inv.Process == history.NemesisProcess {
			continue
		}
		switch inv.F {
		case history.Write:
			if inv.Value == nil || inv.Value.Reg == nil {
				continue
			}
			done := inv.Time
			if c != nil {
				done = c.Time
			}
			lastWrite[inv.Key] = max(lastWrite[inv.Key], done)
			switch {
			case c == nil || c.Type == history.Info:
				unknown[inv.Key]++
			case c.Type == history.Fail:
				switch c.Error {
				case ErrStaleFence:
					rejected++
				case ErrLeaseLost:
					withheld++
				}
			case c.Type == history.OK:
				accepted = append(accepted, write{process: inv.Process, key: inv.Key,
					reg: *inv.Value.Reg, fence: inv.Value.Fence, call: inv.Time, ret: c.Time})
			}
		case history.Read:
			if c != nil && c.Type == history.OK && c.Value != nil && c.Value.Reg != nil {
				lastRead[inv.Key] = read{at: inv.Time, value: *c.Value.Reg}
			}
		}
	}
	v.Details.WritesAccepted = len(accepted)
	nUnknown := 0
	for _, n := range unknown {
		nUnknown += n
	}
	v.Details.WritesUnknown = nUnknown
	v.Details.StaleWritesRejected = rejected
	v.Details.WritesWithheld = withheld

	lost := map[string]int{} // by key
	first := map[string]map[int64]write{}
	for _, w := range accepted {
		seen := first[w.key]
		if seen == nil {
			seen = map[int64]write{}
			first[w.key] = seen
		}
		if prev, dup := seen[w.reg]; dup {
			lost[w.key]++
			text := fmt.Sprintf("processes %d and %d both wrote %d to %q (at %s and %s): one increment was lost",
				prev.process, w.process, w.reg, w.key, seconds(prev.ret), seconds(w.ret))
			if prev.process == w.process {
				text = fmt.Sprintf("process %d wrote %d to %q twice (at %s and %s): the register had been set back in between, so one increment was lost",
					w.process, w.reg, w.key, seconds(prev.ret), seconds(w.ret))
			}
			v.add(Anomaly{Kind: "lost-update", Key: w.key, Processes: []int{prev.process, w.process},
				Start: prev.ret, End: w.ret, Text: text})
			continue
		}
		seen[w.reg] = w
	}
	nLost := 0
	for _, n := range lost {
		nLost += n
	}
	v.Details.LostUpdates = nLost

	stale := staleWrites(accepted)
	for _, a := range stale {
		v.add(a)
	}
	v.Details.StaleWritesAccepted = len(stale)

	// A read begun after every write of its key had completed sees the
	// final value; with no unknown writes of that key it must equal the
	// number of accepted ones (unless a lost update of that key already
	// told the same story). A write of unknown outcome mutes only its key.
	count := map[string]int64{}
	for _, w := range accepted {
		count[w.key]++
	}
	for _, k := range slices.Sorted(maps.Keys(count)) {
		n := count[k]
		r, ok := lastRead[k]
		if !ok || r.at <= lastWrite[k] || unknown[k] > 0 || lost[k] > 0 {
			continue // no final read, or nothing to compare it with
		}
		if f := r.value; f != n {
			v.add(Anomaly{Kind: "lost-update", Key: k,
				Text: fmt.Sprintf("%q ends at %d after %d accepted increments", k, f, n)})
		}
	}
	return v
}

// staleWrites finds accepted fenced writes whose token is not greater than
// that of a write accepted before they were invoked. Real-time order, not
// completion order, because two concurrent writes may complete in either
// order whatever order the store ran them in.
func staleWrites(accepted []write) []Anomaly {
	var out []Anomaly
	byKey := map[string][]write{}
	for _, w := range accepted {
		if w.fence > 0 {
			byKey[w.key] = append(byKey[w.key], w)
		}
	}
	for key, ws := range byKey {
		byRet := append([]write(nil), ws...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
		byCall := append([]write(nil), ws...)
		sort.Slice(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
		var best write
		j := 0
		for _, w := range byCall {
			for j < len(byRet) && byRet[j].ret < w.call {
				if byRet[j].fence > best.fence {
					best = byRet[j]
				}
				j++
			}
			if best.fence > 0 && w.fence <= best.fence {
				out = append(out, Anomaly{Kind: "stale-write", Key: key, Processes: []int{best.process, w.process},
					Start: best.ret, End: w.ret,
					Text: fmt.Sprintf("process %d's write with fencing token %d was accepted after process %d's write with token %d",
						w.process, w.fence, best.process, best.fence)})
			}
		}
	}
	return out
}
