package verdict

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// ops builds a history: n completed acquires every step from start, and the
// nemesis ops given.
func acquires(start, step int64, n int, typ history.Type) []history.Op {
	var out []history.Op
	for i := 0; i < n; i++ {
		t := start + int64(i)*step
		out = append(out, history.Op{Process: i % 3, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: t},
			history.Op{Process: i % 3, Type: typ, F: history.Acquire, Key: "lock", Time: t + 1})
	}
	return out
}

func nemesisOp(f fault.Op, site history.Site, at, dur int64, typ history.Type) history.Op {
	return history.Op{Process: history.NemesisProcess, Type: typ, F: string(f), Time: at, Value: &history.Value{Site: &site, Duration: dur}}
}

func TestVacuity(t *testing.T) {
	requires := []fault.Evidence{{Op: fault.Pause, Point: "before-write"}, {Op: fault.PartitionEnd}}
	// Attempts that completed before (ok), during and after (failed) the pause.
	busy := func(more ...history.Op) []history.Op {
		return append(append(acquires(0, 10, 70, history.OK), acquires(700, 10, 80, history.Fail)...), more...)
	}
	atWrite := history.Site{Process: history.IDOf(2), Point: "before-write"}
	pause := nemesisOp(fault.Pause, atWrite, 500, 400, history.OK)
	healed := nemesisOp(fault.PartitionEnd, history.Site{All: true}, 2000, 0, history.OK)
	cases := []struct {
		name string
		ops  []history.Op
		want string // "" or a part of the reason
	}{
		{"every fault, traffic all round", busy(pause, healed), ""},
		{"the pause never happened", busy(healed), "never happened: pause"},
		{"a pause elsewhere is not this story's", busy(nemesisOp(fault.Pause, history.Site{Process: history.IDOf(2), Point: "before-release"}, 500, 400, history.OK), healed), "never happened: pause"},
		{"a pause that failed is no evidence", busy(nemesisOp(fault.Pause, atWrite, 500, 400, history.Fail), healed), "never happened: pause"},
		{"the partition was never healed", busy(pause), "never happened: partition-end"},
		{"nobody worked before the fault", append(acquires(600, 10, 40, history.OK), nemesisOp(fault.Pause, atWrite, 100, 400, history.OK), healed), "before"},
		{"nobody worked while it lasted", append(acquires(0, 10, 20, history.OK), nemesisOp(fault.Pause, atWrite, 1000, 400, history.OK), healed), "during"},
		{"nobody worked after it", append(acquires(0, 10, 115, history.OK), nemesisOp(fault.Pause, atWrite, 1000, 130, history.OK), healed), "after"},
		{"an attempt answered as the pause began counts as during it", append(append(append(acquires(0, 10, 50, history.OK), acquires(499, 10, 1, history.OK)...),
			acquires(1000, 10, 10, history.Fail)...), pause, healed), ""},
	}
	for _, c := range cases {
		got := Vacuity(requires, Traffic{}, c.ops)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: vacuity %q, want %q", c.name, got, c.want)
		}
		// Read as recorded, in time order, with the fault found on the
		// way (JudgeStream), the same.
		ops := slices.Clone(c.ops)
		slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
		m := newTrafficMeter(requires, Traffic{})
		var nemesis []history.Op
		for _, op := range ops {
			m.add(op)
			if op.Process == history.NemesisProcess {
				nemesis = append(nemesis, op)
			}
		}
		if streamed := m.vacuity(nemesis, false); streamed != got {
			t.Errorf("%s: read as a stream, vacuity %q; whole, %q", c.name, streamed, got)
		}
	}
	if got := Vacuity(nil, Traffic{}, nil); got != "" {
		t.Errorf("a story with no fault is never vacuous, got %q", got)
	}
}

// A delay proves itself by a read or write it held up: one sent while it
// lasted and answered no sooner than the delay. A client that waited out
// the delay for the lock, or a request sent after it ended, proves
// nothing.
func TestVacuityDelayed(t *testing.T) {
	requires := []fault.Evidence{{Op: fault.LatencyStart, Node: "store"}, {Op: fault.LatencyEnd, Node: "store"}}
	traffic := Traffic{Before: 3, After: 3, Delayed: 1}
	link := history.Site{Node: "store", Peer: "c0"}
	store := func(p int, f string, sent, answered int64) []history.Op {
		return []history.Op{{Process: p, Type: history.Invoke, F: f, Key: "reg", Time: sent}, {Process: p, Type: history.OK, F: f, Key: "reg", Time: answered}}
	}
	around := func(more ...history.Op) []history.Op {
		ops := append(acquires(0, 10, 30, history.OK), acquires(2000, 10, 30, history.OK)...)
		ops = append(ops, nemesisOp(fault.LatencyStart, link, 500, 300, history.OK), nemesisOp(fault.LatencyEnd, link, 1500, 0, history.OK))
		return append(ops, more...)
	}
	cases := []struct {
		name string
		ops  []history.Op
		want string
	}{
		{"a write held up by the delay", around(store(0, history.Write, 600, 910)...), ""},
		{"a retired client's new process, held up", around(store(7, history.Read, 1400, 1700)...), ""},
		{"nothing sent while it lasted", around(), "0 read(s) or write(s)"},
		{"quick replies only", around(store(1, history.Write, 600, 620)...), "0 read(s) or write(s)"},
		{"sent after the delay ended", around(store(0, history.Write, 1600, 1950)...), "0 read(s) or write(s)"},
		{"sent before it began", around(store(0, history.Write, 400, 1000)...), "0 read(s) or write(s)"},
	}
	for _, c := range cases {
		ops := slices.Clone(c.ops)
		slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
		got := Vacuity(requires, traffic, ops)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: vacuity %q, want %q", c.name, got, c.want)
		}
	}
}

// A vacuous outcome matches no expectation, whatever the checkers said.
func TestVacuousMatchesNothing(t *testing.T) {
	for _, o := range []Outcome{Safe, Unsafe, LockUnsafe, Deadlock, Unfair, Vacuous} {
		if Matches(Expectation{Outcome: o}, Vacuous, nil) {
			t.Errorf("vacuous matched %s", o)
		}
	}
}
