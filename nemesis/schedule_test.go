package nemesis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

var five = []string{"n1", "n2", "n3", "n4", "n5"}

func reach(g nemesis.Grudge, peer string, nodes []string) []string {
	var out []string
	for _, n := range nodes {
		if !slices.Contains(g[peer], n) {
			out = append(out, n)
		}
	}
	return out
}

func TestIsolateNode(t *testing.T) {
	g := nemesis.IsolateNode("n3", []string{"c0", "c1"})
	for _, p := range []string{"c0", "c1"} {
		if got := reach(g, p, five); slices.Contains(got, "n3") || len(got) != 4 {
			t.Fatalf("%s reaches %v", p, got)
		}
	}
}

func TestHalvesGivesOneSideTheMajority(t *testing.T) {
	g := nemesis.Halves(five, []string{"c0", "c1", "c2", "c3"})
	a, b := reach(g, "c0", five), reach(g, "c3", five)
	if len(a) != 3 || len(b) != 2 || slices.ContainsFunc(a, func(n string) bool { return slices.Contains(b, n) }) {
		t.Fatalf("halves: %v and %v", a, b)
	}
}

func TestMajoritiesRingOverlapsButDiffers(t *testing.T) {
	peers := []string{"c0", "c1", "c2", "c3", "c4"}
	g := nemesis.MajoritiesRing(five, peers)
	seen := map[string]bool{}
	for i, p := range peers {
		r := reach(g, p, five)
		if len(r) != 3 {
			t.Fatalf("%s sees %v, not a majority", p, r)
		}
		seen[strings.Join(r, ",")] = true
		for _, q := range peers[i+1:] {
			if !slices.ContainsFunc(r, func(n string) bool { return slices.Contains(reach(g, q, five), n) }) {
				t.Fatalf("%s and %s share no node", p, q)
			}
		}
	}
	if len(seen) != len(peers) {
		t.Fatalf("only %d distinct majorities for %d peers", len(seen), len(peers))
	}
}

func TestBridgeKeepsTheMiddleNodeForBoth(t *testing.T) {
	g := nemesis.Bridge(five, []string{"c0", "c1"})
	a, b := reach(g, "c0", five), reach(g, "c1", five)
	if !slices.Equal(a, []string{"n1", "n2", "n3"}) || !slices.Equal(b, []string{"n3", "n4", "n5"}) {
		t.Fatalf("bridge: %v and %v", a, b)
	}
}

// With the nodes as their own peers the shapes split the servers the way
// Jepsen's split a database's nodes; what the docker backend then drops is
// checked packet by packet in package docker.
func TestShapesAmongTheNodesThemselves(t *testing.T) {
	together := func(g nemesis.Grudge) map[string][]string {
		out := map[string][]string{}
		for _, a := range five {
			for _, b := range five {
				if !g.Apart(a, b) {
					out[a] = append(out[a], b)
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		name string
		g    nemesis.Grudge
		want map[string]string
	}{
		{"isolate", nemesis.IsolateNode("n3", five), map[string]string{
			"n1": "n1,n2,n4,n5", "n2": "n1,n2,n4,n5", "n3": "n3", "n4": "n1,n2,n4,n5", "n5": "n1,n2,n4,n5"}},
		{"halves", nemesis.Halves(five, five), map[string]string{
			"n1": "n1,n2,n3", "n2": "n1,n2,n3", "n3": "n1,n2,n3", "n4": "n4,n5", "n5": "n4,n5"}},
		{"majorities ring", nemesis.MajoritiesRing(five, five), map[string]string{
			"n1": "n1,n2,n5", "n2": "n1,n2,n3", "n3": "n2,n3,n4", "n4": "n3,n4,n5", "n5": "n1,n4,n5"}},
		{"bridge", nemesis.Bridge(five, five), map[string]string{
			"n1": "n1,n2,n3", "n2": "n1,n2,n3", "n3": "n1,n2,n3,n4,n5", "n4": "n3,n4,n5", "n5": "n3,n4,n5"}},
	} {
		got := together(c.g)
		for _, n := range five {
			if strings.Join(got[n], ",") != c.want[n] {
				t.Errorf("%s: %s reaches %v, want %s (grudge %s)", c.name, n, got[n], c.want[n], c.g)
			}
		}
	}
}

func TestRandomScheduleIsTheSeedsAlone(t *testing.T) {
	o := nemesis.RandomOptions{Seed: 42, Duration: 30 * time.Second, Interval: time.Second}
	a, healAt, err := nemesis.Random(3, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := nemesis.Random(3, o)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	o.Seed = 43
	c, _, _ := nemesis.Random(3, o)
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("a different seed gave the same schedule")
	}
	if healAt != 29*time.Second || len(a) < 5 {
		t.Fatalf("want the heal phase at 29s after a few faults, got %s after %d", healAt, len(a))
	}
	kinds := map[int]bool{}
	for i, s := range a {
		kinds[s.Fault] = true
		if s.Stop <= s.Start || s.Stop > healAt || i > 0 && s.Start <= a[i-1].Stop {
			t.Fatalf("span %d (%v) overlaps its neighbour or the heal phase", i, s)
		}
	}
	if len(kinds) != 3 {
		t.Fatalf("30 s of faults drew %d of 3 kinds", len(kinds))
	}
}

func TestRandomScheduleRefusesNonsense(t *testing.T) {
	if _, _, err := nemesis.Random(0, nemesis.RandomOptions{Duration: time.Minute, Interval: time.Second}); err == nil {
		t.Fatal("no faults accepted")
	}
	if _, _, err := nemesis.Random(3, nemesis.RandomOptions{Duration: time.Second, Interval: time.Second}); err == nil {
		t.Fatal("a duration shorter than 3 intervals accepted")
	}
}

// A fault done inside a trap (a clock jump when the holder stands at its
// write) is a line of the schedule a person reads, not hidden in a callback.
func TestScheduleListsWhatATrapDoes(t *testing.T) {
	g := nemesis.NewGate(nil)
	s := nemesis.Schedule{g.ArmStep(time.Second, nemesis.Trap{Point: "before-write", Client: nemesis.AnyClient, Pause: time.Second,
		Then:     func(context.Context, int, int) error { return nil },
		ThenName: "jump n3's clock 5s forward"})}
	if got := s.String(); !strings.Contains(got, "pause 1s the next client at before-write, and there jump n3's clock 5s forward") {
		t.Fatalf("schedule says %q", got)
	}
}

// TestAnActionTheRunsEndCutsShortIsNoFailure: a step or a trap's action
// that the run's end interrupts (a slot's hand-over under way at the time
// limit) fails for no fault of its own, and must not turn the run into an
// error; one that fails for a reason of its own must, even if it returns
// after the run's end.
func TestAnActionTheRunsEndCutsShortIsNoFailure(t *testing.T) {
	// underWay ends the run while it works, and returns the run's end.
	underWay := func(end context.CancelFunc) func(context.Context) error {
		return func(ctx context.Context) error { end(); <-ctx.Done(); return ctx.Err() }
	}
	// refused fails on its own, after the run's end when end is set.
	refused := func(end context.CancelFunc) func(context.Context) error {
		return func(context.Context) error { end(); return errors.New("refused") }
	}
	cases := []struct {
		name string
		do   func(context.CancelFunc) func(context.Context) error
		want bool
	}{{"cut short", underWay, false}, {"refused", refused, true}}
	for _, tc := range cases {
		ctx, end := context.WithCancel(context.Background())
		err := nemesis.Schedule{{Name: "hand a slot over", Do: tc.do(end)}}.Run(ctx)
		if got := err != nil; got != tc.want {
			t.Errorf("a step %s: %v, want an error: %v", tc.name, err, tc.want)
		}
		for _, after := range []bool{false, true} {
			ctx, end := context.WithCancel(context.Background())
			do := tc.do(end)
			act := func(ctx context.Context, _, _ int) error { return do(ctx) }
			trap := nemesis.Trap{Point: "before-write", Client: nemesis.AnyClient, Then: act}
			if after {
				trap = nemesis.Trap{Point: "before-write", Client: nemesis.AnyClient, After: act}
			}
			g := nemesis.NewGate(history.NewRecorder(nil, 0))
			g.Arm(trap)
			_ = g.At(ctx, 0, 0, "before-write")
			if got := g.Err() != nil; got != tc.want {
				t.Errorf("a trap's action %s (After %v): gate error %v, want one: %v", tc.name, after, g.Err(), tc.want)
			}
			end()
		}
	}
}

// The hold keeps the first step until Ready, and every later step keeps
// its distance from the first: the story told after the hold is the one
// an idle machine sees. Unready, it waits Max and goes on; ready, or a
// first step that only arms a trap, it moves nothing.
func TestHeldScheduleMovesEveryStepByItsWait(t *testing.T) {
	for _, c := range []struct {
		name        string
		readyAfter  time.Duration // never when 0
		max         time.Duration
		first, most time.Duration // the first step's time, at least and at most
		moved       bool
		arms        bool // the first step arms a trap
	}{
		{name: "ready later", readyAfter: 300 * time.Millisecond, max: 5 * time.Second, first: 300 * time.Millisecond, most: 2 * time.Second, moved: true},
		{name: "never ready", max: 200 * time.Millisecond, first: 250 * time.Millisecond, most: 2 * time.Second, moved: true},
		{name: "ready at once", readyAfter: time.Nanosecond, max: 5 * time.Second, first: 50 * time.Millisecond, most: 2 * time.Second},
		{name: "arming, never ready", max: 5 * time.Second, first: 50 * time.Millisecond, most: 2 * time.Second, arms: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var at []time.Duration
			start := time.Now()
			step := func(d time.Duration) nemesis.Step {
				return nemesis.Step{At: d, Name: d.String(), Do: func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					at = append(at, time.Since(start))
					return nil
				}}
			}
			var moved time.Duration
			h := nemesis.Hold{Max: c.max, Moved: func(d time.Duration) { moved = d },
				Ready: func() bool { return c.readyAfter > 0 && time.Since(start) >= c.readyAfter }}
			first := step(50 * time.Millisecond)
			first.Arms = c.arms
			// Given out of order: the schedule sorts its steps first.
			if err := (nemesis.Schedule{step(150 * time.Millisecond), first}).RunHeld(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			if len(at) != 2 || at[0] < c.first || at[0] > c.most {
				t.Fatalf("steps at %v: the first must come between %v and %v", at, c.first, c.most)
			}
			// Unmoved, the second would come at once after a held first;
			// a first step run late shortens the gap, so the bound is loose.
			if gap := at[1] - at[0]; gap < 40*time.Millisecond {
				t.Fatalf("steps at %v: the second must keep its 100 ms after the first", at)
			}
			if (moved > 0) != c.moved {
				t.Fatalf("moved %v: want moved %v", moved, c.moved)
			}
		})
	}
}

// Steps not yet taken come Later as much as Hold.Later says, read as it
// grows while they wait.
func TestHeldScheduleStepsComeLaterAsTold(t *testing.T) {
	var later atomic.Int64
	start := time.Now()
	var at time.Duration
	s := nemesis.Schedule{{At: 50 * time.Millisecond, Name: "first", Do: func(context.Context) error { later.Store(int64(200 * time.Millisecond)); return nil }},
		{At: 100 * time.Millisecond, Name: "second", Do: func(context.Context) error { at = time.Since(start); return nil }}}
	if err := s.RunHeld(context.Background(), nemesis.Hold{Later: func() time.Duration { return time.Duration(later.Load()) }}); err != nil {
		t.Fatal(err)
	}
	if at < 300*time.Millisecond {
		t.Fatalf("the second step came at %v: 100 ms planned and 200 ms later", at)
	}
}
