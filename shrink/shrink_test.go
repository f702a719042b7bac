package shrink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// Delta debugging on a plan whose finding needs two of its eight faults
// together, one of them to last at least 0.7 TTLs and to start by 11 TTLs:
// the shrink keeps those two and the final heal, cuts both short no
// further than the finding allows, starts the free one later and the
// other where it was, and halves the clients down to two.
func TestSmallerKeepsWhatTheFindingNeeds(t *testing.T) {
	var p scenario.Plan
	for i := range 8 {
		p = append(p, scenario.Step{At: scenario.TTLs(float64(2 * i)), Until: scenario.TTLs(float64(2*i) + 1.6),
			Action: scenario.Action{Do: "pause-node", Node: fmt.Sprintf("n%d", i+1)}})
	}
	p = append(p, scenario.Step{At: scenario.TTLs(16), Action: scenario.Action{Do: "heal-all"}})
	needs := func(c scenario.Plan) bool {
		var three, six bool
		for _, st := range c {
			three = three || st.Node == "n3"
			six = six || st.Node == "n6" && st.Until.V-st.At.V >= 0.7 && st.At.V <= 11
		}
		return three && six && c[len(c)-1].Do == "heal-all"
	}
	tries := 0
	got, clients := Smaller(p, 5, func(_ string, c scenario.Plan, _ int) bool { tries++; return needs(c) }, func() error { return nil })
	var at, until []float64
	for _, st := range got {
		at, until = append(at, st.At.V), append(until, st.Until.V)
	}
	// n3 shortened to [4, 4.8], then moved half of the 11.2 TTLs to the
	// heal; n6 shortened to [10, 10.8], and 12.6 would start too late.
	if !slices.Equal(at, []float64{9.6, 10, 16}) || !slices.Equal(until, []float64{10.4, 10.8, 0}) {
		t.Fatalf("kept steps at %v until %v TTLs, want n3 at 9.6 until 10.4, n6 at 10 until 10.8, the heal at 16", at, until)
	}
	if clients != 2 {
		t.Errorf("clients %d, want 2", clients)
	}
	if tries > 30 {
		t.Errorf("%d tries for 8 faults: delta debugging takes fewer", tries)
	}
	said := removed(p, got, 5, clients)
	for _, want := range []string{"moved pause-node: starts at 9.6 TTLs, not 4", "shortened pause-node: lasts 0.8 TTLs, not 1.6", "clients: 2, not 5"} {
		if !slices.Contains(said, want) {
			t.Errorf("the report says %q, without %q", said, want)
		}
	}
	if n := len(said); n != 6+3+1 {
		t.Errorf("the report has %d lines, want 6 removed, n3 moved and both shortened, and the clients: %q", n, said)
	}
	// A finding that needs everything keeps everything.
	all, _ := Smaller(p, 2, func(_ string, c scenario.Plan, _ int) bool { return reflect.DeepEqual(c, p) }, func() error { return nil })
	if !reflect.DeepEqual(all, p) {
		t.Fatal("a finding that needs every fault lost one")
	}
	// Of two steps that do the same, the one kept is the one nearest
	// before: nothing was moved or shortened here.
	arm := scenario.Action{Do: "arm", Trap: &scenario.Trap{Point: "before-write", Client: "any", Pause: scenario.TTLs(2)}}
	twice := scenario.Plan{{At: scenario.TTLs(9), Until: scenario.TTLs(11.8), Action: arm}, {At: scenario.TTLs(18), Until: scenario.TTLs(20.4), Action: arm}}
	if said := removed(twice, twice[1:], 5, 5); len(said) != 1 || !strings.HasPrefix(said[0], `removed {"at":9,`) {
		t.Errorf("the later of two arms kept: the report says %q", said)
	}
	// The first of two moved past the second is one move, and a move of
	// a fault whose ends round differently is no shortening.
	moved := scenario.Plan{{At: scenario.TTLs(19.5), Until: scenario.TTLs(22.3), Action: arm}, twice[1]}
	if said := removed(twice, moved, 5, 5); !slices.Equal(said, []string{"moved arm: starts at 19.5 TTLs, not 9"}) {
		t.Errorf("one of two arms moved: the report says %q", said)
	}
	odd := scenario.Plan{{At: scenario.TTLs(0.1), Until: scenario.TTLs(1.3), Action: arm}}
	if said := removed(odd, scenario.Plan{{At: scenario.TTLs(0.7), Until: scenario.TTLs(1.9), Action: arm}}, 5, 5); len(said) != 1 {
		t.Errorf("a move alone: the report says %q", said)
	}
}

// A stored run shrinks for real, each candidate replayed on real Redis:
// K1 (set-nx-px, two clients) told with a node paused briefly before the
// trap is armed. The node's pause goes (K1 shows without it), the holder's
// pause stays (without it nobody outlives a lease), and the smallest
// schedule is written as a scenario file that parses back to it, with
// shrink.md saying what was removed. Two replays a candidate, one needed:
// a replay starved by a busy machine runs again alone, and one of two is
// enough to keep a candidate that shows K1 every time.
func TestShrinkReplaysAStoredRun(t *testing.T) {
	k1, err := scenario.Lookup("paused-holder")
	if err != nil {
		t.Fatal(err)
	}
	// Only this lock's expectation: the file must parse in a binary that
	// registers no library's or service's lock.
	k1.Expect = map[string]verdict.Expectation{"set-nx-px": k1.Expect["set-nx-px"]}
	k1.Plan = append(scenario.Plan{{At: scenario.TTLs(0.2), Until: scenario.TTLs(0.4), Action: scenario.Action{Do: "pause-node", Node: "n1"}}}, k1.Plan...)
	out := t.TempDir()
	stored, err := engine.RunUnstarved(context.Background(), engine.Options{Told: &k1, Lock: "set-nx-px", Clients: 2,
		TimeLimit: 3 * time.Second, Out: out}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Outcome != verdict.Unsafe {
		t.Fatalf("the stored run: outcome %s (%s), want unsafe", stored.Outcome, stored.Starved)
	}
	if err := report.Write(stored); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{Dir: stored.Dir, Replays: 2, Keep: 1, Final: 2, Out: out, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	// Taking out the node's pause (kept), then the trap (not kept);
	// nothing else applies to a lone trap, which has no length, starts
	// at the plan's end and has two clients already.
	if len(res.Tries) != 2 {
		t.Errorf("%d tries, want 2: %+v", len(res.Tries), res.Tries)
	}
	var kept []string
	for _, try := range res.Tries {
		if try.Kept {
			kept = append(kept, try.Change)
		}
		if strings.HasPrefix(try.Change, `without {"at":1,"do":"arm"`) && try.Shown > 0 {
			t.Errorf("try %q showed K1 in %d of 2 replays: nothing outlived a lease", try.Change, try.Shown)
		}
	}
	if len(kept) != 1 || !strings.HasPrefix(kept[0], `without {"at":0.2,"until":0.4,"do":"pause-node"`) {
		t.Fatalf("kept %q, want only the node's pause taken out; tries %+v", kept, res.Tries)
	}
	if Faults(res.To) != 1 || res.To[0].Do != "arm" || res.ClientsTo != 2 {
		t.Fatalf("shrunk to %+v with %d clients, want the trap alone and 2", res.To, res.ClientsTo)
	}
	data, err := os.ReadFile(filepath.Join(res.Dir, "scenario.json"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := scenario.Parse(data)
	if err != nil {
		t.Fatalf("the shrunk scenario.json does not parse: %v", err)
	}
	if !reflect.DeepEqual(file.Plan, res.To) || file.Clients != 2 {
		t.Fatalf("scenario.json holds %+v with %d clients, want %+v and 2", file.Plan, file.Clients, res.To)
	}
	if len(res.Removed) != 1 || !strings.Contains(res.Removed[0], `"do":"pause-node"`) {
		t.Fatalf("removed %q, want the node's pause alone", res.Removed)
	}
	md, err := os.ReadFile(filepath.Join(res.Dir, "shrink.md"))
	if err != nil || !strings.Contains(string(md), res.Removed[0]) {
		t.Fatalf("shrink.md does not say what was removed (%v):\n%s", err, md)
	}
}
