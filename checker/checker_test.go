package checker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
)

// h builds a history by hand: each call appends one op at the given time.
type h []history.Op

func (x *h) add(p int, t history.Type, f, key string, v *history.Value, at int64, errText string) *h {
	*x = append(*x, history.Op{Index: int64(len(*x)), Process: p, Type: t, F: f, Key: key, Value: v, Time: at, Error: errText})
	return x
}

// cycle is one complete acquire/release by p: acquire [a0,a1], release [r0,r1].
func (x *h) cycle(p int, a0, a1, r0, r1 int64) *h {
	x.add(p, history.Invoke, history.Acquire, "L", nil, a0, "")
	x.add(p, history.OK, history.Acquire, "L", nil, a1, "")
	x.add(p, history.Invoke, history.Release, "L", nil, r0, "")
	return x.add(p, history.OK, history.Release, "L", nil, r1, "")
}

func sorted(x h) []history.Op {
	// Hand-built histories are written per process; the recorder's order is
	// by time, which is what checkers rely on.
	out := append([]history.Op(nil), x...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Time < out[j-1].Time; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func reg(v int64) *history.Value { return &history.Value{Reg: history.Int64(v)} }

func fenced(v, f int64) *history.Value { return &history.Value{Reg: history.Int64(v), Fence: f} }

func TestIntervalsSequentialHoldsAreValid(t *testing.T) {
	var x h
	x.cycle(0, 0, 10, 20, 25).cycle(1, 5, 30, 40, 45).cycle(0, 50, 60, 70, 75)
	v := Intervals{}.Check(sorted(x))
	if v.Valid != Valid {
		t.Fatalf("want valid, got %v %+v", v.Valid, v.Anomalies)
	}
}

func TestIntervalsNameBothDoubleHolders(t *testing.T) {
	var x h
	x.cycle(0, 0, 10, 30, 35).cycle(1, 5, 20, 40, 45)
	v := Intervals{}.Check(sorted(x))
	var doubles []Anomaly
	for _, a := range v.Anomalies {
		if a.Kind == "double-holder" {
			doubles = append(doubles, a)
		}
	}
	if v.Valid != Invalid || len(doubles) != 1 {
		t.Fatalf("want one double holder, got %v %+v", v.Valid, v.Anomalies)
	}
	a := doubles[0]
	if a.Processes[0] != 0 || a.Processes[1] != 1 || a.Start != 20 || a.End != 30 || a.Key != "L" {
		t.Fatalf("wrong anomaly %+v", a)
	}
}

func TestIntervalsRetiredProcessStopsHolding(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 10, "")
	x.add(0, history.Invoke, history.Write, "R", reg(1), 11, "").add(0, history.Info, history.Write, "R", nil, 15, "timeout")
	x.cycle(1, 12, 20, 30, 31)
	if v := (Intervals{}).Check(sorted(x)); v.Valid != Valid {
		t.Fatalf("retired holder should not overlap: %+v", v.Anomalies)
	}
}

func TestIntervalsOpenHoldAtEndCounts(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 10, "")
	x.cycle(1, 12, 20, 30, 31)
	if v := (Intervals{}).Check(sorted(x)); v.Valid != Invalid {
		t.Fatal("a hold never released overlaps a later one")
	}
}

func lin(x h) Validity { return Linearizable{Timeout: 10 * time.Second}.Check(sorted(x)).Valid }

func TestLinearizableSequentialMutex(t *testing.T) {
	var x h
	x.cycle(0, 0, 10, 20, 25).cycle(1, 5, 30, 40, 45)
	x.add(2, history.Invoke, history.Acquire, "L", nil, 1, "").add(2, history.Fail, history.Acquire, "L", nil, 44, "taken")
	if got := lin(x); got != Valid {
		t.Fatalf("want valid, got %v", got)
	}
}

func TestLinearizableCatchesAcquireWhileHeld(t *testing.T) {
	var x h
	x.cycle(0, 0, 10, 30, 35).cycle(1, 15, 20, 40, 45)
	if got := lin(x); got != Invalid {
		t.Fatalf("want invalid, got %v", got)
	}
}

func TestLinearizableConcurrentAcquiresMayOrder(t *testing.T) {
	// p1's acquire overlaps p0's release, so it may take effect after it.
	var x h
	x.cycle(0, 0, 10, 30, 35).cycle(1, 15, 32, 40, 45)
	if got := lin(x); got != Valid {
		t.Fatalf("want valid, got %v", got)
	}
}

func TestLinearizableUnknownAcquireMayNotHaveHappened(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.Info, history.Acquire, "L", nil, 10, "timeout")
	x.cycle(1, 20, 25, 30, 35)
	if got := lin(x); got != Valid {
		t.Fatalf("an info acquire must be allowed not to have happened, got %v", got)
	}
}

func TestLinearizableReleaseByNonHolder(t *testing.T) {
	var x h
	x.cycle(0, 0, 10, 30, 35)
	x.add(1, history.Invoke, history.Release, "L", nil, 15, "").add(1, history.OK, history.Release, "L", nil, 16, "")
	if got := lin(x); got != Invalid {
		t.Fatalf("want invalid, got %v", got)
	}
}

func TestLinearizablePartitionsByKey(t *testing.T) {
	var x h
	x.cycle(0, 0, 10, 30, 35)
	x.add(1, history.Invoke, history.Acquire, "M", nil, 12, "").add(1, history.OK, history.Acquire, "M", nil, 14, "")
	if got := lin(x); got != Valid {
		t.Fatalf("holders of different keys do not conflict, got %v", got)
	}
}

func res(x h) Verdict { return Resource{}.Check(sorted(x)) }

func TestResourceCleanIncrements(t *testing.T) {
	var x h
	for i := int64(1); i <= 3; i++ {
		x.add(int(i), history.Invoke, history.Write, "R", reg(i), i*10, "").add(int(i), history.OK, history.Write, "R", nil, i*10+1, "")
	}
	x.add(9, history.Invoke, history.Read, "R", nil, 50, "").add(9, history.OK, history.Read, "R", reg(3), 51, "")
	if v := res(x); v.Valid != Valid {
		t.Fatalf("want valid, got %+v", v.Anomalies)
	}
}

func TestResourceLostUpdateNamesWriters(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Write, "R", reg(1), 10, "").add(0, history.OK, history.Write, "R", nil, 11, "")
	x.add(1, history.Invoke, history.Write, "R", reg(2), 20, "").add(1, history.OK, history.Write, "R", nil, 21, "")
	x.add(2, history.Invoke, history.Write, "R", reg(2), 30, "").add(2, history.OK, history.Write, "R", nil, 31, "")
	v := res(x)
	if v.Valid != Invalid || v.Anomalies[0].Kind != "lost-update" || v.Anomalies[0].Processes[0] != 1 || v.Anomalies[0].Processes[1] != 2 {
		t.Fatalf("want lost update by 1 and 2, got %+v", v)
	}
}

func TestResourceFinalReadShortOfIncrements(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Write, "R", reg(1), 10, "").add(0, history.OK, history.Write, "R", nil, 11, "")
	x.add(1, history.Invoke, history.Write, "R", reg(2), 20, "").add(1, history.OK, history.Write, "R", nil, 21, "")
	x.add(9, history.Invoke, history.Read, "R", nil, 50, "").add(9, history.OK, history.Read, "R", reg(1), 51, "")
	if v := res(x); v.Valid != Invalid {
		t.Fatal("register at 1 after 2 increments must be invalid")
	}
}

func TestResourceStaleFenceRejectedIsSafe(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Write, "R", fenced(1, 1), 10, "").add(0, history.OK, history.Write, "R", nil, 11, "")
	x.add(1, history.Invoke, history.Write, "R", fenced(2, 2), 20, "").add(1, history.OK, history.Write, "R", nil, 21, "")
	x.add(0, history.Invoke, history.Write, "R", fenced(2, 1), 30, "").add(0, history.Fail, history.Write, "R", nil, 31, ErrStaleFence)
	v := res(x)
	if v.Valid != Valid || v.Details.StaleWritesRejected != 1 {
		t.Fatalf("want valid with one rejection, got %+v", v)
	}
}

func TestResourceWithheldWriteIsCountedAndLosesNothing(t *testing.T) {
	// Process 0 read 0 and, told its lease was lost, did not write; 1
	// wrote 1 over the same read: one increment, none lost.
	var x h
	x.add(0, history.Invoke, history.Read, "R", nil, 1, "").add(0, history.OK, history.Read, "R", reg(0), 2, "")
	x.add(1, history.Invoke, history.Read, "R", nil, 3, "").add(1, history.OK, history.Read, "R", reg(0), 4, "")
	x.add(1, history.Invoke, history.Write, "R", reg(1), 5, "").add(1, history.OK, history.Write, "R", nil, 6, "")
	x.add(0, history.Invoke, history.Write, "R", reg(1), 7, "").add(0, history.Fail, history.Write, "R", nil, 8, ErrLeaseLost)
	v := res(x)
	if v.Valid != Valid || v.Details.WritesWithheld != 1 || v.Details.LostUpdates != 0 {
		t.Fatalf("want valid with one withheld write, got %+v", v)
	}
}

func TestResourceStaleFenceAcceptedIsInvalid(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Write, "R", fenced(1, 5), 10, "").add(0, history.OK, history.Write, "R", nil, 11, "")
	x.add(1, history.Invoke, history.Write, "R", fenced(2, 3), 20, "").add(1, history.OK, history.Write, "R", nil, 21, "")
	v := res(x)
	if v.Valid != Invalid || v.Anomalies[0].Kind != "stale-write" {
		t.Fatalf("want stale-write, got %+v", v)
	}
}

func TestResourceConcurrentFencedWritesMayCompleteOutOfOrder(t *testing.T) {
	var x h
	x.add(1, history.Invoke, history.Write, "R", fenced(2, 2), 10, "").add(1, history.OK, history.Write, "R", nil, 30, "")
	x.add(0, history.Invoke, history.Write, "R", fenced(1, 1), 5, "").add(0, history.OK, history.Write, "R", nil, 31, "")
	if v := res(x); v.Valid != Valid {
		t.Fatalf("overlapping writes are not ordered, got %+v", v.Anomalies)
	}
}

func TestValidityJSON(t *testing.T) {
	for _, v := range []Validity{Valid, Invalid, Unknown} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back Validity
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Fatalf("%v → %s → %v (%v)", v, b, back, err)
		}
	}
	if string(mustJSON(Valid)) != "true" || string(mustJSON(Unknown)) != `"unknown"` {
		t.Fatal("validity must marshal as true/false/\"unknown\"")
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func linWith(s Semantics, x h) Validity {
	return Linearizable{Semantics: s, Timeout: 10 * time.Second}.Check(sorted(x)).Valid
}

func TestReentrantModelCountsEntries(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 1, "")
	x.add(0, history.Invoke, history.Acquire, "L", nil, 2, "").add(0, history.OK, history.Acquire, "L", nil, 3, "")
	x.add(0, history.Invoke, history.Release, "L", nil, 4, "").add(0, history.OK, history.Release, "L", nil, 5, "")
	// Still held once: another process may not have it yet...
	bad := append(h(nil), x...)
	bad.add(1, history.Invoke, history.Acquire, "L", nil, 6, "").add(1, history.OK, history.Acquire, "L", nil, 7, "")
	if got := linWith(Reentrant, bad); got != Invalid {
		t.Fatalf("acquire while the owner still counts one entry: %v", got)
	}
	// ...but after the second release it may.
	x.add(0, history.Invoke, history.Release, "L", nil, 6, "").add(0, history.OK, history.Release, "L", nil, 7, "")
	x.add(1, history.Invoke, history.Acquire, "L", nil, 8, "").add(1, history.OK, history.Acquire, "L", nil, 9, "")
	if got := linWith(Reentrant, x); got != Valid {
		t.Fatalf("two entries, two exits, then another owner: %v", got)
	}
	if got := linWith(Mutex, x); got != Invalid {
		t.Fatal("the plain mutex model must refuse re-entry")
	}
}

func TestFencedModelNeedsIncreasingTokens(t *testing.T) {
	fence := func(f int64) *history.Value { return &history.Value{Fence: f} }
	build := func(f1, f2 int64) h {
		var x h
		x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", fence(f1), 1, "")
		x.add(0, history.Invoke, history.Release, "L", nil, 2, "").add(0, history.OK, history.Release, "L", nil, 3, "")
		x.add(1, history.Invoke, history.Acquire, "L", nil, 4, "").add(1, history.OK, history.Acquire, "L", fence(f2), 5, "")
		return x
	}
	if got := linWith(Fenced, build(1, 2)); got != Valid {
		t.Fatalf("increasing tokens: %v", got)
	}
	if got := linWith(Fenced, build(5, 3)); got != Invalid {
		t.Fatalf("a token lower than an earlier one: %v", got)
	}
}

func deadline(d int64) *history.Value { return &history.Value{Deadline: d} }

func TestPromiseSeparatesBrokenLockFromLateClient(t *testing.T) {
	// K1: p0's promise ends at 50; p0 believes until 100; p1 acquires at 60.
	var late h
	late.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", deadline(50), 10, "")
	late.add(1, history.Invoke, history.Acquire, "L", nil, 20, "").add(1, history.OK, history.Acquire, "L", deadline(160), 60, "")
	late.add(0, history.Invoke, history.Release, "L", nil, 100, "").add(0, history.Fail, history.Release, "L", nil, 101, "not held")
	if v := (Promise{}).Check(sorted(late)); v.Valid != Valid {
		t.Fatalf("a client outliving its lease is not the lock's broken promise: %+v", v.Anomalies)
	}
	if v := (Intervals{}).Check(sorted(late)); v.Valid != Invalid {
		t.Fatal("yet the beliefs overlap")
	}
	// K4: p1 is granted while p0's promise still runs.
	var broken h
	broken.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", deadline(200), 10, "")
	broken.add(1, history.Invoke, history.Acquire, "L", nil, 20, "").add(1, history.OK, history.Acquire, "L", deadline(260), 60, "")
	v := (Promise{}).Check(sorted(broken))
	if v.Valid != Invalid || v.Anomalies[0].Start != 60 || v.Anomalies[0].End != 200 {
		t.Fatalf("want the promise broken from 60 to 200, got %+v", v)
	}
}

func TestLivenessFindsTheDeadlockButNotARecovery(t *testing.T) {
	l := Liveness{Allowance: 100}
	// p0 crashes at 10 holding the key; the others fail until 1000.
	var dead h
	dead.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 5, "")
	dead.add(0, history.Invoke, "crash", "", nil, 10, "").add(0, history.Info, "crash", "", nil, 10, "crashed")
	for t0 := int64(20); t0 < 1000; t0 += 100 {
		dead.add(1, history.Invoke, history.Acquire, "L", nil, t0, "").add(1, history.Fail, history.Acquire, "L", nil, t0+90, "taken")
	}
	v := l.Check(sorted(dead))
	if v.Valid != Invalid || v.Anomalies[0].Kind != "deadlock" || v.Anomalies[0].Start != 10 {
		t.Fatalf("want a deadlock from 10, got %+v", v)
	}
	// The same crash, but the key expires and p1 gets it at 90.
	var recovers h
	recovers.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 5, "")
	recovers.add(0, history.Invoke, "crash", "", nil, 10, "").add(0, history.Info, "crash", "", nil, 10, "crashed")
	recovers.add(1, history.Invoke, history.Acquire, "L", nil, 20, "").add(1, history.Fail, history.Acquire, "L", nil, 60, "taken")
	recovers.add(1, history.Invoke, history.Acquire, "L", nil, 70, "").add(1, history.OK, history.Acquire, "L", nil, 90, "")
	recovers.add(1, history.Invoke, history.Release, "L", nil, 95, "").add(1, history.OK, history.Release, "L", nil, 96, "")
	if v := l.Check(sorted(recovers)); v.Valid != Valid {
		t.Fatalf("recovery within the allowance: %+v", v.Anomalies)
	}
}

func TestLivenessRestartsTheClockAtANemesisAction(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 5, "")
	x.add(0, history.Invoke, history.Release, "L", nil, 6, "").add(0, history.OK, history.Release, "L", nil, 7, "")
	for t0 := int64(20); t0 < 500; t0 += 100 {
		x.add(1, history.Invoke, history.Acquire, "L", nil, t0, "").add(1, history.Fail, history.Acquire, "L", nil, t0+90, "unreachable")
	}
	x.add(history.NemesisProcess, history.Invoke, "partition-end", "", nil, 480, "").add(history.NemesisProcess, history.OK, "partition-end", "", nil, 480, "")
	x.add(1, history.Invoke, history.Acquire, "L", nil, 520, "").add(1, history.OK, history.Acquire, "L", nil, 530, "")
	if v := (Liveness{Allowance: 100}).Check(sorted(x)); v.Valid != Valid {
		t.Fatalf("unavailable during a partition, back within the allowance after: %+v", v.Anomalies)
	}
}

func TestFairnessCountsOvertaking(t *testing.T) {
	f := Fairness{Margin: 5}
	var fifo h
	fifo.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 100, "")
	fifo.add(1, history.Invoke, history.Acquire, "L", nil, 10, "").add(1, history.OK, history.Acquire, "L", nil, 200, "")
	fifo.add(2, history.Invoke, history.Acquire, "L", nil, 20, "").add(2, history.OK, history.Acquire, "L", nil, 300, "")
	if v := f.Check(sorted(fifo)); v.Valid != Valid {
		t.Fatalf("FIFO grants: %+v", v.Anomalies)
	}
	var jumped h
	jumped.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 300, "")
	jumped.add(1, history.Invoke, history.Acquire, "L", nil, 10, "").add(1, history.OK, history.Acquire, "L", nil, 100, "")
	v := f.Check(sorted(jumped))
	if v.Valid != Invalid || v.Anomalies[0].Processes[0] != 0 || v.Anomalies[0].Processes[1] != 1 {
		t.Fatalf("process 1 overtook process 0: %+v", v)
	}
	// Within the margin, arrivals are a tie.
	var tie h
	tie.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 300, "")
	tie.add(1, history.Invoke, history.Acquire, "L", nil, 3, "").add(1, history.OK, history.Acquire, "L", nil, 100, "")
	if v := f.Check(sorted(tie)); v.Valid != Valid {
		t.Fatal("arrivals within the margin are not ordered")
	}
	// A waiter that gave up after a later arrival was served was overtaken
	// too; one that gave up before anyone later was served was not.
	var gaveUp h
	gaveUp.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.Fail, history.Acquire, "L", nil, 300, "wait ran out")
	gaveUp.add(1, history.Invoke, history.Acquire, "L", nil, 10, "").add(1, history.OK, history.Acquire, "L", nil, 100, "")
	if v := f.Check(sorted(gaveUp)); v.Valid != Invalid || v.Anomalies[0].Processes[0] != 0 {
		t.Fatalf("process 1 was served while process 0 waited until it gave up: %+v", v)
	}
	var stuck h
	stuck.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.Fail, history.Acquire, "L", nil, 300, "wait ran out")
	stuck.add(1, history.Invoke, history.Acquire, "L", nil, 10, "").add(1, history.OK, history.Acquire, "L", nil, 400, "")
	if v := f.Check(sorted(stuck)); v.Valid != Valid {
		t.Fatalf("nobody later was served while process 0 waited: %+v", v.Anomalies)
	}
}

func TestForeignReleaseIsNamed(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 10, "")
	x.add(1, history.Invoke, history.Acquire, "L", nil, 20, "").add(1, history.OK, history.Acquire, "L", nil, 50, "")
	x.add(0, history.Invoke, history.Release, "L", nil, 60, "").add(0, history.OK, history.Release, "L", nil, 61, "")
	x.add(1, history.Invoke, history.Release, "L", nil, 90, "").add(1, history.Fail, history.Release, "L", nil, 91, "not held")
	v := Intervals{}.Check(sorted(x))
	found := false
	for _, a := range v.Anomalies {
		if a.Kind == "foreign-release" && a.Processes[0] == 0 && a.Processes[1] == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("process 0 deleted process 1's lock: %+v", v.Anomalies)
	}
	// A refused release deletes nothing.
	var y h
	y.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 10, "")
	y.add(1, history.Invoke, history.Acquire, "L", nil, 20, "").add(1, history.OK, history.Acquire, "L", nil, 50, "")
	y.add(0, history.Invoke, history.Release, "L", nil, 60, "").add(0, history.Fail, history.Release, "L", nil, 61, "not held")
	for _, a := range (Intervals{}).Check(sorted(y)).Anomalies {
		if a.Kind == "foreign-release" {
			t.Fatal("a refused release reported as foreign")
		}
	}
}

func TestLinearizableCrashedHolderMayLapse(t *testing.T) {
	// p0 holds, crashes inside its critical section; its lease runs out and
	// p1 gets the key: no violation.
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 5, "")
	x.add(0, history.Invoke, "crash", "", nil, 10, "").add(0, history.Info, "crash", "", nil, 10, "crashed")
	x.cycle(1, 20, 60, 70, 75)
	if got := lin(x); got != Valid {
		t.Fatalf("a crashed holder's lease may lapse: %v", got)
	}
	// But before the crash, it still held the key.
	var y h
	y.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 5, "")
	y.cycle(1, 6, 8, 9, 9)
	y.add(0, history.Invoke, "crash", "", nil, 10, "").add(0, history.Info, "crash", "", nil, 10, "crashed")
	if got := lin(y); got != Invalid {
		t.Fatalf("p1 got the key while p0 still held it: %v", got)
	}
}

func TestResourceOnlyAReadAfterEveryWriteIsFinal(t *testing.T) {
	var x h
	x.add(0, history.Invoke, history.Write, "R", reg(1), 10, "").add(0, history.OK, history.Write, "R", nil, 11, "")
	x.add(1, history.Invoke, history.Read, "R", nil, 12, "").add(1, history.OK, history.Read, "R", reg(1), 13, "")
	x.add(1, history.Invoke, history.Write, "R", reg(2), 14, "").add(1, history.OK, history.Write, "R", nil, 15, "")
	if v := res(x); v.Valid != Valid {
		t.Fatalf("an in-cycle read is not the final count: %+v", v.Anomalies)
	}
}

// Gaps seen on locks written outside the repository (issue 10, part 4).

// The victim's acquire returned while the stale release was in flight (its
// SET landed before the DEL), and its own release, within its lease, was
// refused 0.4 ms later: a foreign release, though the hold began after the
// release was sent.
func TestForeignReleaseWhileTheVictimsAcquireWasInFlight(t *testing.T) {
	lease := func(d int64) *history.Value { return &history.Value{Deadline: d} }
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", lease(40), 10, "")
	x.add(1, history.Invoke, history.Acquire, "L", nil, 50, "").add(1, history.OK, history.Acquire, "L", lease(5000), 61, "")
	x.add(0, history.Invoke, history.Release, "L", nil, 60, "").add(0, history.OK, history.Release, "L", nil, 63, "")
	x.add(1, history.Invoke, history.Release, "L", nil, 62, "").add(1, history.Fail, history.Release, "L", nil, 65, "not held")
	v := Intervals{}.Check(sorted(x))
	if v.Counts["foreign-release"] != 1 || v.Anomalies[0].Processes[0] != 0 || v.Anomalies[0].Processes[1] != 1 ||
		!strings.Contains(v.Anomalies[0].Text, "deleted process 1's lock") {
		t.Fatalf("process 0's release in flight deleted process 1's lock: %+v", v.Anomalies)
	}
	// The same shape with process 1's release accepted is the ordinary
	// race of a DEL that deleted its own key first: nothing to report.
	var y h
	y.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", lease(40), 10, "")
	y.add(1, history.Invoke, history.Acquire, "L", nil, 50, "").add(1, history.OK, history.Acquire, "L", lease(5000), 61, "")
	y.add(0, history.Invoke, history.Release, "L", nil, 60, "").add(0, history.OK, history.Release, "L", nil, 63, "")
	y.add(1, history.Invoke, history.Release, "L", nil, 62, "").add(1, history.OK, history.Release, "L", nil, 65, "")
	if v := (Intervals{}).Check(sorted(y)); v.Valid != Valid {
		t.Fatalf("a release that returned before the next holder's was judged foreign: %+v", v.Anomalies)
	}
}

// A release refused while the lease was still promised: the lock lost the
// key under its holder. Refused after the deadline, it is only a lease
// that ran out.
func TestReleaseRefusedWithinTheLeaseIsALostLease(t *testing.T) {
	lease := &history.Value{Deadline: 100}
	var x h
	x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", lease, 10, "")
	x.add(0, history.Invoke, history.Release, "L", nil, 20, "").add(0, history.Fail, history.Release, "L", nil, 21, "not held")
	if v := (Promise{}).Check(sorted(x)); v.Valid != Invalid || v.Counts["lease-lost"] != 1 {
		t.Fatalf("a release refused 79 before its deadline: %+v", v)
	}
	var y h
	y.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", lease, 10, "")
	y.add(0, history.Invoke, history.Release, "L", nil, 99, "").add(0, history.Fail, history.Release, "L", nil, 101, "not held")
	if v := (Promise{}).Check(sorted(y)); v.Valid != Valid {
		t.Fatalf("a release answered after the deadline may be refused: %+v", v.Anomalies)
	}
}

// A foreign release is told as the history shows it: a deletion is claimed
// only when the victim's refused release witnesses it.
func TestForeignReleaseClaimsADeletionOnlyWithAWitness(t *testing.T) {
	build := func(victimLease *history.Value) string {
		var x h
		x.add(0, history.Invoke, history.Acquire, "L", nil, 0, "").add(0, history.OK, history.Acquire, "L", nil, 10, "")
		x.add(1, history.Invoke, history.Acquire, "L", nil, 20, "").add(1, history.OK, history.Acquire, "L", victimLease, 50, "")
		x.add(0, history.Invoke, history.Release, "L", nil, 60, "").add(0, history.OK, history.Release, "L", nil, 61, "")
		x.add(1, history.Invoke, history.Release, "L", nil, 90, "").add(1, history.Fail, history.Release, "L", nil, 91, "not held")
		for _, a := range (Intervals{}).Check(sorted(x)).Anomalies {
			if a.Kind == "foreign-release" {
				return a.Text
			}
		}
		t.Fatal("no foreign release reported")
		return ""
	}
	unwitnessed := build(nil)
	if strings.Contains(unwitnessed, "deleted process 1's lock") || !strings.Contains(unwitnessed, "if it deleted anything") {
		t.Fatalf("no lease says the key was still process 1's when its release was refused: %q", unwitnessed)
	}
	witnessed := build(&history.Value{Deadline: 500})
	if !strings.Contains(witnessed, "deleted from under it") {
		t.Fatalf("process 1's release, refused within its lease, witnesses the deletion: %q", witnessed)
	}
}
