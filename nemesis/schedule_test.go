package nemesis_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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

func faults() []nemesis.Fault {
	noop := func(context.Context) error { return nil }
	return []nemesis.Fault{{Name: "partition", Start: noop, Stop: noop}, {Name: "pause", Start: noop, Stop: noop}, {Name: "clock", Start: noop, Stop: noop}}
}

func TestRandomScheduleIsTheSeedsAlone(t *testing.T) {
	o := nemesis.RandomOptions{Seed: 42, Duration: 30 * time.Second, Interval: time.Second}
	a, err := nemesis.Random(faults(), o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := nemesis.Random(faults(), o)
	if a.String() != b.String() {
		t.Fatalf("same seed, different schedules:\n%s\n%s", a, b)
	}
	o.Seed = 43
	c, _ := nemesis.Random(faults(), o)
	if a.String() == c.String() {
		t.Fatal("a different seed gave the same schedule")
	}
	last := a[len(a)-1]
	if last.Name != "final heal" || last.At != 29*time.Second {
		t.Fatalf("schedule must end with the heal phase, ends with %q at %s", last.Name, last.At)
	}
	for i := 0; i+1 < len(a)-1; i += 2 {
		start, stop := a[i], a[i+1]
		if !strings.HasPrefix(start.Name, "start ") || stop.Name != "stop "+strings.TrimPrefix(start.Name, "start ") || stop.At <= start.At {
			t.Fatalf("steps %d,%d are not a start/stop pair: %q@%s %q@%s", i, i+1, start.Name, start.At, stop.Name, stop.At)
		}
		if stop.At > last.At {
			t.Fatal("a fault outlives the heal phase")
		}
	}
}

func TestRandomScheduleRefusesNonsense(t *testing.T) {
	if _, err := nemesis.Random(nil, nemesis.RandomOptions{Duration: time.Minute, Interval: time.Second}); err == nil {
		t.Fatal("no faults accepted")
	}
	if _, err := nemesis.Random(faults(), nemesis.RandomOptions{Duration: time.Second, Interval: time.Second}); err == nil {
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
