package checker

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
)

// everything is one small history on which every checker has something
// to say: two grants of L within one promise, a release that took F from
// under its next holder, a register with stale, refused, lost and unknown
// writes, a key D stuck after its holder crashed, and a waiter on J
// overtaken.
func everything() []history.Op {
	var x h
	// L: p1 is granted while p0's promise runs.
	x.op(0, history.Acquire, "L", history.OK, 0, 10, deadline(200))
	x.op(1, history.Acquire, "L", history.OK, 20, 60, deadline(260))
	x.op(1, history.Release, "L", history.OK, 300, 301, nil)
	// F: p2's release succeeds while p3 holds; p3's own release, within
	// its lease, is refused.
	x.op(2, history.Acquire, "F", history.OK, 0, 10, nil)
	x.op(3, history.Acquire, "F", history.OK, 20, 50, deadline(500))
	x.op(2, history.Release, "F", history.OK, 60, 61, nil)
	x.op(3, history.Release, "F", history.Fail, 90, 91, nil)
	x[len(x)-1].Error = "not held"
	// R: token 3 accepted after token 5, token 1 refused, value 2 written
	// twice, one write of unknown outcome.
	x.add(4, history.Invoke, history.Write, "R", fenced(1, 5), 10, "").add(4, history.OK, history.Write, "R", nil, 11, "")
	x.add(5, history.Invoke, history.Write, "R", fenced(2, 3), 20, "").add(5, history.OK, history.Write, "R", nil, 21, "")
	x.add(4, history.Invoke, history.Write, "R", fenced(2, 1), 30, "").add(4, history.Fail, history.Write, "R", nil, 31, ErrStaleFence)
	x.add(6, history.Invoke, history.Write, "R", fenced(2, 6), 35, "").add(6, history.OK, history.Write, "R", nil, 36, "")
	x.add(5, history.Invoke, history.Write, "R", reg(3), 40, "").add(5, history.Info, history.Write, "R", nil, 41, "timeout")
	// D: p7 crashes holding it; p8 fails to get it until the end.
	x.op(7, history.Acquire, "D", history.OK, 0, 5, nil)
	x.add(7, history.Invoke, "crash", "", nil, 10, "").add(7, history.Info, "crash", "", nil, 10, "crashed")
	for t0 := int64(20); t0 < 1000; t0 += 100 {
		x.op(8, history.Acquire, "D", history.Fail, t0, t0+90, nil)
	}
	x[len(x)-1].Error = "outcome unknown: lock script: TRYAGAIN Multiple keys request during rehashing of slot"
	// J: p10 arrives after p9 and is granted before it.
	x.op(9, history.Acquire, "J", history.OK, 0, 300, nil)
	x.op(10, history.Acquire, "J", history.OK, 10, 100, nil)
	x.op(9, history.Release, "J", history.OK, 310, 311, nil)
	x.op(10, history.Release, "J", history.OK, 101, 102, nil)
	return sorted(x)
}

// The verdicts of every checker come back from results.json equal, field
// for field: re-judging a stored run reads what the run wrote. Between them
// they set every detail, so each field's key is proven to read back, and
// the keys are results.json's.
func TestVerdictsSurviveJSON(t *testing.T) {
	var noDeadlines h
	noDeadlines.cycle(0, 0, 10, 20, 25)
	checkers := []Checker{
		Resource{}, Intervals{}, Linearizable{Timeout: 10 * time.Second},
		Linearizable{Semantics: Fenced, Timeout: 10 * time.Second},
		Linearizable{Timeout: -1}, // out of time before it began: Unknown, with a reason
		Promise{}, Liveness{Allowance: 100}, Fairness{Margin: 5},
		GhostHolds{Bound: 1, Allowance: 100, Quorum: 1}, StolenKeys{},
	}
	// What the nodes held: a stolen key, then a ghost.
	var held h
	held.grant(0, "A", ms(1000), ms(0), ms(2)).seen("n1", "A", 0, ms(3))
	held.grant(1, "B", ms(1100), ms(50), ms(100)).seen("n1", "B", 0, ms(101))
	held.add(1, history.Info, history.Write, "R", nil, ms(150), "crashed").refused(2, ms(160), ms(300))
	held.add(0, history.Invoke, history.Write, "R", reg(1), ms(310), "").add(0, history.Fail, history.Write, "R", nil, ms(311), ErrLeaseLost)
	keys := map[string]bool{}
	validities := map[Validity]bool{}
	for _, ops := range [][]history.Op{everything(), sorted(noDeadlines), sorted(held)} {
		for _, c := range checkers {
			v := c.Check(ops)
			if v.Checker != c.Name() {
				t.Errorf("%s's verdict names %q", c.Name(), v.Checker)
			}
			validities[v.Valid] = true
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var back Verdict
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: %v in %s", c.Name(), err, b)
			}
			if !reflect.DeepEqual(back, v) {
				t.Errorf("%s: wrote %+v\nread back %+v\nfrom %s", c.Name(), v, back, b)
			}
			var raw struct{ Details map[string]any }
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			for k := range raw.Details {
				keys[k] = true
			}
		}
	}
	if len(validities) != 3 {
		t.Errorf("the verdicts were only %v: each answer must be proven to read back", slices.Collect(maps.Keys(validities)))
	}
	want := []string{
		"writes_accepted", "writes_unknown", "stale_writes_rejected", "writes_withheld", "lost_updates", "stale_writes_accepted",
		"holds", "double_holders", "overlap_ns", "foreign_releases", "double_held_ns", "episodes",
		"operations", "model", "segments", "reason",
		"promises", "broken_promises", "leases_lost", "note",
		"allowance_ns", "longest_stall_ns", "slot_refusals",
		"grants", "overtakings",
		"ghost_keys", "longest_ghost_ns", "stolen_keys",
	}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(keys)); !slices.Equal(got, want) {
		t.Errorf("details written %v, want every one of %v", got, want)
	}
	if n := reflect.TypeFor[Details]().NumField(); n != len(want) {
		t.Errorf("Details has %d fields, the test proves %d: a new field needs a history that sets it", n, len(want))
	}
}

// A zero verdict's details are left out, as an empty map's were.
func TestZeroDetailsAreLeftOut(t *testing.T) {
	b, err := json.Marshal(Verdict{Checker: ResourceName, Valid: Valid})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"checker":"resource","valid":true}` {
		t.Fatalf("got %s", b)
	}
}

// Every checker has one place in the severity table, and a run's worst
// verdict is the first invalid one the table lists.
func TestSeverityTable(t *testing.T) {
	table := Severities()
	checkers := []Checker{Resource{}, Intervals{}, Linearizable{}, Promise{}, StolenKeys{}, Liveness{}, GhostHolds{}, Fairness{}}
	for _, c := range checkers {
		n := 0
		for _, s := range table {
			if s.Checker == c.Name() {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s has %d entries in the severity table, want 1", c.Name(), n)
		}
	}
	if len(table) != len(checkers) {
		t.Errorf("%d entries for %d checkers", len(table), len(checkers))
	}
	table[0].Outcome = "changed"
	if Severities()[0].Outcome != "unsafe" {
		t.Fatal("a caller's copy changed the table")
	}

	verdicts := func(invalid ...Name) []Verdict {
		var vs []Verdict
		for _, s := range Severities() {
			v := Verdict{Checker: s.Checker, Valid: Valid}
			if slices.Contains(invalid, s.Checker) {
				v.Valid = Invalid
			}
			vs = append(vs, v)
		}
		return vs
	}
	for _, c := range []struct {
		invalid []Name
		want    string
	}{
		{[]Name{FairnessName, ResourceName, LivenessName}, "unsafe"},
		{[]Name{FairnessName, PromiseName}, "lock-unsafe"},
		{[]Name{LinearizableName}, "lock-unsafe"},
		{[]Name{IntervalsName, LivenessName}, "lock-unsafe"},
		{[]Name{FairnessName, LivenessName}, "deadlock"},
		{[]Name{FairnessName}, "unfair"},
		{nil, ""},
	} {
		s, ok := Worst(verdicts(c.invalid...))
		if s.Outcome != c.want || ok != (c.want != "") {
			t.Errorf("%v invalid: worst %+v %v, want %q", c.invalid, s, ok, c.want)
		}
	}
	if _, ok := Worst([]Verdict{{Checker: ResourceName, Valid: Unknown}}); ok {
		t.Error("an unknown verdict counted as a failure")
	}
}
