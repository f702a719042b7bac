package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/verdict"
)

// ComparisonTable is the matrix turned the way a person choosing a lock reads
// it: locks down, grouped by the service they run on, stories across, and
// each cell coloured by what became of the protected resource rather than
// by whether the run met its expectation (an expected "unsafe" is still
// red). Whether the run matched is a separate mark on the cell.
type ComparisonTable struct {
	// Stories are the columns, sorted by name so that a merged matrix and
	// a direct one lay out alike (and redlock-* stories sit together).
	Stories []string
	// Groups are the services, in GroupOrder; empty groups are left out.
	Groups []ComparisonGroup
}

// ComparisonGroup is the locks of one service.
type ComparisonGroup struct {
	Name string
	Rows []ComparisonRow
}

// ComparisonRow is one lock across every story.
type ComparisonRow struct {
	Lock string
	// Fenced, Broken and Summary come from the lock registry; a lock the
	// registry does not know (a matrix read back by a program that did not
	// register it) has them zero.
	Fenced  bool
	Broken  bool
	Summary string
	// Cells line up with ComparisonTable.Stories.
	Cells []ComparisonCell
}

// ComparisonCell is one (story, lock) run, or an empty cell where the
// story has no expectation for the lock.
type ComparisonCell struct {
	Story, Lock string
	// Ran is false for a pair the matrix did not run.
	Ran      bool
	Outcome  verdict.Outcome
	Expected verdict.Expectation
	Matched  bool
	// Href is the run's page relative to the results root ("" when the
	// run left no directory).
	Href string
	// Class names the colour: what happened to the resource (CellClass).
	Class string
	// Word is the cell's short text, Title its full one (the tooltip).
	Word, Title string
}

// The service groups, in the order the table shows them. Other holds
// locks the registry does not know or whose server has no group here, so
// a matrix with a lock added later still renders.
const (
	GroupRedis     = "Redis locks"
	GroupLibraries = "Redis libraries"
	// The Redis libraries by the language their users write in; a
	// library whose language is not one of these stays in GroupLibraries.
	GroupGo        = "Go libraries on Redis"
	GroupPython    = "Python libraries on Redis"
	GroupPHP       = "PHP libraries on Redis"
	GroupZooKeeper = "ZooKeeper"
	GroupEtcd      = "etcd"
	GroupPostgres  = "PostgreSQL"
	GroupMySQL     = "MySQL (MariaDB)"
	GroupMemcached = "memcached"
	GroupOther     = "other"
	GroupControls  = "controls"
)

// GroupOrder is the row order of the groups: Redis first because every
// story was told for it, the controls last because they prove the
// checkers, not a lock.
var GroupOrder = []string{GroupRedis, GroupGo, GroupPython, GroupPHP, GroupLibraries, GroupZooKeeper, GroupEtcd, GroupPostgres, GroupMySQL, GroupMemcached, GroupOther, GroupControls}

// serverGroups names the group of each server kind (cluster's kind names)
// other than Redis, whose locks split into algorithms and libraries.
var serverGroups = map[string]string{
	"zookeeper": GroupZooKeeper,
	"etcd":      GroupEtcd,
	"postgres":  GroupPostgres,
	"mariadb":   GroupMySQL,
	"memcached": GroupMemcached,
}

// languageGroups names the group of a Redis library by its language.
var languageGroups = map[string]string{"Go": GroupGo, "Python": GroupPython, "PHP": GroupPHP}

// controls are the locks every matrix runs to test its checkers; nothing
// in their Info tells them from a Redis lock.
var controls = []string{"none", "mutex"}

// LockGroup is the group of the named lock: its server kind from the lock
// registry, and for Redis whether a library implements it.
func LockGroup(name string) string {
	if slices.Contains(controls, name) {
		return GroupControls
	}
	info, err := locks.Lookup(name)
	if err != nil {
		return GroupOther
	}
	kind := info.ServerKind()
	if kind != locks.ServerRedis {
		if g, ok := serverGroups[kind]; ok {
			return g
		}
		return GroupOther
	}
	if info.Library != "" {
		if g, ok := languageGroups[info.Language]; ok {
			return g
		}
		return GroupLibraries
	}
	return GroupRedis
}

// look is how the comparison shows an outcome that is evidence: its
// colour's class, the few letters a cell has room for (the tooltip has
// the rest), what the colour stands for in words, and its symbol in the
// README, where there is no colour but emoji.
type look struct{ class, word, happened, symbol string }

// looks holds every judged outcome's look; any other outcome is shown as
// not judged.
var looks = map[verdict.Outcome]look{
	verdict.Safe:       {"cmp-safe", "safe", "resource kept safe", "🟢"},
	verdict.LockUnsafe: {"cmp-saved", "saved", "two holders, but the stale write was rejected (fencing saved the resource)", "🔵"},
	verdict.Unsafe:     {"cmp-unsafe", "LOST", "resource corrupted (lost update or stale write)", "🔴"},
	verdict.Deadlock:   {"cmp-stall", "stall", "stalled (a free lock stayed unobtainable)", "🟠"},
	verdict.Unfair:     {"cmp-unfair", "unfair", "a later waiter was served first", "🟤"},
}

// unjudgedWords are the cell words of the outcomes that are not evidence.
var unjudgedWords = map[verdict.Outcome]string{
	verdict.Starved: "starv", verdict.Vacuous: "vac", verdict.Undecided: "unkn",
	verdict.Errored: "err", verdict.Interrupted: "intr",
}

// lookOf is o's look: its own, or for an outcome that is not evidence
// (and any word this package does not know) the not-judged look with its
// few letters; an empty cell has only its colour.
func lookOf(o verdict.Outcome) look {
	if l, ok := looks[o]; ok {
		return l
	}
	if o == "" {
		return look{class: "cmp-empty", happened: "not judged"}
	}
	w, ok := unjudgedWords[o]
	if !ok {
		w = string(o[:min(len(o), 5)])
	}
	return look{class: "cmp-none", word: w, happened: "not judged", symbol: "⚪"}
}

// CellClass names the colour of an outcome: what happened to the
// protected resource. Every outcome that is not evidence, and any word
// this package does not know, is "cmp-none" (not judged).
func CellClass(o verdict.Outcome) string { return lookOf(o).class }

// cellWord is the few letters a cell has room for.
func cellWord(o verdict.Outcome) string { return lookOf(o).word }

// happened says in words what the colour stands for.
func happened(o verdict.Outcome) string { return lookOf(o).happened }

// runHref is the run's page relative to the results root. A run directory
// is always root/scenario/lock/stamp (WriteIndex finds runs so), so its
// last three elements are its place under the root wherever the matrix
// was run from.
func runHref(dir string) string {
	if dir == "" {
		return ""
	}
	parts := strings.Split(filepath.ToSlash(filepath.Clean(dir)), "/")
	return path.Join(append(parts[max(0, len(parts)-3):], "index.html")...)
}

// baseName is a lock's name without its fencing suffix, so that a fenced
// variant sorts beside the lock it fences.
func baseName(lock string) string { return strings.TrimSuffix(lock, "-fenced") }

// Comparison lays the matrix's entries out as the comparison table. A
// pair that appears twice shows its last entry.
func Comparison(entries []Entry) ComparisonTable {
	var c ComparisonTable
	byPair := map[[2]string]Entry{}
	var lockNames []string
	for _, e := range entries {
		if !slices.Contains(c.Stories, e.Scenario) {
			c.Stories = append(c.Stories, e.Scenario)
		}
		if !slices.Contains(lockNames, e.Lock) {
			lockNames = append(lockNames, e.Lock)
		}
		byPair[[2]string{e.Scenario, e.Lock}] = e
	}
	sort.Strings(c.Stories)
	// Within a group: by the lock's base name, the unfenced one first, so
	// zk and zk-fenced are neighbours.
	sort.Slice(lockNames, func(i, j int) bool {
		a, b := lockNames[i], lockNames[j]
		if baseName(a) != baseName(b) {
			return baseName(a) < baseName(b)
		}
		return a < b
	})
	rows := map[string][]ComparisonRow{}
	for _, l := range lockNames {
		row := ComparisonRow{Lock: l}
		if info, err := locks.Lookup(l); err == nil {
			row.Fenced, row.Broken, row.Summary = info.Fenced, info.Broken, info.Summary
		}
		for _, s := range c.Stories {
			e, ran := byPair[[2]string{s, l}]
			cell := ComparisonCell{Story: s, Lock: l, Ran: ran}
			if ran {
				cell.Outcome, cell.Expected, cell.Matched, cell.Href = e.Outcome, e.Expected, e.Matched, runHref(e.Dir)
				cell.Class, cell.Word, cell.Title = CellClass(e.Outcome), cellWord(e.Outcome), cellTitle(e)
			} else {
				cell.Class = CellClass("")
			}
			row.Cells = append(row.Cells, cell)
		}
		g := LockGroup(l)
		rows[g] = append(rows[g], row)
	}
	for _, g := range GroupOrder {
		if len(rows[g]) > 0 {
			c.Groups = append(c.Groups, ComparisonGroup{Name: g, Rows: rows[g]})
		}
	}
	return c
}

// cellTitle is the tooltip: everything the cell's word leaves out.
func cellTitle(e Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s / %s: %s, %s.", e.Scenario, e.Lock, e.Outcome, happened(e.Outcome))
	if e.Matched {
		fmt.Fprintf(&b, " Matched: expected %s.", e.Expected)
	} else {
		fmt.Fprintf(&b, " DID NOT MATCH: expected %s.", e.Expected)
	}
	if len(e.Observations) > 0 {
		fmt.Fprintf(&b, " Seen: %s.", strings.Join(e.Observations, ", "))
	}
	if e.Starved != "" {
		fmt.Fprintf(&b, " Starved: %s.", e.Starved)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, " Error: %s.", e.Error)
	}
	if e.Late != "" {
		fmt.Fprintf(&b, " Late: %s.", e.Late)
	}
	return b.String()
}

// Width budget: the index's body is 1100 px at most, so the table takes
// the width it is given (table-layout fixed) and the story names stand
// upright, one column wide each, instead of widening their columns.
const compareStyle = `<style>
.cmp-wrap{max-width:100%;overflow-x:auto}
table.cmp{table-layout:fixed;width:100%;border-collapse:separate;border-spacing:2px;font-size:11px;line-height:1.2}
table.cmp td,table.cmp th{padding:0;border:0;text-align:center;vertical-align:middle}
table.cmp col.cmp-lockcol{width:150px}
table.cmp th.cmp-story{height:170px;vertical-align:bottom;font-weight:500}
table.cmp th.cmp-story a,table.cmp th.cmp-story span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;display:inline-block;padding:2px 0;color:#333}
table.cmp th.cmp-lock{text-align:left;font-weight:500;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;padding-right:4px}
table.cmp tr.cmp-group th{text-align:left;font-size:12px;font-weight:700;padding:8px 0 1px;border-bottom:1px solid #ccc;color:#444}
.cmp-fence{display:inline-block;font-size:9px;padding:0 3px;margin-left:3px;border-radius:3px;background:#0e7490;color:#fff;vertical-align:1px}
.cmp-broken{display:inline-block;font-size:9px;padding:0 3px;margin-left:3px;border-radius:3px;border:1px solid #999;color:#666;vertical-align:1px}
table.cmp td{position:relative;height:19px;border-radius:3px}
table.cmp td a{display:block;color:inherit;text-decoration:none;line-height:19px;overflow:hidden;white-space:nowrap}
table.cmp td a:hover{outline:2px solid #333}
.cmp-safe{background:#bbf7d0;color:#14532d}
.cmp-saved{background:#a5f3fc;color:#164e63;font-weight:600}
.cmp-unsafe{background:#f87171;color:#450a0a;font-weight:700}
.cmp-stall{background:#fbbf24;color:#451a03;font-weight:600}
.cmp-unfair{background:#d6d3d1;color:#292524}
.cmp-none{background:repeating-linear-gradient(135deg,#f4f4f5 0 3px,#d4d4d8 3px 5px);color:#3f3f46;font-style:italic}
.cmp-empty{background:#fafafa}
.cmp-badge{position:absolute;top:-3px;right:-2px;font-size:9px;line-height:11px;font-weight:700;font-style:normal;pointer-events:none}
.cmp-ok .cmp-badge{color:#15803d;opacity:.55}
td.cmp-miss{box-shadow:inset 0 0 0 2px #b91c1c}
.cmp-miss .cmp-badge{background:#b91c1c;color:#fff;border-radius:6px;padding:0 3px;top:-5px;right:-4px;font-size:10px}
.cmp-legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin:.6em 0;padding:0;list-style:none}
.cmp-legend li{margin:0;display:flex;align-items:center;gap:5px}
.cmp-legend .cmp-key{display:inline-block;min-width:38px;height:17px;line-height:17px;text-align:center;border-radius:3px;font-size:11px;position:relative}
</style>`

var compareTable = template.Must(template.New("compare").Parse(compareStyle + `
<h2 id="comparison">Which lock keeps the resource safe under which fault</h2>
<ul class="cmp-legend">
<li><span class="cmp-key cmp-safe">safe</span>kept safe</li>
<li><span class="cmp-key cmp-saved">saved</span>two holders, stale write rejected (fencing saved it)</li>
<li><span class="cmp-key cmp-unsafe">LOST</span>lost update or stale write</li>
<li><span class="cmp-key cmp-stall">stall</span>stalled (deadlock)</li>
<li><span class="cmp-key cmp-unfair">unfair</span>a later waiter served first</li>
<li><span class="cmp-key cmp-none">starv</span>not judged: starv(ed), vac(uous), unkn(own), err(or), intr(errupted)</li>
<li><span class="cmp-key cmp-safe cmp-ok" style="box-shadow:none">safe<span class="cmp-badge">✓</span></span>as the story expects</li>
<li><span class="cmp-key cmp-safe cmp-miss" style="box-shadow:inset 0 0 0 2px #b91c1c">safe<span class="cmp-badge">✗</span></span>not what the story expects (hover: the expectation)</li>
<li><span class="cmp-fence">fenced</span>leases carry fencing tokens</li>
<li><span class="cmp-broken">broken</span>kept as a counter-example</li>
</ul>
<div class="cmp-wrap"><table class="cmp">
<colgroup><col class="cmp-lockcol">{{range .Stories}}<col>{{end}}</colgroup>
<thead><tr><th></th>{{range .Stories}}<th class="cmp-story" title="{{.}}"><span>{{.}}</span></th>{{end}}</tr></thead>
<tbody>
{{- $n := len .Stories}}
{{- range .Groups}}
<tr class="cmp-group"><th colspan="{{$n}}">{{.Name}}</th><th></th></tr>
{{- range .Rows}}
<tr><th class="cmp-lock" title="{{.Lock}}{{if .Summary}}: {{.Summary}}{{end}}">{{.Lock}}{{if .Fenced}}<span class="cmp-fence">fenced</span>{{end}}{{if .Broken}}<span class="cmp-broken">broken</span>{{end}}</th>
{{- range .Cells}}<td class="{{.Class}}{{if .Ran}} {{if .Matched}}cmp-ok{{else}}cmp-miss{{end}}{{end}}"{{if .Ran}} title="{{.Title}}"{{end}}>
{{- if .Ran}}{{if .Href}}<a href="{{.Href}}">{{.Word}}</a>{{else}}<a>{{.Word}}</a>{{end}}<span class="cmp-badge">{{if .Matched}}✓{{else}}✗{{end}}</span>{{end}}</td>
{{- end}}</tr>
{{- end}}
{{- end}}
</tbody></table></div>
`))

// HTML renders the comparison as a fragment of a page (its own style
// included), for the results index.
func (c ComparisonTable) HTML() template.HTML {
	var b bytes.Buffer
	if err := compareTable.Execute(&b, c); err != nil {
		return template.HTML("<p>comparison: " + template.HTMLEscapeString(err.Error()) + "</p>")
	}
	return template.HTML(b.String())
}

// ComparisonHTML is the comparison of m's entries as a page fragment: the
// results index calls it from its template.
func (m Matrix) ComparisonHTML() template.HTML { return Comparison(m.Entries).HTML() }

// markdownSymbol is a cell's symbol in the README.
func markdownSymbol(o verdict.Outcome) string { return lookOf(o).symbol }

// ComparisonMarkdown writes the comparison as a Markdown table for the
// README: a symbol per cell, ✗ after it where the run did not match its
// story's expectation, a group's name as a row of its own, and the legend
// below.
func ComparisonMarkdown(w io.Writer, entries []Entry) {
	c := Comparison(entries)
	fmt.Fprintf(w, "| lock | %s |\n|---|%s\n", strings.Join(c.Stories, " | "), strings.Repeat(":-:|", len(c.Stories)))
	for _, g := range c.Groups {
		fmt.Fprintf(w, "| **%s** |%s\n", g.Name, strings.Repeat(" |", len(c.Stories)))
		for _, r := range g.Rows {
			cells := []string{"`" + r.Lock + "`"}
			if r.Fenced {
				cells[0] += " (fenced)"
			}
			if r.Broken {
				cells[0] += " (broken)"
			}
			for _, cell := range r.Cells {
				s := markdownSymbol(cell.Outcome)
				if cell.Ran && !cell.Matched {
					s += "✗"
				}
				cells = append(cells, s)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "🟢 kept safe · 🔵 two holders, stale write rejected (fencing saved the resource) · 🔴 lost update or stale write · "+
		"🟠 stalled (deadlock) · 🟤 unfair (a later waiter served first) · ⚪ not judged (starved, vacuous, unknown, error, interrupted) · "+
		"✗ not what the story expects · empty: the story has no expectation for the lock")
}
