package checker

import (
	"encoding/json"
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
	if v.Valid != Invalid || len(v.Anomalies) != 1 {
		t.Fatalf("want one double holder, got %v %+v", v.Valid, v.Anomalies)
	}
	a := v.Anomalies[0]
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
	if v.Valid != Valid || v.Details["stale_writes_rejected"] != 1 {
		t.Fatalf("want valid with one rejection, got %+v", v)
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
