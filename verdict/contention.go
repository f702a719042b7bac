package verdict

import (
	"fmt"

	"github.com/locktorture/locktorture/history"
)

// contention counts, for Traffic.Contended, the lock attempts the other
// clients tried inside the story's window: from its fault (or, with
// Traffic.PastLease, from the end of the lease the holder was granted) to
// the holder's next write answered in it, or else its release. The
// holder is the client whose grant came last before the fault and which
// had not begun to release it. An attempt counts when it was granted in
// the window, or sent and refused in it: an attempt sent before the
// window and refused asked the lock while it was still out of reach. A
// window that the lock keeps shut (the holder's key kept on a node until
// after the holder released) asks for nothing.
//
// Read in recorded (time) order, as trafficMeter reads, so it works on a
// stream.
type contention struct {
	pastLease bool
	// Until the fault: each client's grant not yet released, and the
	// latest expiry the observer read on a node for each lease token.
	held map[int]history.Op
	kept map[string]int64
	// From the fault: whether the holder is known, the holder (-1 where
	// none held or a PastLease grant named no lease, which leaves nothing
	// to count), its lease token, whether it released before the window
	// opened, the window's start, whether its end has come, when each
	// other client's attempt in flight was sent, and the attempts counted.
	resolved bool
	holder   int
	token    string
	shut     bool
	from     int64
	closed   bool
	sent     map[int]int64
	tried    int
}

func newContention(pastLease bool) *contention {
	return &contention{pastLease: pastLease, held: map[int]history.Op{}, kept: map[string]int64{}, holder: -1, sent: map[int]int64{}}
}

// add reads the next op; known says the fault was found, at the time
// at. Ops up to the fault's time tell who held when it struck (the fault
// may be known before them, where a whole history is read); the first
// one after it settles the holder.
func (c *contention) add(op history.Op, known bool, at int64) {
	if !c.resolved && known && op.Time > at {
		c.resolve(at)
	}
	if c.resolved {
		c.during(op)
	} else {
		c.before(op)
	}
}

// before reads an op recorded before the fault.
func (c *contention) before(op history.Op) {
	switch {
	case op.F == history.Acquire && op.Type == history.OK:
		c.held[op.Process] = op
	case op.F == history.Observe && op.Value != nil && op.Value.Token != "":
		c.kept[op.Value.Token] = max(c.kept[op.Value.Token], op.Value.Deadline)
	case op.F == history.Release && op.Type == history.Invoke,
		op.F == history.Acquire && op.Type == history.Info:
		delete(c.held, op.Process)
	}
}

// resolve settles the holder: whoever held at the fault's time at.
func (c *contention) resolve(at int64) {
	c.resolved = true
	var grant *history.Op
	for _, op := range c.held {
		if op.Time <= at && (grant == nil || op.Time > grant.Time) {
			grant = &op
		}
	}
	kept := c.kept
	c.held, c.kept = nil, nil
	if grant == nil {
		return
	}
	c.holder, c.from = grant.Process, at
	if c.pastLease {
		if grant.Value == nil || grant.Value.Deadline == 0 {
			c.holder = -1
			return
		}
		c.token = grant.Value.Token
		c.from = max(at, grant.Value.Deadline, kept[c.token])
	}
}

// outlived moves a PastLease window's start to where a node keeps the
// holder's key past it (php-lock's key outlives the lease its client
// counts by a second): no successor can be let in before then, and what
// was counted until now came before the window.
func (c *contention) outlived(op history.Op) {
	if op.Value == nil || op.Value.Token != c.token || op.Value.Deadline <= c.from {
		return
	}
	c.from, c.tried = op.Value.Deadline, 0
	clear(c.sent)
}

// during reads an op recorded after the fault.
func (c *contention) during(op history.Op) {
	if c.holder < 0 || c.closed {
		return
	}
	if c.pastLease && op.F == history.Observe {
		c.outlived(op)
	}
	if op.Process == c.holder && op.F == history.Release && op.Type == history.Invoke {
		// A release before the window opened shut it: the lock let
		// nobody in while the holder held.
		c.closed, c.shut = true, op.Time < c.from
		return
	}
	if op.Time < c.from {
		return
	}
	if op.Process == c.holder {
		c.closed = op.F == history.Write && op.Type != history.Invoke
		return
	}
	if op.F != history.Acquire || op.Process < 0 {
		return
	}
	switch op.Type {
	case history.Invoke:
		c.sent[op.Process] = op.Time
	case history.OK:
		c.tried++
	case history.Fail:
		if _, ok := c.sent[op.Process]; ok {
			c.tried++
		}
	}
	if op.Type != history.Invoke {
		delete(c.sent, op.Process)
	}
}

// vacuity says why the window held too few attempts, or "": known and
// at as add's.
func (c *contention) vacuity(want int, fault string, known bool, at int64) string {
	if !known {
		return ""
	}
	if !c.resolved {
		c.resolve(at)
	}
	if c.holder < 0 || c.shut || c.tried >= want {
		return ""
	}
	from := fmt.Sprintf("after %s", fault)
	if c.pastLease {
		from = fmt.Sprintf("after its lease ended (%.3f s)", float64(c.from)/1e9)
	}
	return fmt.Sprintf("too little contention: %d lock attempt(s) by other clients were tried while client %d held the lock %s, the story needs %d",
		c.tried, c.holder, from, want)
}
