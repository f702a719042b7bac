package scenario

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/workloads"
)

func intervalEnv(seed int64, iv *Interval) *Env {
	return &Env{TTL: time.Second, TimeLimit: 40 * time.Second, Seed: seed, Interval: iv,
		Nodes: []string{"n1", "n2", "n3"}, Clients: []string{"c0", "c1", "c2", "c3"}}
}

// An interval run's plan is drawn from its seed: the same seed gives the
// same faults at the same times, another seed others; faults start an
// interval apart or later, never overlap, last as long as For draws, and
// end before the quiet time that precedes the final heal.
func TestIntervalPlanReplaysFromItsSeed(t *testing.T) {
	iv := &Interval{Faults: []string{"pause", "partition", "kill", "node-pause", "crash", "latency", "clock"},
		Every: workloads.UniformDist(time.Second, 3*time.Second), For: workloads.UniformDist(200*time.Millisecond, 1500*time.Millisecond)}
	a, err := intervalPlan(intervalEnv(7, iv))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := intervalPlan(intervalEnv(7, iv))
	c, _ := intervalPlan(intervalEnv(8, iv))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("seed 7 drew two plans")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 drew one plan")
	}
	kinds := map[string]bool{}
	var lastEnd float64
	for _, st := range a[:len(a)-1] {
		kinds[st.Do] = true
		end := st.Until.V
		switch {
		case st.Do == "pause":
			end = st.At.V + st.For.V
		case st.Do == "clock-bump":
			end = st.At.V + st.By.V
		}
		length := end - st.At.V
		if st.At.V < lastEnd-1e-9 && st.Do != "latency" {
			t.Fatalf("%s at %g starts before the last fault ended (%g)", st.Do, st.At.V, lastEnd)
		}
		if length < 0.2-1e-9 || length > 1.5+1e-9 {
			t.Fatalf("%s lasts %g TTLs, outside 0.2..1.5", st.Do, length)
		}
		if end > 38+1e-9 {
			t.Fatalf("%s ends at %g, inside the last 2 TTLs", st.Do, end)
		}
		lastEnd = end
	}
	if len(kinds) < 6 {
		t.Fatalf("40 s of faults every 1..3 s drew only %v", kinds)
	}
	if last := a[len(a)-1]; last.Do != "heal-all" || last.At.V != 38 {
		t.Fatalf("the plan ends with %+v, want heal-all at 38 TTLs", last)
	}
	// The plan is a told story: it compiles as data (checked names and
	// fields) and reads back as it was written.
	raw, _ := json.Marshal(a)
	var back Plan
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(a, back) {
		t.Fatalf("the plan does not read back: %v", err)
	}
	if err := a.Check(map[string]bool{}); err != nil {
		t.Fatal(err)
	}
}

// What an interval run cannot do is refused in one line.
func TestIntervalRefusals(t *testing.T) {
	ok := Interval{Faults: []string{"pause"}, Every: workloads.FixedDist(time.Second), For: workloads.FixedDist(time.Second)}
	if err := ok.Check(1); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		iv    Interval
		nodes int
		says  string
	}{
		"no kinds":    {Interval{Every: ok.Every, For: ok.For}, 1, "needs fault kinds"},
		"no interval": {Interval{Faults: ok.Faults, For: ok.For}, 1, "positive interval"},
		"zero every":  {Interval{Faults: ok.Faults, Every: workloads.FixedDist(0), For: ok.For}, 1, "positive interval"},
		"no lengths":  {Interval{Faults: ok.Faults, Every: ok.Every}, 1, "lengths"},
		"no server":   {Interval{Faults: []string{"kill"}, Every: ok.Every, For: ok.For}, 0, "acts on the lock's server"},
		"no kind":     {Interval{Faults: []string{"meteor"}, Every: ok.Every, For: ok.For}, 1, "want some of"},
	} {
		err := c.iv.Check(c.nodes)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", name, err, c.says)
		}
	}
	if _, err := ParseFaults("pause,gc"); err == nil || !strings.Contains(err.Error(), `"gc"`) {
		t.Fatalf("ParseFaults: %v", err)
	}
	if got, err := ParseFaults("pause, kill,pause"); err != nil || !reflect.DeepEqual(got, []string{"pause", "kill"}) {
		t.Fatalf("ParseFaults: %v %v", got, err)
	}
}

// A scenario file may describe a user's system: its workload and its
// faults on an interval, drawn run by run from the seed.
func TestFileWithASystem(t *testing.T) {
	s, err := Parse([]byte(`{"name": "my-system", "story": "my numbers",
		"workload": {"hold": "80ms..300ms", "think": "exp:50ms", "keys": 4},
		"interval": {"faults": ["pause"], "every": "2s", "for": "200ms..1s"},
		"expect": {"set-nx-px": {"outcome": "promise-kept", "why": "mine"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Draw == nil || s.Plan != nil || s.Workload.Keys != 4 || s.Workload.Hold != workloads.UniformDist(80*time.Millisecond, 300*time.Millisecond) {
		t.Fatalf("%+v", s)
	}
	for body, says := range map[string]string{
		`"workload": {"hold": "300ms..80ms"}`:                       "upside down",
		`"workload": {"keys": 40}`:                                  "keys 40",
		`"workload": {"think": "exp:"}`:                             "missing",
		`"interval": {"faults": ["pause"]}`:                         "positive interval",
		`"interval": {"faults": ["x"], "every": "1s", "for": "1s"}`: "want some of",
	} {
		_, err := Parse([]byte(`{"name": "s", "story": "s", ` + body + `, "expect": {"set-nx-px": {"outcome": "safe", "why": "w"}}}`))
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want %q", body, err, says)
		}
	}
}
