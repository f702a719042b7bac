package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/locktorture/locktorture/history"
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

// randomFault is one kind of fault a random schedule draws: what it does
// (drawing its target from pick as it is drawn: a node to isolate, pause
// or kill, a client to pause or to slow, a command boundary to trap), and
// whether it is undone at its span's end.
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

// randomFaults are the faults a random schedule of e's topology draws
// from. A slice, not a map: its order is part of every seed's schedule.
func randomFaults(e *Env) []randomFault {
	node := func(pick *rand.Rand) string { return e.Nodes[pick.IntN(len(e.Nodes))] }
	client := func(pick *rand.Rand) string { return fmt.Sprint(pick.IntN(len(e.Clients))) }
	partition := func(g nemesis.Grudge) Action { return Action{Do: "partition", Cuts: cutsOf(g, e.Clients)} }
	faults := []randomFault{{lasts: true,
		draw: func(pick *rand.Rand) Action { return partition(nemesis.IsolateNode(node(pick), e.Clients)) }}}
	if len(e.Nodes) >= 3 {
		for _, shape := range []func([]string, []string) nemesis.Grudge{nemesis.Halves, nemesis.MajoritiesRing, nemesis.Bridge} {
			faults = append(faults, randomFault{lasts: true,
				draw: func(*rand.Rand) Action { return partition(shape(e.Nodes, e.Clients)) }})
		}
	}
	faults = append(faults,
		randomFault{lasts: true, draw: func(pick *rand.Rand) Action { return Action{Do: "pause-node", Node: node(pick)} }},
		randomFault{lasts: true, draw: func(pick *rand.Rand) Action { return Action{Do: "kill", Node: node(pick)} }},
		randomFault{draw: func(pick *rand.Rand) Action {
			return Action{Do: "pause-client", Client: client(pick), For: TTLs(2)}
		}})
	// Traps at a command boundary drawn from the seed: where a lock that
	// sends two commands for one step (GET then DEL) is caught between
	// them. Either side of a command is drawn: after its reply, before the
	// lock sees it, and before it is sent, after whatever the client
	// decided on its own since the last reply (a check of its clock), which
	// is not the same place. A pause inside an acquire and one inside a
	// release are faults of their own; a crash is one more. They catch
	// whichever client gets there first: one client named in advance can
	// lose every race for the lock while the trap is armed, and a trap that
	// never springs is a fault drawn and not done. Package explore tries
	// every boundary in turn instead of drawing.
	boundary := func(pick *rand.Rand, in string) *nemesis.Command {
		reply := pick.IntN(2) == 0
		return &nemesis.Command{In: in, Nth: 1 + pick.IntN(2), Reply: reply}
	}
	for _, in := range []string{history.Acquire, history.Release} {
		faults = append(faults, randomFault{lasts: true,
			draw: func(pick *rand.Rand) Action {
				return armed(Trap{Command: boundary(pick, in), Client: "any", Pause: TTLs(2)})
			}})
	}
	faults = append(faults,
		randomFault{lasts: true, draw: func(pick *rand.Rand) Action {
			in := []string{history.Acquire, history.Release}[pick.IntN(2)]
			return armed(Trap{Command: boundary(pick, in), Client: "any", Crash: true})
		}},
		randomFault{lasts: true, draw: func(pick *rand.Rand) Action {
			return Action{Do: "latency", Client: client(pick), Node: "store", For: TTLs(0.5), Jitter: TTLs(0.25)}
		}})
	return faults
}

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
