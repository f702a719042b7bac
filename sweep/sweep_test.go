package sweep

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
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
	for _, f := range []string{"sweep.json", "sweep.md", "sweep.png", "sweep.svg", "sweep-figures.png", "sweep-figures.svg"} {
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

// The t interval by hand: {0.1, 0.2, 0.3} has mean 0.2, s = 0.1, a
// standard error of 0.1/√3 and t(2) = 4.3027, so 0.2 ± 0.2484, clipped
// below at 0; {0.4, 0.5, 0.5, 0.6} has s = √(0.02/3), t(3) = 3.1824, so
// 0.5 ± 0.1299. Past 30 degrees of freedom t is the normal's 1.96.
func TestMeanIntervalIsStudentT(t *testing.T) {
	cases := []struct {
		xs           []float64
		mean, lo, hi float64
	}{
		{[]float64{0.1, 0.2, 0.3}, 0.2, 0, 0.4484},
		{[]float64{0.4, 0.5, 0.5, 0.6}, 0.5, 0.3701, 0.6299},
		{[]float64{0.9, 1, 1}, 0.9667, 0.8232, 1},
		{[]float64{0.25}, 0.25, 0, 1}, // one run: no interval claimed
	}
	for _, c := range cases {
		m, lo, hi := MeanInterval(c.xs)
		if math.Abs(m-c.mean) > 5e-5 || math.Abs(lo-c.lo) > 5e-5 || math.Abs(hi-c.hi) > 5e-5 {
			t.Errorf("MeanInterval(%v) = %.4f [%.4f, %.4f], want %.4f [%.4f, %.4f]", c.xs, m, lo, hi, c.mean, c.lo, c.hi)
		}
	}
	if m, lo, hi := MeanInterval(nil); !math.IsNaN(m) || lo != 0 || hi != 1 {
		t.Errorf("no run: %g [%g, %g], want NaN [0, 1]", m, lo, hi)
	}
	if TCritical(1) != 12.7062 || TCritical(30) != 2.0423 || math.Abs(TCritical(31)-1.96) > 1e-3 {
		t.Errorf("t: %g %g %g", TCritical(1), TCritical(30), TCritical(31))
	}
	// 40 values of 0 and 1 alternating: s = √(10/39), so 0.5 ± 1.96·s/√40.
	var xs []float64
	for i := range 40 {
		xs = append(xs, float64(i%2))
	}
	if _, lo, _ := MeanInterval(xs); math.Abs(lo-(0.5-1.959964*math.Sqrt(10.0/39)/math.Sqrt(40))) > 1e-6 {
		t.Errorf("40 runs: low %g", lo)
	}
}

// fakeRun is a judged run's result with the figures given, as a run
// without servers would have it.
func fakeRun(dir string, outcome verdict.Outcome, lost, held float64, episodes int) *engine.Result {
	r := &engine.Result{Dir: dir}
	r.Outcome = outcome
	r.Figures = verdict.Figures{LostFraction: lost, DoubleHeldFraction: held, Episodes: episodes}
	return r
}

// A cell keeps each judged run's figures, and none of an unjudged one's,
// and the table says their means.
func TestCellKeepsEachRunsFigures(t *testing.T) {
	var c Cell
	c.add(fakeRun("a", verdict.Unsafe, 0.1, 0.02, 3), nil)
	c.add(fakeRun("b", verdict.Unsafe, 0.3, 0.04, 1), nil)
	c.add(fakeRun("c", verdict.Vacuous, 0.9, 0.9, 9), nil)
	c.add(nil, errors.New("no server"))
	if c.Judged != 2 || len(c.Figures) != 2 || len(c.Unjudged) != 2 {
		t.Fatalf("cell %+v: want 2 judged with figures, 2 not", c)
	}
	if m, _, _ := MeanInterval(c.values(fractions[0])); math.Abs(m-0.2) > 1e-12 {
		t.Errorf("mean lost fraction %g, want 0.2", m)
	}
	if m, _, _ := MeanInterval(c.values(fractions[1])); math.Abs(m-0.03) > 1e-12 {
		t.Errorf("mean double-held fraction %g, want 0.03", m)
	}
	if e := c.meanEpisodes(); e != 2 {
		t.Errorf("mean episodes %g, want 2", e)
	}
	// 0.2 ± 12.7062 × 0.1/√2 is clipped to [0, 1]; 0.03 ± 12.7062 × 0.01.
	if got := strings.Join(c.figureCells(), " | "); got != "0.200 [0.000, 1.000] | 0.030 [0.000, 0.157] | 2.0" {
		t.Errorf("table cells %q", got)
	}
	if got := (Cell{Judged: 1}).figureCells(); !slices.Equal(got, []string{"–", "–", "–"}) {
		t.Errorf("a cell without figures: %q", got)
	}
}

// Merge keeps every run's figures: the merged cell has each shard's, and
// its table their mean over both.
func TestMergeKeepsEachRunsFigures(t *testing.T) {
	sp := Spec{Param: "hold", From: 0, To: 100, Steps: 2}
	shard := func(name string, lost ...float64) string {
		dir := t.TempDir()
		var c Cell
		for _, l := range lost {
			c.add(fakeRun("", verdict.Unsafe, l, l/10, 1), nil)
		}
		c.Dirs = nil // no run on disk to copy
		sw := Sweep{Story: "paused-holder", Param: scenario.Param{Name: "hold", Unit: "ms"}, Spec: sp, Runs: 2,
			Locks: []string{"set-nx-px"}, Shard: name, Start: time.Now(), TTL: "500ms",
			Cells: map[string]Cell{cellKey("set-nx-px", 0): {}, cellKey("set-nx-px", 100): c},
			Dir:   filepath.Join(dir, "sweeps", "paused-holder", "t")}
		if err := sw.Write(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	m, err := Merge([]string{shard("1/2", 0.1), shard("2/2", 0.3, 0.5)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := m.Cells[cellKey("set-nx-px", 100)]
	var lost []float64
	for _, f := range c.Figures {
		lost = append(lost, f.LostFraction)
	}
	if c.Judged != 3 || !slices.Equal(lost, []float64{0.1, 0.3, 0.5}) && !slices.Equal(lost, []float64{0.3, 0.5, 0.1}) {
		t.Fatalf("merged cell: %d judged, lost fractions %v; want 3, 0.1 0.3 0.5", c.Judged, lost)
	}
	var back Sweep
	if b, err := os.ReadFile(filepath.Join(m.Dir, "sweep.json")); err != nil || json.Unmarshal(b, &back) != nil ||
		len(back.Cells[cellKey("set-nx-px", 100)].Figures) != 3 {
		t.Fatalf("merged sweep.json lacks the runs' figures: %v", err)
	}
	var md strings.Builder
	m.Table(&md)
	// 0.3 ± 4.3027 × 0.2/√3 = 0.3 ± 0.4968, clipped.
	if !strings.Contains(md.String(), "| 0.300 [0.000, 0.797] | 0.030 [0.000, 0.080] | 1.0 | 0 |") {
		t.Fatalf("table:\n%s", md.String())
	}
}

// Every story has the workload's parameters: a sweep of the hold or the
// think sets a fixed length in ms, of keys or clients a count, and keeps
// the rest of the run (the workload's other fields, the interval, the
// story's parameters) as it was; a count between two is refused.
func TestWorkloadParamsEveryStoryHas(t *testing.T) {
	s, err := scenario.Lookup("paused-holder")
	if err != nil {
		t.Fatal(err)
	}
	iv := &scenario.Interval{Faults: []string{"pause"}}
	run := engine.Options{Scenario: s.Name, Clients: 7, Interval: iv, Params: map[string]float64{"pause": 3},
		Workload: workloads.Shape{Think: workloads.ExpDist(5 * time.Millisecond), Keys: 2}}
	o := RunAt(s, run, HoldParam, 250)
	if o.Workload.Hold != workloads.FixedDist(250*time.Millisecond) || o.Workload.Think != run.Workload.Think ||
		o.Workload.Keys != 2 || o.Interval != iv || o.Clients != 7 || o.Params["pause"] != 3 {
		t.Errorf("hold 250: %+v", o)
	}
	if o := RunAt(s, run, ThinkParam, 12.5); o.Workload.Think != workloads.FixedDist(12500*time.Microsecond) || !o.Workload.Hold.IsZero() {
		t.Errorf("think 12.5: %+v", o.Workload)
	}
	if o := RunAt(s, run, KeysParam, 3); o.Workload.Keys != 3 || o.Workload.Think != run.Workload.Think {
		t.Errorf("keys 3: %+v", o.Workload)
	}
	if o := RunAt(s, run, ClientsParam, 16); o.Clients != 16 || o.Workload != run.Workload {
		t.Errorf("clients 16: %d %+v", o.Clients, o.Workload)
	}
	want := map[string][3]float64{HoldParam: {0, 60_000, 0}, ThinkParam: {0, 60_000, 2}, KeysParam: {1, 16, 1}, ClientsParam: {2, 256, float64(s.Clients)}}
	for name, w := range want {
		p, ok := ParamOf(s, name, 0)
		if !ok || p.Name != name || p.Min != w[0] || p.Max != w[1] || p.Default != w[2] || p.Help == "" {
			t.Errorf("ParamOf(%s): %+v, want min %g max %g default %g", name, p, w[0], w[1], w[2])
		}
	}
	if _, ok := ParamOf(s, "nonesuch", 0); ok {
		t.Error("ParamOf(nonesuch): a parameter")
	}
	for _, bad := range []struct {
		name string
		v    float64
	}{{KeysParam, 3.5}, {ClientsParam, 2.5}} {
		if err := CheckAt(s, bad.name, bad.v); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %g: %v, want one line refusing it", bad.name, bad.v, err)
		}
	}
	// Each parameter's ends resolve as a run (no server is started).
	for _, name := range WorkloadParams {
		p, _ := ParamOf(s, name, 0)
		for _, v := range []float64{p.Min, p.Max} {
			o := RunAt(s, engine.Options{Scenario: s.Name, Lock: "set-nx-px"}, name, v)
			if _, err := engine.Resolve(o); err != nil {
				t.Errorf("%s %g: %v", name, v, err)
			}
		}
	}
	if CheckAt(s, KeysParam, 4) != nil || CheckAt(s, HoldParam, 2.5) != nil || CheckAt(s, "pause", 2.5) != nil {
		t.Error("a whole count, or a length, refused")
	}
}

// The figures' plot is drawn for a small sweep, points of one run (whose
// interval is [0, 1]) and a threshold among them.
func TestFiguresPlotIsWritten(t *testing.T) {
	sw := Sweep{Story: "paused-holder", Param: scenario.Param{Name: "pause", Unit: "TTLs", Threshold: 1},
		Spec: Spec{Param: "pause", From: 0.5, To: 2.5, Steps: 3}, Runs: 2, Locks: []string{"set-nx-px", "set-nx-px-fenced"},
		Cells: map[string]Cell{}, Dir: t.TempDir()}
	for i, v := range sw.Spec.Values() {
		var a, b Cell
		for r := 0; r <= i%2; r++ {
			a.add(fakeRun("", verdict.Unsafe, 0.05*v+0.01*float64(r), 0.01*v, 2), nil)
			b.add(fakeRun("", verdict.PromiseKept, 0, 0.01*v, 1), nil)
		}
		sw.Cells[cellKey("set-nx-px", v)], sw.Cells[cellKey("set-nx-px-fenced", v)] = a, b
	}
	if err := sw.Write(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sweep-figures.png", "sweep-figures.svg", "sweep.png"} {
		if fi, err := os.Stat(filepath.Join(sw.Dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(sw.Dir, "sweep-figures.svg")); !strings.Contains(string(b), "set-nx-px-fenced: double-held time") {
		t.Error("the figures' plot does not name the fenced lock's double-held time")
	}
}
