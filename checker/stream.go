package checker

import (
	"cmp"
	"maps"
	"slices"

	"github.com/locktorture/locktorture/history"
)

// Stream judges a history as it is read, op by op, a segment at a time: a
// run of any length is judged in memory bounded by a segment and the ops
// in flight, not by the history, and gets the verdicts the checkers give
// the whole history at once (the differential test holds it to that).
//
// A segment ends at a quiet point, just before an acquire returns a grant
// of the one key the history's acquires name (a stall of another key could
// span the grant of one: a history of several keys is judged whole):
// nobody holds any key, no lease of a retired holder is still promised,
// every node last read holds no key, no nemesis action and no client op
// other than an acquire is in flight, and no op was recorded at the same
// instant, nor was an acquire in flight called at the instant its
// process's previous op returned. There nothing a checker judges spans
// the cut: a hold, a
// promise, a ghost or a pair of observations lies wholly on one side, and
// a stall ends at the grant. What does span it is carried, in ops and in
// the few checkers' own state:
//   - the acquires still waiting are recorded again at the head of the
//     next segment, as they were called (they return there), and stay
//     without an outcome in the one before;
//   - the linearizability search starts from a free key holding the
//     greatest fencing token granted so far;
//   - the register carries its count of accepted increments, the values
//     written (as runs of consecutive values), the greatest fenced write
//     and its last read and write, and judges its final value at the end;
//   - fairness carries the grants that overtook a wait still in flight,
//     counted once the wait ends, as a whole history counts them;
//   - liveness starts its first stall at the cut, where a grant has just
//     ended the one before.
//
// Verdicts merge across segments: invalid if any segment's is, else
// unknown if any is; counts and totals add up, the longest spans are the
// longest of any segment, and anomalies are listed up to the same bound.
// The longest stall is the longest that ended inside a segment.
type Stream struct {
	checkers []Checker
	// minOps is how many ops a segment gathers before it may end.
	minOps int

	seg    []history.Op
	first  bool  // seg is the first segment
	from   int64 // the current segment's cut time (0: the first)
	lastAt int64 // the time of the op recorded last
	flying map[int]history.Op
	// returned is when each process's latest op returned.
	returned map[int]int64
	nemesis  map[history.ActionKey]int // nemesis actions in flight
	held     map[int]map[string]int    // entries held, by process and key
	// deadlines are, by process and key, the latest deadline promised in
	// the hold in progress; promised is the latest deadline a retired
	// holder's leases ran to.
	deadlines map[int]map[string]int64
	promised  int64
	keys      map[string]bool    // the keys acquires have named
	present   map[[2]string]bool // node, key → the node's last read found a key
	fences    map[string]int64   // the greatest fence granted, by key
	// startFences are fences as the current segment began.
	startFences map[string]int64

	resource *resourceCarry
	fairness *fairnessCarry
	// stalls are the segments whose liveness waits on the outcome of
	// acquires they ended with in flight.
	stalls []*pendingStalls
	// judging brings the verdicts on the segment being judged.
	judging  chan []Verdict
	merged   []Verdict
	segments int
}

// pendingStalls is a segment whose stalls are judged once the acquires in
// flight at its end have an outcome: one of unknown outcome, or none, may
// have taken the key from its call on, which ends a stall there, as it
// does in the whole history; a grant or a refusal changes nothing before
// the cut.
type pendingStalls struct {
	at       int      // the liveness checker's place in the checkers
	liveness Liveness // as the segment is judged
	ops      []history.Op
	waiting  map[int]bool
}

// DefaultSegment is the fewest ops a Stream's segment gathers before it
// may end: large enough that the checkers' fixed cost per segment is
// small beside their work, small enough that a segment's memory is a few
// megabytes.
const DefaultSegment = 20000

// NewStream judges a history with checkers, in segments of at least minOps
// ops (0: DefaultSegment).
func NewStream(checkers []Checker, minOps int) *Stream {
	if minOps <= 0 {
		minOps = DefaultSegment
	}
	return &Stream{checkers: checkers, minOps: minOps, first: true,
		flying: map[int]history.Op{}, nemesis: map[history.ActionKey]int{}, returned: map[int]int64{}, held: map[int]map[string]int{}, deadlines: map[int]map[string]int64{},
		keys: map[string]bool{}, present: map[[2]string]bool{}, fences: map[string]int64{}}
}

// Add reads the next op of the history, in recorded order.
func (s *Stream) Add(op history.Op) {
	if len(s.seg) >= s.minOps && s.quietBefore(op) {
		s.cut(op.Time)
	}
	s.track(op)
	s.seg = append(s.seg, op)
	s.lastAt = op.Time
	if op.Process >= 0 && op.F == history.Acquire && op.Type != history.Invoke && len(s.stalls) > 0 {
		s.resolve(op)
	}
}

// resolve hands the outcome of an acquire to the segments waiting on it,
// and judges those that wait on nothing more.
func (s *Stream) resolve(op history.Op) {
	kept := s.stalls[:0]
	for _, w := range s.stalls {
		if w.waiting[op.Process] {
			delete(w.waiting, op.Process)
			if op.Type == history.Info {
				w.ops = append(w.ops, op)
			} else {
				w.liveness.settled[op.Process] = true
			}
		}
		if len(w.waiting) > 0 {
			kept = append(kept, w)
			continue
		}
		s.mergeAt(w.at, w.liveness.Check(w.ops))
	}
	clear(s.stalls[len(kept):])
	s.stalls = kept
}

// Verdicts judges what is left and returns each checker's verdict on the
// whole history, in the order the checkers were given. An acquire still
// in flight at the end may have taken its key from its call on, in every
// segment it spans.
func (s *Stream) Verdicts() []Verdict {
	s.judge(true)
	for _, w := range s.stalls {
		s.mergeAt(w.at, w.liveness.Check(w.ops))
	}
	s.stalls = nil
	return s.merged
}

// Segments is how many segments the history was judged in.
func (s *Stream) Segments() int { return s.segments }

// quietBefore says whether a segment may end just before op.
func (s *Stream) quietBefore(op history.Op) bool {
	if op.F != history.Acquire || op.Type != history.OK || op.Process < 0 || op.Time <= s.lastAt {
		return false
	}
	if len(s.nemesis) > 0 || len(s.held) > 0 || s.promised >= op.Time || len(s.keys) != 1 || !s.keys[op.Key] {
		return false
	}
	for p, inv := range s.flying {
		// An acquire called at the instant its process's previous op
		// returned may be ordered before that op (the clock cannot tell
		// them apart); without its outcome, the segment could explain
		// that op by it.
		if r, ok := s.returned[p]; inv.F != history.Acquire || ok && r >= inv.Time {
			return false
		}
	}
	for _, p := range s.present {
		if p {
			return false
		}
	}
	return true
}

// track keeps what quietBefore asks of the ops read so far.
func (s *Stream) track(op history.Op) {
	p := op.Process
	switch {
	case p == history.NemesisProcess:
		k := history.ActionOf(op)
		if op.Type == history.Invoke {
			s.nemesis[k]++
		} else if s.nemesis[k] > 1 {
			s.nemesis[k]--
		} else {
			delete(s.nemesis, k)
		}
		return
	case p == history.ObserverProcess:
		if op.F == history.Observe && op.Value != nil {
			s.present[[2]string{op.Value.Target, op.Key}] = op.Error == "" && op.Value.Token != ""
		}
		return
	}
	if op.F == history.Acquire {
		s.keys[op.Key] = true
	}
	if op.Type == history.Invoke {
		s.flying[p] = op
	} else {
		delete(s.flying, p)
		s.returned[p] = op.Time
	}
	switch {
	case op.F == history.Acquire && op.Type == history.OK:
		if s.held[p] == nil {
			s.held[p], s.deadlines[p] = map[string]int{}, map[string]int64{}
		}
		s.held[p][op.Key]++
		if op.Value != nil {
			s.deadlines[p][op.Key] = max(s.deadlines[p][op.Key], op.Value.Deadline)
			s.fences[op.Key] = max(s.fences[op.Key], op.Value.Fence)
		}
	case op.F == history.Release && op.Type == history.Invoke:
		if n, ok := s.held[p][op.Key]; ok {
			if n <= 1 {
				delete(s.held[p], op.Key)
				delete(s.deadlines[p], op.Key)
				if len(s.held[p]) == 0 {
					delete(s.held, p)
					delete(s.deadlines, p)
				}
			} else {
				s.held[p][op.Key] = n - 1
			}
		}
	}
	if op.Type == history.Info {
		delete(s.returned, p)
		// Retired: it gives nothing back, and the lock owes it its keys
		// until their deadlines.
		for _, d := range s.deadlines[p] {
			s.promised = max(s.promised, d)
		}
		delete(s.held, p)
		delete(s.deadlines, p)
	}
}

// cut judges the segment so far and starts the next at the cut time at,
// headed by the acquires still in flight.
func (s *Stream) cut(at int64) {
	s.judge(false)
	waiting := slices.SortedFunc(maps.Values(s.flying), func(a, b history.Op) int { return cmp.Compare(a.Index, b.Index) })
	s.seg = append(make([]history.Op, 0, 2*s.minOps), waiting...)
	s.first, s.from = false, at
	s.startFences = maps.Clone(s.fences)
}

// judge judges the current segment, the last one if last, while the next
// is read: the segment before is merged first, so the checkers that carry
// state across segments see them in order, and at most two segments are
// held at once.
func (s *Stream) judge(last bool) {
	s.wait()
	s.segments++
	seg := slices.Clip(s.seg)
	deferred := -1
	for i, c := range s.checkers {
		if l, ok := c.(Liveness); ok && !last && len(s.flying) > 0 {
			// Judged once the acquires in flight have an outcome.
			if !s.first {
				l.start = s.from
			}
			l.settled = map[int]bool{}
			waiting := map[int]bool{}
			for p := range s.flying {
				waiting[p] = true
			}
			s.stalls = append(s.stalls, &pendingStalls{at: i, liveness: l, ops: seg, waiting: waiting})
			s.reserve(i, l.Name())
			deferred = i
		}
	}
	first, from, fences := s.first, s.from, s.startFences
	done := make(chan []Verdict, 1)
	s.judging = done
	go func() {
		vs := make([]Verdict, len(s.checkers))
		for i, c := range s.checkers {
			switch c := c.(type) {
			case Linearizable:
				c.fences = fences
				vs[i] = c.Check(seg)
			case Liveness:
				if i == deferred {
					continue
				}
				if !first {
					c.start = from
				}
				vs[i] = c.Check(seg)
			case Resource:
				vs[i], s.resource = c.judge(seg, s.resource, last)
			case Fairness:
				vs[i], s.fairness = c.judge(seg, s.fairness, last)
			default:
				vs[i] = c.Check(seg)
			}
		}
		done <- vs
	}()
	if last {
		s.wait()
	}
}

// wait merges the verdicts on the segment being judged, once they come.
func (s *Stream) wait() {
	if s.judging == nil {
		return
	}
	for i, v := range <-s.judging {
		if v.Checker != "" {
			s.mergeAt(i, v)
		}
	}
	s.judging = nil
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
// once it has, later segments add only their numbers.
func (s *Stream) mergeAt(i int, v Verdict) {
	for len(s.merged) <= i {
		s.merged = append(s.merged, Verdict{})
	}
	m := s.merged[i]
	switch {
	case m.Checker == "":
		s.merged[i] = v
	case m.Checker == LinearizableName && m.Valid == Invalid:
		m.Details = m.Details.add(v.Details)
		s.merged[i] = m
	default:
		s.merged[i] = merge(m, v)
	}
}

// merge joins the verdicts of one checker on two consecutive segments.
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
