package checker

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/history"
)

// shapes are the kinds of history the differential tests draw: the
// workload's own (one key, no re-entry), and the ones it may grow into or
// meet under faults: two keys, re-entry, equal timestamps, crashes and
// every unknown outcome, leases with deadlines, a lock that mostly works.
var shapes = []genOpts{
	{steps: 16, keys: []string{"k"}, procs: 3},
	{steps: 20, keys: []string{"k"}, procs: 3, faults: true, deadlines: true},
	{steps: 20, keys: []string{"k", "m"}, procs: 3, faults: true, reentry: true},
	{steps: 24, keys: []string{"k", "m"}, procs: 3, faults: true, reentry: true, sameTime: true, deadlines: true},
	{steps: 24, keys: []string{"k"}, procs: 3, faults: true, sameTime: true, deadlines: true, faithful: 0.9},
	{steps: 30, keys: []string{"k", "m"}, procs: 2, faults: true, reentry: true, deadlines: true, faithful: 0.9},
}

// agreement compares every checker with its reference judge on one
// history, and returns how many comparisons it made and what differed.
func agreement(ops []history.Op, allow int64) (int, []string) {
	var diffs []string
	differ := func(what string, got, want any) {
		diffs = append(diffs, fmt.Sprintf("%s: checker %v, reference %v", what, got, want))
	}
	checks := 0
	compare := func(what string, got, want any) {
		checks++
		if fmt.Sprint(got) != fmt.Sprint(want) {
			differ(what, got, want)
		}
	}

	// intervals: double holders and how long they overlapped.
	overlaps := map[refPair]int64{}
	for _, o := range Overlaps(Holds(ops)) {
		overlaps[pairOf(o.Key, o.A, o.B)] += o.End - o.Start
	}
	compare("double holders", sortedPairs(overlaps), sortedPairs(refDoubleHolders(ops)))
	iv := Intervals{}.Check(ops)
	foreign := map[refForeign]int{}
	for _, a := range listed(iv, "foreign-release") {
		foreign[refForeign{a.Processes[0], a.Start, a.Processes[1]}]++
	}
	compare("foreign releases", fmt.Sprint(foreign), fmt.Sprint(refForeignReleases(ops)))

	// promise: broken promises, how long, and leases lost.
	pv := Promise{}.Check(ops)
	broken := map[refPair]int64{}
	for _, a := range listed(pv, "promise-broken") {
		broken[pairOf(a.Key, a.Processes[0], a.Processes[1])] += a.End - a.Start
	}
	compare("broken promises", sortedPairs(broken), sortedPairs(refBrokenPromises(ops)))
	lost := map[refLost]bool{}
	for _, a := range listed(pv, "lease-lost") {
		lost[refLost{a.Processes[0], a.Start}] = true
	}
	compare("leases lost", fmt.Sprint(lost), fmt.Sprint(refLeasesLost(ops)))

	// liveness: the stalls flagged, and the longest.
	lv := Liveness{Allowance: time.Duration(allow)}.Check(ops)
	stalls := map[refStall]bool{}
	for _, a := range listed(lv, "deadlock") {
		if stalls[refStall{a.Key, a.Start, a.End}] {
			differ("stall reported twice", a, nil)
		}
		stalls[refStall{a.Key, a.Start, a.End}] = true
	}
	want, longest := refDeadlocks(ops, allow)
	compare("deadlocks", fmt.Sprint(stalls), fmt.Sprint(want))
	compare("longest stall", int64(lv.Details.LongestStall), longest)

	// linearizable: the checker, porcupine on the whole history with and
	// without the reductions, and the brute force, on every model.
	for _, s := range []Semantics{Mutex, Reentrant, Fenced} {
		ref := refLinearizable(s, ops)
		got := Linearizable{Semantics: s, Timeout: 10 * time.Second}.Check(ops).Valid == Valid
		compare(fmt.Sprintf("linearizable (%s)", s), got, ref)
		whole := porcupine.CheckOperationsTimeout(Model(s), mutexOperations(ops, false), 10*time.Second)
		compare(fmt.Sprintf("unreduced porcupine (%s)", s), whole == porcupine.Ok, ref)
		segs := segmentsOf(s, MutexOperations(ops), 1, nil)
		cut, _ := checkSegments(s, segs, 10*time.Second)
		compare(fmt.Sprintf("segments cut everywhere (%s)", s), cut == porcupine.Ok, ref)
	}
	return checks, diffs
}

// resourceAgreement compares Resource with its reference judge.
func resourceAgreement(ops []history.Op) (int, []string) {
	v := Resource{}.Check(ops)
	lost, stale := refResource(ops)
	n := func(m map[string]int) int {
		t := 0
		for _, x := range m {
			t += x
		}
		return t
	}
	var diffs []string
	if v.Counts["lost-update"] != n(lost) {
		diffs = append(diffs, fmt.Sprintf("lost updates: checker %d, reference %d %v", v.Counts["lost-update"], n(lost), lost))
	}
	if v.Counts["stale-write"] != n(stale) {
		diffs = append(diffs, fmt.Sprintf("stale writes: checker %d, reference %d %v", v.Counts["stale-write"], n(stale), stale))
	}
	return 2, diffs
}

// listed is v's anomalies of one kind, all of them (the differential
// histories are small enough that none is left unlisted).
func listed(v Verdict, kind string) []Anomaly {
	var out []Anomaly
	for _, a := range v.Anomalies {
		if a.Kind == kind {
			out = append(out, a)
		}
	}
	if len(out) != v.Counts[kind] {
		panic(fmt.Sprintf("%d %s anomalies, %d listed: draw smaller histories", v.Counts[kind], kind, len(out)))
	}
	return out
}

func sortedPairs(m map[refPair]int64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b refPair) int {
		return cmpPair(a, b)
	})
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s:%d-%d=%d ", k.key, k.a, k.b, m[k])
	}
	return s
}

func cmpPair(a, b refPair) int {
	switch {
	case a.key != b.key:
		if a.key < b.key {
			return -1
		}
		return 1
	case a.a != b.a:
		return a.a - b.a
	}
	return a.b - b.b
}

// Every checker says what its reference judge says, on thousands of small
// random histories of every shape: intervals (double holders, overlap,
// foreign releases), promise (broken promises, their length, leases
// lost), liveness (stalls flagged, the longest), linearizable (the
// checker, porcupine with and without the reductions, and with a cut at
// every point, against a brute-force search) and resource.
func TestCheckersAgreeWithReferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	histories, checks, differ := 0, 0, 0
	invalid := map[Name]int{}
	byWhat := map[string]int{} // differences by what was compared
	// tally counts one history's comparisons and shows its first few
	// differences.
	tally := func(n int, diffs []string, ops []history.Op) {
		histories++
		checks += n
		differ += len(diffs)
		for _, d := range diffs {
			byWhat[strings.SplitN(d, ":", 2)[0]]++
			if differ < 6 {
				t.Errorf("%s on %+v", d, ops)
			}
		}
	}
	for i := 0; i < 600; i++ {
		for _, o := range shapes {
			ops := genHistory(rng, o)
			allow := []int64{5, 10, 20}[rng.IntN(3)]
			n, diffs := agreement(ops, allow)
			tally(n, diffs, ops)
			for _, c := range []Checker{Intervals{}, Promise{}, Liveness{Allowance: time.Duration(allow)}, Linearizable{}} {
				if c.Check(ops).Valid == Invalid {
					invalid[c.Name()]++
				}
			}
		}
		ops := genWrites(rng, 24)
		n, diffs := resourceAgreement(ops)
		tally(n, diffs, ops)
		if res(h(ops)).Valid == Invalid {
			invalid[ResourceName]++
		}
	}
	// The comparison means something only if every checker says both.
	for _, name := range []Name{IntervalsName, PromiseName, LivenessName, LinearizableName, ResourceName} {
		if invalid[name] < 100 || invalid[name] > 3000 {
			t.Errorf("%s judged %d histories invalid: the random histories do not exercise both verdicts", name, invalid[name])
		}
	}
	t.Logf("%d histories, %d comparisons with the reference judges, %d differ %v; invalid by checker: %v", histories, checks, differ, byWhat, invalid)
}

// FuzzCheckersAgree is TestCheckersAgreeWithReferences for longer searches:
//
//	go test -run '^$' -fuzz FuzzCheckersAgree -fuzztime 10m ./checker/
func FuzzCheckersAgree(f *testing.F) {
	for i := range uint64(len(shapes)) {
		f.Add(i, uint64(1), uint8(0))
	}
	// Found by the fuzzer: a process's release and its next acquire at
	// one instant, which porcupine may order either way, and a segment
	// cut between them.
	f.Add(uint64(334), uint64(65), uint8(0x87))
	f.Add(uint64(69), uint64(123), uint8('u'))
	// And one where a release of another key was refused.
	f.Add(uint64(321), uint64(155), uint8('W'))
	f.Fuzz(func(t *testing.T, shape, seed uint64, size uint8) {
		rng := rand.New(rand.NewPCG(shape, seed))
		o := shapes[shape%uint64(len(shapes))]
		o.steps += int(size % 16)
		ops := genHistory(rng, o)
		if _, diffs := agreement(ops, 5+int64(size%20)); len(diffs) > 0 {
			t.Fatalf("%v on %+v", diffs, ops)
		}
		if _, diffs := resourceAgreement(genWrites(rng, 16+int(size%32))); len(diffs) > 0 {
			t.Fatalf("%v", diffs)
		}
	})
}
