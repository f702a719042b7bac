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
func (r Resource) Check(ops []history.Op) Verdict {
	v, _ := r.judge(ops, nil, true)
	return v
}

// resourceCarry is what the register's judgement of a Stream's segments
// carries from one to the next: at a cut no write or read is in flight,
// so every write before it was accepted, refused or left unknown there.
type resourceCarry struct {
	count  map[string]int64 // accepted writes, by key
	muted  map[string]bool  // keys whose final value cannot be told: a write of unknown outcome, or a lost update
	values map[string]*runs // the values accepted, by key
	best   map[string]write // the accepted fenced write with the greatest token, by key
	read   map[string]registerRead
	write  map[string]int64 // latest completion (or call, if none) of any write, by key
}

// registerRead is a read of the register that returned: when it was
// called and what it saw.
type registerRead struct{ at, value int64 }

// judge judges ops after what before (nil: nothing) carries, and the final
// value only if last; it returns what the next segment needs.
func (Resource) judge(ops []history.Op, before *resourceCarry, last bool) (Verdict, *resourceCarry) {
	v := Verdict{Checker: ResourceName, Valid: Valid}
	c := before
	if c == nil {
		c = newResourceCarry()
	}
	accepted := c.acceptedWrites(ops, &v.Details)
	v.Details.LostUpdates = c.lostUpdates(&v, accepted)
	stale := staleWrites(accepted, c.best)
	for _, a := range stale {
		v.add(a)
	}
	v.Details.StaleWritesAccepted = len(stale)
	if last {
		c.finalValues(&v)
	}
	return v, c
}

// newResourceCarry is what the first segment starts from: nothing written.
func newResourceCarry() *resourceCarry {
	return &resourceCarry{count: map[string]int64{}, muted: map[string]bool{}, values: map[string]*runs{},
		best: map[string]write{}, read: map[string]registerRead{}, write: map[string]int64{}}
}

// acceptedWrites walks ops' writes and reads of the register: it counts in
// d the writes accepted, refused, withheld and of unknown outcome, notes
// in c each key's latest write and read, and returns the writes accepted
// in the order they were invoked.
func (c *resourceCarry) acceptedWrites(ops []history.Op, d *Details) []write {
	var accepted []write
	pairs := history.Pairs(ops)
	for i := range pairs {
		inv, cp := &pairs[i].Invoke, pairs[i].Completion
		if inv.Process == history.NemesisProcess {
			continue
		}
		switch inv.F {
		case history.Write:
			if inv.Value == nil || inv.Value.Reg == nil {
				continue
			}
			if w, ok := c.noteWrite(inv, cp, d); ok {
				accepted = append(accepted, w)
			}
		case history.Read:
			if cp != nil && cp.Type == history.OK && cp.Value != nil && cp.Value.Reg != nil {
				c.read[inv.Key] = registerRead{at: inv.Time, value: *cp.Value.Reg}
			}
		}
	}
	d.WritesAccepted = len(accepted)
	return accepted
}

// noteWrite notes one write of the register (its invocation and its
// completion, nil if none) and returns it if the store accepted it. A
// write of unknown outcome mutes its key: the final value cannot be told.
func (c *resourceCarry) noteWrite(inv, cp *history.Op, d *Details) (write, bool) {
	done := inv.Time
	if cp != nil {
		done = cp.Time
	}
	c.write[inv.Key] = max(c.write[inv.Key], done)
	switch {
	case cp == nil || cp.Type == history.Info:
		d.WritesUnknown++
		c.muted[inv.Key] = true
	case cp.Type == history.Fail:
		switch cp.Error {
		case ErrStaleFence:
			d.StaleWritesRejected++
		case ErrLeaseLost:
			d.WritesWithheld++
		}
	case cp.Type == history.OK:
		return write{process: inv.Process, key: inv.Key,
			reg: *inv.Value.Reg, fence: inv.Value.Fence, call: inv.Time, ret: cp.Time}, true
	}
	return write{}, false
}

// lostUpdates adds to v every accepted write of a value already accepted
// for its key, in this segment or an earlier one, and returns how many
// there were. Each mutes its key: the lost update already tells why the
// final value falls short.
func (c *resourceCarry) lostUpdates(v *Verdict, accepted []write) int {
	lost := 0
	first := map[string]map[int64]write{} // key → value → its first accepted write here
	for _, w := range accepted {
		c.count[w.key]++
		seen := first[w.key]
		if seen == nil {
			seen = map[int64]write{}
			first[w.key] = seen
		}
		prev, dup := seen[w.reg]
		switch {
		case dup:
			v.add(writtenTwice(prev, w))
		case c.values[w.key].has(w.reg):
			v.add(writtenBefore(w))
		default:
			seen[w.reg] = w
			continue
		}
		lost++
		c.muted[w.key] = true
	}
	c.remember(first)
	return lost
}

// remember adds the values accepted in a segment to those accepted before.
func (c *resourceCarry) remember(first map[string]map[int64]write) {
	for key, seen := range first {
		if c.values[key] == nil {
			c.values[key] = &runs{}
		}
		for _, reg := range slices.Sorted(maps.Keys(seen)) {
			c.values[key].add(reg)
		}
	}
}

// writtenTwice is the lost update of w writing the value prev wrote in the
// same segment.
func writtenTwice(prev, w write) Anomaly {
	text := fmt.Sprintf("processes %d and %d both wrote %d to %q (at %s and %s): one increment was lost",
		prev.process, w.process, w.reg, w.key, seconds(prev.ret), seconds(w.ret))
	if prev.process == w.process {
		text = fmt.Sprintf("process %d wrote %d to %q twice (at %s and %s): the register had been set back in between, so one increment was lost",
			w.process, w.reg, w.key, seconds(prev.ret), seconds(w.ret))
	}
	return Anomaly{Kind: "lost-update", Key: w.key, Processes: []int{prev.process, w.process},
		Start: prev.ret, End: w.ret, Text: text}
}

// writtenBefore is the lost update of w writing a value accepted in an
// earlier segment of a Stream.
func writtenBefore(w write) Anomaly {
	return Anomaly{Kind: "lost-update", Key: w.key, Processes: []int{w.process}, Start: w.ret, End: w.ret,
		Text: fmt.Sprintf("process %d wrote %d to %q at %s, a value accepted before the stream's segment began: one increment was lost",
			w.process, w.reg, w.key, seconds(w.ret))}
}

// finalValues checks each key's last read against its accepted writes. A
// read begun after every write of its key had completed sees the final
// value; with no unknown writes of that key it must equal the number of
// accepted ones (unless a lost update of that key already told the same
// story). A write of unknown outcome mutes only its key.
func (c *resourceCarry) finalValues(v *Verdict) {
	for _, k := range slices.Sorted(maps.Keys(c.count)) {
		n := c.count[k]
		r, ok := c.read[k]
		if !ok || r.at <= c.write[k] || c.muted[k] {
			continue // no final read, or nothing to compare it with
		}
		if f := r.value; f != n {
			v.add(Anomaly{Kind: "lost-update", Key: k,
				Text: fmt.Sprintf("%q ends at %d after %d accepted increments", k, f, n)})
		}
	}
}

// runs is a set of register values as sorted, disjoint runs of
// consecutive ones: an incremented register's values take one run, however
// long the history.
type runs struct{ lo, hi []int64 }

// has says whether x is in the set.
func (r *runs) has(x int64) bool {
	if r == nil {
		return false
	}
	i := sort.Search(len(r.lo), func(i int) bool { return r.hi[i] >= x })
	return i < len(r.lo) && r.lo[i] <= x
}

// add puts x in the set, joining the runs it touches.
func (r *runs) add(x int64) {
	i := sort.Search(len(r.lo), func(i int) bool { return r.hi[i] >= x-1 })
	switch {
	case i < len(r.lo) && r.lo[i] <= x && x <= r.hi[i]:
		return
	case i < len(r.lo) && r.hi[i] == x-1:
		r.hi[i] = x
		if i+1 < len(r.lo) && r.lo[i+1] == x+1 {
			r.hi[i] = r.hi[i+1]
			r.lo, r.hi = slices.Delete(r.lo, i+1, i+2), slices.Delete(r.hi, i+1, i+2)
		}
	case i < len(r.lo) && r.lo[i] == x+1:
		r.lo[i] = x
	default:
		r.lo, r.hi = slices.Insert(r.lo, i, x), slices.Insert(r.hi, i, x)
	}
}

// staleWrites finds accepted fenced writes whose token is not greater than
// that of a write accepted before they were invoked. Real-time order, not
// completion order, because two concurrent writes may complete in either
// order whatever order the store ran them in.
//
// best holds, by key, the accepted fenced write with the greatest token
// from before accepted (a Stream's earlier segments, all returned before
// any of these was called); it is updated to include these.
func staleWrites(accepted []write, best map[string]write) []Anomaly {
	var out []Anomaly
	byKey := map[string][]write{}
	for _, w := range accepted {
		if w.fence > 0 {
			byKey[w.key] = append(byKey[w.key], w)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		ws := byKey[key]
		byRet := append([]write(nil), ws...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
		byCall := append([]write(nil), ws...)
		sort.Slice(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
		top := best[key]
		j := 0
		for _, w := range byCall {
			for j < len(byRet) && byRet[j].ret < w.call {
				if byRet[j].fence > top.fence {
					top = byRet[j]
				}
				j++
			}
			if top.fence > 0 && w.fence <= top.fence {
				out = append(out, Anomaly{Kind: "stale-write", Key: key, Processes: []int{top.process, w.process},
					Start: top.ret, End: w.ret,
					Text: fmt.Sprintf("process %d's write with fencing token %d was accepted after process %d's write with token %d",
						w.process, w.fence, top.process, top.fence)})
			}
		}
		for _, w := range byRet[j:] {
			if w.fence > top.fence {
				top = w
			}
		}
		best[key] = top
	}
	return out
}
