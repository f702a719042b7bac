package main

// The matrix: every (scenario, lock) pair the flags select, run side by
// side, each judged against its expectation.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// matrixMode is what run does when no other mode is named. -runs is the
// one flag it refuses that is not a mode's own: it counts a sweep's or a
// shrink's runs, and a pair runs once.
var matrixMode = mode{takes: slices.Concat(runFlags, []string{"scenario", "pairs", "service", "language", "shard", "probe", "v", "fresh"}),
	run: func(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
		return runMatrix(ctx, f, nil, stdout, stderr)
	}}

// matrixRun is a matrix under way: its pairs, what each was planned at,
// and the entry each ended with.
type matrixRun struct {
	f     *flags
	base  engine.Options
	told  map[string]*scenario.Scenario
	pairs [][2]string
	plans []pairPlan
	seats int
	tr    *tracker
	// width bounds the seats the matrix's first runs hold, by what they
	// measure (width.go).
	width *width
	// full: the run is the whole matrix, or a shard of a selection, which
	// is what summary.json and the index's grid show; an ad-hoc selection
	// leaves them alone.
	full   bool
	result report.Matrix

	noting      sync.Mutex
	interrupted []string
	// rerun lists the starved pairs run a second time, and where each
	// one's first run is; again says the pairs run now are those.
	rerun []string
	again bool
}

// runMatrix runs the pairs f selects, of the stories told (a scenario
// file's) or else the catalogue's, and says how each ended.
func runMatrix(ctx context.Context, f *flags, told map[string]*scenario.Scenario, stdout, stderr io.Writer) int {
	m := &matrixRun{f: f, told: told, base: f.runOptions(stdout)}
	if f.probe != "" {
		p, err := scenario.ParseProbe(f.probe)
		if err != nil {
			fmt.Fprintf(stderr, "run: -probe: %v\n", err)
			return 2
		}
		m.base.Probe = &p
	}
	m.full = f.scenarios == "all" && f.lockNames == "" && f.pairs == "" && told == nil || f.shard != ""
	var err error
	if m.pairs, err = m.selectPairs(stdout); err == nil {
		err = m.resolve()
	}
	if err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 2
	}
	m.sayPlan(stdout)
	if !f.fresh {
		// One kept topology per seat: the pairs of a topology run one
		// after another (runOrder), as many side by side as there are
		// seats, each handing its servers to the next.
		m.base.Pool = cluster.NewPool(m.seats)
		defer m.base.Pool.Close()
		for key, n := range m.topologies() {
			m.base.Pool.Want(key, n)
		}
	}
	// One pair asked for by name is looked at, not tallied: its block is
	// printed as with -v.
	m.tr = newTracker(stdout, stderr, m.plans, f.parallel, m.seats, isTerminal(stdout), f.verbose || len(m.pairs) == 1)
	m.width = newWidth(m.seats, m.tr.printf)
	order := runOrder(m.plans)
	m.tr.queue = slices.Clone(order)
	m.sayEstimate(stdout)
	m.result = report.Matrix{Started: time.Now(), Seed: f.seed, Shard: f.shard, Entries: make([]report.Entry, len(m.pairs))}
	// At most -parallel runs at once. A story whose verdict hangs on
	// timing waits for the machine alone in engine.Run, whatever runs
	// beside it.
	engine.Spread(ctx, f.parallel, len(order), func(k int) { m.runPair(ctx, order[k]) })
	m.runStarvedAgain(ctx)
	m.tr.stop()
	wall := time.Since(m.result.Started)
	if len(m.interrupted) > 0 || ctx.Err() != nil {
		for _, dir := range m.interrupted {
			fmt.Fprintf(stderr, "run: interrupted; partial history in %s/history.jsonl\n", dir)
		}
		_ = report.WriteIndex(f.out)
		return 130
	}
	return m.end(wall, stdout, stderr)
}

// topologies counts the matrix's pairs by the topology the pool keeps
// for them.
func (m *matrixRun) topologies() map[string]int {
	n := map[string]int{}
	for _, p := range m.plans {
		if p.topology != "" {
			n[p.topology]++
		}
	}
	return n
}

// runOrder is the order the pairs start in: those that take more than a
// seat first, then those that take one, then those that take the machine
// alone, each in the plan's order but with the pairs of one kept
// topology together (in the place of its first), so that each hands its
// servers to the next at once rather than leave them idle, beside other
// pairs, until a later story's pair of its kind.
//
// A pair waits for its seats holding those it has taken, so every wider
// pair that follows a narrower one keeps a seat idle until a second
// empties; among their like, a pair that ends frees what the next takes.
// An alone pair waits for every seat to empty, and a seat emptied for it
// stays idle until the other's pair ends; met among the others, each
// alone pair costs that drain once, and together, after them, the drain
// is paid once, behind the one-seat pairs, the shortest. The results are
// listed in the plan's order all the same.
func runOrder(plans []pairPlan) []int {
	var wide, narrow, alone []int
	for i, p := range plans {
		switch {
		case p.alone:
			alone = append(alone, i)
		case p.take > 1:
			wide = append(wide, i)
		default:
			narrow = append(narrow, i)
		}
	}
	return slices.Concat(byTopology(plans, wide), byTopology(plans, narrow), byTopology(plans, alone))
}

// byTopology is order with each kept topology's pairs moved up to its
// first, the rest in place. A topology's pairs are dealt story by story
// (each story's first pair, then each one's second, ...): the pairs of
// one story crash, restart or fill their servers at the same moments of
// their runs, and side by side those moments come at once to a machine
// whose other pairs are at other points of theirs.
func byTopology(plans []pairPlan, order []int) []int {
	// rank is where a pair goes: its own place, or its topology's first;
	// nth how many of its story's pairs of that topology come before it.
	rank, nth := make([]int, len(order)), make([]int, len(order))
	first := map[string]int{}
	dealt := map[[2]string]int{}
	for k, i := range order {
		rank[k] = k
		if key := plans[i].topology; key != "" {
			if f, ok := first[key]; ok {
				rank[k] = f
			} else {
				first[key] = k
			}
			story := [2]string{key, plans[i].scenario}
			nth[k] = dealt[story]
			dealt[story]++
		}
	}
	places := make([]int, len(order))
	for k := range places {
		places[k] = k
	}
	slices.SortStableFunc(places, func(a, b int) int { return cmp.Or(rank[a]-rank[b], nth[a]-nth[b]) })
	out := make([]int, len(order))
	for k, place := range places {
		out[k] = order[place]
	}
	return out
}

// selectPairs is the pairs of the flags' plan that fall in -shard, which
// it leaves as "i/n" (the shard it ran, when -shard came from the
// environment).
func (m *matrixRun) selectPairs(stdout io.Writer) ([][2]string, error) {
	f := m.f
	o := only{split(f.services), split(f.languages)}
	var pairs [][2]string
	var err error
	if f.pairs != "" {
		pairs, err = planPairs(f, o)
	} else {
		pairs, err = plan(f.scenarios, f.lockNames, o, m.told)
	}
	if err != nil || f.shard == "" {
		return pairs, err
	}
	given := f.shard
	i, n, err := parseShard(given, getenv)
	if err != nil {
		return nil, fmt.Errorf("-shard %s: %v", given, err)
	}
	if f.shard = fmt.Sprintf("%d/%d", i, n); f.shard != given {
		fmt.Fprintf(stdout, "-shard %s: shard %s, from the environment\n", given, f.shard)
	}
	var mine [][2]string
	for k, p := range pairs {
		if k%n == i-1 {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("-shard %s: no pair falls in this shard", f.shard)
	}
	return mine, nil
}

// options is the engine's options for pair i.
//
// A starved pair's second run takes the whole machine-wide room: its first
// was no evidence because the machine ran late, and a run of another
// process's beside it (a test's, another matrix's) is load it can be
// spared.
func (m *matrixRun) options(i int) engine.Options {
	o := m.base
	p := m.pairs[i]
	o.Scenario, o.Lock, o.Told = p[0], p[1], m.told[p[0]]
	o.Alone = o.Alone || m.again
	return o
}

// resolve checks every pair before any starts, so a typo fails in a
// second; what engine.Resolve fills in is what the time left is
// estimated from.
func (m *matrixRun) resolve() error {
	m.seats = engine.Seats()
	m.plans = make([]pairPlan, len(m.pairs))
	for i, p := range m.pairs {
		plan, err := engine.Resolve(m.options(i))
		if err != nil {
			return err
		}
		m.plans[i] = pairPlan{scenario: p[0], lock: p[1], limit: plan.Options.TimeLimit, alone: plan.Alone(), take: plan.Seats(), kind: plan.Lock.ServerKind(),
			topology: plan.PoolKey()}
	}
	return nil
}

// sayPlan says what each omitted flag came to, so a run is never a
// surprise.
func (m *matrixRun) sayPlan(stdout io.Writer) {
	f := m.f
	from := func(name, dflt string) string {
		if f.has(name) {
			return ""
		}
		return " (" + dflt + ")"
	}
	var sizes []string
	for _, name := range []string{"clients", "ttl", "time-limit"} {
		if f.has(name) {
			sizes = append(sizes, "-"+name+" "+f.set.Lookup(name).Value.String())
		}
	}
	fmt.Fprintf(stdout, "seed %d%s; %d pair(s), %d at a time%s; clients, ttl and time limit: %s\n",
		f.seed, from("seed", "from the clock"), len(m.pairs), f.parallel, from("parallel", "the room's seats"),
		cmp.Or(strings.Join(sizes, ", "), "each scenario's own (a run's block and its results.json say them)"))
}

// sayEstimate says how long a matrix of more than one pair will take.
func (m *matrixRun) sayEstimate(stdout io.Writer) {
	if len(m.pairs) < 2 {
		return
	}
	alone := ""
	if slices.ContainsFunc(m.plans, func(p pairPlan) bool { return p.alone }) {
		alone = ", the stories that run alone by themselves"
	}
	fmt.Fprintf(stdout, "about %s to go: each pair's time limit and ~%.1f s to start and judge it, %d at a time%s\n",
		minSec(m.tr.estimate()), priorOverhead.total().Seconds(), min(m.f.parallel, m.seats), alone)
}

// runPair runs pair i and puts its entry in the matrix. What the run logs
// goes to its block, which the tracker prints whole when the run ends (if
// it did not match, or with -v), so runs side by side do not interleave.
func (m *matrixRun) runPair(ctx context.Context, i int) {
	p := m.pairs[i]
	o := m.options(i)
	var log bytes.Buffer
	o.Log = &log
	o.Progress = m.tr.progress(i)
	leave, at := func() {}, 0
	if !m.again {
		var err error
		if leave, at, err = m.width.enter(ctx, m.plans[i].seats(m.seats)); err != nil {
			return // never started, as a pair Spread did not reach
		}
	}
	m.tr.begin(i)
	res, err := engine.Run(ctx, o)
	// Run gives its seats up as it returns: what it held ends here.
	freed := time.Now()
	leave()
	if !m.again && err == nil {
		share := lateness.Share(res.Lateness, res.Limits)
		if res.Outcome == verdict.Starved {
			share = max(share, 1)
		}
		m.width.measure(m.plans[i].name(), share, at)
	}
	if errors.Is(err, engine.ErrInterrupted) {
		// Not judged, but listed: the index shows it was cut short.
		m.tr.forget(i)
		res.Outcome = verdict.Interrupted
		_ = res.Save()
		m.noting.Lock()
		m.interrupted = append(m.interrupted, res.Dir)
		m.noting.Unlock()
		return
	}
	if err == nil {
		err = report.Write(res)
	}
	m.tr.finish(i, res, err, log.Bytes(), freed)
	m.result.Entries[i] = report.EntryOf(p[0], p[1], res, err)
}

// runStarvedAgain runs each starved or vacuous pair once more. A starved
// run is no evidence either way: the machine, not the lock, ran late. A
// vacuous one did not tell its story, and beside other runs the likeliest
// reason is theirs: a loaded machine can slow a lock's tries past its own
// timeouts (redsync cuts each off at 5% of the TTL) while the meter's
// limits, a fifth of a TTL, still hold, and a client that waits out the
// story's fault for the lock meets none of it. It runs again after the
// others and one at a time, and says so; its first run stays in -out for
// anyone who asks why, and a second vacuous run is the verdict.
func (m *matrixRun) runStarvedAgain(ctx context.Context) {
	var starved []int
	for i, e := range m.result.Entries {
		if e.Outcome == verdict.Starved || e.Outcome == verdict.Vacuous {
			starved = append(starved, i)
		}
	}
	if len(starved) > 0 && ctx.Err() == nil {
		m.tr.runAgain(starved)
	}
	m.again = true
	for _, i := range starved {
		if ctx.Err() != nil {
			break
		}
		e := m.result.Entries[i]
		m.tr.printf("%s / %s was %s (see above): running it once more, alone on the machine, now that the other runs are done\n", e.Scenario, e.Lock, e.Outcome)
		m.rerun = append(m.rerun, fmt.Sprintf("%s/%s (first run: %s)", e.Scenario, e.Lock, e.Dir))
		m.runPair(ctx, i)
	}
}

// end prints the matrix's tables and counts and writes its summary and
// index: exit 0 when every pair matched, else 1.
func (m *matrixRun) end(wall time.Duration, stdout, stderr io.Writer) int {
	out := m.f.out
	if len(m.pairs) > 1 {
		m.printTables(wall, stdout)
	}
	var err error
	if m.full {
		err = report.WriteSummary(out, m.result)
		if err == nil {
			err = writeSeats(out, m.plans, m.tr.use, m.seats, wall, m.result.Started)
		}
	}
	if err == nil {
		err = report.WriteIndex(out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "run: %v\n", err)
		return 1
	}
	mx := &m.result
	mx.Count()
	fmt.Fprintf(stdout, "%d of %d runs matched their expectation; open %s\n", mx.Matched, mx.Total, filepath.Join(out, "index.html"))
	if mx.Starved > 0 {
		fmt.Fprintf(stdout, "%d run(s) starved again: the machine ran too late for their verdicts to be evidence (see their lines and blocks above)\n", mx.Starved)
	}
	if mx.Late > 0 {
		fmt.Fprintf(stdout, "%d run(s) ran late and kept their verdict, a fault-free pass or beside a slow lock server (see the table above)\n", mx.Late)
	}
	if s := m.width.summary(); s != "" {
		fmt.Fprintln(stdout, s)
	}
	if len(m.rerun) > 0 {
		fmt.Fprintf(stdout, "%d starved or vacuous run(s) ran again, and the counts are of the second runs: %s\n", len(m.rerun), strings.Join(m.rerun, "; "))
	}
	if mx.Matched < mx.Total {
		return 1
	}
	return 0
}

// printTables prints the seat-seconds, then the pairs a reader must look
// at again. Each pair had its line as it ended; the table repeats, in the
// matrix's order, those that did not match or ran late (all of them with
// -v), last, where the tail of a long log still shows them.
func (m *matrixRun) printTables(wall time.Duration, stdout io.Writer) {
	fmt.Fprintln(stdout)
	seatTable(stdout, m.plans, m.tr.use, m.seats, wall)
	shown := m.result.Entries
	if !m.f.verbose {
		shown = slices.DeleteFunc(slices.Clone(shown), func(e report.Entry) bool { return e.Matched && e.Late == "" })
	}
	if len(shown) > 0 {
		fmt.Fprintln(stdout)
		report.MatrixTable(stdout, shown)
	}
}

// only is what -service and -language keep of a plan: the locks on these
// server kinds, written in these languages (none named: every one).
type only struct{ kinds, languages []string }

// keeps says whether o keeps the lock info describes.
func (o only) keeps(info locks.Info) bool {
	return (len(o.kinds) == 0 || slices.Contains(o.kinds, info.ServerKind())) &&
		(len(o.languages) == 0 || slices.ContainsFunc(o.languages, func(l string) bool { return strings.EqualFold(l, language(info)) }))
}

// language is the language a lock's clients are written in: its
// library's, or Go for this repository's own.
func language(info locks.Info) string {
	if info.Language == "" {
		return "Go"
	}
	return info.Language
}

// check refuses a server kind or a language no lock has.
func (o only) check() error {
	for _, k := range o.kinds {
		if _, err := cluster.LookupKind(k); err != nil {
			return fmt.Errorf("-service %s: no such server kind (one of %s)", k, strings.Join(cluster.Kinds(), ", "))
		}
	}
	var known []string
	for _, n := range locks.Names() {
		info, _ := locks.Lookup(n)
		if l := language(info); !slices.Contains(known, l) {
			known = append(known, l)
		}
	}
	for _, l := range o.languages {
		if !slices.ContainsFunc(known, func(k string) bool { return strings.EqualFold(k, l) }) {
			return fmt.Errorf("-language %s: no lock's clients are written in it (one of %s)", l, strings.Join(known, ", "))
		}
	}
	return nil
}

// plan expands the -scenario and -lock lists into (scenario, lock) pairs.
// A lock named explicitly must apply to every scenario named; with no -lock,
// each scenario runs every lock it has an expectation for. A story in told
// (a scenario file's) is taken from there, not from the catalogue. Only
// the locks o keeps are planned.
func plan(scenarioList, lockList string, o only, told map[string]*scenario.Scenario) ([][2]string, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	names, err := storyNames(scenarioList)
	if err != nil {
		return nil, err
	}
	var pairs [][2]string
	for _, sn := range names {
		s, err := scenario.Lookup(sn)
		if t := told[sn]; t != nil {
			s, err = *t, nil
		}
		if err != nil {
			return nil, err
		}
		ls := split(lockList)
		if len(ls) == 0 && s.Exploration {
			return nil, fmt.Errorf("-scenario %s explores one lock at a time: name it with -lock (one of %s)", sn, strings.Join(locks.Names(), ", "))
		}
		if len(ls) == 0 {
			ls = s.Locks()
		}
		for _, l := range ls {
			lk, err := locks.Lookup(l)
			if err != nil {
				return nil, err
			}
			if _, ok := s.Expect[l]; !ok && scenarioList == "all" {
				continue
			}
			if !o.keeps(lk) {
				continue
			}
			pairs = append(pairs, [2]string{sn, l})
		}
	}
	if len(pairs) == 0 && (len(o.kinds) > 0 || len(o.languages) > 0) {
		return nil, fmt.Errorf("no scenario in %q applies to a lock on %s in %s", scenarioList, orEvery(o.kinds, "every server kind"), orEvery(o.languages, "every language"))
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no scenario in %q applies to lock %q", scenarioList, lockList)
	}
	return pairs, nil
}

// planPairs is the pairs -pairs names, each story/lock, in its order
// and once each: a matrix across stories and locks that no cross of
// -scenario and -lock names (make test's services and libraries), which
// one run deals onto its seats together, each kind's servers kept for
// its next pair, where small matrices one after another would each
// start their own and wait out their own tail. all on either side
// reads as in -scenario and -lock; -service and -language keep what they
// keep of the whole list, as of a cross.
func planPairs(f *flags, o only) ([][2]string, error) {
	if f.has("scenario") || f.has("lock") {
		return nil, errors.New("-pairs names its stories and locks: drop -scenario and -lock")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	var pairs [][2]string
	for _, item := range split(f.pairs) {
		story, lock, ok := strings.Cut(item, "/")
		if !ok || story == "" || lock == "" || strings.Contains(lock, "/") {
			return nil, fmt.Errorf("-pairs %s: want story/lock (all on either side)", item)
		}
		if lock == "all" {
			lock = ""
		}
		ps, err := plan(story, lock, only{}, nil)
		if err != nil {
			return nil, fmt.Errorf("-pairs %s: %v", item, err)
		}
		for _, p := range ps {
			lk, _ := locks.Lookup(p[1]) // plan looked it up
			if o.keeps(lk) && !slices.Contains(pairs, p) {
				pairs = append(pairs, p)
			}
		}
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("-pairs %q names no pair on %s in %s", f.pairs, orEvery(o.kinds, "every server kind"), orEvery(o.languages, "every language"))
	}
	return pairs, nil
}

// storyNames is the stories -scenario names: every one but the
// explorations (random, asked for by name) for all.
func storyNames(scenarioList string) ([]string, error) {
	if slices.Contains(split(scenarioList), "all") && scenarioList != "all" {
		return nil, errors.New(`-scenario all runs every story and cannot be combined with other names`)
	}
	var names []string
	if scenarioList == "all" {
		for _, n := range scenario.Names() {
			if s, _ := scenario.Lookup(n); !s.Exploration {
				names = append(names, n)
			}
		}
	} else {
		names = split(scenarioList)
	}
	if len(names) == 0 {
		return nil, errors.New("-scenario is empty")
	}
	return names, nil
}

// orEvery is names joined, or every when there are none.
func orEvery(names []string, every string) string {
	if len(names) == 0 {
		return every
	}
	return strings.Join(names, ", ")
}
