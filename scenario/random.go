package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
)

func init() {
	add(Scenario{
		Name: "random",
		Story: "Exploration: a seeded random schedule of the faults the topology allows (partitions, node pauses, kills, " +
			"client pauses, latency), then a final heal; the same seed replays the same schedule.",
		TimeLimitTTLs: 30, MinTimeLimitTTLs: 8,
		Random: true,
		// Holders work 0.1 TTL, so the lock is held most of the time, as in
		// real use: a late command from a client that lost its lease (a
		// DEL after a GET, a renewal) then lands on someone's lock instead
		// of on a free key.
		HoldTTLs: 0.1,
		Expect: expect(locks.Names(), Expectation{Outcome: PromiseKept,
			Why: "exploration, judged against the lock's own fault model: a broken promise under faults it claims to survive is a finding (the seed replays it); under others it is expected"}),
		Schedule: randomSchedule,
	})
}

// randomSchedule draws the random scenario's faults from the seed: the
// faults the topology allows, alternating with quiet periods of about two
// TTLs, then a final heal that undoes everything (so liveness is judged on
// a healed system).
func randomSchedule(e *Env) (nemesis.Schedule, error) {
	// A stream of its own for picking targets, so the fault sequence (drawn
	// by nemesis.Random from the same seed) does not shift with it.
	pick := rand.New(rand.NewPCG(uint64(e.Seed), 0x5eed))
	node := func() string { return e.Nodes[pick.IntN(len(e.Nodes))] }
	client := func() int { return pick.IntN(len(e.Clients)) }
	n := e.Nemesis
	var faults []nemesis.Fault
	{
		var target string
		faults = append(faults, nemesis.Fault{Name: "isolate a lock node",
			Start: func(context.Context) error {
				target = node()
				return n.Partition(nemesis.IsolateNode(target, e.Clients))
			},
			Stop: func(context.Context) error { return n.Heal() }})
	}
	if len(e.Nodes) >= 3 {
		// A slice, not a map: the order of the faults is part of the seed's
		// schedule.
		shapes := []struct {
			name  string
			shape func([]string, []string) nemesis.Grudge
		}{{"partition halves", nemesis.Halves}, {"partition majorities ring", nemesis.MajoritiesRing}, {"partition bridge", nemesis.Bridge}}
		for _, sh := range shapes {
			faults = append(faults, nemesis.Fault{Name: sh.name,
				Start: func(context.Context) error { return n.Partition(sh.shape(e.Nodes, e.Clients)) },
				Stop:  func(context.Context) error { return n.Heal() }})
		}
	}
	{
		var target string
		faults = append(faults, nemesis.Fault{Name: "pause a lock node",
			Start: func(context.Context) error { target = node(); return n.PauseNode(target) },
			Stop:  func(context.Context) error { return n.ResumeNode(target) }})
	}
	{
		var target string
		faults = append(faults, nemesis.Fault{Name: "kill a lock node",
			Start: func(context.Context) error { target = node(); return n.KillNode(target) },
			Stop:  func(ctx context.Context) error { return n.RestartNode(ctx, target, 0) }})
	}
	faults = append(faults, nemesis.Fault{Name: "pause a client for 2 TTLs",
		Start: func(context.Context) error { e.Gate.PauseClient(client(), e.TTLs(2)); return nil },
		Stop:  func(context.Context) error { return nil }})
	// Traps at a command boundary drawn from the seed: where a lock that
	// sends two commands for one step (GET then DEL) is caught between them.
	// A pause stands after a reply, before the lock sees it (before the
	// next command is nearly the same place), inside an acquire or a
	// release, each a fault of its own; a crash may also stand before a
	// command, which then never leaves. They catch whichever client gets
	// there first: one client named in advance can lose every race for the
	// lock while the trap is armed (a loaded machine did so), and a trap
	// that never springs is a fault drawn and not done.
	boundary := func(in string, reply bool) *nemesis.Command {
		return &nemesis.Command{In: in, Nth: 1 + pick.IntN(2), Reply: reply}
	}
	for _, in := range []string{history.Acquire, history.Release} {
		faults = append(faults, nemesis.Fault{Name: "pause the first client between the commands of its " + in + " for 2 TTLs",
			Start: func(context.Context) error {
				e.Gate.Arm(nemesis.Trap{Command: boundary(in, true), Client: nemesis.AnyClient, Pause: e.TTLs(2)})
				return nil
			},
			Stop: func(context.Context) error { e.Gate.Disarm(); return nil }})
	}
	faults = append(faults, nemesis.Fault{Name: "crash the first client at a command boundary",
		Start: func(context.Context) error {
			in := []string{history.Acquire, history.Release}[pick.IntN(2)]
			e.Gate.Arm(nemesis.Trap{Command: boundary(in, pick.IntN(2) == 0), Client: nemesis.AnyClient, Crash: true})
			return nil
		},
		Stop: func(context.Context) error { e.Gate.Disarm(); return nil }})
	{
		var peer string
		faults = append(faults, nemesis.Fault{Name: "slow a client's store link",
			Start: func(context.Context) error {
				peer = e.Clients[client()]
				return n.Latency(peer, "store", e.TTLs(0.5), e.TTLs(0.25))
			},
			Stop: func(context.Context) error { return n.Latency(peer, "store", 0, 0) }})
	}
	heal := func(ctx context.Context) error {
		e.Gate.Disarm()
		if err := n.Heal(); err != nil {
			return err
		}
		for _, name := range e.Nodes {
			nd := e.Nemesis.Node(name)
			switch {
			case nd == nil:
				return fmt.Errorf("no node %s", name)
			case nd.PID() == 0:
				if err := n.RestartNode(ctx, name, 0); err != nil {
					return err
				}
			case nd.Paused():
				if err := n.ResumeNode(name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return nemesis.Random(faults, nemesis.RandomOptions{Seed: uint64(e.Seed), Duration: e.TimeLimit, Interval: e.TTLs(2), Heal: heal})
}

// PromiseKept is what random exploration expects of every lock: its promise
// kept under the faults it claims to survive (locks.Info.Claims).
const PromiseKept = "promise-kept"

// faultKinds names the kinds of fault the nemesis carried out in ops, in
// the lock fault-model's words.
func faultKinds(ops []history.Op) []locks.Fault {
	kinds := map[string]locks.Fault{
		"partition-start": locks.Partition, "latency-start": locks.Latency, "node-pause": locks.NodePause,
		"kill": locks.NodeCrash, "power-loss": locks.NodeCrash, "clock-bump": locks.NodeClock,
		"clock-strobe-start": locks.NodeClock, history.Pause: locks.ClientPause, "stall": locks.ClientPause,
		"crash": locks.ClientCrash, "clock-skew": locks.ClientClock, "promote": locks.Failover,
	}
	seen := map[locks.Fault]bool{}
	for _, op := range ops {
		if k, ok := kinds[op.F]; ok && op.Process == history.NemesisProcess && op.Type == history.OK {
			seen[k] = true
		}
	}
	var out []locks.Fault
	for _, f := range locks.Faults {
		if seen[f] {
			out = append(out, f)
		}
	}
	return out
}

// judgeClaims holds a random run to the lock's fault model: its promise
// (the validity deadline, or for a lock that gives none, that no two
// clients hold it at once) broken under claimed faults alone is a finding;
// broken when an unclaimed fault was drawn, it is explained. Anomalies
// with the promise kept (a client that outlived its lease, K1) are what
// the promise never covered, and said so.
func (r *Result) judgeClaims(info locks.Info) {
	promise := "promise-broken"
	if v, ok := r.Verdict("promise"); ok && v.Details["promises"] == 0 {
		promise = "double-holder"
	}
	var drawn, unclaimed []string
	for _, f := range faultKinds(r.Ops) {
		drawn = append(drawn, string(f))
		if !slices.Contains(info.Claims, f) {
			unclaimed = append(unclaimed, string(f))
		}
	}
	r.Matched = r.Outcome != Undecided && r.Outcome != Vacuous && r.Outcome != Starved
	switch {
	case !r.Matched || r.Outcome == Safe:
	case !slices.Contains(r.Observations, promise):
		r.Explained = fmt.Sprintf("%s with its promise kept under %s: clients outlived their leases, which no promise covers",
			r.Outcome, orNone(drawn))
	case len(unclaimed) == 0:
		r.Matched = false
		r.Finding = fmt.Sprintf("%s: %s broke its promise under %s, faults it claims to survive (its claims: %s)",
			promise, info.Name, orNone(drawn), info.ClaimList())
	default:
		r.Explained = fmt.Sprintf("%s, explained by %s, which %s makes no claim about", promise, strings.Join(unclaimed, ", "), info.Name)
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no fault"
	}
	return strings.Join(s, ", ")
}
