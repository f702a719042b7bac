package checker

import (
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
)

// cycleOn is cycle on key k.
func (x *h) cycleOn(k string, p int, a0, a1, r0, r1 int64) *h {
	x.add(p, history.Invoke, history.Acquire, k, nil, a0, "")
	x.add(p, history.OK, history.Acquire, k, nil, a1, "")
	x.add(p, history.Invoke, history.Release, k, nil, r0, "")
	return x.add(p, history.OK, history.Release, k, nil, r1, "")
}

// The time with two holders is the union of the overlaps, over every
// key; an episode is a span of it on one key, however many holders it
// had. On A: 0 and 1 overlap over [20,30], 2 joins over [25,40], one
// episode [20,40]; later 3 and 4 over [100,110]. On B: [35,50], which
// adds [40,50] to the union. Union: [20,50] and [100,110], 40 ns.
func TestDoubleHeldIsTheUnionAndEpisodesAreKeyByKey(t *testing.T) {
	var x h
	x.cycleOn("A", 0, 0, 10, 30, 31).cycleOn("A", 1, 5, 20, 40, 41).cycleOn("A", 2, 21, 25, 45, 46).
		cycleOn("A", 3, 90, 95, 110, 111).cycleOn("A", 4, 96, 100, 120, 121).
		cycleOn("B", 5, 0, 1, 50, 51).cycleOn("B", 6, 30, 35, 60, 61)
	v := Intervals{}.Check(sorted(x))
	if v.Details.DoubleHeld != 40 || v.Details.Episodes != 3 {
		t.Fatalf("double held %d ns in %d episode(s), want 40 ns in 3", v.Details.DoubleHeld, v.Details.Episodes)
	}
	var none h
	none.cycleOn("A", 0, 0, 10, 20, 21).cycleOn("B", 1, 0, 10, 20, 21)
	if v := (Intervals{}).Check(sorted(none)); v.Details.DoubleHeld != 0 || v.Details.Episodes != 0 {
		t.Fatalf("two keys held apart counted as double held: %+v", v.Details)
	}
}

// DoubleHeld on overlaps given by hand: spans that touch join.
func TestDoubleHeldJoinsTouchingSpans(t *testing.T) {
	d, n := DoubleHeld([]Overlap{{Key: "k", Start: 0, End: 10}, {Key: "k", Start: 10, End: 15}, {Key: "j", Start: 5, End: 30}})
	if d != time.Duration(30) || n != 2 {
		t.Fatalf("got %d ns in %d episodes, want 30 in 2", d, n)
	}
}
