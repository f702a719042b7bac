package verdict

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// try is one lock attempt by client p, sent at sent and answered at
// answered as typ (a grant's lease ending at deadline, 0: none named).
func try(p int, sent, answered int64, typ history.Type, deadline int64) []history.Op {
	done := history.Op{Process: p, Type: typ, F: history.Acquire, Key: "lock", Time: answered}
	if typ == history.OK {
		done.Value = &history.Value{Token: fmt.Sprintf("t%d", p), Deadline: deadline}
	}
	return []history.Op{{Process: p, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: sent}, done}
}

// op is client p's f, sent at sent and answered at answered.
func op(p int, f string, sent, answered int64) []history.Op {
	return []history.Op{{Process: p, Type: history.Invoke, F: f, Key: "reg", Time: sent}, {Process: p, Type: history.OK, F: f, Key: "reg", Time: answered}}
}

// inOrder orders the parts by time, as a run records them.
func inOrder(parts ...[]history.Op) []history.Op {
	var ops []history.Op
	for _, p := range parts {
		ops = append(ops, p...)
	}
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	return ops
}

// A story that needs a second client to reach for the lock while the
// first holds it after the fault (a clock jump under a paused holder)
// did not happen where the waiter's tries fell outside that window.
func TestVacuityContended(t *testing.T) {
	requires := []fault.Evidence{{Op: fault.ClockBump}}
	bump := []history.Op{nemesisOp(fault.ClockBump, history.Site{Node: "n3"}, 300, 0, history.OK)}
	held := try(0, 90, 100, history.OK, 1000)
	write := op(0, history.Write, 600, 610)
	cases := []struct {
		name string
		ops  []history.Op
		want string
	}{
		{"granted after the jump", inOrder(held, bump, try(1, 400, 450, history.OK, 1400), write), ""},
		{"refused after the jump", inOrder(held, bump, try(1, 400, 450, history.Fail, 0), write), ""},
		{"sent before, granted after", inOrder(held, bump, try(1, 250, 350, history.OK, 1300), write), ""},
		{"sent before, refused after", inOrder(held, bump, try(1, 250, 350, history.Fail, 0), write, try(1, 700, 710, history.OK, 1700)),
			"0 lock attempt(s) by other clients were tried while client 0 held the lock after clock-bump"},
		{"tried only once the holder wrote", inOrder(held, bump, write, try(1, 650, 660, history.OK, 1650)), "the story needs 1"},
		{"tried only by the holder", inOrder(held, bump, try(0, 400, 410, history.Fail, 0), write), "the story needs 1"},
		{"a released grant holds nothing", inOrder(held, op(0, history.Release, 200, 210), bump), ""},
	}
	for _, c := range cases {
		got := Vacuity(requires, Traffic{Contended: 1}, c.ops)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: vacuity %q, want %q", c.name, got, c.want)
		}
		m := newTrafficMeter(requires, Traffic{Contended: 1})
		for _, op := range c.ops {
			m.add(op)
		}
		if streamed := m.vacuity(bump, false); streamed != got {
			t.Errorf("%s: read as a stream, vacuity %q; whole, %q", c.name, streamed, got)
		}
	}
}

// kept is the observer's read, at at, of client 0's key (token "t0") on a
// node that keeps it until until.
func kept(at, until int64) []history.Op {
	return []history.Op{{Process: history.ObserverProcess, Type: history.OK, F: history.Observe, Key: "lock", Time: at,
		Value: &history.Value{Token: "t0", Deadline: until}}}
}

// A late write needs a successor: with PastLease the window opens when
// the holder's lease ends, and closes when its write is answered.
func TestVacuityContendedPastLease(t *testing.T) {
	requires := []fault.Evidence{{Op: fault.LatencyStart, Node: "store"}}
	delay := nemesisOp(fault.LatencyStart, history.Site{Node: "store", Peer: "c0"}, 200, 300, history.OK)
	lateWrite := op(0, history.Write, 300, 800)
	cases := []struct {
		name string
		ops  []history.Op
		want string
	}{
		{"a successor granted before the late write", inOrder(try(0, 90, 100, history.OK, 500), []history.Op{delay}, lateWrite, try(1, 550, 560, history.OK, 1560)), ""},
		{"refused while the lease lasted, then nothing until the write",
			inOrder(try(0, 90, 100, history.OK, 500), []history.Op{delay}, lateWrite, try(1, 450, 470, history.Fail, 0), try(1, 900, 910, history.OK, 1900)),
			"after its lease ended (0.000 s), the story needs 1"},
		{"a grant that names no lease is not counted", inOrder(try(0, 90, 100, history.OK, 0), []history.Op{delay}, lateWrite), ""},
		{"a key a node keeps past the late write, seen before the delay", inOrder(try(0, 90, 100, history.OK, 500), kept(150, 1500), []history.Op{delay}, lateWrite,
			try(1, 450, 470, history.Fail, 0), op(0, history.Release, 850, 860), try(1, 900, 910, history.OK, 1900)), ""},
		{"a key a node keeps past the late write, seen after it began", inOrder(try(0, 90, 100, history.OK, 500), []history.Op{delay}, kept(520, 1500), lateWrite,
			try(1, 510, 515, history.Fail, 0), op(0, history.Release, 850, 860)), ""},
		{"a key kept a little past the lease, then nothing until the write", inOrder(try(0, 90, 100, history.OK, 500), kept(150, 520), []history.Op{delay}, lateWrite,
			try(1, 505, 510, history.Fail, 0), op(0, history.Release, 850, 860)), "the story needs 1"},
	}
	for _, c := range cases {
		got := Vacuity(requires, Traffic{Contended: 1, PastLease: true}, c.ops)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: vacuity %q, want %q", c.name, got, c.want)
		}
	}
}

// ContendedIfShort asks the floor of a run that showed nothing where a
// violation was expected, and of no other: a pass where a second holder
// was expected with nobody reaching for the lock in the window is
// vacuous, a lock that holds passes however its waiters waited, and a
// violation seen stands, a lesser one too (a successor granted after the
// holder's write, before its release).
func TestContendedIfShort(t *testing.T) {
	requires := []fault.Evidence{{Op: fault.ClockBump}}
	bump := []history.Op{nemesisOp(fault.ClockBump, history.Site{Node: "n1"}, 300, 0, history.OK)}
	release := []history.Op{{Process: 0, Type: history.Invoke, F: history.Release, Key: "lock", Time: 620},
		{Process: 0, Type: history.OK, F: history.Release, Key: "lock", Time: 630}}
	holder := inOrder(try(0, 90, 100, history.OK, 1000), bump, op(0, history.Write, 600, 610), release)
	untold := inOrder(holder, try(1, 650, 660, history.OK, 1660))
	shown := inOrder(holder, try(1, 400, 450, history.OK, 1450))
	afterTheWrite := inOrder(holder, try(1, 612, 615, history.OK, 1615))
	cases := []struct {
		name    string
		expect  Outcome
		ifShort bool
		ops     []history.Op
		want    Outcome
	}{
		{"a pass where two holders were expected, nobody reaching", LockUnsafe, true, untold, Vacuous},
		{"a pass expected, nobody reaching", Safe, true, untold, Safe},
		{"a pass expected, nobody reaching, the floor asked of every run", Safe, false, untold, Vacuous},
		{"two holders expected and shown", LockUnsafe, true, shown, LockUnsafe},
		{"a lost write expected, two holders after the write", Unsafe, true, afterTheWrite, LockUnsafe},
	}
	for _, c := range cases {
		traffic := Traffic{Contended: 1, ContendedIfShort: c.ifShort}
		r := Judge(Case{Expected: Expectation{Outcome: c.expect}, Checkers: []checker.Checker{checker.Intervals{}}, Requires: requires, Traffic: traffic},
			c.ops, 0, nil)
		if r.Outcome != c.want {
			t.Errorf("%s: outcome %s (vacuous %q), want %s", c.name, r.Outcome, r.Vacuous, c.want)
		}
	}
	if got := Vacuity(requires, Traffic{Contended: 1, ContendedIfShort: true}, untold); got != "" {
		t.Errorf("a run whose outcome is not known yet: vacuity %q, want none", got)
	}
}
