package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktorture/locktorture/nemesis"
)

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
		Start: func(context.Context) error { e.Gate.PauseClient(client(), e.ttls(2)); return nil },
		Stop:  func(context.Context) error { return nil }})
	{
		var peer string
		faults = append(faults, nemesis.Fault{Name: "slow a client's store link",
			Start: func(context.Context) error {
				peer = e.Clients[client()]
				return n.Latency(peer, "store", e.ttls(0.5), e.ttls(0.25))
			},
			Stop: func(context.Context) error { return n.Latency(peer, "store", 0, 0) }})
	}
	heal := func(ctx context.Context) error {
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
	return nemesis.Random(faults, nemesis.RandomOptions{Seed: uint64(e.Seed), Duration: e.TimeLimit, Interval: e.ttls(2), Heal: heal})
}
