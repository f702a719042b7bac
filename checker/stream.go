package checker

import (
	"cmp"
	"maps"
	"slices"

	"github.com/locktorture/locktorture/history"
)

// Stream judges a history as it is read, op by op, a segment at a time: a
// run of any length is judged in the memory of a few segments and the ops
// in flight, not of the history, and gets the verdicts the checkers give
// the whole history at once (the differential test holds it to that).
//
// A segment ends at a quiet point, just before an acquire returns a grant
// of the one key the history's acquires name (a stall of another key could
// span the grant of one: a history of several keys is judged whole):
// nobody holds any key, no lease of a retired holder is still promised,
// every node's last read found no key, no nemesis action and no client op
// other than an acquire is in flight, no op was recorded at the grant's
// instant before it, and no acquire in flight was called at the instant
// its process's previous op returned. There no hold, promise or ghost
// spans the cut, and the grant ends any stall. What does span it is
// carried, in ops and in the few checkers' own state:
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
//   - liveness judges a segment's stalls, which the grant's call ends,
//     once the acquires it ended with in flight have their outcome (one
//     granted or of unknown outcome may have taken the key from its call
//     on), with the nemesis's actions until then, and every refusal at
//     the grant's instant is read; the next segment's first stall begins
//     at the cut;
//   - stolen keys are judged with the releases and faults that ended since
//     each node's last read before the cut: the observer sends a node's
//     next read only once the one before is recorded, so no pair of
//     observations after the cut looks further back for what removed a
//     key.
//
// Verdicts merge across segments: invalid if any segment's is, else
// unknown if any is; counts and totals add up, the longest spans are the
// longest of any segment, and up to the same number of anomalies of a kind
// are listed, though not always the same ones. Each segment's
// linearizability search has the whole Timeout, so a history too long to
// search whole may be decided in segments. Where memory is not bounded: an
// acquire that waits on through many segments (see maxHeld), and a node
// whose last read stays the same for long, whose releases and faults are
// carried meanwhile.
//
// The checkers are given by value, as engine.Checkers gives them; one of
// another type is judged a segment at a time with nothing carried.
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
	// nemesis are the nemesis's actions in flight, by action.
	nemesis map[history.ActionKey][]history.Op
	held    map[int]map[string]int // entries held, by process and key
	// deadlines are, by process and key, the latest deadline promised in
	// the hold in progress; promised is the latest deadline a retired
	// holder's leases ran to.
	deadlines map[int]map[string]int64
	promised  int64
	keys      map[string]bool // the keys acquires have named
	// reads are, by node and key, the node's last observation of the key.
	reads map[[2]string]lastRead
	// ended are the releases and nemesis actions that ended, each as its
	// invocation and completion, since the earliest node's last read
	// before the segment: what stolen keys may need for an excuse.
	ended []history.Op
	// carried is ended as the current segment began.
	carried []history.Op
	fences  map[string]int64 // the greatest fence granted, by key
	// startFences are fences as the current segment began.
	startFences map[string]int64

	// The checkers' carried state, by their place in checkers.
	resource map[int]*resourceCarry
	fairness map[int]*fairnessCarry
	// stalls are the segments whose liveness waits on the outcome of
	// acquires they ended with in flight, or on what else is recorded at
	// their grant's instant.
	stalls []*pendingStalls
	// judging brings the verdicts on the segment being judged.
	judging  chan []Verdict
	merged   []Verdict
	segments int
}

// lastRead is what a node's last read found: whether it held the key,
// and when the read was recorded.
type lastRead struct {
	found bool
	at    int64
}

// DefaultSegment is the fewest ops a Stream's segment gathers before it
// may end: large enough that the checkers' fixed cost per segment is
// small beside their work, small enough that a segment's memory is a few
// megabytes.
const DefaultSegment = 20000

// maxHeld is how many segments may wait on an acquire's outcome for
// their stalls to be judged. Past it the oldest is judged with what is
// known: an acquire still waiting may have taken the key from its call
// on, as one that never returns may, though it may yet be refused.
const maxHeld = 8

// NewStream judges a history with checkers, in segments of at least minOps
// ops (0: DefaultSegment).
func NewStream(checkers []Checker, minOps int) *Stream {
	if minOps <= 0 {
		minOps = DefaultSegment
	}
	return &Stream{checkers: checkers, minOps: minOps, first: true,
		flying: map[int]history.Op{}, returned: map[int]int64{}, nemesis: map[history.ActionKey][]history.Op{},
		held: map[int]map[string]int{}, deadlines: map[int]map[string]int64{}, keys: map[string]bool{},
		reads: map[[2]string]lastRead{}, fences: map[string]int64{},
		resource: map[int]*resourceCarry{}, fairness: map[int]*fairnessCarry{}}
}

// Add reads the next op of the history, in recorded order.
func (s *Stream) Add(op history.Op) {
	if len(s.seg) >= s.minOps && s.quietBefore(op) {
		s.cut(op.Time)
	}
	if len(s.stalls) > 0 {
		s.resolve(op)
	}
	s.track(op)
	s.seg = append(s.seg, op)
	s.lastAt = op.Time
}

// Verdicts judges what is left and returns each checker's verdict on the
// whole history, in the order the checkers were given. An acquire still
// in flight at the end may have taken its key from its call on, in every
// segment it spans.
func (s *Stream) Verdicts() []Verdict {
	s.judge(true, 0)
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
	for _, r := range s.reads {
		if r.found {
			return false
		}
	}
	return true
}

// track keeps what quietBefore and the carried state ask of the ops read
// so far.
func (s *Stream) track(op history.Op) {
	p := op.Process
	switch {
	case p == history.NemesisProcess:
		k := history.ActionOf(op)
		if op.Type == history.Invoke {
			s.nemesis[k] = append(s.nemesis[k], op)
		} else if q := s.nemesis[k]; len(q) > 0 {
			s.ended = append(s.ended, q[0], op)
			if s.nemesis[k] = q[1:]; len(q) == 1 {
				delete(s.nemesis, k)
			}
		}
		return
	case p == history.ObserverProcess:
		if op.F == history.Observe && op.Value != nil {
			s.reads[[2]string{op.Value.Target, op.Key}] = lastRead{found: op.Error == "" && op.Value.Token != "", at: op.Time}
		}
		return
	}
	if op.F == history.Acquire {
		s.keys[op.Key] = true
	}
	if op.Type == history.Invoke {
		s.flying[p] = op
	} else {
		if inv, ok := s.flying[p]; ok && op.F == history.Release {
			s.ended = append(s.ended, inv, op)
		}
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
	s.judge(false, at)
	waiting := slices.SortedFunc(maps.Values(s.flying), func(a, b history.Op) int { return cmp.Compare(a.Index, b.Index) })
	s.seg = append(make([]history.Op, 0, 2*s.minOps), waiting...)
	s.first, s.from = false, at
	s.startFences = maps.Clone(s.fences)
	// A pair of observations after the cut looks back no further than
	// its node's last read before it.
	bound := at
	for _, r := range s.reads {
		bound = min(bound, r.at)
	}
	kept := s.ended[:0:0]
	for i := 0; i+1 < len(s.ended); i += 2 {
		if s.ended[i+1].Time >= bound {
			kept = append(kept, s.ended[i], s.ended[i+1])
		}
	}
	s.ended, s.carried = kept, slices.Clip(kept)
}

// judge judges the current segment, the last one if last (else the one
// cut at at), while the next is read: the segment before is merged first,
// so the checkers that carry state across segments see them in order.
func (s *Stream) judge(last bool, at int64) {
	s.wait()
	s.segments++
	seg := slices.Clip(s.seg)
	deferred := map[int]bool{}
	for i, c := range s.checkers {
		if l, ok := c.(Liveness); ok && !last {
			// Judged once the acquires in flight have an outcome and
			// every op at the grant's instant is read.
			if !s.first {
				l.start = s.from
			}
			l.until, l.settled = at, map[int]bool{}
			waiting := map[int]bool{}
			for p := range s.flying {
				waiting[p] = true
			}
			s.stalls = append(s.stalls, &pendingStalls{at: i, liveness: l, ops: seg, waiting: waiting, cut: at})
			s.reserve(i, l.Name())
			deferred[i] = true
		}
	}
	if len(s.stalls) > maxHeld {
		w := s.stalls[0]
		s.stalls = s.stalls[1:]
		s.mergeAt(w.at, w.liveness.Check(w.ops))
	}
	first, from, fences, carried := s.first, s.from, s.startFences, s.carried
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
				if deferred[i] {
					continue
				}
				if !first {
					c.start = from
				}
				vs[i] = c.Check(seg)
			case StolenKeys:
				vs[i] = c.Check(append(slices.Clip(carried), seg...))
			case Resource:
				vs[i], s.resource[i] = c.judge(seg, s.resource[i], last)
			case Fairness:
				vs[i], s.fairness[i] = c.judge(seg, s.fairness[i], last)
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
