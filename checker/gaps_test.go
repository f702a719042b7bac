package checker

import (
	"testing"

	"github.com/locktorture/locktorture/history"
)

// op appends one completed op of p: invoke at t0, completion typ at t1.
func (x *h) op(p int, f, key string, typ history.Type, t0, t1 int64, v *history.Value) *h {
	x.add(p, history.Invoke, f, key, nil, t0, "")
	return x.add(p, typ, f, key, v, t1, "")
}

// A holder retired by an unknown outcome gave nothing back: the lock still
// promised it the key until its deadline, so a grant to another process
// before then is the lock breaking its word.
func TestDeadHoldersLeaseGivenAwayEarly(t *testing.T) {
	retired := func(grantAt int64, retire func(x *h)) h {
		var x h
		x.op(0, history.Acquire, "L", history.OK, 0, 10, deadline(200))
		retire(&x)
		x.op(1, history.Acquire, "L", history.OK, 60, grantAt, deadline(grantAt+200))
		x.op(1, history.Release, "L", history.OK, grantAt+150, grantAt+151, nil)
		return x
	}
	ways := map[string]func(x *h){
		"read info": func(x *h) { x.op(0, history.Read, "R", history.Info, 40, 50, nil) },
		"crash":     func(x *h) { x.op(0, "crash", "", history.Info, 50, 50, nil) },
		"info acquire of another key": func(x *h) {
			x.op(0, history.Acquire, "M", history.Info, 40, 50, nil)
		},
	}
	for name, retire := range ways {
		early := retired(100, retire)
		v := Promise{}.Check(sorted(early))
		if v.Valid != Invalid || v.Counts["promise-broken"] != 1 || v.Anomalies[0].Start != 100 || v.Anomalies[0].End != 200 {
			t.Errorf("%s: process 0's key, promised until 200, went to process 1 at 100: %+v", name, v)
		}
		if got := lin(early); got != Invalid {
			t.Errorf("%s: linearizable: a dead holder's lease taken before its deadline: %v", name, got)
		}
		if v := (Intervals{}).Check(sorted(early)); v.Valid != Valid {
			t.Errorf("%s: intervals: a retired process believes nothing: %+v", name, v.Anomalies)
		}
		late := retired(210, retire)
		if v := (Promise{}).Check(sorted(late)); v.Valid != Valid {
			t.Errorf("%s: granted after the dead holder's deadline: %+v", name, v.Anomalies)
		}
		if got := lin(late); got != Valid {
			t.Errorf("%s: linearizable: granted after the dead holder's deadline: %v", name, got)
		}
	}
	// A lease without a deadline may lapse at any time after its holder
	// is retired.
	var none h
	none.op(0, history.Acquire, "L", history.OK, 0, 10, nil)
	none.op(0, history.Read, "R", history.Info, 40, 50, nil)
	none.op(1, history.Acquire, "L", history.OK, 60, 100, nil)
	if got := lin(none); got != Valid {
		t.Fatalf("no deadline: the lease may lapse at retirement: %v", got)
	}
}

// A retired holder's whole lease runs out: every entry of a reentrant
// hold, every key it held, whatever op retired it.
func TestRetiredHoldersKeysAllLapse(t *testing.T) {
	cases := map[string]struct {
		sem   Semantics
		build func(x *h)
	}{
		"reentrant, entered twice, crashed": {Reentrant, func(x *h) {
			x.op(0, history.Acquire, "L", history.OK, 0, 1, nil)
			x.op(0, history.Acquire, "L", history.OK, 2, 3, nil)
			x.op(0, "crash", "", history.Info, 4, 4, nil)
		}},
		"two keys, crashed": {Mutex, func(x *h) {
			x.op(0, history.Acquire, "L", history.OK, 0, 1, nil)
			x.op(0, history.Acquire, "M", history.OK, 2, 3, nil)
			x.op(0, "crash", "", history.Info, 4, 4, nil)
		}},
		"retired by an unknown acquire of a second key": {Mutex, func(x *h) {
			x.op(0, history.Acquire, "L", history.OK, 0, 1, nil)
			x.op(0, history.Acquire, "M", history.Info, 2, 4, nil)
		}},
		"retired by an unknown release of a second key": {Mutex, func(x *h) {
			x.op(0, history.Acquire, "L", history.OK, 0, 1, nil)
			x.op(0, history.Acquire, "M", history.OK, 2, 3, nil)
			x.op(0, history.Release, "M", history.Info, 3, 4, nil)
		}},
		"reentrant, entered twice, unknown release": {Reentrant, func(x *h) {
			x.op(0, history.Acquire, "L", history.OK, 0, 1, nil)
			x.op(0, history.Acquire, "L", history.OK, 2, 3, nil)
			x.op(0, history.Release, "L", history.Info, 3, 4, nil)
		}},
	}
	for name, c := range cases {
		var x h
		c.build(&x)
		x.op(1, history.Acquire, "L", history.OK, 10, 20, nil)
		x.op(1, history.Release, "L", history.OK, 30, 31, nil)
		if got := linWith(c.sem, x); got != Valid {
			t.Errorf("%s: the next holder got the lapsed key: %v", name, got)
		}
		// Before the retirement it was still held.
		var y h
		c.build(&y)
		y.op(1, history.Acquire, "L", history.OK, 2, 2, nil)
		y.op(1, history.Release, "L", history.OK, 30, 31, nil)
		if got := linWith(c.sem, y); got != Invalid {
			t.Errorf("%s: granted while process 0 still held it: %v", name, got)
		}
	}
}

// Holds are per process and key, and a reentrant hold ends with its last
// release.
func TestIntervalsHoldsPerKeyAndEntry(t *testing.T) {
	var keys h
	keys.op(0, history.Acquire, "K1", history.OK, 0, 1, nil)
	keys.op(0, history.Acquire, "K2", history.OK, 2, 3, nil)
	keys.op(1, history.Acquire, "K1", history.OK, 4, 5, nil)
	keys.op(0, history.Release, "K1", history.OK, 6, 7, nil)
	v := Intervals{}.Check(sorted(keys))
	if v.Counts["double-holder"] != 1 || v.Anomalies[0].Key != "K1" || v.Anomalies[0].Start != 5 || v.Anomalies[0].End != 6 {
		t.Errorf("processes 0 and 1 both held K1 from 5 to 6: %+v", v)
	}
	var reentry h
	reentry.op(0, history.Acquire, "L", history.OK, 0, 1, nil)
	reentry.op(0, history.Acquire, "L", history.OK, 2, 3, nil)
	reentry.op(0, history.Release, "L", history.OK, 4, 5, nil)
	reentry.op(1, history.Acquire, "L", history.OK, 6, 7, nil)
	reentry.op(0, history.Release, "L", history.OK, 8, 9, nil)
	v = Intervals{}.Check(sorted(reentry))
	if v.Counts["double-holder"] != 1 || v.Anomalies[0].Start != 7 || v.Anomalies[0].End != 8 {
		t.Errorf("process 0 held L once more until 8, process 1 from 7: %+v", v)
	}
	// Released whole before the other acquires; other keys apart.
	var fine h
	fine.op(0, history.Acquire, "K1", history.OK, 0, 1, nil)
	fine.op(0, history.Acquire, "K1", history.OK, 2, 3, nil)
	fine.op(0, history.Acquire, "K2", history.OK, 2, 3, nil)
	fine.op(0, history.Release, "K1", history.OK, 4, 5, nil)
	fine.op(0, history.Release, "K1", history.OK, 6, 7, nil)
	fine.op(1, history.Acquire, "K1", history.OK, 8, 9, nil)
	if v := (Intervals{}).Check(sorted(fine)); v.Valid != Valid {
		t.Errorf("K1 released twice before process 1 took it, K2 is another key: %+v", v.Anomalies)
	}
}

// A release that succeeded within its own lease deleted its own key: when
// another process held the key too, the lock had granted it twice (a
// double holder, a broken promise), but the release was not foreign.
func TestReleaseWithinItsOwnLeaseIsNotForeign(t *testing.T) {
	build := func(d int64) h {
		var x h
		x.op(0, history.Acquire, "L", history.OK, 0, 10, deadline(d))
		x.op(1, history.Acquire, "L", history.OK, 20, 50, deadline(300))
		x.op(0, history.Release, "L", history.OK, 60, 61, nil)
		x.op(1, history.Release, "L", history.OK, 90, 91, nil)
		return x
	}
	v := Intervals{}.Check(sorted(build(200)))
	if v.Counts["foreign-release"] != 0 || v.Counts["double-holder"] != 1 {
		t.Errorf("process 0 released its own key within its lease: %+v", v)
	}
	// Its lease over, the same release hit whoever held the key.
	if v := (Intervals{}).Check(sorted(build(40))); v.Counts["foreign-release"] != 1 {
		t.Errorf("process 0's lease had lapsed when it released: %+v", v)
	}
}

// inFlight is a history in which process 0 holds the key and releases it
// at 6, process 1's acquire is in flight from 10 to 500 and ends as ends
// says (none: no such acquire; a grant is released at once), process 2 is
// refused try after try, and process 3 takes the key at 600.
func inFlight(ends history.Type) h {
	var x h
	x.op(0, history.Acquire, "L", history.OK, 0, 5, nil)
	x.op(0, history.Release, "L", history.OK, 6, 7, nil)
	if ends != "" {
		x.op(1, history.Acquire, "L", ends, 10, 500, nil)
	}
	if ends == history.OK {
		x.op(1, history.Release, "L", history.OK, 505, 506, nil)
	}
	for t0 := int64(20); t0 < 580; t0 += 50 {
		x.op(2, history.Acquire, "L", history.Fail, t0, t0+40, nil)
	}
	x.op(3, history.Acquire, "L", history.OK, 590, 600, nil)
	return x
}

// An acquire of unknown outcome may have taken the key: until it completed
// nobody can say the key was free, and from then its lease may run a TTL,
// which the allowance covers.
func TestLivenessAnUnknownAcquireMayHoldTheKey(t *testing.T) {
	l := Liveness{Allowance: 200}
	if v := l.Check(sorted(inFlight(history.Info))); v.Valid != Valid {
		t.Errorf("process 1's acquire may have held the key until 500: %+v", v.Anomalies)
	}
	if v := l.Check(sorted(inFlight(""))); v.Valid != Invalid || v.Anomalies[0].Start != 6 {
		t.Errorf("free from 6 (process 0's release) to 590, and acquires failed: %+v", v)
	}
}

// A granted acquire may have taken the key anywhere from its call on: a
// holder whose answer comes late (a PostgreSQL backend starved of a core
// for 1.4 s kept symfony-postgres's grant from its worker) keeps the
// others out before the history shows it holding. The same acquire
// refused took nothing, and the key was free from process 0's release.
func TestLivenessAGrantedAcquireMayHoldTheKeyFromItsCall(t *testing.T) {
	l := Liveness{Allowance: 200}
	if v := l.Check(sorted(inFlight(history.OK))); v.Valid != Valid {
		t.Errorf("process 1's acquire may have held the key from 10: %+v", v.Anomalies)
	}
	if v := l.Check(sorted(inFlight(history.Fail))); v.Valid != Invalid || v.Anomalies[0].Start != 6 || v.Anomalies[0].End != 590 {
		t.Errorf("free from 6 (process 0's release) to 590 (process 3's call), and acquires failed: %+v", v)
	}
}

// A grant called while a fault lasts and answered after it heals is
// measured from the fault's end, as a stall ended by its answer was: the
// key may not come back while the fault lasts, and the refusals then are
// no deadlock. With no fault, the same refusals are one.
func TestLivenessAGrantCalledDuringAFaultIsExcusedByItsHeal(t *testing.T) {
	build := func(fault bool) h {
		var x h
		x.op(0, history.Acquire, "L", history.OK, 0, 5, nil)
		x.op(0, history.Release, "L", history.OK, 6, 7, nil)
		if fault {
			x.op(history.NemesisProcess, "partition-start", "", history.OK, 10, 10, nil)
		}
		for t0 := int64(20); t0 < 480; t0 += 50 {
			x.op(2, history.Acquire, "L", history.Fail, t0, t0+40, nil)
		}
		x.add(1, history.Invoke, history.Acquire, "L", nil, 490, "")
		if fault {
			x.op(history.NemesisProcess, "partition-end", "", history.OK, 495, 495, nil)
		}
		x.add(1, history.OK, history.Acquire, "L", nil, 500, "")
		return x
	}
	l := Liveness{Allowance: 200}
	if v := l.Check(sorted(build(true))); v.Valid != Valid {
		t.Errorf("the partition healed at 495, before the grant called at 490 was answered: %+v", v.Anomalies)
	}
	if v := l.Check(sorted(build(false))); v.Valid != Invalid || v.Anomalies[0].Start != 6 || v.Anomalies[0].End != 490 {
		t.Errorf("no fault: free from 6 to 490 (process 1's call), and acquires failed: %+v", v)
	}
}

// One stall is one anomaly, also when it ends with a grant at the very end
// of the history (its call ends the stall).
func TestLivenessReportsEachStallOnce(t *testing.T) {
	var x h
	x.op(0, history.Acquire, "L", history.OK, 0, 5, nil)
	x.op(0, history.Release, "L", history.OK, 6, 7, nil)
	for t0 := int64(20); t0 < 900; t0 += 50 {
		x.op(1, history.Acquire, "L", history.Fail, t0, t0+40, nil)
	}
	x.op(2, history.Acquire, "L", history.OK, 950, 1000, nil)
	v := Liveness{Allowance: 200}.Check(sorted(x))
	if v.Counts["deadlock"] != 1 || v.Anomalies[0].Start != 6 || v.Anomalies[0].End != 950 || v.Details.LongestStall != 944 {
		t.Errorf("one stall, 6 to 950: %+v", v)
	}
}

// Nobody could hold a key before any client tried to: a stall begins no
// earlier than the first acquire of its key.
func TestLivenessMeasuresFromTheFirstAcquire(t *testing.T) {
	build := func(lastFail int64) h {
		var x h
		x.op(9, history.Read, "R", history.OK, 0, 1, reg(0))
		x.op(0, history.Acquire, "L", history.Info, 1000, 1100, nil)
		for t0 := int64(1010); t0 < lastFail; t0 += 50 {
			x.op(1, history.Acquire, "L", history.Fail, t0, t0+40, nil)
		}
		x.op(2, history.Acquire, "L", history.OK, lastFail, lastFail+10, nil)
		return x
	}
	l := Liveness{Allowance: 200}
	v := l.Check(sorted(build(1250)))
	if v.Valid != Valid {
		t.Errorf("clients ready at 1000, the key obtained at 1260: %+v", v.Anomalies)
	}
	v = l.Check(sorted(build(1500)))
	if v.Valid != Invalid || v.Anomalies[0].Start != 1100 {
		t.Errorf("stuck from 1100 (when the unknown acquire completed) to 1510: %+v", v)
	}
}

// An unknown write leaves only its own key's final count unjudged.
func TestResourceUnknownWriteMutesOnlyItsKey(t *testing.T) {
	var x h
	x.op(0, history.Write, "A", history.Info, 10, 11, reg(1))
	x[len(x)-2].Value = reg(1)
	for i := int64(1); i <= 2; i++ {
		x.add(int(i), history.Invoke, history.Write, "B", reg(i), i*10, "").add(int(i), history.OK, history.Write, "B", nil, i*10+1, "")
	}
	x.op(9, history.Read, "A", history.OK, 50, 51, reg(0))
	x.op(9, history.Read, "B", history.OK, 52, 53, reg(1))
	v := res(x)
	if v.Valid != Invalid || v.Counts["lost-update"] != 1 || v.Anomalies[0].Key != "B" {
		t.Fatalf("B ends at 1 after 2 accepted increments, whatever happened to A: %+v", v)
	}
}
