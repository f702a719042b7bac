// Package shrink reduces the schedule of a run that showed a finding to a
// smaller one that still shows it, as delta debugging does: fewer faults,
// then shorter ones, then later ones, then fewer clients. Runs are not
// deterministic, so every candidate is replayed several times and kept only when it shows
// the finding often enough; the rate of every try is reported, and the
// result is a scenario file that replays the smallest schedule found.
package shrink

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// Options tunes a shrink.
type Options struct {
	// Dir is the stored run whose finding is shrunk: a run of a story told
	// as data (a random run keeps the plan it drew).
	Dir string
	// Replays is how many times each candidate runs (0: 4), and Keep how
	// many of them must show the finding for it to be kept (0: all but
	// one, and at least one).
	Replays, Keep int
	// Final is how many times the smallest schedule is replayed at the
	// end, to say how reliably it shows the finding (0: 10).
	Final int
	// Parallel is how many replays go at once (0: the machine's seats).
	Parallel int
	// Out is the results directory: the shrink is written under
	// shrinks/<story>/<lock>/<time>/.
	Out string
	// Logf, when set, hears every try as it ends.
	Logf func(format string, args ...any)
}

// Try is one candidate schedule and how often it showed the finding.
type Try struct {
	// Change says what the candidate changed ("without step 3: kill n2").
	Change string `json:"change"`
	Shown  int    `json:"shown"`
	Runs   int    `json:"runs"`
	Kept   bool   `json:"kept"`
}

// Result is a finished shrink.
type Result struct {
	Story, Lock string
	// Shows is what every kept candidate showed: the finding, or the
	// outcome.
	Shows string
	// From is the schedule shrunk (its faults, the final heal left out),
	// To the smallest that still showed the finding.
	From, To scenario.Plan
	// Clients are the run's clients before and after.
	ClientsFrom, ClientsTo int
	// Removed lists what was taken out or cut short, in words.
	Removed []string
	Tries   []Try
	// Shown of Final replays of To showed the finding.
	Shown, Final int
	// Dir holds scenario.json (To as a file), shrink.md and every replay.
	Dir string
}

// Faults counts the faults a plan sets, the steps that undo everything at
// the end (heal-all) left out.
func Faults(p scenario.Plan) int {
	n := 0
	for _, st := range p {
		if st.Do != "heal-all" {
			n++
		}
	}
	return n
}

// Run shrinks the finding of the run stored in o.Dir.
func Run(ctx context.Context, o Options) (*Result, error) {
	stored, err := engine.Load(o.Dir)
	if err != nil {
		return nil, err
	}
	story, err := toldStory(o.Dir, stored)
	if err != nil {
		return nil, err
	}
	shows, what, err := finding(o.Dir, stored)
	if err != nil {
		return nil, err
	}
	ttl, limit, err := timing(stored)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	dir, err := engine.RunDir(filepath.Join(o.Out, "shrinks", story.Name, stored.Lock), time.Now())
	if err != nil {
		return nil, err
	}
	res := &Result{Story: story.Name, Lock: stored.Lock, Shows: what, From: story.Plan, ClientsFrom: stored.Clients, ClientsTo: stored.Clients, Dir: dir}
	r := replayer{ctx: ctx, o: o, stored: stored, story: story, shows: shows, ttl: ttl, limit: limit, dir: dir}
	plan, clients := Smaller(story.Plan, stored.Clients, r.tries(res), ctx.Err)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res.To, res.ClientsTo = plan, clients
	res.Removed = removed(story.Plan, plan, stored.Clients, clients)
	res.Final = o.Final
	res.Shown = r.replay(plan, clients, o.Final)
	shrunk := story
	shrunk.Plan = plan
	shrunk.Clients = clients
	shrunk.Story = fmt.Sprintf("%s Shrunk from %s (%d faults, %d clients) to %d faults and %d clients, showing %s in %d of %d replays.",
		story.Story, o.Dir, Faults(story.Plan), stored.Clients, Faults(plan), clients, what, res.Shown, res.Final)
	if err := shrunk.Save(filepath.Join(dir, "scenario.json")); err != nil {
		return nil, err
	}
	return res, res.write()
}

// toldStory is the story the run stored in dir was told: the one it kept
// (a random run's drawn plan, a file's), or the catalogue's (a sweep
// point's run).
func toldStory(dir string, stored *engine.Result) (scenario.Scenario, error) {
	if stored.Told != nil {
		return *stored.Told, nil
	}
	story, err := scenario.Lookup(stored.Scenario)
	if err != nil || story.Plan == nil {
		return story, fmt.Errorf("%s: the run's story %s has no plan to shrink", dir, stored.Scenario)
	}
	return story, nil
}

// finding is what the run stored in dir showed, as a test of a replay and
// in words: an exploration's finding, else its outcome (a sweep point's
// double holder or corrupted resource).
func finding(dir string, stored *engine.Result) (func(*engine.Result) bool, string, error) {
	if stored.Finding != "" {
		return func(r *engine.Result) bool { return r.Finding != "" }, "its finding", nil
	}
	if !stored.Outcome.Judged() || stored.Outcome == verdict.Safe || stored.Outcome == verdict.PromiseKept {
		return nil, "", fmt.Errorf("%s: the run shows nothing to shrink (outcome %s)", dir, stored.Outcome)
	}
	return func(r *engine.Result) bool { return r.Outcome == stored.Outcome }, "outcome " + string(stored.Outcome), nil
}

// timing is the stored run's TTL and time limit, which every replay keeps.
func timing(stored *engine.Result) (ttl, limit time.Duration, err error) {
	if ttl, err = time.ParseDuration(stored.TTL); err != nil {
		return 0, 0, err
	}
	if limit, err = time.ParseDuration(stored.TimeLimit); err != nil {
		return 0, 0, err
	}
	return ttl, limit, nil
}

// replayer replays candidates of a stored run's schedule: its story, lock,
// seed, backend and parameters, with the plan and clients changed.
type replayer struct {
	ctx        context.Context
	o          Options
	stored     *engine.Result
	story      scenario.Scenario
	shows      func(*engine.Result) bool
	ttl, limit time.Duration
	dir        string
}

// replay runs p with clients n times, o.Parallel at once, and says how
// many of the runs showed the finding. A run that fails to run shows
// nothing. A starved replay is no evidence either way: it runs once more,
// alone, as a matrix's pair does, and the run alone is the one judged.
func (r replayer) replay(p scenario.Plan, clients, n int) int {
	s := r.story
	s.Plan = p
	shown := make([]bool, n)
	engine.Spread(r.ctx, r.o.Parallel, n, func(i int) {
		// A finding of a run that played its whole time limit may be in
		// its tail: its replays play it whole too.
		run := engine.Options{Told: &s, Lock: r.stored.Lock, Seed: r.stored.Seed, Clients: clients, TTL: r.ttl, TimeLimit: r.limit,
			FullTime: !r.stored.EndedEarly, SpawnWorkers: r.stored.SpawnWorkers, Backend: r.stored.Backend, Out: filepath.Join(r.dir, "replays"), Params: r.stored.Params}
		got, err := engine.RunUnstarved(r.ctx, run, r.o.Logf)
		if err == nil {
			_ = report.Write(got)
			shown[i] = r.shows(got)
		}
	})
	count := 0
	for _, ok := range shown {
		if ok {
			count++
		}
	}
	return count
}

// tries is Smaller's try: it replays a candidate o.Replays times, keeps
// it when o.Keep of them show the finding, and records the try in res.
func (r replayer) tries(res *Result) func(change string, p scenario.Plan, clients int) bool {
	return func(change string, p scenario.Plan, clients int) bool {
		shown := r.replay(p, clients, r.o.Replays)
		t := Try{Change: change, Shown: shown, Runs: r.o.Replays, Kept: shown >= r.o.Keep}
		res.Tries = append(res.Tries, t)
		r.o.Logf("%s: shown %d of %d%s", change, shown, r.o.Replays, map[bool]string{true: ", kept", false: ""}[t.Kept])
		return t.Kept
	}
}

func (o Options) withDefaults() Options {
	if o.Replays <= 0 {
		o.Replays = 4
	}
	if o.Keep <= 0 {
		o.Keep = max(o.Replays-1, 1)
	}
	if o.Final <= 0 {
		o.Final = 10
	}
	if o.Parallel <= 0 {
		o.Parallel = engine.Seats()
	}
	if o.Out == "" {
		o.Out = "results"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Smaller is the shrinking itself, given try, which replays a candidate
// (a plan, a client count, and what it changed in words) and says whether
// it still shows the finding. It keeps the final heal-all and
// removes faults as delta debugging does (halves, then quarters, down to
// one at a time), then halves what each fault that is undone lasts, then
// starts each fault later, by half what is left between its end and the
// plan's, then halves the clients while the finding stays (down to 2).
// stop ends it early (a cancelled context).
func Smaller(p scenario.Plan, clients int, try func(change string, p scenario.Plan, clients int) bool, stop func() error) (scenario.Plan, int) {
	s := shrinking{clients: clients, try: try, stop: stop}
	var faults scenario.Plan
	for _, st := range p {
		if st.Do == "heal-all" {
			s.rest = append(s.rest, st)
		} else {
			faults = append(faults, st)
		}
	}
	faults, stopped := s.fewerFaults(faults)
	if stopped {
		return s.with(faults), s.clients
	}
	faults = s.shorterFaults(faults)
	faults = s.laterFaults(faults, planEnd(p))
	s.fewerClients(faults)
	return s.with(faults), s.clients
}

// shrinking is Smaller's state between its steps: the heal-all steps it
// keeps as they are, the clients so far, and its try and stop.
type shrinking struct {
	rest    scenario.Plan
	clients int
	try     func(change string, p scenario.Plan, clients int) bool
	stop    func() error
}

// with is the plan of faults, the heal-all steps after them.
func (s *shrinking) with(faults scenario.Plan) scenario.Plan {
	return append(append(scenario.Plan{}, faults...), s.rest...)
}

// fewerFaults takes out what faults it can with delta debugging's
// complement steps: take out one of n chunks; on success go on with what
// is left at the same granularity, else split finer, until chunks are
// single faults. It says whether stop ended it.
func (s *shrinking) fewerFaults(faults scenario.Plan) (scenario.Plan, bool) {
	for n := 2; len(faults) > 0 && n <= 2*len(faults); {
		if s.stop() != nil {
			return faults, true
		}
		chunk := (len(faults) + n - 1) / n
		removedOne := false
		for i := 0; i < len(faults); i += chunk {
			j := min(i+chunk, len(faults))
			cand := append(append(scenario.Plan{}, faults[:i]...), faults[j:]...)
			if s.try("without "+words(faults[i:j]), s.with(cand), s.clients) {
				faults, removedOne = cand, true
				break
			}
		}
		switch {
		case removedOne:
			n = max(n-1, 2)
		case chunk == 1:
			n = 2*len(faults) + 1
		default:
			n = min(2*n, len(faults))
		}
	}
	return faults, false
}

// shorterFaults tries each fault that is undone at until lasting half as
// long.
func (s *shrinking) shorterFaults(faults scenario.Plan) scenario.Plan {
	for i, st := range faults {
		if s.stop() != nil || st.Until.IsZero() || st.Until.Param != "" || st.At.Param != "" {
			continue
		}
		cand := append(scenario.Plan{}, faults...)
		cand[i].Until = ttls(st.At.V + (st.Until.V-st.At.V)/2)
		if s.try(fmt.Sprintf("%s lasting %s TTLs, not %s", words(faults[i:i+1]), ttls(cand[i].Until.V-st.At.V), ttls(st.Until.V-st.At.V)), s.with(cand), s.clients) {
			faults = cand
		}
	}
	return faults
}

// planEnd is the latest start or end of any step of p, in TTLs.
func planEnd(p scenario.Plan) float64 {
	end := 0.0
	for _, st := range p {
		end = max(end, st.At.V, st.Until.V)
	}
	return end
}

// laterFaults tries each fault moved later by half what is left between
// its end and the plan's (end), lasting as long: a finding that needs no
// warm-up before its fault shows that, and one that does keeps its start.
func (s *shrinking) laterFaults(faults scenario.Plan, end float64) scenario.Plan {
	for i, st := range faults {
		if s.stop() != nil || st.At.Param != "" || st.Until.Param != "" {
			continue
		}
		last := max(st.At.V, st.Until.V)
		shift := (end - last) / 2
		if shift < 0.05 {
			continue
		}
		cand := append(scenario.Plan{}, faults...)
		cand[i].At = ttls(st.At.V + shift)
		if !st.Until.IsZero() {
			cand[i].Until = ttls(st.Until.V + shift)
		}
		if s.try(fmt.Sprintf("%s starting at %g TTLs, not %g", words(faults[i:i+1]), cand[i].At.V, st.At.V), s.with(cand), s.clients) {
			faults = cand
		}
	}
	return faults
}

// fewerClients halves the clients while the finding stays, down to 2.
func (s *shrinking) fewerClients(faults scenario.Plan) {
	for s.clients > 2 && s.stop() == nil {
		fewer := max(s.clients/2, 2)
		if !s.try(fmt.Sprintf("%d clients, not %d", fewer, s.clients), s.with(faults), fewer) {
			break
		}
		s.clients = fewer
	}
}

// ttls is n TTLs to a millionth, so halving and moving print as a person
// would write them (10.4, not 10.399999999999999).
func ttls(n float64) scenario.Num { return scenario.TTLs(math.Round(n*1e6) / 1e6) }

// words names steps as a schedule lists them, briefly.
func words(steps scenario.Plan) string {
	var w []string
	for _, st := range steps {
		b, _ := json.Marshal(st)
		w = append(w, string(b))
	}
	return strings.Join(w, ", ")
}

// removed says what the shrink took out of from to reach to. A step of to
// is matched with a step of from that does the same: first one that starts
// with it, then, for a step that was moved (a shrink only moves starts
// later), the one that starts nearest before it. What is left of from was
// removed.
func removed(from, to scenario.Plan, clientsFrom, clientsTo int) []string {
	var out []string
	used := make([]bool, len(from))
	same := func(a, b scenario.Step) bool {
		x, _ := json.Marshal(a.Action)
		y, _ := json.Marshal(b.Action)
		return string(x) == string(y) && a.At.Param == b.At.Param && a.At.V <= b.At.V
	}
	match := make([]int, len(to))
	for i, st := range to {
		match[i] = slices.IndexFunc(from, func(f scenario.Step) bool { return f.At == st.At && same(f, st) })
		if k := match[i]; k >= 0 && !used[k] {
			used[k] = true
		} else {
			match[i] = -1
		}
	}
	for i, st := range to {
		if match[i] >= 0 {
			continue
		}
		for j, f := range from {
			if k := match[i]; !used[j] && same(f, st) && (k < 0 || f.At.V > from[k].At.V) {
				match[i] = j
			}
		}
		if k := match[i]; k >= 0 {
			used[k] = true
		}
	}
	var changed []string
	for i, st := range to {
		k := match[i]
		if k < 0 {
			continue
		}
		f := from[k]
		if f.At != st.At {
			changed = append(changed, fmt.Sprintf("moved %s: starts at %s TTLs, not %s", st.Do, st.At, f.At))
		}
		if was, is := ttls(f.Until.V-f.At.V), ttls(st.Until.V-st.At.V); !f.Until.IsZero() && was != is {
			changed = append(changed, fmt.Sprintf("shortened %s: lasts %s TTLs, not %s", st.Do, is, was))
		}
	}
	for k, f := range from {
		if !used[k] {
			out = append(out, "removed "+words(scenario.Plan{f}))
		}
	}
	out = append(out, changed...)
	if clientsTo != clientsFrom {
		out = append(out, fmt.Sprintf("clients: %d, not %d", clientsTo, clientsFrom))
	}
	return out
}

// write saves shrink.md and shrink.json beside scenario.json.
func (r *Result) write() error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Shrink of %s / %s\n\n", r.Story, r.Lock)
	fmt.Fprintf(&b, "From %d faults and %d clients to %d faults and %d clients; the smallest showed %s in %d of %d replays.\n\n",
		Faults(r.From), r.ClientsFrom, Faults(r.To), r.ClientsTo, r.Shows, r.Shown, r.Final)
	b.WriteString("What was removed:\n\n")
	for _, w := range r.Removed {
		fmt.Fprintf(&b, "- %s\n", w)
	}
	fmt.Fprintf(&b, "\nEvery try (a candidate is kept when enough of its replays show %s):\n\n| change | shown | kept |\n|---|---|---|\n", r.Shows)
	for _, t := range r.Tries {
		fmt.Fprintf(&b, "| %s | %d of %d | %v |\n", strings.ReplaceAll(t.Change, "|", "\\|"), t.Shown, t.Runs, t.Kept)
	}
	fmt.Fprintf(&b, "\nReplay it: `go run ./cmd/run -scenario-file %s -lock %s`\n", filepath.Join(r.Dir, "scenario.json"), r.Lock)
	if err := os.WriteFile(filepath.Join(r.Dir, "shrink.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.Dir, "shrink.json"), j, 0o644)
}
