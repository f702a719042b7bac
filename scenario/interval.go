package scenario

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Interval is Jepsen's nemesis interval, for a user's own system: faults
// of the kinds named, one every Every, each lasting a draw of For, for the
// whole run, then a final heal. The seed draws every time, length, kind
// and target, so a run replays from it; the plan it draws is the run's
// told story (scenario.json) as random's is.
type Interval struct {
	// Faults are the kinds to apply (IntervalKinds), drawn with equal
	// chances.
	Faults []string `json:"faults"`
	// Every is the time from one fault's start to the next one's (a fault
	// still on when the next is due delays it: faults never overlap, so
	// each one's effect is its own).
	Every workloads.Dist `json:"every"`
	// For is how long each fault lasts: a pause, a partition, a node down;
	// for a clock, how far it jumps; for latency, the stall.
	For workloads.Dist `json:"for"`
}

// intervalKind is one kind of fault an interval run applies: the actions
// it takes at its start (until its end, where it lasts), and whether it
// needs lock nodes of the run's own or their clocks faked.
type intervalKind struct {
	help  string
	nodes bool
	clock bool
	steps func(e *Env, pick *rand.Rand, at, until Num) []Step
}

// intervalKinds are the kinds of fault an interval run applies, by the
// name a user gives them.
var intervalKinds = map[string]intervalKind{
	"pause": {help: "a client stopped whole for the length (a GC pause)",
		steps: func(e *Env, pick *rand.Rand, at, until Num) []Step {
			return []Step{{At: at, Action: Action{Do: "pause", Client: pickClient(e, pick), For: TTLs(until.V - at.V)}}}
		}},
	"crash": {help: "the first client to reach its write inside the critical section in the window is killed there",
		steps: func(_ *Env, _ *rand.Rand, at, until Num) []Step {
			return []Step{{At: at, Until: until, Action: armed(Trap{Point: workloads.BeforeWrite, Client: "any", Crash: true})}}
		}},
	"node-pause": {help: "a lock node stopped (SIGSTOP) for the length", nodes: true,
		steps: func(e *Env, pick *rand.Rand, at, until Num) []Step {
			return []Step{{At: at, Until: until, Action: Action{Do: "node-pause", Node: pickNode(e, pick)}}}
		}},
	"kill": {help: "a lock node killed (kill -9) and restarted after the length", nodes: true,
		steps: func(e *Env, pick *rand.Rand, at, until Num) []Step {
			return []Step{{At: at, Until: until, Action: Action{Do: "kill", Node: pickNode(e, pick)}}}
		}},
	"partition": {help: "a lock node cut off from every client for the length", nodes: true,
		steps: func(e *Env, pick *rand.Rand, at, until Num) []Step {
			return []Step{{At: at, Until: until, Action: partitionOf(e, nemesis.IsolateNode(pickNode(e, pick), e.Clients))}}
		}},
	"latency": {help: "a client's links to the lock nodes delay everything by the length, for the length (a network stall)", nodes: true,
		steps: func(e *Env, pick *rand.Rand, at, until Num) []Step {
			client, d := pickClient(e, pick), TTLs(until.V-at.V)
			var out []Step
			for _, n := range e.Nodes {
				out = append(out, Step{At: at, Until: until, Action: Action{Do: "latency", Client: client, Node: n, For: d}})
			}
			return out
		}},
	"clock": {help: "a lock node's clock jumps forward by the length (libfaketime)", nodes: true, clock: true,
		steps: func(e *Env, pick *rand.Rand, at, until Num) []Step {
			return []Step{{At: at, Action: Action{Do: "clock-bump", Node: pickNode(e, pick), By: TTLs(until.V - at.V)}}}
		}},
}

// IntervalKinds lists the kinds of fault an interval run applies, with
// what each does, sorted.
func IntervalKinds() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(intervalKinds)) {
		out = append(out, name+": "+intervalKinds[name].help)
	}
	return out
}

// lookupInterval is the interval kind named f, or an error that lists
// them.
func lookupInterval(f string) (intervalKind, error) {
	k, ok := intervalKinds[f]
	if !ok {
		return k, fmt.Errorf("fault kind %q: want some of %s", f, intervalNames())
	}
	return k, nil
}

// intervalNames are the kinds' names, sorted, as a list.
func intervalNames() string { return strings.Join(slices.Sorted(maps.Keys(intervalKinds)), ", ") }

// ParseFaults reads a comma-separated list of interval kinds.
func ParseFaults(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if _, err := lookupInterval(f); err != nil {
			return nil, err
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Check says in one line what is wrong with iv for a lock whose nodes
// number nodes (0: it has none of its own, as the in-process controls).
func (iv Interval) Check(nodes int) error {
	switch {
	case len(iv.Faults) == 0:
		return fmt.Errorf("an interval run needs fault kinds (-faults): some of %s", intervalNames())
	case iv.Every.IsZero() || iv.Every.MeanOf() <= 0:
		return fmt.Errorf("an interval run needs a positive interval (-fault-every 2s, 1s..3s or exp:2s)")
	case iv.For.IsZero():
		return fmt.Errorf("an interval run needs the faults' lengths (-fault-for 500ms or 200ms..1s)")
	}
	for _, f := range iv.Faults {
		k, err := lookupInterval(f)
		if err != nil {
			return err
		}
		if k.nodes && nodes == 0 {
			return fmt.Errorf("fault kind %s acts on the lock's server, and this lock has none", f)
		}
	}
	if err := iv.Every.Check(); err != nil {
		return fmt.Errorf("-fault-every %v", err)
	}
	if err := iv.For.Check(); err != nil {
		return fmt.Errorf("-fault-for %v", err)
	}
	return nil
}

// Clock says whether iv moves a node's clock: its lock nodes then run
// under libfaketime.
func (iv Interval) Clock() bool {
	return slices.ContainsFunc(iv.Faults, func(f string) bool { return intervalKinds[f].clock })
}

// intervalQuiet is how long, in TTLs, the end of an interval run has no
// fault: liveness is judged on a healed system, given time to recover.
const intervalQuiet = 2

// intervalPlan draws an interval run's plan from the seed: from a first
// interval on, a fault of a kind drawn from iv's every Every (drawn), no
// sooner than the last one ended, each lasting a draw of For, until one
// would end within intervalQuiet TTLs of the time limit; then a heal of
// everything.
func intervalPlan(e *Env) (Plan, error) {
	iv := e.Interval
	if iv == nil {
		return nil, fmt.Errorf("scenario interval needs its faults (-faults, -fault-every, -fault-for)")
	}
	pick := rand.New(rand.NewPCG(uint64(e.Seed), 0x1e7e4))
	ttls := func(d time.Duration) Num { return TTLs(float64(d) / float64(e.TTL)) }
	healAt := e.TimeLimit - e.TTLs(intervalQuiet)
	var p Plan
	for t, free := iv.Every.Draw(pick), time.Duration(0); ; t += max(iv.Every.Draw(pick), time.Millisecond) {
		t = max(t, free)
		kind := intervalKinds[iv.Faults[pick.IntN(len(iv.Faults))]]
		d := max(iv.For.Draw(pick), time.Millisecond).Round(time.Millisecond)
		if t+d > healAt {
			break
		}
		at := t.Round(time.Millisecond)
		p = append(p, kind.steps(e, pick, ttls(at), ttls(at+d))...)
		free = t + d
	}
	return append(p, Step{At: ttls(healAt), Action: Action{Do: "heal-all"}}), nil
}

// IntervalStory is the story of faults on an interval, which a run tells
// with its own (engine.Options.Interval).
const IntervalStory = "interval"

func intervalStory(add func(Scenario)) {
	add(Scenario{
		Name: IntervalStory,
		Story: "Your system's faults: kinds you name (-faults), one every -fault-every, each lasting a draw of -fault-for, " +
			"for the whole run, then a final heal; the seed replays it. Read the figures (writes lost, time with two holders) beside the verdict.",
		TimeLimitTTLs: 30, MinTimeLimitTTLs: 6,
		Exploration: true,
		Rules: []Rule{expect(anyLock, verdict.Expectation{Outcome: verdict.PromiseKept,
			Why: "your system's faults, judged against the lock's own fault model: a broken promise under faults it claims to survive is a finding (the seed replays it); the figures say how much the others cost"})},
		Draw: intervalPlan,
	})
}
