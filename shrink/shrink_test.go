package shrink

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/locktorture/locktorture/scenario"
)

// Delta debugging on a plan whose finding needs two of its eight faults
// together, and one of them to last at least a TTL: the shrink keeps those
// two and the final heal, cuts the other short no further than the finding
// allows, and halves the clients down to two.
func TestSmallerKeepsWhatTheFindingNeeds(t *testing.T) {
	var p scenario.Plan
	for i := range 8 {
		p = append(p, scenario.Step{At: scenario.TTLs(float64(2 * i)), Until: scenario.TTLs(float64(2*i) + 1.6),
			Action: scenario.Action{Do: "pause-node", Node: []string{"n1", "n2", "n3", "n4", "n5", "n1", "n2", "n3"}[i]}})
	}
	p = append(p, scenario.Step{At: scenario.TTLs(16), Action: scenario.Action{Do: "heal-all"}})
	needs := func(c scenario.Plan) bool {
		var two, five bool
		for _, st := range c {
			two = two || st.At.V == 4
			five = five || st.At.V == 10 && st.Until.V-st.At.V >= 0.7
		}
		return two && five && c[len(c)-1].Do == "heal-all"
	}
	tries := 0
	got, clients := Smaller(p, 5, func(_ string, c scenario.Plan, _ int) bool { tries++; return needs(c) }, func() error { return nil })
	var at []float64
	for _, st := range got {
		at = append(at, st.At.V)
	}
	if !slices.Equal(at, []float64{4, 10, 16}) {
		t.Fatalf("kept the steps at %v TTLs, want 4, 10 and the heal at 16", at)
	}
	if d := got[1].Until.V - got[1].At.V; math.Abs(d-0.8) > 1e-9 {
		t.Errorf("the needed fault lasts %g TTLs, want 0.8 (halved once: half of that would lose the finding)", d)
	}
	if d := got[0].Until.V - got[0].At.V; math.Abs(d-0.8) > 1e-9 {
		t.Errorf("the other lasts %g TTLs, want 0.8", d)
	}
	if clients != 2 {
		t.Errorf("clients %d, want 2", clients)
	}
	if tries > 30 {
		t.Errorf("%d tries for 8 faults: delta debugging takes fewer", tries)
	}
	// A finding that needs everything keeps everything.
	all, _ := Smaller(p, 2, func(_ string, c scenario.Plan, _ int) bool { return reflect.DeepEqual(c, p) }, func() error { return nil })
	if !reflect.DeepEqual(all, p) {
		t.Fatal("a finding that needs every fault lost one")
	}
}
