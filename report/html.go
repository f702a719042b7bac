package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/engine"
)

const style = `body{font:15px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
.verdict{font-size:1.15em;padding:.5em .8em;border-radius:6px;display:inline-block}
.ok{background:#dff3e3;color:#14532d}.bad{background:#fde2e2;color:#7f1d1d}
table{border-collapse:collapse}td,th{padding:.25em .7em;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
.valid{color:#15803d}.invalid{color:#b91c1c;font-weight:600}.unknown{color:#a16207}
li{margin:.3em 0}.while{color:#666;font-size:.92em}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto}.muted{color:#666}`

var runPage = template.Must(template.New("run").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.R.Scenario}} / {{.R.Lock}}</title><style>` + style + `</style></head><body>
<p class="muted"><a href="../../../index.html">all runs</a></p>
<h1>{{.R.Scenario}} / {{.R.Lock}}</h1>
<p class="verdict {{if .R.Matched}}ok{{else}}bad{{end}}">expected <b>{{.R.Expected}}</b> · observed <b>{{.R.Outcome}}</b> · {{if .R.Matched}}MATCHED{{else}}DID NOT MATCH{{end}}</p>
{{if .R.Finding}}<p class="verdict bad">finding: {{.R.Finding}}</p>{{end}}
{{if .R.Explained}}<p class="verdict ok">expected: {{.R.Explained}}</p>{{end}}
{{if .R.Vacuous}}<p class="verdict bad">vacuous: {{.R.Vacuous}}. The story did not happen, so the checkers' verdicts below prove nothing either way.</p>{{end}}
{{if .R.Starved}}<p class="verdict bad">starved: {{.R.Starved}}. The harness ran too late for the story's timing to hold, so the checkers' verdicts below prove nothing either way.</p>{{else if .R.Late}}<p class="verdict">late: {{.R.Late}}. The verdict stands: no fault ran, so lateness had no fault's window to move, and every checker passed.</p>{{end}}
<p>{{.R.Story}}</p>
<p class="muted">Why this is expected: {{.R.Expected.Why}}</p>
<table>
<tr><th>seed</th><td>{{.R.Seed}}</td><th>clients</th><td>{{.R.Clients}}</td><th>TTL</th><td>{{.R.TTL}}</td></tr>
<tr><th>time limit</th><td>{{.R.TimeLimit}}</td><th>ops</th><td>{{.R.OpCount}}</td><th>started</th><td>{{.Started}}</td></tr>
<tr><th>lateness</th><td colspan="5">{{.Lateness}}</td></tr>
</table>
<h2>What happened</h2>
{{range .Headlines}}<p><b>{{.}}</b></p>{{end}}
{{if .Findings}}<ul>{{range .Findings}}<li><b>{{.Kind}}</b>: {{.Text}}{{if .While}}<div class="while">meanwhile the nemesis: {{.While}}</div>{{end}}</li>{{end}}</ul>
{{if .More}}<p class="muted">{{.More}}</p>{{end}}
{{else}}<p>Every checker found the history valid.</p>{{end}}
<h2>Checkers</h2>
<table><tr><th>checker</th><th>verdict</th><th>anomalies</th></tr>
{{range .R.Verdicts}}<tr><td>{{.Checker}}</td><td class="{{.Valid}}">{{.Valid}}</td><td>{{range $k, $v := .Counts}}{{$k}}: {{$v}} {{end}}</td></tr>{{end}}
</table>
<h2>Plots</h2>
{{if .R.Streamed}}<p class="muted">Judged as a stream: the clients' {{.R.OpCount}} ops were read from history.jsonl.gz a segment at a time and not held, so the plots show the nemesis only.</p>{{end}}
{{range .Charts}}<p>{{if $.Vector}}<a href="{{.Name}}.svg"><img src="{{.Name}}.png" alt="{{.Title}}"></a>{{else}}<img src="{{.Name}}.png" alt="{{.Title}}">{{end}}</p>{{end}}
<h2>Nemesis</h2>
{{if .Faults}}<ul>{{range .Faults}}<li>{{.}}</li>{{end}}</ul>{{else}}<p>No faults.</p>{{end}}
{{if .R.Schedule}}<p class="muted">Schedule:</p><pre>{{.R.Schedule}}</pre>{{end}}
<h2>Files</h2>
<ul>{{if not .R.Streamed}}<li><a href="timeline.html">timeline.html</a>: porcupine's timeline of every acquire and release, with the store's ops, the nemesis and the anomalies</li>
{{end}}<li><a href="history.jsonl.gz">history.jsonl.gz</a>: every op as it happened (gzip; <code>history.LoadFile</code> reads it{{if .R.Streamed}}, <code>history.Each</code> op by op{{end}})</li>
<li><a href="results.json">results.json</a>: verdicts and details</li>
<li><a href="cluster.json">cluster.json</a>: the nodes, their ports and pids</li>
{{range .R.ServerLogs}}<li><a href="{{.}}">{{.}}</a>: what the server logged while the run had it, kept since the run did not match</li>
{{end}}{{with .R.CommandLog}}<li><a href="{{.}}">{{.}}</a>: when the lock issued each command of its connections and when it was answered, kept since the run did not match</li>
{{end}}</ul>
</body></html>`))

type finding struct {
	Kind, Text, While string
}

// page writes the run's index.html.
func page(r *engine.Result, charts []Chart, vector bool) error {
	faults := Faults(r.Ops)
	var findings []finding
	total := 0
	lastWhile := ""
	for _, v := range r.Verdicts {
		shown := 0
		for _, a := range v.Anomalies {
			total++
			if shown == 5 {
				continue
			}
			shown++
			f := finding{Kind: string(v.Checker) + ": " + a.Kind, Text: a.Text, While: strings.Join(During(faults, a.Start, a.End), "; ")}
			// Said once for a run of anomalies in the same fault.
			if f.While == lastWhile {
				f.While = ""
			} else {
				lastWhile = f.While
			}
			findings = append(findings, f)
		}
	}
	more := ""
	if n := countAll(r.Verdicts); n > len(findings) {
		more = fmt.Sprintf("%d more anomalies, of which results.json lists %d; the checker table below counts them all.", n-len(findings), total-len(findings))
	}
	var fs []string
	for _, f := range faults {
		fs = append(fs, fmt.Sprintf("%s–%s %s", secs(f.Start), secs(f.End), f.Text()))
	}
	f, err := os.Create(filepath.Join(r.Dir, "index.html"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	err = runPage.Execute(f, map[string]any{
		"R": r, "Charts": charts, "Findings": findings, "More": more, "Faults": fs, "Headlines": headlines(r, faults),
		"Started": r.Started.UTC().Format(time.RFC3339), "Vector": vector, "Lateness": latenessLine(r),
	})
	if err != nil {
		return fmt.Errorf("report: index.html: %w", err)
	}
	return f.Close()
}

// headlines tells the double holders the way a person would: per key, the
// hold that overlapped the most others, how long, and the nemesis then.
// The anomaly list has every pair; this is the one sentence to read first.
func headlines(r *engine.Result, faults []Fault) []string {
	type holdID struct {
		key   string
		proc  int
		start int64
	}
	holds := checker.Holds(r.Ops)
	byID := map[holdID]checker.Hold{}
	for _, h := range holds {
		byID[holdID{h.Key, h.Process, h.Start}] = h
	}
	count := map[holdID]map[int]bool{}
	n := map[holdID]int{}
	for _, o := range checker.Overlaps(holds) {
		id := holdID{o.Key, o.A, o.AStart}
		if count[id] == nil {
			count[id] = map[int]bool{}
		}
		count[id][o.B] = true
		n[id]++
	}
	best := map[string]holdID{}
	for id, c := range n {
		if b, ok := best[id.key]; !ok || c > n[b] {
			best[id.key] = id
		}
	}
	var out []string
	for key, id := range best {
		h := byID[id]
		var others []string
		for p := range count[id] {
			others = append(others, fmt.Sprint(p))
		}
		sort.Strings(others)
		line := fmt.Sprintf("Process %d believed it held %q from %s to %s (%s) while %d holds by process(es) %s began.",
			h.Process, key, secs(h.Start), secs(h.End), time.Duration(h.End-h.Start).Round(time.Millisecond), n[id], strings.Join(others, ", "))
		if d := During(faults, h.Start, h.End); len(d) > 0 {
			line += " Meanwhile the nemesis: " + strings.Join(d, "; ") + "."
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

func countAll(vs []checker.Verdict) int {
	n := 0
	for _, v := range vs {
		for _, c := range v.Counts {
			n += c
		}
	}
	return n
}

var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>locktorture results</title><style>` + style + `</style></head><body>
<h1>locktorture results</h1>
{{if .Matrix}}{{.Matrix.ComparisonHTML}}
<h2>Last matrix ({{.Matrix.Matched}} of {{.Matrix.Total}} matched{{if .Matrix.Starved}}, {{.Matrix.Starved}} starved{{end}}, {{.MatrixStarted}})</h2>
<div style="max-width:100%;overflow-x:auto"><table><tr><th>scenario</th>{{range .Grid.Locks}}<th>{{.}}</th>{{end}}</tr>
{{range .Grid.Rows}}<tr><td>{{.Scenario}}</td>{{range .Cells}}<td>{{if .Dir}}<a href="{{.Href}}" class="{{if .Matched}}valid{{else}}invalid{{end}}"{{if .Starved}} title="starved: {{.Starved}}"{{end}}>{{.Outcome}}{{if not .Matched}} ✗{{end}}</a>{{else if .Outcome}}<span class="invalid">{{.Outcome}}</span>{{end}}</td>{{end}}</tr>{{end}}
</table></div>{{end}}
<h2>Runs ({{len .Runs}})</h2>
<table><tr><th>started</th><th>scenario</th><th>lock</th><th>expected</th><th>observed</th><th></th></tr>
{{range .Runs}}<tr><td>{{.Started}}</td><td>{{.Scenario}}</td><td>{{.Lock}}</td><td>{{.Expected}}</td><td>{{.Outcome}}</td><td><a href="{{.Href}}" class="{{if .Matched}}valid{{else}}invalid{{end}}">{{if .Matched}}matched{{else}}did not match{{end}}</a></td></tr>{{end}}
</table></body></html>`))

type indexRun struct {
	Started, Scenario, Lock, Expected, Outcome, Href string
	Matched                                          bool
}

type gridCell struct {
	Entry
	Href string
}

type gridRow struct {
	Scenario string
	Cells    []gridCell
}

type grid struct {
	Locks []string
	Rows  []gridRow
}

// gridOf lays matrix entries out with scenarios down and locks across.
func gridOf(entries []Entry, root string) grid {
	var g grid
	cell := map[[2]string]Entry{}
	var scens []string
	for _, e := range entries {
		if !contains(scens, e.Scenario) {
			scens = append(scens, e.Scenario)
		}
		if !contains(g.Locks, e.Lock) {
			g.Locks = append(g.Locks, e.Lock)
		}
		cell[[2]string{e.Scenario, e.Lock}] = e
	}
	sort.Strings(g.Locks)
	for _, s := range scens {
		row := gridRow{Scenario: s}
		for _, l := range g.Locks {
			e := cell[[2]string{s, l}]
			href := ""
			if e.Dir != "" {
				if rel, err := filepath.Rel(root, filepath.Join(e.Dir, "index.html")); err == nil {
					href = filepath.ToSlash(rel)
				}
			}
			row.Cells = append(row.Cells, gridCell{Entry: e, Href: href})
		}
		g.Rows = append(g.Rows, row)
	}
	return g
}

// WriteIndex writes root/index.html: the last matrix (root/summary.json) and
// every run under root, newest first.
func WriteIndex(root string) error {
	data := map[string]any{}
	if b, err := os.ReadFile(filepath.Join(root, "summary.json")); err == nil {
		var m Matrix
		if json.Unmarshal(b, &m) == nil {
			data["Matrix"], data["Grid"] = m, gridOf(m.Entries, root)
			data["MatrixStarted"] = m.Started.UTC().Format(time.RFC3339)
		}
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "results.json"))
	var runs []indexRun
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r engine.Result
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		rel, _ := filepath.Rel(root, filepath.Join(filepath.Dir(f), "index.html"))
		runs = append(runs, indexRun{Started: r.Started.UTC().Format(time.RFC3339), Scenario: r.Scenario, Lock: r.Lock,
			Expected: r.Expected.String(), Outcome: string(r.Outcome), Matched: r.Matched, Href: filepath.ToSlash(rel)})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Started > runs[j].Started })
	data["Runs"] = runs
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(root, "index.html"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	if err := indexPage.Execute(f, data); err != nil {
		return fmt.Errorf("report: results index: %w", err)
	}
	return f.Close()
}
