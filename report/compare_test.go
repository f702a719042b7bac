package report_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/verdict"
)

// Locks of the services this round adds, under names of this test's own
// so they cannot collide with the real ones when those are registered:
// the grouping reads only the registry's Server and Fenced.
var registerServiceLocks = sync.OnceFunc(func() {
	library.Register()
	for _, l := range []struct {
		name, server string
		fenced       bool
	}{
		{"cmptest-zk", "zookeeper", false}, {"cmptest-zk-fenced", "zookeeper", true},
		{"cmptest-etcd", "etcd", false}, {"cmptest-pg", "postgres", false},
		{"cmptest-memcached", "memcached", false}, {"cmptest-novel", "no-such-server", false},
	} {
		locks.Register(locks.Info{Name: l.name, Server: l.server, Fenced: l.fenced, New: func(locks.Config) locks.Lock { return nil }})
	}
})

func expect(o verdict.Outcome) verdict.Expectation { return verdict.Expectation{Outcome: o} }

// outcomeEntries has one run of set-nx-px per outcome, each in a story of
// its own; the ones named in missed did not match.
func outcomeEntries(root string, missed ...verdict.Outcome) []report.Entry {
	outcomes := []verdict.Outcome{verdict.Safe, verdict.LockUnsafe, verdict.Unsafe, verdict.Deadlock, verdict.Unfair,
		verdict.Starved, verdict.Vacuous, verdict.Undecided, verdict.Errored, verdict.Interrupted, "promise-broken-someday"}
	var es []report.Entry
	for _, o := range outcomes {
		scen := "s-" + string(o)
		es = append(es, report.Entry{Scenario: scen, Lock: "set-nx-px", Expected: expect(o), Outcome: o,
			Matched: o.Judged() && !slices.Contains(missed, o), Dir: filepath.Join(root, scen, "set-nx-px", "20261124T000000Z")})
	}
	return es
}

func TestComparisonCellsColourWhatHappenedAndMarkMismatchesApart(t *testing.T) {
	root := filepath.Join(t.TempDir(), "results")
	es := outcomeEntries(root, verdict.Unsafe, verdict.Safe)
	// An expected unsafe that matched: red all the same.
	es = append(es, report.Entry{Scenario: "s-unsafe-expected", Lock: "set-nx-px", Expected: expect(verdict.Unsafe),
		Outcome: verdict.Unsafe, Matched: true, Dir: "results/s-unsafe-expected/set-nx-px/20261124T000001Z"})
	want := map[string]string{
		"s-safe": "cmp-safe", "s-lock-unsafe": "cmp-saved", "s-unsafe": "cmp-unsafe", "s-unsafe-expected": "cmp-unsafe",
		"s-deadlock": "cmp-stall", "s-unfair": "cmp-unfair", "s-starved": "cmp-none", "s-vacuous": "cmp-none",
		"s-unknown": "cmp-none", "s-error": "cmp-none", "s-interrupted": "cmp-none", "s-promise-broken-someday": "cmp-none",
	}
	c := report.Comparison(es)
	if len(c.Groups) != 1 || c.Groups[0].Name != report.GroupRedis || len(c.Groups[0].Rows) != 1 {
		t.Fatalf("groups: %+v", c.Groups)
	}
	row := c.Groups[0].Rows[0]
	if len(row.Cells) != len(want) || len(c.Stories) != len(want) {
		t.Fatalf("%d cells, %d stories, want %d", len(row.Cells), len(c.Stories), len(want))
	}
	for _, cell := range row.Cells {
		if cell.Class != want[cell.Story] {
			t.Errorf("%s: class %q, want %q", cell.Story, cell.Class, want[cell.Story])
		}
	}

	// The page: one td per cell, in story order, the mismatch class and
	// badge exactly where Matched is false, the link relative to root.
	html := string(c.HTML())
	tds := regexp.MustCompile(`<td class="([^"]*)"[^>]*>(.*?)</td>`).FindAllStringSubmatch(html, -1)
	if len(tds) != len(row.Cells) {
		t.Fatalf("%d cells rendered, want %d:\n%s", len(tds), len(row.Cells), html)
	}
	for i, td := range tds {
		cell := row.Cells[i]
		classes := strings.Fields(td[1])
		if !slices.Contains(classes, want[cell.Story]) {
			t.Errorf("%s rendered with class %q", cell.Story, td[1])
		}
		miss := slices.Contains(classes, "cmp-miss")
		badge := strings.Contains(td[2], `<span class="cmp-badge">✗</span>`)
		if miss != !cell.Matched || badge != !cell.Matched {
			t.Errorf("%s (matched %v): mismatch class %v, ✗ badge %v", cell.Story, cell.Matched, miss, badge)
		}
		href := cell.Story + "/set-nx-px/20261124T000000Z/index.html"
		if cell.Story == "s-unsafe-expected" {
			href = "s-unsafe-expected/set-nx-px/20261124T000001Z/index.html"
		}
		if !strings.Contains(td[2], `<a href="`+href+`">`) {
			t.Errorf("%s: no link to %s in %s", cell.Story, href, td[2])
		}
	}
	// The expectation is in the tooltip of a mismatch.
	if !strings.Contains(html, `title="s-safe / set-nx-px: safe, resource kept safe. DID NOT MATCH: expected safe.`) {
		t.Errorf("no tooltip with the expectation of the missed safe run")
	}
}

func TestComparisonGroupsRowsByServiceInAFixedOrder(t *testing.T) {
	registerServiceLocks()
	lockNames := []string{"mutex", "cmptest-memcached", "not-registered", "redis-py", "cmptest-zk-fenced", "set-nx-px-fenced",
		"cmptest-pg", "none", "redsync", "cmptest-etcd", "set-nx-px-del", "cmptest-novel", "cmptest-zk", "set-nx-px"}
	var es []report.Entry
	for _, s := range []string{"paused-holder", "baseline"} {
		for _, l := range lockNames {
			es = append(es, report.Entry{Scenario: s, Lock: l, Expected: expect(verdict.Safe), Outcome: verdict.Safe, Matched: true})
		}
	}
	c := report.Comparison(es)
	var got []string
	for _, g := range c.Groups {
		var rows []string
		for _, r := range g.Rows {
			rows = append(rows, r.Lock)
		}
		got = append(got, g.Name+": "+strings.Join(rows, " "))
	}
	want := []string{
		"Redis locks: set-nx-px set-nx-px-fenced set-nx-px-del",
		"Go libraries on Redis: redsync",
		"Python libraries on Redis: redis-py",
		"ZooKeeper: cmptest-zk cmptest-zk-fenced",
		"etcd: cmptest-etcd",
		"PostgreSQL: cmptest-pg",
		"memcached: cmptest-memcached",
		"other: cmptest-novel not-registered",
		"controls: mutex none",
	}
	if !slices.Equal(got, want) {
		t.Errorf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(c.Stories, []string{"baseline", "paused-holder"}) {
		t.Errorf("stories %v", c.Stories)
	}
	for _, g := range c.Groups {
		for _, r := range g.Rows {
			if r.Fenced != strings.HasSuffix(r.Lock, "-fenced") {
				t.Errorf("%s: fenced %v", r.Lock, r.Fenced)
			}
		}
	}
	// A lock the registry does not know still renders, unmarked.
	html := string(c.HTML())
	if !strings.Contains(html, `<th class="cmp-lock" title="not-registered">not-registered</th>`) {
		t.Errorf("unregistered lock's row missing")
	}
	if n := strings.Count(html, `<span class="cmp-fence">fenced</span></th>`); n != 2 {
		t.Errorf("%d rows marked fenced, want 2", n)
	}
}

func TestComparisonMarkdownRow(t *testing.T) {
	es := []report.Entry{
		{Scenario: "baseline", Lock: "set-nx-px-fenced", Expected: expect(verdict.Safe), Outcome: verdict.Safe, Matched: true},
		{Scenario: "fencing", Lock: "set-nx-px-fenced", Expected: expect(verdict.LockUnsafe), Outcome: verdict.LockUnsafe, Matched: true},
		{Scenario: "paused-holder", Lock: "set-nx-px-fenced", Expected: expect(verdict.LockUnsafe), Outcome: verdict.Unsafe},
		{Scenario: "watchdog", Lock: "set-nx-px-fenced", Expected: expect(verdict.Safe), Outcome: verdict.Starved},
		{Scenario: "dead-waiter", Lock: "set-nx-px", Expected: expect(verdict.Safe), Outcome: verdict.Deadlock},
		{Scenario: "fair-order", Lock: "set-nx-px", Expected: expect(verdict.Unfair), Outcome: verdict.Unfair, Matched: true},
	}
	var b bytes.Buffer
	report.ComparisonMarkdown(&b, es)
	md := b.String()
	for _, line := range []string{
		"| lock | baseline | dead-waiter | fair-order | fencing | paused-holder | watchdog |",
		"| **Redis locks** | | | | | | |",
		"| `set-nx-px` |  | 🟠✗ | 🟤 |  |  |  |",
		"| `set-nx-px-fenced` (fenced) | 🟢 |  |  | 🔵 | 🔴✗ | ⚪✗ |",
	} {
		if !strings.Contains(md, line+"\n") {
			t.Errorf("no line %q in:\n%s", line, md)
		}
	}
	if !strings.Contains(md, "🔴 lost update") || !strings.Contains(md, "✗ not what the story expects") {
		t.Errorf("no legend below the table:\n%s", md)
	}
}

func TestIndexShowsTheComparisonAboveTheGrid(t *testing.T) {
	root := t.TempDir()
	es := outcomeEntries(root, verdict.Unsafe)
	if err := report.WriteSummary(root, report.Matrix{Entries: es}); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteIndex(root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	cmp, grid := strings.Index(page, `<h2 id="comparison">`), strings.Index(page, "<h2>Last matrix")
	if cmp < 0 || grid < 0 || cmp > grid {
		t.Fatalf("comparison at %d, grid at %d", cmp, grid)
	}
	if !strings.Contains(page, `<td class="cmp-unsafe cmp-miss"`) || !strings.Contains(page, `<a href="s-lock-unsafe/set-nx-px/20261124T000000Z/index.html">saved</a>`) {
		t.Errorf("index lacks the comparison's cells:\n%s", page[cmp:grid])
	}
}
