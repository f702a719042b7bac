package verdict

import (
	"fmt"
	"slices"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Traffic is the least traffic a story needs around its fault, as etcd's
// robustness tests want a minimal rate: lock attempts that completed (ok or
// fail) before the fault, while it lasted (pauses and stalls, whose length
// the history records), and after it. Too little, and a clean verdict says
// nothing.
type Traffic struct {
	Before int `json:"before,omitempty"`
	During int `json:"during,omitempty"`
	After  int `json:"after,omitempty"`
	// Delayed is the least reads and writes that a latency fault held up:
	// sent while it lasted (from its op to the op that ends it on its
	// link) and answered no sooner than its delay. A delay on a client's
	// link to the store that held up none of its requests did not happen,
	// whatever came of the run: a client that spent the delay waiting for
	// the lock (a loaded machine slows a lock's tries past its own
	// timeouts) wrote nothing late. Counted from the history alone, so a
	// client retired under a new process still counts.
	Delayed int `json:"delayed,omitempty"`
	// Contended is the least lock attempts the other clients tried while
	// the client that held the lock when the fault struck still held it,
	// from the fault to that holder's next write (or its release): a
	// story that needs a second client to reach for the lock in that
	// window did not happen where none did (a waiter's retry that fell
	// after it). PastLease starts the window at the end of the lease
	// the holder was granted, where its grant named one (Value.Deadline;
	// otherwise nothing is counted), or later where the observer read its
	// key kept on a node longer: a late write needs a successor.
	Contended int  `json:"contended,omitempty"`
	PastLease bool `json:"past_lease,omitempty"`
	// ContendedIfShort asks Contended only of a run that showed nothing
	// where a violation was expected: a pass, or the expected outcome
	// without an observation it was to show. A lock that holds keeps its
	// waiters in one acquire across the window (retrying inside it, or
	// blocked at the server), which the history cannot count as an
	// attempt; any violation seen, the expected one or a lesser one (a
	// successor granted after the holder's write), stands. A run with no
	// expectation to fall short of (exploration) is asked nothing.
	ContendedIfShort bool `json:"contended_if_short,omitempty"`
}

// defaultTraffic holds for every story that states none.
var defaultTraffic = Traffic{Before: 3, During: 1, After: 3}

// Floor is the floor t stands for: t, or the default where t is zero.
func (t Traffic) Floor() Traffic {
	if t == (Traffic{}) {
		return defaultTraffic
	}
	return t
}

// Vacuity says, in one line, why the run in ops did not tell the story
// whose evidence is requires, or "" when it did. requires[0] is the
// story's fault: traffic (zero: the default floor) is counted around its
// first occurrence. The run's outcome is not known here, so a floor
// asked only of a run that showed nothing (ContendedIfShort) is not asked.
func Vacuity(requires []fault.Evidence, traffic Traffic, ops []history.Op) string {
	m := newTrafficMeter(requires, traffic)
	if len(requires) > 0 {
		m.found(requires[0].First(ops))
	}
	for _, op := range ops {
		m.add(op)
	}
	return m.vacuity(ops, false)
}

// trafficMeter counts a run's lock attempts around its story's fault as
// its history is read, and then says whether the story happened.
type trafficMeter struct {
	requires []fault.Evidence
	floor    Traffic
	// known says the story's fault was found: it lasted from start to
	// end.
	known                 bool
	start, end            int64
	before, during, after int
	// Until the fault is found (a history read as it was recorded, in
	// time order), the attempts answered so far, and how many of them at
	// the latest instant, which counts as the fault's own if it comes
	// next.
	early, atLast int
	last          int64
	// For Traffic.Delayed: the fault's place (fault.Place) and delay,
	// when each process's read or write in flight was sent, how many took
	// the delay or longer, and whether the fault has ended.
	place   string
	delay   int64
	sent    map[int]int64
	delayed int
	ended   bool
	// For Traffic.Contended (nil where the floor asks none).
	contention *contention
}

func newTrafficMeter(requires []fault.Evidence, traffic Traffic) *trafficMeter {
	m := &trafficMeter{requires: requires, floor: traffic.Floor(), sent: map[int]int64{}}
	if m.floor.Contended > 0 {
		m.contention = newContention(m.floor.PastLease)
	}
	return m
}

// found sets the story's fault, op (nil: not found yet).
func (m *trafficMeter) found(op *history.Op) {
	if op == nil || m.known {
		return
	}
	m.known, m.start, m.end = true, op.Time, op.Time
	m.place = fault.Place(*op)
	if op.Value != nil {
		m.delay = op.Value.Duration
	}
	if spec, _ := fault.Lookup(fault.Op(op.F)); spec.Shape == fault.Span && op.Value != nil {
		m.end += op.Value.Duration
	}
	m.before += m.early
	if m.early > 0 && m.last == m.start {
		m.before -= m.atLast
		m.during += m.atLast
	}
}

// add reads the next op.
func (m *trafficMeter) add(op history.Op) {
	if !m.known && len(m.requires) > 0 && m.requires[0].Matches(op) {
		m.found(&op)
	}
	m.countDelayed(op)
	if m.contention != nil {
		m.contention.add(op, m.known, m.start)
	}
	if op.F != history.Acquire || (op.Type != history.OK && op.Type != history.Fail) {
		return
	}
	switch {
	case !m.known:
		if op.Time != m.last {
			m.last, m.atLast = op.Time, 0
		}
		m.early++
		m.atLast++
	case op.Time < m.start:
		m.before++
	case op.Time <= m.end:
		m.during++
	default:
		m.after++
	}
}

// vacuity says why the story did not happen, or "": every fault it
// requires is among the nemesis's ops, and the traffic around the first
// of them reached the floor. short says the run showed no violation
// where one was expected (showedNothing).
func (m *trafficMeter) vacuity(nemesis []history.Op, short bool) string {
	for _, e := range m.requires {
		if e.First(nemesis) == nil {
			return fmt.Sprintf("required fault never happened: %s", e)
		}
	}
	if !m.known {
		return ""
	}
	if m.delayed < m.floor.Delayed {
		return fmt.Sprintf("too little traffic during %s: %d read(s) or write(s) sent while it lasted were held up by its delay, the story needs %d",
			m.requires[0], m.delayed, m.floor.Delayed)
	}
	counts := []struct {
		when      string
		got, want int
	}{{"before", m.before, m.floor.Before}, {"during", m.during, m.floor.During}, {"after", m.after, m.floor.After}}
	for _, c := range counts {
		if c.when == "during" && m.end == m.start {
			continue
		}
		if c.got < c.want {
			return fmt.Sprintf("too little traffic %s %s: %d lock attempts completed, the story needs %d", c.when, m.requires[0], c.got, c.want)
		}
	}
	if m.contention != nil && (short || !m.floor.ContendedIfShort) {
		return m.contention.vacuity(m.floor.Contended, m.requires[0].String(), m.known, m.start)
	}
	return ""
}

// countDelayed counts op when it answers a read or write sent while the
// fault lasted that took at least the fault's delay: the fault held it
// up. The fault ends at the first op after it that ends its kind on its
// place (or every place).
func (m *trafficMeter) countDelayed(op history.Op) {
	if m.floor.Delayed == 0 || !m.known || op.Time < m.start {
		return
	}
	switch {
	case op.Process == history.NemesisProcess && op.Type == history.OK:
		// Paired as a report pairs them (report.Faults): an end on the
		// fault's place, or one on every place.
		m.ended = m.ended || slices.Contains(fault.EndedBy(fault.Op(op.F)), m.requires[0].Op) &&
			(op.Site().All || fault.Place(op) == m.place)
	case op.F != history.Read && op.F != history.Write:
	case op.Type == history.Invoke:
		if !m.ended {
			m.sent[op.Process] = op.Time
		}
	default:
		if sent, ok := m.sent[op.Process]; ok && op.Time-sent >= m.delay {
			m.delayed++
		}
		delete(m.sent, op.Process)
	}
}
