// Package sweep runs one story across a range of one of its parameters,
// many runs per point, and says how likely a violation is at each point,
// with a 95% Wilson interval, and what it cost (the runs' mean fractions
// of writes lost and of time with two holders, with Student-t intervals):
// where pass/fail says a lease broke under a 2.5-TTL pause, a sweep shows
// the pause at which it starts to, how surely, and how much. A sweep's runs are spread over the machine's seats as a matrix's
// are, and over machines with shards whose files Merge joins.
package sweep

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// Spec is the range a sweep covers: Steps values of Param evenly from
// From to To.
type Spec struct {
	Param    string
	From, To float64
	Steps    int
}

// ParseSpec reads PARAM=FROM..TO[:STEPS] (STEPS: 5 when left out).
func ParseSpec(s string) (Spec, error) {
	bad := func(why string) (Spec, error) {
		return Spec{}, fmt.Errorf("-sweep %s: %s (want PARAM=FROM..TO[:STEPS], e.g. pause=0.25..2.5:10)", s, why)
	}
	name, rng, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return bad("no parameter")
	}
	sp := Spec{Param: strings.TrimSpace(name), Steps: 5}
	rng, steps, hasSteps := strings.Cut(rng, ":")
	if hasSteps {
		n, err := strconv.Atoi(steps)
		if err != nil || n < 2 || n > 100 {
			return bad("STEPS is a whole number from 2 to 100")
		}
		sp.Steps = n
	}
	from, to, ok := strings.Cut(rng, "..")
	var err1, err2 error
	sp.From, err1 = strconv.ParseFloat(from, 64)
	sp.To, err2 = strconv.ParseFloat(to, 64)
	if !ok || err1 != nil || err2 != nil || !(sp.From < sp.To) {
		return bad("FROM..TO are two numbers, FROM below TO")
	}
	return sp, nil
}

// Values are the points of the range.
func (s Spec) Values() []float64 {
	out := make([]float64, s.Steps)
	for i := range out {
		v := s.From + (s.To-s.From)*float64(i)/float64(s.Steps-1)
		out[i] = math.Round(v*1e6) / 1e6
	}
	return out
}

// Options is one sweep.
type Options struct {
	// Run is what every run starts from (Scenario, Out, TTL, Clients...);
	// Lock and Params are set per run.
	Run   engine.Options
	Locks []string
	Spec  Spec
	// Runs is how many runs each (point, lock) gets.
	Runs int
	// Parallel is how many runs go at once (0: the machine's seats).
	Parallel int
	// Shard, Shards: run only the jobs k with k%Shards == Shard-1 (1-based;
	// 0 and 0: every job).
	Shard, Shards int
	// Logf, when set, hears of each run as it ends; calls never overlap.
	Logf func(format string, args ...any)
}

// Sweep is what a sweep found: sweep.json.
type Sweep struct {
	Story string          `json:"story"`
	Param scenario.Param  `json:"param"`
	Spec  Spec            `json:"spec"`
	Runs  int             `json:"runs"`
	Locks []string        `json:"locks"`
	TTL   string          `json:"ttl"`
	Shard string          `json:"shard,omitempty"`
	Start time.Time       `json:"started"`
	Cells map[string]Cell `json:"cells"` // by cellKey(lock, value)
	Dir   string          `json:"dir"`
	// Parallel is how many runs went at once.
	Parallel int `json:"parallel"`
}

// Cell is one lock at one point: its runs and what they showed.
type Cell struct {
	// Judged counts the runs that are evidence; the others (vacuous,
	// starved, failed) are listed in Unjudged and counted in nothing else.
	Judged int `json:"judged"`
	// DoubleHolder counts runs in which two clients held the lock at once;
	// Unsafe runs in which the protected resource was corrupted.
	DoubleHolder int      `json:"double_holder"`
	Unsafe       int      `json:"unsafe"`
	Unjudged     []string `json:"unjudged,omitempty"`
	Dirs         []string `json:"dirs"`
	// Figures are each judged run's figures, in the order the runs ended:
	// kept run by run, not as means, so that Merge can join shards and
	// the intervals be drawn from every run.
	Figures []verdict.Figures `json:"figures,omitempty"`
}

// Measures are what a sweep counts, as the table and plot name them.
var Measures = []string{"double holder", "resource corrupted"}

// count is the cell's count of measure m.
func (c Cell) count(m string) int {
	if m == Measures[0] {
		return c.DoubleHolder
	}
	return c.Unsafe
}

func cellKey(lock string, v float64) string { return lock + "@" + strconv.FormatFloat(v, 'g', -1, 64) }

// TTLParam is the one parameter a sweep has that is no story's: the lease
// itself, in ms, with every parameter of the story counted in TTLs held at
// its length in time under the base TTL (-ttl, or the story's own). It
// asks how long a lease must be for a given pause, jump or delay, and, for
// a lock service, what its lease length buys. The rest of the story's
// schedule (when a trap is armed, a literal delay) and its time limit stay
// in TTLs, and scale with the lease.
const TTLParam = "ttl"

// ParamOf is the parameter name of story s, or, for TTLParam, the lease
// at base (0: the story's TTL) with its threshold where a parameter of the
// story has one: a pause of 2.5 TTLs at 500 ms is 1250 ms, and a lease
// survives it from a TTL of 1250 ms up.
//
// The workload's parameters (WorkloadParams) every story has too, where
// it has none of its own by that name.
func ParamOf(s scenario.Scenario, name string, base time.Duration) (scenario.Param, bool) {
	if name != TTLParam {
		if p, ok := s.Param(name); ok {
			return p, true
		}
		return workloadParam(s, name, base)
	}
	base = cmp.Or(base, s.TTL)
	ms := float64(base) / float64(time.Millisecond)
	p := scenario.Param{Name: TTLParam, Unit: "ms", Default: ms, Min: 100, Max: 60_000,
		Help: fmt.Sprintf("the lease, with the story's parameters in TTLs held at their length at a TTL of %s", base)}
	for _, q := range s.Params {
		if q.Unit == "TTLs" && q.Threshold > 0 {
			p.Threshold = math.Round(q.Default*ms/q.Threshold*1e3) / 1e3
			p.Help += fmt.Sprintf(" (%s %g ms: its threshold is reached at a lease of %g ms)", q.Name, q.Default*ms, p.Threshold)
			break
		}
	}
	return p, true
}

// RunAt is run with the sweep's parameter name at v: the story's parameter
// set, or, for TTLParam, the TTL set to v ms and each parameter of the
// story in TTLs scaled so that it lasts as long as its default at the base
// TTL (run.TTL, or the story's); or, for a workload parameter, the run's
// workload (or clients) set so, the rest of run as it was.
func RunAt(s scenario.Scenario, run engine.Options, name string, v float64) engine.Options {
	if _, own := s.Param(name); !own && name != TTLParam {
		if w, ok := workloadAt(run, name, v); ok {
			return w
		}
	}
	if name != TTLParam {
		run.Params = map[string]float64{name: v}
		return run
	}
	base := cmp.Or(run.TTL, s.TTL)
	run.TTL = time.Duration(v * float64(time.Millisecond))
	run.Params = map[string]float64{}
	for _, q := range s.Params {
		if q.Unit == "TTLs" {
			run.Params[q.Name] = math.Round(q.Default*float64(base)/float64(run.TTL)*1e6) / 1e6
		}
	}
	return run
}

// Run runs the sweep's jobs (every lock at every point, Runs times) and
// writes sweep.json, sweep.md and the plot under
// Out/sweeps/<story>/<time>.
func Run(ctx context.Context, o Options) (*Sweep, error) {
	s, err := scenario.Lookup(o.Run.Scenario)
	if err != nil {
		return nil, err
	}
	p, ok := ParamOf(s, o.Spec.Param, o.Run.TTL)
	if !ok {
		return nil, fmt.Errorf("-sweep: scenario %s has no parameter %q", s.Name, o.Spec.Param)
	}
	for _, v := range o.Spec.Values() {
		if err := CheckAt(s, p.Name, v); err != nil {
			return nil, fmt.Errorf("-sweep: %w", err)
		}
	}
	if o.Parallel == 0 {
		o.Parallel = engine.Seats()
	}
	if o.Run.Out == "" {
		o.Run.Out = "results" // where the runs go too (engine.Resolve)
	}
	sw := &Sweep{Story: s.Name, Param: p, Spec: o.Spec, Runs: o.Runs, Locks: o.Locks, Start: time.Now(),
		Cells: map[string]Cell{}, Parallel: o.Parallel}
	if o.Shards > 0 {
		sw.Shard = fmt.Sprintf("%d/%d", o.Shard, o.Shards)
	}
	if p.Name == TTLParam {
		sw.TTL = fmt.Sprintf("swept, the faults as at %s", cmp.Or(o.Run.TTL, s.TTL))
	}
	type job struct {
		lock string
		v    float64
	}
	var jobs []job
	for r := 0; r < o.Runs; r++ {
		for _, v := range o.Spec.Values() {
			for _, l := range o.Locks {
				jobs = append(jobs, job{l, v})
			}
		}
	}
	logf := engine.Serialized(o.Logf)
	var mu sync.Mutex // the cells and the TTL
	for _, l := range o.Locks {
		for _, v := range o.Spec.Values() {
			sw.Cells[cellKey(l, v)] = Cell{}
		}
	}
	if o.Shards > 0 {
		var mine []job
		for k, j := range jobs {
			if k%o.Shards == o.Shard-1 {
				mine = append(mine, j)
			}
		}
		jobs = mine
	}
	engine.Spread(ctx, o.Parallel, len(jobs), func(i int) {
		j := jobs[i]
		ro := RunAt(s, o.Run, p.Name, j.v)
		ro.Lock = j.lock
		res, err := engine.RunUnstarved(ctx, ro, logf)
		if err == nil {
			err = report.Write(res)
		}
		mu.Lock()
		c := sw.Cells[cellKey(j.lock, j.v)]
		c.add(res, err)
		sw.Cells[cellKey(j.lock, j.v)] = c
		if sw.TTL == "" && res != nil && p.Name != TTLParam {
			sw.TTL = res.TTL
		}
		mu.Unlock()
		logf("%s %s=%g %s: %s", s.Name, p.Name, j.v, j.lock, line(res, err))
	})
	if err := ctx.Err(); err != nil {
		return sw, err
	}
	sw.Dir = filepath.Join(o.Run.Out, "sweeps", s.Name, sw.Start.UTC().Format("20060102T150405.000Z"))
	return sw, sw.Write()
}

// add counts one run in the cell.
func (c *Cell) add(res *engine.Result, err error) {
	if res != nil {
		c.Dirs = append(c.Dirs, res.Dir)
	}
	switch {
	case err != nil:
		c.Unjudged = append(c.Unjudged, "error: "+err.Error())
	case !res.Outcome.Judged():
		c.Unjudged = append(c.Unjudged, fmt.Sprintf("%s: %s", res.Outcome, res.Dir))
	default:
		c.Judged++
		if slices.Contains(res.Observations, "double-holder") {
			c.DoubleHolder++
		}
		if res.Outcome == verdict.Unsafe {
			c.Unsafe++
		}
		c.Figures = append(c.Figures, res.Figures)
	}
}

func line(res *engine.Result, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%s %v", res.Outcome, res.Observations)
}

// Wilson is the 95% Wilson score interval of k successes in n trials: an
// interval that stays inside [0, 1] and means something at k = 0 or k = n
// and small n, where the normal approximation does not.
func Wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	p := float64(k) / float64(n)
	nf := float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return max(0, mid-half), min(1, mid+half)
}

// Write writes sweep.json, sweep.md, sweep.png and sweep-figures.png
// (each with its .svg) into Dir.
func (sw *Sweep) Write() error {
	return errors.Join(report.WriteTextAndJSON(sw.Dir, "sweep.md", sw.Table, "sweep.json", sw),
		sw.Plot(filepath.Join(sw.Dir, "sweep")),
		sw.PlotFigures(filepath.Join(sw.Dir, "sweep-figures")))
}

// Table writes the sweep as a markdown table: per lock and point, the
// runs judged, each measure's P with its interval, and the mean of each
// of the runs' fractions (acknowledged writes lost, time with two
// holders) with its interval, and of their episodes.
func (sw *Sweep) Table(w io.Writer) {
	fmt.Fprintf(w, "%s: P(violation) against %s (%s; %d run(s) a point; ttl %s)\n\n", sw.Story, sw.Param.Name, sw.Param.Unit, sw.Runs, sw.TTL)
	io.WriteString(w, "P: 95% Wilson intervals. Lost writes (of those acknowledged) and double-held time (of the run's span): "+
		"the mean of the judged runs' fractions with a 95% Student-t interval, [0, 1] from one run.\n\n")
	fmt.Fprintf(w, "| lock | %s | judged | P(double holder) [95%%] | P(resource corrupted) [95%%] | lost writes [95%%] | double-held time [95%%] | episodes | not judged |\n"+
		"|---|---|---|---|---|---|---|---|---|\n", sw.Param.Name)
	for _, l := range sw.Locks {
		for _, v := range sw.Spec.Values() {
			c := sw.Cells[cellKey(l, v)]
			var ps []string
			for _, m := range Measures {
				k := c.count(m)
				lo, hi := Wilson(k, c.Judged)
				ps = append(ps, fmt.Sprintf("%d/%d = %.2f [%.2f, %.2f]", k, c.Judged, frac(k, c.Judged), lo, hi))
			}
			fmt.Fprintf(w, "| %s | %g | %d | %s | %s | %s | %d |\n", l, v, c.Judged, ps[0], ps[1],
				strings.Join(c.figureCells(), " | "), len(c.Unjudged))
		}
	}
}

func frac(k, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}

// Merge joins the sweep.json of each shard directory in dirs (a shard's
// -out, or the sweep's own directory) into one sweep under out, and writes
// it, with each shard's runs copied under out as a matrix's merge copies
// them: every shard of the set must be there once, and all must be of one
// sweep (story, parameter, range, runs, locks).
func Merge(dirs []string, out string) (*Sweep, error) {
	var merged *Sweep
	seen := map[string]bool{}
	n := 0
	for _, d := range dirs {
		// root is the shard's -out, which its runs are under.
		root := d
		files, _ := filepath.Glob(filepath.Join(d, "sweeps", "*", "*", "sweep.json"))
		if len(files) == 0 {
			files, _ = filepath.Glob(filepath.Join(d, "sweep.json"))
			root = filepath.Join(d, "..", "..", "..")
		}
		if len(files) != 1 {
			return nil, fmt.Errorf("%s: want one sweep.json, found %d", d, len(files))
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			return nil, err
		}
		var sw Sweep
		if err := json.Unmarshal(b, &sw); err != nil {
			return nil, fmt.Errorf("%s: %w", files[0], err)
		}
		if sw.Spec.Steps < 2 || sw.Spec.Steps > 100 || !(sw.Spec.From < sw.Spec.To) {
			return nil, fmt.Errorf("%s: its range %g..%g:%d is not a sweep's", files[0], sw.Spec.From, sw.Spec.To, sw.Spec.Steps)
		}
		i, k, err := shardOf(sw.Shard)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", files[0], err)
		}
		name := fmt.Sprintf("%d/%d", i, k)
		if seen[name] {
			return nil, fmt.Errorf("shard %s given twice", name)
		}
		seen[name] = true
		switch {
		case merged == nil:
			n = k
			first := sw
			first.Shard, first.Cells = "", map[string]Cell{}
			merged = &first
		case k != n || sw.Story != merged.Story || sw.Spec != merged.Spec || sw.Runs != merged.Runs || !slices.Equal(sw.Locks, merged.Locks) ||
			sw.TTL != "" && merged.TTL != "" && sw.TTL != merged.TTL:
			return nil, fmt.Errorf("%s: not a shard of the same sweep as %s", files[0], dirs[0])
		}
		merged.TTL = cmp.Or(merged.TTL, sw.TTL)
		for key, c := range sw.Cells {
			m := merged.Cells[key]
			m.Judged += c.Judged
			m.DoubleHolder += c.DoubleHolder
			m.Unsafe += c.Unsafe
			m.Unjudged = append(m.Unjudged, c.Unjudged...)
			m.Figures = append(m.Figures, c.Figures...)
			for _, run := range c.Dirs {
				at, err := report.CopyRun(root, run, out)
				if err != nil {
					return nil, err
				}
				m.Dirs = append(m.Dirs, at)
			}
			merged.Cells[key] = m
		}
	}
	if merged == nil {
		return nil, errors.New("no shard given")
	}
	for i := 1; i <= n; i++ {
		if !seen[fmt.Sprintf("%d/%d", i, n)] {
			return nil, fmt.Errorf("shard %d/%d missing", i, n)
		}
	}
	merged.Dir = filepath.Join(out, "sweeps", merged.Story, merged.Start.UTC().Format("20060102T150405.000Z"))
	return merged, merged.Write()
}

// shardOf reads a sweep's shard, "" being the whole sweep as one shard.
func shardOf(s string) (int, int, error) {
	if s == "" {
		return 1, 1, nil
	}
	a, b, _ := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || i < 1 || i > n {
		return 0, 0, fmt.Errorf("shard %q is not i/n", s)
	}
	return i, n, nil
}
