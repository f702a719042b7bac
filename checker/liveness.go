package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Liveness finds deadlocked keys: a key that nobody holds and nobody can
// acquire for longer than the lock's TTL allows, while clients keep trying
// (the SETNX-then-crash-before-EXPIRE deadlock, S1). The clock of a stall
// restarts at every nemesis action: the nemesis may legitimately make a key
// unreachable while a fault lasts, but once the last fault is undone the
// key must come back within the allowance.
type Liveness struct {
	// Allowance is the longest stall a correct lock may show: its TTL, plus
	// the waiter timeout where a dead waiter may hold a queue, plus slack.
	Allowance time.Duration
}

// Name is "liveness".
func (Liveness) Name() string { return "liveness" }

// Check reports stalls longer than the allowance.
func (l Liveness) Check(ops []history.Op) Verdict {
	v := Verdict{Checker: "liveness", Valid: Valid, Details: map[string]any{"allowance_ns": int64(l.Allowance)}}
	if len(ops) == 0 {
		return v
	}
	end := ops[len(ops)-1].Time
	var nemesisAt []int64
	grants := map[string][]int64{}
	fails := map[string][]int64{}
	for _, op := range ops {
		switch {
		case op.Process == history.NemesisProcess && op.Type != history.Invoke:
			nemesisAt = append(nemesisAt, op.Time)
		case op.F == history.Acquire && op.Type == history.OK:
			grants[op.Key] = append(grants[op.Key], op.Time)
		case op.F == history.Acquire && op.Type == history.Fail:
			fails[op.Key] = append(fails[op.Key], op.Time)
		}
	}
	holdsByKey := map[string][]Hold{}
	for _, h := range Holds(ops) {
		holdsByKey[h.Key] = append(holdsByKey[h.Key], h)
	}
	var longest int64
	for _, k := range slices.Sorted(maps.Keys(fails)) {
		// Free stretches: from the end of the last hold to the next grant.
		var busyUntil int64
		hs := holdsByKey[k] // sorted by start
		hi := 0
		next := append(append([]int64(nil), grants[k]...), end)
		for _, g := range next {
			for hi < len(hs) && hs[hi].Start < g {
				busyUntil = max(busyUntil, hs[hi].End)
				hi++
			}
			from := max(busyUntil, lastBefore(nemesisAt, g))
			if g != end {
				longest = max(longest, g-from)
			}
			if g-from <= int64(l.Allowance) {
				continue
			}
			// Someone must have tried and failed after the allowance ran out.
			tried := false
			for _, f := range fails[k] {
				if f > from+int64(l.Allowance) && f <= g {
					tried = true
					break
				}
			}
			if !tried {
				continue
			}
			longest = max(longest, g-from)
			until := "the end of the run"
			if g != end {
				until = seconds(g)
			}
			v.add(Anomaly{Kind: "deadlock", Key: k, Start: from, End: g,
				Text: fmt.Sprintf("nobody held %q and nobody could acquire it from %s to %s (%s, allowance %s)",
					k, seconds(from), until, span(g-from), l.Allowance)})
		}
	}
	// The longest wait from a key falling free (or the last fault) to its
	// next grant, flagged or not: how close a correct lock came.
	v.Details["longest_stall_ns"] = longest
	return v
}

// lastBefore is the greatest t in ts (sorted) that is < limit, or 0.
func lastBefore(ts []int64, limit int64) int64 {
	i := sort.Search(len(ts), func(i int) bool { return ts[i] >= limit })
	if i == 0 {
		return 0
	}
	return ts[i-1]
}
