package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
)

// networkActions are the faults of links: cut (partition, cut), slowed
// (latency, lag), and healed.
//
// partition, heal and cut keep their names rather than their ops'
// (partition-start, partition-end): two actions record partition-start
// (partition, and cut, one direction of one link), and heal is no one
// partition's end but every cut's and every delay's at once
// (fault.PartitionEnd's AlsoEnds); partition and heal are what the fault
// table's labels call them. latency and lag record latency-start, or
// latency-end when told a delay of 0, so neither is named as one op.
var networkActions = []ActionKind{
	{Name: "partition", Ops: ops(fault.PartitionStart), Undo: heal, Needs: []string{"cuts"},
		Help: "cut each peer of cuts off from its nodes (both ways)", compile: compilePartition,
		draws: []draw{
			{rank: 1, op: fault.PartitionStart, lasts: true, action: func(e *Env, pick *rand.Rand) Action {
				return partitionOf(e, nemesis.IsolateNode(pickNode(e, pick), e.Clients))
			}},
			shapeDraw(2, nemesis.Halves), shapeDraw(3, nemesis.MajoritiesRing), shapeDraw(4, nemesis.Bridge),
		}},
	{Name: "heal", Ops: ops(fault.PartitionEnd), Help: "undo every partition and cut",
		compile: simple("heal every partition", func(c *compiler) error { return c.e.Nemesis.Heal() })},
	{Name: "heal-once-led", Ops: ops(fault.PartitionEnd),
		Help:    "undo every partition and cut once a lock node says it leads its ensemble (an election that outlasts the run leaves it starved): the clients get back no sooner than a restarted ensemble serves",
		compile: simple("heal every partition once a lock node leads", healOnceLed)},
	{Name: "cut", Ops: ops(fault.PartitionStart), Undo: heal, Needs: []string{"client", "node", "direction"},
		Help: "drop one direction of a client's link to a node", compile: compileCut},
	{Name: "latency", Ops: ops(fault.LatencyStart, fault.LatencyEnd),
		Undo: func(a Action) Action { a.For, a.Jitter = Num{}, Num{}; return a }, Needs: []string{"client", "node"}, Takes: []string{"for", "jitter", "direction"},
		Help:    "delay a client's link to a node (the store, say) by for TTLs, give or take jitter; for 0 ends the delay",
		compile: compileLatency,
		draws: []draw{{rank: 11, op: fault.LatencyStart, lasts: true, action: func(e *Env, pick *rand.Rand) Action {
			return Action{Do: "latency", Client: pickClient(e, pick), Node: "store", For: TTLs(0.5), Jitter: TTLs(0.25)}
		}}}},
	{Name: "lag", Ops: ops(fault.LatencyStart, fault.LatencyEnd), Undo: func(a Action) Action { a.For = Num{}; return a },
		Needs: []string{"node"}, Takes: []string{"for"},
		Help:    "delay a master's replication to its replica by for TTLs, both ways: its writes reach the replica that much later (for 0 ends it)",
		compile: compileLag},
}

// healOnceLed heals once the ensemble has a leader: a restarted ensemble
// restores its sessions with a fresh timeout as it elects, so clients
// that get back as it serves find them, however long its members took to
// start. Delayed (Action.Delay), it heals no sooner than that either.
func healOnceLed(c *compiler) error {
	if led, err := awaitElection(c, "", "the ensemble had elected no leader to heal the cut after when the run ended"); !led {
		return err
	}
	return c.e.Nemesis.Heal()
}

// heal undoes a partition or a cut.
func heal(Action) Action { return Action{Do: "heal"} }

// partitionOf is the partition that cuts g's peers, e's clients, off.
func partitionOf(e *Env, g nemesis.Grudge) Action {
	return Action{Do: "partition", Cuts: cutsOf(g, e.Clients)}
}

// shapeDraw draws a partition of one of Jepsen's shapes: it needs three
// nodes or more, and picks nothing from the seed's stream.
func shapeDraw(rank int, shape func(nodes, peers []string) nemesis.Grudge) draw {
	return draw{rank: rank, op: fault.PartitionStart, lasts: true,
		only:   func(e *Env) bool { return len(e.Nodes) >= 3 },
		action: func(e *Env, _ *rand.Rand) Action { return partitionOf(e, shape(e.Nodes, e.Clients)) }}
}

// compilePartition compiles a partition's cuts.
func compilePartition(c *compiler, path string, a Action) (deed, string, error) {
	type line struct {
		from  func(caught int) ([]string, error)
		nodes []string
	}
	var lines []line
	var words []string
	for i, cut := range a.Cuts {
		at := fmt.Sprintf("%s.cuts[%d]", path, i)
		from, err := c.peers(at+".from", cut.From)
		if err != nil {
			return nil, "", err
		}
		var nodes []string
		for j, ref := range cut.Nodes {
			ns, err := c.nodes(fmt.Sprintf("%s.nodes[%d]", at, j), ref)
			if err != nil {
				return nil, "", err
			}
			nodes = append(nodes, ns...)
		}
		lines = append(lines, line{from, nodes})
		words = append(words, fmt.Sprintf("%s from %s", cut.From, strings.Join(cut.Nodes, ", ")))
	}
	return func(_ context.Context, caught int) error {
		g := nemesis.Grudge{}
		for _, l := range lines {
			from, err := l.from(caught)
			if err != nil {
				return err
			}
			for _, peer := range from {
				g[peer] = append(g[peer], l.nodes...)
			}
		}
		return c.e.Nemesis.Partition(g)
	}, "cut off " + strings.Join(words, "; "), nil
}

// compileCut compiles one direction of a client's link cut.
func compileCut(c *compiler, path string, a Action) (deed, string, error) {
	return c.withClientNode(path, a, fmt.Sprintf("cut %s of client %s's link to %s", a.Direction, a.Client, a.Node),
		func(_ context.Context, peer, node string) error {
			return c.e.Nemesis.CutDirection(peer, node, a.Direction)
		})
}

// compileLatency compiles a delay on a client's link, or its end.
func compileLatency(c *compiler, path string, a Action) (deed, string, error) {
	d, j := a.For.in(c.e), a.Jitter.in(c.e)
	name := fmt.Sprintf("delay client %s's link to %s by %s", a.Client, a.Node, d)
	if a.Direction != "" {
		name = fmt.Sprintf("delay client %s's %s to %s by %s", a.Client, a.Direction, a.Node, d)
	}
	if d == 0 {
		name = fmt.Sprintf("end the delay on client %s's link to %s", a.Client, a.Node)
	}
	return c.withClientNode(path, a, name, func(_ context.Context, peer, node string) error {
		if a.Direction != "" {
			return c.e.Nemesis.LatencyDirection(peer, node, a.Direction, d, j)
		}
		return c.e.Nemesis.Latency(peer, node, d, j)
	})
}

// compileLag compiles a delay on a master's replication link, or its end.
func compileLag(c *compiler, path string, a Action) (deed, string, error) {
	master, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	d, replica := a.For.in(c.e), cluster.ReplicaName(master)
	if c.e.Nemesis.Node(replica) == nil {
		return nil, "", fmt.Errorf("%s.node: %s has no replica in this run (name the master: primary)", path, master)
	}
	name := fmt.Sprintf("delay the replication of %s to %s by %s", master, replica, d)
	if d == 0 {
		name = fmt.Sprintf("end the delay on the replication of %s", master)
	}
	return func(context.Context, int) error {
		return c.e.Nemesis.Latency(cluster.ReplicationPeer(replica), master, d, 0)
	}, name, nil
}
