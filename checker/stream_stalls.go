package checker

import (
	"cmp"
	"maps"
	"slices"

	"github.com/locktorture/locktorture/history"
)

// pendingStalls is a segment whose stalls wait to be judged. The grant at
// its cut ends its last stall, as in the whole history, with every refusal
// recorded at that instant counted, before the grant or after it, and the
// nemesis's actions until the acquires in flight are answered. An
// acquire it ended with in flight matters too: one granted, one of unknown
// outcome, or one with none may have taken the key from its call on, which
// ends a stall there; one refused after the cut took nothing before it.
type pendingStalls struct {
	at       int      // the liveness checker's place in the checkers
	liveness Liveness // as the segment is judged
	ops      []history.Op
	waiting  map[int]bool
	cut      int64
	// closed says an op later than the cut was read: nothing more can
	// be recorded at its instant.
	closed bool
}

// resolve hands op to the segments whose stalls wait, and judges those
// that wait on nothing more. It runs before op is tracked, so the
// invocation of an acquire refused at a cut's instant is still in flight.
func (s *Stream) resolve(op history.Op) {
	refused := op.Process >= 0 && op.F == history.Acquire && op.Type == history.Fail
	kept := s.stalls[:0]
	for _, w := range s.stalls {
		if op.Time > w.cut {
			w.closed = true
		}
		if op.Process == history.NemesisProcess && op.Type != history.Invoke && len(w.waiting) > 0 {
			// A fault undone before a grant called in the segment is
			// answered excuses the stall its call ends (Liveness).
			w.ops = append(w.ops, quiet(op))
		}
		if op.Process >= 0 && op.F == history.Acquire && op.Type != history.Invoke {
			switch {
			case w.waiting[op.Process]:
				delete(w.waiting, op.Process)
				if !refused || op.Time <= w.cut {
					w.ops = append(w.ops, quiet(op))
				} else {
					w.liveness.settled[op.Process] = true
				}
			case refused && op.Time <= w.cut:
				// Called and refused at the grant's instant.
				if inv, ok := s.flying[op.Process]; ok {
					w.ops = append(w.ops, quiet(inv), quiet(op))
				}
			}
		}
		if len(w.waiting) > 0 || !w.closed {
			kept = append(kept, w)
			continue
		}
		s.mergeAt(w.at, w.liveness.Check(w.ops))
	}
	clear(s.stalls[len(kept):])
	s.stalls = kept
}

// quiet is op as a segment's stalls are told of it after the segment: its
// error is the segment's where it was read, not counted twice.
func quiet(op history.Op) history.Op {
	op.Error = ""
	return op
}

// reserve keeps checker i's place in the merged verdicts while its
// verdict on a segment waits.
func (s *Stream) reserve(i int, name Name) {
	for len(s.merged) <= i {
		s.merged = append(s.merged, Verdict{})
	}
	if s.merged[i].Checker == "" {
		s.merged[i] = Verdict{Checker: name, Valid: Valid}
	}
}

// mergeAt merges v into checker i's verdict so far. The linearizability
// search names the first stretch with no legal order and stops there, so
// once it has, later segments add only their numbers, and no reason for
// giving no answer.
func (s *Stream) mergeAt(i int, v Verdict) {
	for len(s.merged) <= i {
		s.merged = append(s.merged, Verdict{})
	}
	m := s.merged[i]
	switch {
	case m.Checker == "":
		s.merged[i] = v
	case m.Checker == LinearizableName && (m.Valid == Invalid || v.Valid == Invalid):
		if m.Valid != Invalid {
			m.Valid, m.Counts, m.Anomalies = Invalid, v.Counts, v.Anomalies
		}
		m.Details = m.Details.add(v.Details)
		m.Details.Reason = ""
		s.merged[i] = m
	default:
		s.merged[i] = merge(m, v)
	}
}

// merge joins the verdicts of one checker on two segments.
func merge(a, b Verdict) Verdict {
	out := a
	switch {
	case a.Valid == Invalid || b.Valid == Invalid:
		out.Valid = Invalid
	case a.Valid == Unknown || b.Valid == Unknown:
		out.Valid = Unknown
	}
	if len(b.Counts) > 0 {
		out.Counts = maps.Clone(a.Counts)
		if out.Counts == nil {
			out.Counts = map[string]int{}
		}
		listed := map[string]int{}
		for _, an := range a.Anomalies {
			listed[an.Kind]++
		}
		out.Anomalies = slices.Clone(a.Anomalies)
		for _, an := range b.Anomalies {
			if listed[an.Kind] < maxListed {
				listed[an.Kind]++
				out.Anomalies = append(out.Anomalies, an)
			}
		}
		for k, n := range b.Counts {
			out.Counts[k] += n
		}
	}
	out.Details = a.Details.add(b.Details)
	return out
}

// add sums two segments' details: counts and totals add up, the longest
// spans are the longer, and a word (a model, a reason) is the first
// given. A note that there was nothing to check stays only if neither
// segment had anything to check.
func (d Details) add(e Details) Details {
	d.WritesAccepted += e.WritesAccepted
	d.WritesUnknown += e.WritesUnknown
	d.StaleWritesRejected += e.StaleWritesRejected
	d.WritesWithheld += e.WritesWithheld
	d.LostUpdates += e.LostUpdates
	d.StaleWritesAccepted += e.StaleWritesAccepted
	d.Holds += e.Holds
	d.DoubleHolders += e.DoubleHolders
	d.Overlap += e.Overlap
	d.ForeignReleases += e.ForeignReleases
	// No hold spans a cut, so no overlap does: each segment's time and
	// episodes are its own.
	d.DoubleHeld += e.DoubleHeld
	d.Episodes += e.Episodes
	d.Operations += e.Operations
	d.Model = cmp.Or(d.Model, e.Model)
	d.Segments += e.Segments
	d.Reason = cmp.Or(d.Reason, e.Reason)
	d.Promises += e.Promises
	d.BrokenPromises += e.BrokenPromises
	d.LeasesLost += e.LeasesLost
	if d.Note != e.Note {
		d.Note = ""
	}
	d.Allowance = max(d.Allowance, e.Allowance)
	d.LongestStall = max(d.LongestStall, e.LongestStall)
	d.SlotRefusals += e.SlotRefusals
	d.GhostKeys += e.GhostKeys
	d.LongestGhost = max(d.LongestGhost, e.LongestGhost)
	d.StolenKeys += e.StolenKeys
	d.Grants += e.Grants
	d.Overtakings += e.Overtakings
	return d
}
