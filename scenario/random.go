package scenario

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
)

func randomStory(add func(Scenario)) {
	add(Scenario{
		Name: "random",
		Story: "Exploration: a seeded random schedule of the faults the topology allows (partitions, node pauses, kills, " +
			"client pauses, latency), then a final heal; the same seed replays the same schedule.",
		TimeLimitTTLs: 30, MinTimeLimitTTLs: 8,
		Exploration: true,
		// Holders work 0.1 TTL, so the lock is held most of the time, as in
		// real use: a late command from a client that lost its lease (a
		// DEL after a GET, a renewal) then lands on someone's lock instead
		// of on a free key.
		HoldTTLs: 0.1,
		Rules: []Rule{expect(anyLock, verdict.Expectation{Outcome: verdict.PromiseKept,
			Why: "exploration, judged against the lock's own fault model: a broken promise under faults it claims to survive is a finding (the seed replays it); under others it is expected"})},
		Draw: randomPlan,
	})
}

// randomFault is one fault a random schedule of a run draws from: a
// draw of an action's entry, bound to the run.
type randomFault struct {
	draw func(pick *rand.Rand) Action
	// lasts says the action is undone at the span's end (Step.Until);
	// otherwise it has a length of its own.
	lasts bool
}

// randomPlan draws the random scenario's faults from the seed, as a plan:
// the faults the topology allows, alternating with quiet periods of about
// two TTLs, then a final heal that undoes everything (so liveness is
// judged on a healed system). Every target is drawn here, so the plan, a
// run's told story, replays the run's schedule exactly.
func randomPlan(e *Env) (Plan, error) {
	faults := randomFaults(e)
	spans, healAt, err := nemesis.Random(len(faults), nemesis.RandomOptions{Seed: uint64(e.Seed), Duration: e.TimeLimit, Interval: e.TTLs(2)})
	if err != nil {
		return nil, err
	}
	// A stream of its own for picking targets, so the fault sequence
	// (drawn by nemesis.Random from the same seed) does not shift with it.
	pick := rand.New(rand.NewPCG(uint64(e.Seed), 0x5eed))
	ttls := func(d time.Duration) Num { return TTLs(float64(d) / float64(e.TTL)) }
	var p Plan
	for _, s := range spans {
		f := faults[s.Fault]
		st := Step{At: ttls(s.Start), Action: f.draw(pick)}
		if f.lasts {
			st.Until = ttls(s.Stop)
		}
		p = append(p, st)
	}
	return append(p, Step{At: ttls(healAt), Action: Action{Do: "heal-all"}}), nil
}

// randomFaults are the faults a random schedule of e's run draws from:
// every action's draws (its entry's, in faults_*.go) that e allows, in
// the order of their ranks. The order and the length are part of every
// seed's schedule: nemesis.Random draws the n-th of them.
func randomFaults(e *Env) []randomFault {
	var out []randomFault
	for _, d := range randomDraws() {
		if d.only != nil && !d.only(e) {
			continue
		}
		out = append(out, randomFault{lasts: d.lasts, draw: func(pick *rand.Rand) Action { return d.action(e, pick) }})
	}
	return out
}

// randomDraws are every action's draws, by rank.
func randomDraws() []draw {
	var out []draw
	for _, name := range ActionNames() {
		out = append(out, actions[name].draws...)
	}
	slices.SortFunc(out, func(a, b draw) int { return cmp.Compare(a.rank, b.rank) })
	return out
}

// pickNode draws one of the lock nodes from the seed's stream.
func pickNode(e *Env, pick *rand.Rand) string { return e.Nodes[pick.IntN(len(e.Nodes))] }

// pickClient draws a client, by its index, from the seed's stream.
func pickClient(e *Env, pick *rand.Rand) string { return fmt.Sprint(pick.IntN(len(e.Clients))) }

// cutsOf writes a grudge among clients as a partition's cuts, in the
// clients' order.
func cutsOf(g nemesis.Grudge, clients []string) []Cut {
	var cuts []Cut
	for i, c := range clients {
		if nodes := g[c]; len(nodes) > 0 {
			cuts = append(cuts, Cut{From: fmt.Sprintf("client %d", i), Nodes: slices.Clone(nodes)})
		}
	}
	return cuts
}
