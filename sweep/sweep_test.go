package sweep

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/scenario"
)

// The interval is Wilson's: at 0 of 10 it still reaches 0.28, at 10 of 10
// it starts at 0.72, and it always holds the point estimate.
func TestWilsonInterval(t *testing.T) {
	cases := []struct {
		k, n   int
		lo, hi float64
	}{{0, 10, 0, 0.2775}, {10, 10, 0.7225, 1}, {5, 10, 0.2366, 0.7634}, {1, 20, 0.0089, 0.2361}}
	for _, c := range cases {
		lo, hi := Wilson(c.k, c.n)
		if p := float64(c.k) / float64(c.n); p < lo || p > hi {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f] leaves out %.2f", c.k, c.n, lo, hi, p)
		}
		if math.Abs(lo-c.lo) > 5e-4 || math.Abs(hi-c.hi) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if lo, hi := Wilson(0, 0); lo != 0 || hi != 1 {
		t.Errorf("no trial: [%g, %g], want [0, 1]", lo, hi)
	}
}

func TestSpecReadsARange(t *testing.T) {
	sp, err := ParseSpec("pause=0.5..2.5:5")
	if err != nil || sp.Param != "pause" || !slices.Equal(sp.Values(), []float64{0.5, 1, 1.5, 2, 2.5}) {
		t.Fatalf("%+v %v: values %v", sp, err, sp.Values())
	}
	for _, bad := range []string{"pause", "=1..2", "pause=2..1", "pause=1..2:1", "pause=a..2", "pause=1-2"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// A sweep of the TTL holds paused-holder's pause at its length in time
// (2.5 TTLs of the base 500 ms: 1250 ms), so the threshold, the lease that
// outlasts the pause, is 1250 ms; any other parameter is set as given.
func TestTTLSweepHoldsTheFaultsInTime(t *testing.T) {
	s, err := scenario.Lookup("paused-holder")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := ParamOf(s, TTLParam, 0)
	if !ok || p.Unit != "ms" || p.Default != 500 || p.Threshold != 1250 {
		t.Fatalf("the TTL's parameter: %+v", p)
	}
	for v, pause := range map[float64]float64{250: 5, 500: 2.5, 1250: 1, 2500: 0.5} {
		o := RunAt(s, engine.Options{Scenario: s.Name}, TTLParam, v)
		if o.TTL != time.Duration(v)*time.Millisecond || o.Params["pause"] != pause {
			t.Errorf("ttl %g ms: TTL %s, pause %g TTLs; want the pause at %g TTLs", v, o.TTL, o.Params["pause"], pause)
		}
	}
	if o := RunAt(s, engine.Options{TTL: time.Second}, TTLParam, 2000); o.Params["pause"] != 1.25 {
		t.Errorf("base 1s, ttl 2 s: pause %g TTLs, want 1.25 (2.5 s)", o.Params["pause"])
	}
	if o := RunAt(s, engine.Options{TTL: time.Second}, "pause", 3); o.TTL != time.Second || o.Params["pause"] != 3 {
		t.Errorf("a sweep of the pause: %s, %v", o.TTL, o.Params)
	}
}

// Shards of one sweep add up; a shard missing, given twice or of another
// sweep is refused.
func TestMergeAddsShardsUp(t *testing.T) {
	sp := Spec{Param: "pause", From: 0.5, To: 2.5, Steps: 2}
	shard := func(name string, judged, double int) string {
		dir := t.TempDir()
		sw := Sweep{Story: "paused-holder", Param: scenario.Param{Name: "pause", Unit: "TTLs", Threshold: 1}, Spec: sp, Runs: 2,
			Locks: []string{"set-nx-px"}, Shard: name, Start: time.Now(), TTL: "500ms",
			Cells: map[string]Cell{cellKey("set-nx-px", 0.5): {Judged: judged}, cellKey("set-nx-px", 2.5): {Judged: judged, DoubleHolder: double}},
			Dir:   filepath.Join(dir, "sweeps", "paused-holder", "t")}
		if err := sw.Write(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := shard("1/2", 1, 1), shard("2/2", 1, 0)
	out := t.TempDir()
	m, err := Merge([]string{a, b}, out)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Cells[cellKey("set-nx-px", 2.5)]; c.Judged != 2 || c.DoubleHolder != 1 {
		t.Fatalf("merged cell %+v, want 1 of 2", c)
	}
	var md strings.Builder
	m.Table(&md)
	if !strings.Contains(md.String(), "| set-nx-px | 2.5 | 2 | 1/2 = 0.50") {
		t.Fatalf("table:\n%s", md.String())
	}
	for _, f := range []string{"sweep.json", "sweep.md", "sweep.png", "sweep.svg"} {
		if _, err := os.Stat(filepath.Join(m.Dir, f)); err != nil {
			t.Errorf("merged sweep lacks %s: %v", f, err)
		}
	}
	var back Sweep
	if b, err := os.ReadFile(filepath.Join(m.Dir, "sweep.json")); err != nil || json.Unmarshal(b, &back) != nil || back.Shard != "" {
		t.Fatalf("merged sweep.json: %v, shard %q", err, back.Shard)
	}
	for name, dirs := range map[string][]string{"missing": {a}, "twice": {a, a}, "other": {a, shard("2/3", 1, 0)}} {
		if _, err := Merge(dirs, t.TempDir()); err == nil {
			t.Errorf("%s: merged, want an error", name)
		}
	}
}
