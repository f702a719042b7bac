package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Liveness finds deadlocked keys: a key that nobody holds and nobody can
// acquire for longer than the lock's TTL allows, while clients keep trying
// (the SETNX-then-crash-before-EXPIRE deadlock, S1).
//
// A stall is a stretch in which the key was certainly free and nobody got
// it. It begins at the latest of:
//   - the first acquire of the key: before the clients were ready nobody
//     could have taken it;
//   - the end of every hold begun before it;
//   - the completion of every acquire of unknown outcome begun before it:
//     such an acquire may have taken the key as late as that, and its lease
//     may then run a whole TTL, which the allowance covers, so a stall
//     cannot be blamed on the lock while that lease may still be live;
//   - the completion of every granted acquire begun before it: the grant
//     may have taken effect anywhere from its call on, and a holder whose
//     answer comes late (its worker or its server starved of a core) keeps
//     the others out while the history cannot yet show it holding;
//   - the last nemesis action before the stall's end, or before the answer
//     of the grant whose call ends it: the nemesis may legitimately make a
//     key unreachable while a fault lasts, but once the last fault is
//     undone the key must come back within the allowance (a grant called
//     during a fault and answered after it is measured from the fault's
//     end, as though the key came back at its answer; a fault begun after
//     the call and before the answer excuses the stall all the same, a
//     blind spot: the actions are not told apart by fault).
//
// It ends at the call of the next acquire that was granted or whose
// outcome is unknown (either may have taken the key there), or at the end
// of the run.
// It is a deadlock when it is longer than the allowance and an acquire
// failed after the allowance ran out.
type Liveness struct {
	// Allowance is the longest stall a correct lock may show: its TTL, plus
	// the waiter timeout where a dead waiter may hold a queue, plus slack.
	Allowance time.Duration
	// start is when a Stream's segment began, at a grant: no stall of
	// the segment begins before it; until, when a segment that is not
	// the last ends, at the next grant, whose call ends its last stall.
	start, until int64
	// settled are the processes whose acquire in flight at the end of a
	// Stream's segment was refused after it: it took nothing before the
	// cut, and is left out.
	settled map[int]bool
}

// Name is LivenessName.
func (Liveness) Name() Name { return LivenessName }

// busy is a span in which a key was held, or may have been. A stall its
// start ends is excused by the nemesis's actions up to answered, when
// later: a grant's answer, which may come after a fault healed, though the
// grant may have taken the key at its call, during the fault.
type busy struct{ start, end, answered int64 }

// Check reports stalls longer than the allowance.
func (l Liveness) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: LivenessName, Valid: Valid, Details: Details{Allowance: l.Allowance}}
	if len(ops) == 0 {
		return v
	}
	end := max(ops[len(ops)-1].Time, l.until)
	nemesisAt, refusals := faultsAndRefusals(ops)
	v.Details.SlotRefusals = refusals
	keys := l.attempts(ops, end)
	for _, h := range Holds(ops) {
		keys.spans[h.Key] = append(keys.spans[h.Key], busy{start: h.Start, end: h.End})
	}
	var longest int64
	for _, k := range slices.Sorted(maps.Keys(keys.fails)) {
		longest = max(longest, l.stalls(&v, k, keys, nemesisAt, end))
	}
	// The longest stall that ended, flagged or not (how close a correct
	// lock came), or the flagged one still on at the end, if longer.
	v.Details.LongestStall = time.Duration(longest)
	return v
}

// faultsAndRefusals returns when the nemesis's actions completed, in time
// order, and how many acquires and releases Redis Cluster refused with
// TRYAGAIN.
func faultsAndRefusals(ops []history.Op) (nemesisAt []int64, refusals int) {
	for _, op := range ops {
		// The starved note is the gate's word on the run, not a fault.
		if op.Process == history.NemesisProcess && op.Type != history.Invoke && op.F != string(fault.Starved) {
			nemesisAt = append(nemesisAt, op.Time) // in time order, as recorded
		}
		if op.Type != history.Invoke && (op.F == history.Acquire || op.F == history.Release) && strings.Contains(op.Error, "TRYAGAIN") {
			refusals++
		}
	}
	return nemesisAt, refusals
}

// keyAttempts is, by key, what the acquires tell of it.
type keyAttempts struct {
	ready map[string]int64   // the first acquire's call (or the segment's start, if later)
	spans map[string][]busy  // the spans in which the key was held, or may have been
	fails map[string][]int64 // the refused acquires' completions
}

// attempts sorts the acquires of ops by key: a refusal is a failure; a
// grant or an unknown outcome may have held the key from its call to its
// completion (to end, if it has none, unless it was refused after the
// Stream's segment), and a grant's hold (Holds) goes on from there.
func (l Liveness) attempts(ops []history.Op, end int64) keyAttempts {
	a := keyAttempts{ready: map[string]int64{}, spans: map[string][]busy{}, fails: map[string][]int64{}}
	for _, p := range history.Pairs(ops) {
		inv, c := p.Invoke, p.Completion
		if inv.Process == history.NemesisProcess || inv.F != history.Acquire {
			continue
		}
		if _, ok := a.ready[inv.Key]; !ok {
			a.ready[inv.Key] = max(inv.Time, l.start)
		}
		switch {
		case c == nil && l.settled[inv.Process]:
		case c == nil:
			a.spans[inv.Key] = append(a.spans[inv.Key], busy{start: inv.Time, end: end})
		case c.Type == history.Info:
			a.spans[inv.Key] = append(a.spans[inv.Key], busy{start: inv.Time, end: c.Time})
		case c.Type == history.OK:
			a.spans[inv.Key] = append(a.spans[inv.Key], busy{start: inv.Time, end: c.Time, answered: c.Time})
		case c.Type == history.Fail:
			a.fails[inv.Key] = append(a.fails[inv.Key], c.Time)
		}
	}
	return a
}

// stalls adds key k's deadlocks to v and returns its longest stall that
// ended, flagged or not, or the flagged one still on at end, if longer.
func (l Liveness) stalls(v *Verdict, k string, a keyAttempts, nemesisAt []int64, end int64) int64 {
	allow := int64(l.Allowance)
	fs := a.fails[k]
	slices.Sort(fs)
	ss := a.spans[k]
	sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
	busyUntil := a.ready[k]
	var longest int64
	for i := 0; i <= len(ss); i++ {
		// Every span begun at one instant ends one stall (the run's
		// end, after the last span, ends the last).
		g, final := end, i == len(ss)
		if !final {
			g = ss[i].start
			if i > 0 && g == ss[i-1].start {
				continue
			}
		} else if len(ss) > 0 && ss[len(ss)-1].start == end {
			break
		}
		// A Stream's segment ends at a grant, whose call ends its last
		// stall as a span's start does.
		last := final && l.until == 0
		excused, reach := g, busyUntil
		for j := i; j < len(ss) && ss[j].start == g; j++ {
			excused, reach = max(excused, ss[j].answered), max(reach, ss[j].end)
		}
		from := max(busyUntil, lastBefore(nemesisAt, excused))
		busyUntil = reach
		if g <= from {
			continue
		}
		if !last {
			longest = max(longest, g-from)
		}
		// Someone must have tried and failed after the allowance ran out.
		f := sort.Search(len(fs), func(j int) bool { return fs[j] > from+allow })
		if g-from <= allow || f == len(fs) || fs[f] > g {
			continue
		}
		longest = max(longest, g-from)
		v.add(l.deadlock(k, from, g, last))
	}
	return longest
}

// deadlock is the anomaly of key k stalled from from to g, the end of the
// run if last.
func (l Liveness) deadlock(k string, from, g int64, last bool) Anomaly {
	until := "the end of the run"
	if !last {
		until = seconds(g)
	}
	return Anomaly{Kind: "deadlock", Key: k, Start: from, End: g,
		Text: fmt.Sprintf("nobody held %q and nobody could acquire it from %s to %s (%s, allowance %s)",
			k, seconds(from), until, span(g-from), l.Allowance)}
}

// lastBefore is the greatest t in ts (sorted) that is < limit, or 0.
func lastBefore(ts []int64, limit int64) int64 {
	i := sort.Search(len(ts), func(i int) bool { return ts[i] >= limit })
	if i == 0 {
		return 0
	}
	return ts[i-1]
}
