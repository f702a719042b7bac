package engine

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/workloads"
)

// An interval run replays from its seed: two runs of one seed draw one
// plan, whose faults the nemesis does at the plan's times, and another
// seed draws another; the run keeps the plan it was told (Told), with
// its workload and interval, and its figures.
func TestIntervalRunReplaysFromItsSeed(t *testing.T) {
	iv := &scenario.Interval{Faults: []string{"pause"}, Every: workloads.UniformDist(300*time.Millisecond, 600*time.Millisecond),
		For: workloads.FixedDist(200 * time.Millisecond)}
	runSeed := func(seed int64) *Result {
		res, err := RunUnstarved(context.Background(), Options{Scenario: scenario.IntervalStory, Lock: "set-nx-px", TTL: 250 * time.Millisecond,
			TimeLimit: 3 * time.Second, Seed: seed, Interval: iv, Workload: workloads.Shape{Hold: workloads.FixedDist(20 * time.Millisecond)},
			Out: t.TempDir()}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := runSeed(11), runSeed(11), runSeed(12)
	if a.Told == nil || !reflect.DeepEqual(a.Told.Plan, b.Told.Plan) {
		t.Fatal("two runs of seed 11 were told two plans")
	}
	if reflect.DeepEqual(a.Told.Plan, c.Told.Plan) {
		t.Fatal("seeds 11 and 12 were told one plan")
	}
	if a.Interval == nil || a.Workload.Hold != workloads.FixedDist(20*time.Millisecond) {
		t.Fatalf("the run does not keep its system: %+v %+v", a.Interval, a.Workload)
	}
	for _, res := range []*Result{a, b} {
		var at []int64
		for _, op := range res.Ops {
			if op.Process == history.NemesisProcess && op.F == string(fault.Pause) && op.Type == history.OK {
				at = append(at, op.Time-res.Ready)
			}
		}
		var want []time.Duration
		for _, st := range res.Told.Plan {
			if st.Do == "pause" {
				want = append(want, time.Duration(st.At.V*float64(250*time.Millisecond)))
			}
		}
		if len(at) != len(want) || len(want) < 3 {
			t.Fatalf("%d pauses done, %d planned", len(at), len(want))
		}
		for i := range want {
			if d := time.Duration(at[i]) - want[i]; d < 0 || d > 100*time.Millisecond {
				t.Fatalf("pause %d done at %s, planned at %s", i, time.Duration(at[i]), want[i])
			}
		}
	}
	if a.Figures.WritesAcked == 0 || a.Figures.Span < 2*time.Second {
		t.Fatalf("no figures: %+v", a.Figures)
	}
}
