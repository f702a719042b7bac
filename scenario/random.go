package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
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
		Expect: expect(locks.Names(), verdict.Expectation{Outcome: verdict.PromiseKept,
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
	// Either side of a command is drawn: after its reply, before the lock
	// sees it, and before it is sent, after whatever the client decided on
	// its own since the last reply (a check of its clock), which is not
	// the same place. A pause inside an acquire and one inside a release
	// are faults of their own; a crash is one more. They catch whichever
	// client gets there first: one client named in advance can lose every
	// race for the lock while the trap is armed, and a trap that never
	// springs is a fault drawn and not done. Package explore tries every
	// boundary in turn instead of drawing.
	boundary := func(in string, reply bool) *nemesis.Command {
		return &nemesis.Command{In: in, Nth: 1 + pick.IntN(2), Reply: reply}
	}
	for _, in := range []string{history.Acquire, history.Release} {
		faults = append(faults, nemesis.Fault{Name: "pause the first client at a command boundary of its " + in + " for 2 TTLs",
			Start: func(context.Context) error {
				e.Gate.Arm(nemesis.Trap{Command: boundary(in, pick.IntN(2) == 0), Client: nemesis.AnyClient, Pause: e.TTLs(2)})
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
