package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/verdict"
)

const starvedWhy = "the harness's timers ran 250ms late at 1.500s (the limit is 100ms, 20% of the TTL)"

// starvedRun is a three-second run at a 500 ms TTL (limit 100 ms) whose
// timers stalled 250 ms at 1.5 s while a client was paused, with a node
// restarted and its probe's replies measured: every kind of sample, and a
// run judged starved for it.
func starvedRun(dir string) *engine.Result {
	var ops []history.Op
	add := func(p int, t history.Type, f, key string, v *history.Value, at time.Duration) {
		ops = append(ops, history.Op{Index: int64(len(ops)), Process: p, Type: t, F: f, Key: key, Value: v, Time: int64(at)})
	}
	ms := time.Millisecond
	for i := 0; i < 30; i++ {
		at := time.Duration(i) * 100 * ms
		p := i % 2
		add(p, history.Invoke, history.Acquire, "lock", nil, at)
		add(p, history.OK, history.Acquire, "lock", &history.Value{Deadline: int64(at + 500*ms)}, at+2*ms)
		add(p, history.Invoke, history.Release, "lock", nil, at+50*ms)
		add(p, history.OK, history.Release, "lock", nil, at+52*ms)
	}
	add(history.NemesisProcess, history.OK, string(fault.Pause), "", &history.Value{Target: "process 1", Duration: int64(200 * ms)}, 1400*ms)
	add(history.NemesisProcess, history.OK, string(fault.Resume), "", &history.Value{Target: "process 1"}, 1780*ms)
	add(history.NemesisProcess, history.OK, "kill", "", &history.Value{Target: "n1"}, 2200*ms)
	add(history.NemesisProcess, history.OK, "restart", "", &history.Value{Target: "n1"}, 2230*ms)
	var samples []lateness.Sample
	for at := 100 * ms; at < 3000*ms; at += 50 * ms {
		late := 80 * time.Microsecond
		if at == 1500*ms {
			late = 250 * ms
		}
		samples = append(samples,
			lateness.Sample{At: int64(at), Kind: lateness.Timer, Late: int64(late)},
			lateness.Sample{At: int64(at), Kind: lateness.Reply, Late: int64(300*time.Microsecond + at/1000)})
	}
	samples = append(samples,
		lateness.Sample{At: int64(1400 * ms), Kind: lateness.Pause, Late: int64(180 * ms), What: "pause of process 1"},
		lateness.Sample{At: int64(2200 * ms), Kind: lateness.Fault, Late: int64(30 * ms), What: "restart of n1"})
	return &engine.Result{Scenario: "paused-holder", Lock: "set-nx-px", TTL: "500ms", TimeLimit: "3s",
		Expected: verdict.Expectation{Outcome: verdict.Unsafe}, Ready: int64(100 * ms), Dir: dir, Ops: ops, Elapsed: "3.1s",
		Judgement: verdict.Judgement{Outcome: verdict.Starved, Starved: starvedWhy, Lateness: samples,
			Limits: lateness.LimitsFor(500 * time.Millisecond)}}
}

func TestStarvedRunSaysSoAndChartsItsLateness(t *testing.T) {
	r := starvedRun(t.TempDir())
	var sum bytes.Buffer
	report.Summary(&sum, r)
	for _, want := range []string{
		"  starved: " + starvedWhy + " (the checkers' verdicts below prove nothing either way)\n",
		"  lateness: timers 250ms, replies 3.3ms, pauses 180ms, restarts/saves 30ms (limits: 100ms, pauses 50ms, restarts/saves 250ms)\n",
	} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("the summary does not say %q:\n%s", want, sum.String())
		}
	}
	if err := report.Write(r); err != nil {
		t.Fatal(err)
	}
	checkImages(t, r.Dir, "lateness", report.Vector(r))
	page, err := os.ReadFile(filepath.Join(r.Dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	// Starved never matches, so the chart is zoomable too.
	for _, want := range []string{`<p class="verdict bad">starved: `, `<a href="lateness.svg"><img src="lateness.png"`, "pauses 180ms, restarts/saves 30ms (limits: 100ms, pauses 50ms, restarts/saves 250ms)"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("index.html does not say %q", want)
		}
	}
}

func TestLateRunThatPassedSaysItsVerdictStands(t *testing.T) {
	r := starvedRun(t.TempDir())
	r.Expected, r.Outcome, r.Matched, r.Late, r.Starved = verdict.Expectation{Outcome: verdict.Safe}, verdict.Safe, true, starvedWhy, ""
	var sum bytes.Buffer
	report.Summary(&sum, r)
	if want := "  late: " + starvedWhy + " (the verdict stands"; !strings.Contains(sum.String(), want) || strings.Contains(sum.String(), "starved:") {
		t.Errorf("the summary does not say %q, or says starved:\n%s", want, sum.String())
	}
	if err := report.Write(r); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(r.Dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte(`<p class="verdict">late: `)) || bytes.Contains(page, []byte("starved: ")) {
		t.Error("index.html does not say late and that the verdict stands, or says starved")
	}
}

func TestRunWithoutLatenessHasNoLatenessChart(t *testing.T) {
	r := starvedRun(t.TempDir())
	r.Lateness, r.Starved, r.Outcome = nil, "", verdict.Unsafe
	if err := report.Write(r); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "latency.png")); err != nil {
		t.Fatalf("the other charts were not written either: %v", err)
	}
	for _, ext := range []string{"png", "svg"} {
		if _, err := os.Stat(filepath.Join(r.Dir, "lateness."+ext)); err == nil {
			t.Errorf("lateness.%s written for a run that measured no lateness", ext)
		}
	}
	var sum bytes.Buffer
	report.Summary(&sum, r)
	if s := sum.String(); strings.Contains(s, "starved") || !strings.Contains(s, "  lateness: not measured\n") {
		t.Errorf("summary of a run with no lateness measured:\n%s", s)
	}
}

func TestLatenessChartSeries(t *testing.T) {
	r := starvedRun("")
	// A lock that bounds its replies at 50 ms (RedLock) gets a line of its own.
	tight := lateness.LimitsFor(500 * time.Millisecond)
	tight.Reply = 50 * time.Millisecond
	faults := report.Faults(r.Ops)
	for _, tc := range []struct {
		name string
		keep func(lateness.Sample) bool
		lim  lateness.Limits
		want int
	}{
		{"all kinds and both limits", func(lateness.Sample) bool { return true }, lateness.LimitsFor(500 * time.Millisecond), 6},
		{"timers only, no limit known", func(s lateness.Sample) bool { return s.Kind == lateness.Timer }, lateness.Limits{}, 1},
		{"the faults' overruns and every limit", func(s lateness.Sample) bool { return s.Kind.FromHistory() }, lateness.LimitsFor(500 * time.Millisecond), 4},
		{"all kinds, the lock's own reply bound too", func(lateness.Sample) bool { return true }, tight, 7},
	} {
		var samples []lateness.Sample
		for _, s := range r.Lateness {
			if tc.keep(s) {
				samples = append(samples, s)
			}
		}
		c, ok, err := report.Lateness(samples, tc.lim, faults)
		if err != nil || !ok {
			t.Fatalf("%s: ok %v, err %v", tc.name, ok, err)
		}
		if c.Name != "lateness" || c.Series != tc.want {
			t.Errorf("%s: chart %q with %d series, want lateness with %d", tc.name, c.Name, c.Series, tc.want)
		}
	}
	if _, ok, err := report.Lateness(nil, lateness.LimitsFor(500*time.Millisecond), faults); ok || err != nil {
		t.Errorf("no samples: ok %v, err %v; want no chart", ok, err)
	}
}

func TestMatrixCountsAndShowsStarved(t *testing.T) {
	const vacuousWhy = "required fault never happened: partition-end"
	out := t.TempDir()
	unsafe := verdict.Expectation{Outcome: verdict.Unsafe}
	m := report.Matrix{Entries: []report.Entry{
		{Scenario: "paused-holder", Lock: "set-nx-px", Expected: unsafe, Outcome: verdict.Unsafe, Matched: true},
		{Scenario: "paused-holder", Lock: "redlock", Expected: unsafe, Outcome: verdict.Starved, Starved: starvedWhy},
		{Scenario: "gc-pause", Lock: "set-nx-px", Expected: unsafe, Outcome: verdict.Vacuous, Vacuous: vacuousWhy},
		{Scenario: "baseline", Lock: "mutex", Expected: verdict.Expectation{Outcome: verdict.Safe}, Outcome: verdict.Safe, Matched: true, Late: starvedWhy},
	}}
	m.Count()
	if m.Matched != 2 || m.Total != 4 || m.Starved != 1 || m.Late != 1 {
		t.Errorf("counted %d of %d matched, %d starved, %d late; want 2 of 4, 1 starved, 1 late", m.Matched, m.Total, m.Starved, m.Late)
	}
	var table bytes.Buffer
	report.MatrixTable(&table, m.Entries)
	lines := strings.Split(table.String(), "\n")
	if len(lines) < 4 || !strings.Contains(lines[2], "STARVED: "+starvedWhy) || !strings.Contains(lines[3], "MISMATCH: "+vacuousWhy) || !strings.Contains(lines[4], "ok, late: "+starvedWhy) {
		t.Errorf("the table does not tell the starved run from the vacuous one and the late pass:\n%s", table.String())
	}
	if err := report.WriteSummary(out, m); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteIndex(out); err != nil {
		t.Fatal(err)
	}
	index, _ := os.ReadFile(filepath.Join(out, "index.html"))
	md, _ := os.ReadFile(filepath.Join(out, "matrix.md"))
	if !bytes.Contains(index, []byte("2 of 4 matched, 1 starved")) || !bytes.Contains(index, []byte(">starved<")) {
		t.Errorf("the index's grid does not show the starved run:\n%s", index)
	}
	if !bytes.Contains(md, []byte("starved ✗")) {
		t.Errorf("matrix.md does not show the starved run:\n%s", md)
	}
}

// A worker's wait is in the line only where workers were measured, and
// says it is not judged.
func TestLatenessLineNamesAWorkersWaitUnjudged(t *testing.T) {
	r := starvedRun(t.TempDir())
	var without bytes.Buffer
	report.Summary(&without, r)
	if strings.Contains(without.String(), "workers") {
		t.Errorf("a run with no workers names them:\n%s", without.String())
	}
	r.Lateness = append(r.Lateness, lateness.Sample{At: int64(time.Second), Kind: lateness.Worker, Late: int64(40 * time.Millisecond)})
	var with bytes.Buffer
	report.Summary(&with, r)
	if !strings.Contains(with.String(), "replies 3.3ms, workers waited 40ms a TTL (unjudged), pauses 180ms") {
		t.Errorf("the line does not give the workers' wait:\n%s", with.String())
	}
}
