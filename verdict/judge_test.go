package verdict

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
)

func verdicts(valid map[string]checker.Validity) []checker.Verdict {
	var out []checker.Verdict
	for _, name := range []string{"intervals", "linearizable", "promise", "resource", "liveness", "fairness"} {
		v, ok := valid[name]
		if !ok {
			v = checker.Valid
		}
		out = append(out, checker.Verdict{Checker: checker.Name(name), Valid: v})
	}
	return out
}

func TestOutcomeTakesTheMostSerious(t *testing.T) {
	cases := []struct {
		invalid []string
		want    Outcome
	}{
		{nil, Safe},
		{[]string{"fairness"}, Unfair},
		{[]string{"liveness", "fairness"}, Deadlock},
		{[]string{"promise"}, LockUnsafe},
		{[]string{"intervals", "liveness"}, LockUnsafe},
		{[]string{"intervals", "resource"}, Unsafe},
	}
	for _, c := range cases {
		m := map[string]checker.Validity{}
		for _, n := range c.invalid {
			m[n] = checker.Invalid
		}
		if got := Sum(verdicts(m)); got != c.want {
			t.Errorf("invalid %v: outcome %s, want %s", c.invalid, got, c.want)
		}
	}
	if got := Sum(verdicts(map[string]checker.Validity{"linearizable": checker.Unknown, "resource": checker.Invalid})); got != Undecided {
		t.Errorf("an undecided checker makes the outcome %s, want %s", got, Undecided)
	}
}

func TestMatchesNeedsOutcomeShowAndHide(t *testing.T) {
	e := Expectation{Outcome: Unsafe, Show: []string{"foreign-release"}, Hide: []string{"promise-broken"}}
	if !Matches(e, Unsafe, []string{"double-holder", "foreign-release"}) {
		t.Error("outcome and observations as expected, yet no match")
	}
	if Matches(e, LockUnsafe, []string{"foreign-release"}) {
		t.Error("a different outcome matched")
	}
	if Matches(e, Unsafe, []string{"double-holder"}) {
		t.Error("a required observation was missing, yet it matched")
	}
	if Matches(e, Unsafe, []string{"foreign-release", "promise-broken"}) {
		t.Error("a forbidden observation was present, yet it matched")
	}
}

func TestObservationsComeFromCountsNotTheAbbreviatedList(t *testing.T) {
	v := checker.Verdict{Checker: "intervals", Counts: map[string]int{"double-holder": 80, "foreign-release": 1}}
	r := checker.Verdict{Checker: checker.ResourceName, Details: checker.Details{StaleWritesRejected: 2}}
	got := Observations([]checker.Verdict{v, r})
	want := []string{"double-holder", "foreign-release", StaleWriteRejected}
	if len(got) != len(want) {
		t.Fatalf("observations %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("observations %v, want %v", got, want)
		}
	}
}

// holds builds a history of back-to-back holds of "lock", one per entry of
// holders, each [start, start+90ms); overlap shifts every second hold back
// into the one before it.
func holds(holders []int, overlap int64) []history.Op {
	ms := int64(time.Millisecond)
	var ops []history.Op
	for i, p := range holders {
		at := int64(i) * 100 * ms
		if i%2 == 1 {
			at -= overlap
		}
		ops = append(ops,
			history.Op{Process: p, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: at},
			history.Op{Process: p, Type: history.OK, F: history.Acquire, Key: "lock", Time: at + ms, Value: &history.Value{Token: fmt.Sprint(i)}},
			history.Op{Process: p, Type: history.Invoke, F: history.Release, Key: "lock", Time: at + 89*ms},
			history.Op{Process: p, Type: history.OK, F: history.Release, Key: "lock", Time: at + 90*ms})
	}
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// ordered sorts ops by time and numbers them, as a recorded history is.
func ordered(ops []history.Op) []history.Op {
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

func TestLatenessStarvesEveryVerdictButAPass(t *testing.T) {
	ttl := time.Second
	late := []lateness.Sample{{At: int64(150 * time.Millisecond), Kind: lateness.Timer, Late: int64(300 * time.Millisecond)}}
	unfit := history.Op{Process: history.NemesisProcess, Type: history.OK, F: string(fault.Starved), Time: int64(50 * time.Millisecond),
		Value: &history.Value{Target: "the pause of process 0 could last only 40ms"}}
	pause := history.Op{Process: history.NemesisProcess, Type: history.OK, F: string(fault.Pause), Time: int64(120 * time.Millisecond),
		Value: &history.Value{Target: "client 1", Duration: int64(10 * time.Millisecond)}}
	const SafeShowing Outcome = "safe, showing " + StaleWriteRejected
	const LockUnsafeShowing Outcome = "lock-unsafe, showing " + StaleWriteRejected
	slowServer := []lateness.Sample{{At: int64(150 * time.Millisecond), Kind: lateness.Server, Late: int64(800 * time.Millisecond)}}
	// A round trip sent at 100 ms and answered at 900 ms: across a fault at
	// 120 ms, before one at 1.5 s.
	slowEarly := []lateness.Sample{{At: int64(100 * time.Millisecond), Kind: lateness.Server, Late: int64(800 * time.Millisecond)}}
	laterPause := pause
	laterPause.Time = int64(1500 * time.Millisecond)
	movedWall := []lateness.Sample{{At: int64(150 * time.Millisecond), Kind: lateness.Wall, Late: int64(time.Millisecond)}}
	// One acquire that never returns: the key stays stuck past the
	// allowance (deadlock).
	stuck := append(holds([]int{0}, 0),
		history.Op{Process: 1, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: int64(100 * time.Millisecond)},
		history.Op{Process: 1, Type: history.Fail, F: history.Acquire, Key: "lock", Time: int64(3 * time.Second)},
		history.Op{Process: 1, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: int64(3100 * time.Millisecond)},
		history.Op{Process: 1, Type: history.Fail, F: history.Acquire, Key: "lock", Time: int64(6 * time.Second)})
	checkers := []checker.Checker{checker.Intervals{}, checker.Linearizable{Semantics: checker.Mutex, Timeout: time.Minute},
		checker.Promise{}, checker.Resource{}, checker.Liveness{Allowance: 2*ttl + 250*time.Millisecond}}
	cases := []struct {
		name        string
		expect      Outcome
		ops         []history.Op
		late        []lateness.Sample
		wantOutcome Outcome
	}{
		{"a pass on time", Safe, holds([]int{0, 1, 0, 1}, 0), nil, Safe},
		{"a pass, late", Safe, holds([]int{0, 1, 0, 1}, 0), late, Safe},
		{"a violation, late", Safe, holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), late, Starved},
		{"a violation expected, safe and late", LockUnsafe, holds([]int{0, 1, 0, 1}, 0), late, Starved},
		{"a violation expected and shown, late", LockUnsafe, holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), late, Starved},
		{"a violation expected and shown, on time", LockUnsafe, holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), nil, LockUnsafe},
		{"a pass with a fault that did not fit", Safe, append(holds([]int{0, 1, 0, 1}, 0), unfit), nil, Starved},
		// A fault's window may have moved: the pass proves nothing.
		{"a pass with a fault, late", Safe, append(holds([]int{0, 1, 0, 1}, 0), pause), late, Starved},
		{"a pass with a fault, on time", Safe, append(holds([]int{0, 1, 0, 1}, 0), pause), nil, Safe},
		{"a pass missing what it was to show, late", SafeShowing, holds([]int{0, 1, 0, 1}, 0), late, Starved},
		// A violation beside a slow lock server is the lock's.
		{"a violation with a fault, a slow server", LockUnsafe, append(holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), pause), slowServer, LockUnsafe},
		// A server's wall clock that ran ahead of the harness's ends a
		// lease before its promise: the broken promise is not the lock's.
		{"a violation, the wall clock moved", Safe, holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), movedWall, Starved},
		// A slow lock server may have kept every waiter from the key
		// while the story's window was open: the pass proves nothing, also
		// where the slow round trip began before the fault. One answered
		// before the faults began shut no window, and a pass with no fault
		// (here one that missed what it was to show) has none.
		{"a pass with a fault, a slow server", Safe, append(holds([]int{0, 1, 0, 1}, 0), pause), slowServer, Starved},
		{"a pass with a fault, a slow server across its start", Safe, append(holds([]int{0, 1, 0, 1}, 0), pause), slowEarly, Starved},
		{"a pass with a fault, a slow server before it", Safe, append(holds([]int{0, 1, 0, 1}, 0), laterPause), slowEarly, Safe},
		{"a pass with no fault, a slow server", SafeShowing, holds([]int{0, 1, 0, 1}, 0), slowServer, Safe},
		// So may it have let a waiter in only after the holder wrote: a
		// violation short of the one expected proves no less than that,
		// but one that falls short on time is the lock's.
		{"a violation short of the one expected, a slow server", Unsafe, append(holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), pause), slowServer, Starved},
		{"a violation without what it was to show, a slow server", LockUnsafeShowing, append(holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), pause), slowServer, Starved},
		{"a violation short of the one expected, a slow server before the fault", Unsafe, append(holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), laterPause), slowEarly, LockUnsafe},
		{"a violation short of the one expected, on time", Unsafe, append(holds([]int{0, 1, 0, 1}, 50*int64(time.Millisecond)), pause), nil, LockUnsafe},
		{"a stall with a fault, on time", Safe, ordered(append(slices.Clone(stuck), pause)), nil, Deadlock},
		{"a stall with a fault, a slow server", Safe, ordered(append(stuck, pause)), slowServer, Starved},
	}
	for _, c := range cases {
		e := Expectation{Outcome: c.expect}
		switch c.expect {
		case SafeShowing:
			e = Expectation{Outcome: Safe, Show: []string{StaleWriteRejected}}
		case LockUnsafeShowing:
			e = Expectation{Outcome: LockUnsafe, Show: []string{StaleWriteRejected}}
		}
		r := Judge(Case{Expected: e, Checkers: checkers, Limits: lateness.LimitsFor(ttl)}, c.ops, 0, c.late)
		if r.Outcome != c.wantOutcome {
			t.Errorf("%s: outcome %s (starved %q), want %s", c.name, r.Outcome, r.Starved, c.wantOutcome)
		}
		if (c.late != nil) != (r.Late != "") {
			t.Errorf("%s: late %q, want it said only when the run ran late", c.name, r.Late)
		}
		if r.Matched != (c.wantOutcome == e.Outcome && len(e.Show) == 0) {
			t.Errorf("%s: matched %v", c.name, r.Matched)
		}
	}
}

// Exploration holds a lock to its promise both ways the promise checker
// tells: a release refused while the key was still promised to its holder
// (lease-lost) is the lock's failure as much as two holders promised at
// once. Under faults the lock claims to survive it is a finding; with an
// unclaimed fault drawn it is explained; refused after the deadline, the
// lease only ran out and the promise was kept.
func TestExplorationCountsALostLeaseAsABrokenPromise(t *testing.T) {
	ms := int64(time.Millisecond)
	run := func(refusedAt int64, faults ...fault.Op) []history.Op {
		ops := []history.Op{
			{Process: 0, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: 0},
			{Process: 0, Type: history.OK, F: history.Acquire, Key: "lock", Time: ms, Value: &history.Value{Token: "a", Deadline: 500 * ms}},
			{Process: 0, Type: history.Invoke, F: history.Release, Key: "lock", Time: refusedAt - ms},
			{Process: 0, Type: history.Fail, F: history.Release, Key: "lock", Time: refusedAt, Error: "not held"},
		}
		for i, f := range faults {
			ops = append(ops, nemesisOp(f, history.Site{}, int64(i+2)*ms, 0, history.OK))
		}
		slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
		for i := range ops {
			ops[i].Index = int64(i)
		}
		return ops
	}
	claims := &locks.Info{Name: "lease", Claims: []fault.Kind{fault.ClientPause}}
	c := Case{Expected: Expectation{Outcome: PromiseKept}, Checkers: []checker.Checker{checker.Intervals{}, checker.Promise{}}, Claims: claims}
	cases := []struct {
		name             string
		ops              []history.Op
		finding, explain string
	}{
		{"refused within the lease, under a claimed fault", run(100*ms, fault.Pause), "lease-lost: lease broke its promise under client-pause", ""},
		{"refused within the lease, with an unclaimed fault", run(100*ms, fault.Pause, fault.Kill), "", "lease-lost, explained by node-crash"},
		{"refused after the deadline", run(600*ms, fault.Pause), "", ""},
	}
	for _, tc := range cases {
		j := Judge(c, tc.ops, 0, nil)
		if !strings.HasPrefix(j.Finding, tc.finding) || (tc.finding == "") != (j.Finding == "") ||
			!strings.HasPrefix(j.Explained, tc.explain) || j.Matched != (tc.finding == "") {
			t.Errorf("%s: outcome %s %v, matched %v, finding %q, explained %q", tc.name, j.Outcome, j.Observations, j.Matched, j.Finding, j.Explained)
		}
	}
}

// A save the time limit cut short (misconf's save-mend, still running when
// the history ended) left the story untold by the machine's fault, not the
// lock's: the run is starved, not vacuous. Ended in time, the same run is
// judged as the checkers found it.
func TestASaveTheRunOutlivedStarvesIt(t *testing.T) {
	ms := int64(time.Millisecond)
	save := func(f fault.Op, typ history.Type, at int64) history.Op {
		return history.Op{Process: history.NemesisProcess, Type: typ, F: string(f), Time: at,
			Value: &history.Value{Target: "n1", Site: &history.Site{Node: "n1"}}}
	}
	failed := []history.Op{save(fault.SaveFail, history.Invoke, 310*ms), save(fault.SaveFail, history.OK, 350*ms)}
	c := Case{Expected: Expectation{Outcome: Safe}, Checkers: []checker.Checker{checker.Intervals{}},
		Limits:   lateness.LimitsFor(500 * time.Millisecond),
		Requires: []fault.Evidence{{Op: fault.SaveFail}, {Op: fault.SaveMend}},
		Traffic:  Traffic{Before: 1, After: 1}}
	running := ordered(append(append(holds([]int{0, 1, 0, 1, 0, 1, 0, 1}, 0), failed...), save(fault.SaveMend, history.Invoke, 400*ms)))
	if r := Judge(c, running, 0, nil); r.Outcome != Starved || !strings.Contains(r.Starved, "save-mend of n1 ran 390ms late") {
		t.Errorf("a save-mend still running at the end: outcome %s (starved %q, vacuous %q), want starved by the save", r.Outcome, r.Starved, r.Vacuous)
	}
	ended := ordered(append(slices.Clone(running), save(fault.SaveMend, history.OK, 450*ms)))
	if r := Judge(c, ended, 0, nil); r.Outcome != Safe || r.Starved != "" {
		t.Errorf("a save-mend that ended in 50ms: outcome %s (starved %q, vacuous %q), want safe", r.Outcome, r.Starved, r.Vacuous)
	}
}

func TestFellShortRanksByTheCheckersSeverity(t *testing.T) {
	showing := func(o Outcome) Expectation { return Expectation{Outcome: o, Show: []string{StaleWriteRejected}} }
	cases := []struct {
		e    Expectation
		got  Outcome
		obs  []string
		want bool
	}{
		{Expectation{Outcome: Unsafe}, LockUnsafe, nil, true},
		{Expectation{Outcome: Unsafe}, Safe, nil, true},
		{Expectation{Outcome: Deadlock}, Unfair, nil, true},
		{showing(LockUnsafe), LockUnsafe, nil, true},
		{showing(LockUnsafe), LockUnsafe, []string{StaleWriteRejected}, false},
		{Expectation{Outcome: LockUnsafe}, Unsafe, nil, false},
		{Expectation{Outcome: Unfair}, Deadlock, nil, false},
		{Expectation{Outcome: Safe, Hide: []string{"promise-broken"}}, Safe, []string{"promise-broken"}, false},
		{Expectation{}, Safe, nil, false},
		{Expectation{Outcome: Unsafe}, Vacuous, nil, false},
	}
	for _, c := range cases {
		if got := fellShort(c.e, c.got, c.obs); got != c.want {
			t.Errorf("expected %s %v, got %s %v: fell short %v, want %v", c.e.Outcome, c.e.Show, c.got, c.obs, got, c.want)
		}
	}
}
