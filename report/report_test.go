package report_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/report"
)

func runAndWrite(t *testing.T, out, scen, lock string, limit time.Duration) *engine.Result {
	t.Helper()
	res, err := engine.RunUnstarved(context.Background(), engine.Options{Scenario: scen, Lock: lock, TimeLimit: limit, Out: out}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.Write(res); err != nil {
		t.Fatal(err)
	}
	return res
}

// checkImages asserts name.png is a PNG of a size a real plot has, and
// name.svg an SVG document if vector, else absent.
func checkImages(t *testing.T, dir, name string, vector bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, name+".png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s.png is not a PNG: %v", name, err)
	}
	if cfg.Width < 600 || cfg.Height < 200 {
		t.Errorf("%s.png is %dx%d", name, cfg.Width, cfg.Height)
	}
	st, _ := f.Stat()
	if st.Size() < 5000 || st.Size() > 20<<20 {
		t.Errorf("%s.png is %d bytes", name, st.Size())
	}
	svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
	if !vector {
		if err == nil {
			t.Errorf("%s.svg written for a run that matched its expectation", name)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var root struct{ XMLName xml.Name }
	if err := xml.NewDecoder(bytes.NewReader(svg)).Decode(&root); err != nil || root.XMLName.Local != "svg" {
		t.Errorf("%s.svg is not an SVG document: %v %v", name, root.XMLName, err)
	}
}

// links lists the relative href and src targets of an HTML page.
func links(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?:href|src)="([^"#]+)"`).FindAllStringSubmatch(string(b), -1) {
		if !strings.Contains(m[1], "://") {
			out = append(out, m[1])
		}
	}
	return out
}

func checkLinks(t *testing.T, page string) {
	t.Helper()
	ls := links(t, page)
	if len(ls) == 0 {
		t.Fatalf("%s links to nothing", page)
	}
	for _, l := range ls {
		if _, err := os.Stat(filepath.Join(filepath.Dir(page), filepath.FromSlash(l))); err != nil {
			t.Errorf("%s links to %s, which does not exist", page, l)
		}
	}
}

func TestReportOfARealRun(t *testing.T) {
	out := t.TempDir()
	res := runAndWrite(t, out, "paused-holder", "set-nx-px", 2500*time.Millisecond)
	if err := report.WriteSummary(out, report.Matrix{Entries: []report.Entry{report.EntryOf("paused-holder", "set-nx-px", res, nil)}}); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteIndex(out); err != nil {
		t.Fatal(err)
	}
	charts, err := report.Charts(res.Ops)
	if err != nil {
		t.Fatal(err)
	}
	// What each chart must show, worked out from the history independently.
	kinds := map[string]bool{}
	for _, p := range history.Pairs(res.Ops) {
		if p.Invoke.Process == history.NemesisProcess || p.Completion == nil {
			continue
		}
		switch p.Invoke.F {
		case history.Acquire, history.Release, history.Read, history.Write:
			kinds[p.Invoke.F+" "+string(p.Completion.Type)] = true
		}
	}
	want := map[string]int{
		"latency":      len(kinds),
		"throughput":   len(kinds),
		"holders-lock": 3, // holds, validity deadlines, double holders
	}
	got := map[string]int{}
	for _, c := range charts {
		got[c.Name] = c.Series
		checkImages(t, res.Dir, c.Name, report.Vector(res))
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s has %d series, want %d", name, got[name], n)
		}
	}
	if _, ok := got["clocks"]; ok {
		t.Error("a run that moved no clock has a clock chart")
	}
	checkLinks(t, filepath.Join(res.Dir, "index.html"))
	checkLinks(t, filepath.Join(out, "index.html"))
	// The same run, had it not matched, gets zoomable SVGs, linked, and
	// its summary (all a CI log keeps) says what the nemesis did.
	res.Matched = false
	var sum bytes.Buffer
	report.Summary(&sum, res)
	if !bytes.Contains(sum.Bytes(), []byte("  fault ")) || !bytes.Contains(sum.Bytes(), []byte("pause process")) {
		t.Errorf("the summary of a run that did not match does not list its faults:\n%s", sum.String())
	}
	if err := report.Write(res); err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		checkImages(t, res.Dir, c.Name, true)
	}
	checkLinks(t, filepath.Join(res.Dir, "index.html"))
	res.Matched = true
	if err := report.Write(res); err != nil {
		t.Fatal(err)
	}
	// The timeline shades the pause from its start to its resume, paired
	// as the summary pairs it.
	// (porcupine draws times by their order, not their values).
	timeline, _ := os.ReadFile(filepath.Join(res.Dir, "timeline.html"))
	span := regexp.MustCompile(`"Tag":"nemesis","Start":(\d+),"End":(\d+),"Description":"pause process`).FindSubmatch(timeline)
	if span == nil {
		t.Error("timeline.html does not show the pause")
	} else {
		start, _ := strconv.Atoi(string(span[1]))
		end, _ := strconv.Atoi(string(span[2]))
		if end <= start {
			t.Errorf("timeline.html shows the pause as a point, from %d to %d", start, end)
		}
	}
	page, _ := os.ReadFile(filepath.Join(res.Dir, "index.html"))
	if n := bytes.Count(page, []byte("meanwhile the nemesis: pause process")); n != 1 {
		t.Errorf("the pause is told %d times; want once, above the anomalies it explains", n)
	}
	for _, want := range []string{"expected <b>unsafe", "observed <b>unsafe", "MATCHED", "meanwhile the nemesis: pause process", "double-holder", "lost-update"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("index.html does not say %q", want)
		}
	}
}

// A run judged as a stream holds the nemesis's ops only: its report is
// written all the same, counts every op it recorded, and says why its
// plots show no client.
func TestReportOfAStreamedRun(t *testing.T) {
	res, err := engine.RunUnstarved(context.Background(), engine.Options{Scenario: "paused-holder", Lock: "set-nx-px",
		TimeLimit: 2500 * time.Millisecond, Stream: true, Out: t.TempDir()}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.Write(res); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteIndex(filepath.Dir(filepath.Dir(filepath.Dir(res.Dir)))); err != nil {
		t.Fatal(err)
	}
	checkLinks(t, filepath.Join(res.Dir, "index.html"))
	page, _ := os.ReadFile(filepath.Join(res.Dir, "index.html"))
	for _, want := range []string{"MATCHED", "Judged as a stream", fmt.Sprintf("<td>%d</td>", res.Recorded)} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("index.html does not say %q", want)
		}
	}
	var sum bytes.Buffer
	report.Summary(&sum, res)
	if !bytes.Contains(sum.Bytes(), []byte(fmt.Sprintf("%d ops in", res.Recorded))) {
		t.Errorf("the summary does not count the ops recorded (%d):\n%s", res.Recorded, sum.String())
	}
}

func TestClockChartOfARealRun(t *testing.T) {
	out := t.TempDir()
	res := runAndWrite(t, out, "redlock-clock-jump", "redlock", 1500*time.Millisecond)
	charts, err := report.Charts(res.Ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if c.Name == "clocks" {
			if c.Series != 1 {
				t.Fatalf("one node's clock moved, chart has %d series", c.Series)
			}
			checkImages(t, res.Dir, "clocks", report.Vector(res))
			return
		}
	}
	t.Fatal("a run that bumped a clock has no clock chart")
}

func TestFaultsPairStartsWithEnds(t *testing.T) {
	v := func(target string, d time.Duration, s history.Site) *history.Value {
		return &history.Value{Target: target, Duration: int64(d), Site: &s}
	}
	atWrite := history.Site{Client: history.IDOf(0), Process: history.IDOf(2), Point: "before-write"}
	ops := []history.Op{
		{Process: -1, Type: history.OK, F: "partition-start", Value: v("c0↛n1", 0, history.Site{Cut: map[string][]string{"c0": {"n1"}}}), Time: 10},
		{Process: -1, Type: history.OK, F: "pause", Value: v("process 2 at before-write", time.Second, atWrite), Time: 20},
		{Process: -1, Type: history.OK, F: "clock-bump", Value: v("n3", time.Minute, history.Site{Node: "n3"}), Time: 25},
		{Process: -1, Type: history.OK, F: "resume", Value: v("process 2 at before-write", 0, atWrite), Time: 30},
		{Process: -1, Type: history.OK, F: "partition-end", Value: v("all links", 0, history.Site{All: true}), Time: 40},
		{Process: -1, Type: history.OK, F: "crash", Value: v("process 4 at after-setnx", 0, history.Site{Process: history.IDOf(4), Point: "after-setnx"}), Time: 45},
		{Process: 0, Type: history.OK, F: "read", Time: 50},
	}
	fs := report.Faults(ops)
	want := map[string][2]int64{"partition": {10, 40}, "pause": {20, 30}, "clock": {25, 50}, "crash": {45, 45}}
	if len(fs) != len(want) {
		t.Fatalf("faults %+v", fs)
	}
	for _, f := range fs {
		if w := want[f.Kind]; w != [2]int64{f.Start, f.End} {
			t.Errorf("%s from %d to %d, want %v", f.Kind, f.Start, f.End, w)
		}
	}
	if d := report.During(fs, 22, 24); len(d) != 2 {
		t.Errorf("at 22–24 the partition and the pause were on, got %v", d)
	}
}

// Faults on several places at once end at their own place: each node's
// restart ends its own kill, a resume its own pause or stall, a delay is
// removed from its own link whichever direction it slowed; a heal ends
// every cut and every delay, a clock reset every node's offset and no
// client's.
func TestFaultsPairByPlace(t *testing.T) {
	at := int64(0)
	nem := func(f string, target string, d time.Duration, s history.Site) history.Op {
		at += 10
		return history.Op{Process: -1, Type: history.OK, F: f, Value: &history.Value{Target: target, Duration: int64(d), Site: &s}, Time: at}
	}
	n2, n3 := history.Site{Node: "n2"}, history.Site{Node: "n3"}
	p1 := history.Site{Client: history.IDOf(1), Process: history.IDOf(1), Point: "before-write"}
	p2 := history.Site{Client: history.IDOf(2), Process: history.IDOf(2), Point: "before-write"}
	ops := []history.Op{
		nem("kill", "n2", 0, n2),                   // 10
		nem("power-loss", "n3", 0, n3),             // 20
		nem("restart", "n3", 0, n3),                // 30
		nem("pause", "process 1", time.Second, p1), // 40
		nem("stall", "process 2", time.Second, p2), // 50
		nem("resume", "process 2", 0, p2),          // 60
		nem("latency-start", "c0→store upstream", time.Second, history.Site{Peer: "c0", Node: "store", Direction: "upstream"}), // 70
		nem("latency-start", "c1→store", time.Second, history.Site{Peer: "c1", Node: "store"}),                                 // 80
		nem("latency-end", "c0→store", 0, history.Site{Peer: "c0", Node: "store"}),                                             // 90
		nem("clock-bump", "n2", time.Second, n2),                                                                               // 100
		nem("clock-skew", "c0", time.Second, history.Site{Peer: "c0"}),                                                         // 110
		nem("clock-bump", "n3", time.Second, n3),                                                                               // 120
		nem("clock-bump", "n3", 0, n3),                                                                                         // 130: back to true time
		nem("clock-reset", "all nodes", 0, history.Site{All: true}),                                                            // 140
		nem("partition-end", "all links", 0, history.Site{All: true}),                                                          // 150
		nem("starved", "the pause of process 3 …", 0, history.Site{Process: history.IDOf(3)}),                                  // 160
		nem("restart", "n2", 0, n2),                                                                                            // 170
		nem("resume", "process 1", 0, p1),                                                                                      // 180
		{Process: 0, Type: history.OK, F: "read", Time: 200},
	}
	got := map[string][2]int64{}
	for _, f := range report.Faults(ops) {
		got[f.Text()] = [2]int64{f.Start, f.End}
	}
	want := map[string][2]int64{
		"kill n2": {10, 170}, "power-loss n3": {20, 30},
		"pause process 1": {40, 180}, "stall process 2": {50, 60},
		"latency c0→store upstream": {70, 90}, "latency c1→store": {80, 150},
		"clock n2 +1.000s": {100, 140}, "client clock c0 +1.000s": {110, 200}, "clock n3 +1.000s": {120, 130},
	}
	if len(got) != len(want) {
		t.Errorf("faults %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s lasted %v, want %v", k, got[k], w)
		}
	}
}

// A history recorded before sites still pairs each end with the fault of
// its op that is on, and names the clocks it moved by their targets.
func TestFaultsOfAHistoryWithoutSites(t *testing.T) {
	v := func(target string, d time.Duration) *history.Value {
		return &history.Value{Target: target, Duration: int64(d)}
	}
	ops := []history.Op{
		{Process: -1, Type: history.OK, F: "partition-start", Value: v("c0↛n1", 0), Time: 10},
		{Process: -1, Type: history.OK, F: "pause", Value: v("process 2 at before-write", time.Second), Time: 20},
		{Process: -1, Type: history.OK, F: "clock-bump", Value: v("n3", time.Minute), Time: 25},
		{Process: -1, Type: history.OK, F: "resume", Value: v("process 2 at before-write", 0), Time: 30},
		{Process: -1, Type: history.OK, F: "partition-end", Value: v("all links", 0), Time: 40},
		{Process: -1, Type: history.OK, F: "crash", Value: v("process 4 at after-setnx", 0), Time: 45},
		{Process: -1, Type: history.OK, F: "clock-reset", Value: v("all nodes", 0), Time: 48},
		{Process: 0, Type: history.OK, F: "read", Time: 50},
	}
	want := map[string][2]int64{"partition": {10, 40}, "pause": {20, 30}, "clock": {25, 48}, "crash": {45, 45}}
	fs := report.Faults(ops)
	if len(fs) != len(want) {
		t.Fatalf("faults %+v", fs)
	}
	for _, f := range fs {
		if w := want[f.Kind]; w != [2]int64{f.Start, f.End} {
			t.Errorf("%s from %d to %d, want %v", f.Kind, f.Start, f.End, w)
		}
	}
	c, ok, err := report.Clocks(ops, fs)
	if err != nil || !ok || c.Series != 1 {
		t.Fatalf("clock chart of a history without sites: %+v, %v, %v", c, ok, err)
	}
}

// A merge copies a run whole: the servers' logs a run that did not match
// keeps sit in a subdirectory, and its page links them.
func TestCopyRunCopiesSubdirectories(t *testing.T) {
	shard, out := t.TempDir(), t.TempDir()
	run := filepath.Join(shard, "baseline", "pg-advisory", "20261205T000000.000Z")
	if err := os.MkdirAll(filepath.Join(run, "servers"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"results.json": "{}", "servers/n1.log": "a session\n"} {
		if err := os.WriteFile(filepath.Join(run, filepath.FromSlash(name)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst, err := report.CopyRun(shard, run, out)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "servers", "n1.log")); err != nil || string(b) != "a session\n" {
		t.Fatalf("servers/n1.log in the copy: %q, %v", b, err)
	}
}
