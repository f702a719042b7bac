package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/nemesis"
)

// ActionKind is one action a plan can take: the fields it reads (Needs
// must be set; Takes may be) and how it compiles.
type ActionKind struct {
	Needs, Takes []string
	// Help says what it does, for -list.
	Help string
	// Undo, when set, is the action that undoes a (a step's Until).
	Undo func(a Action) Action
	// delays says the action takes its Delay itself (a restart records
	// the time it was down).
	delays  bool
	compile func(c *compiler, path string, a Action) (deed, string, error)
}

// LookupAction finds the action name, as -list describes it.
func LookupAction(name string) (ActionKind, bool) {
	k, ok := actions[name]
	return k, ok
}

// actions are the actions of a plan, by name. A new fault is one entry.
// (It is filled in init: arm and when-acquiring compile actions of their
// own through it.)
var actions map[string]ActionKind

func init() { actions = actionTable() }

func actionTable() map[string]ActionKind {
	return map[string]ActionKind{
		"partition": {Undo: heal, Needs: []string{"cuts"}, Help: "cut each peer of cuts off from its nodes (both ways)", compile: partition},
		"heal":      {Help: "undo every partition and cut", compile: simple("heal every partition", func(c *compiler) error { return c.e.Nemesis.Heal() })},
		"cut": {Undo: heal, Needs: []string{"client", "node", "direction"}, Help: "drop one direction of a client's link to a node",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				return c.withClientNode(path, a, fmt.Sprintf("cut %s of client %s's link to %s", a.Direction, a.Client, a.Node),
					func(_ context.Context, peer, node string) error {
						return c.e.Nemesis.CutDirection(peer, node, a.Direction)
					})
			}},
		"latency": {Undo: func(a Action) Action { a.For, a.Jitter = Num{}, Num{}; return a }, Needs: []string{"client", "node"}, Takes: []string{"for", "jitter", "direction"},
			Help: "delay a client's link to a node (the store, say) by for TTLs, give or take jitter; for 0 ends the delay",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
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
			}},
		"lag": {Undo: func(a Action) Action { a.For = Num{}; return a }, Needs: []string{"node"}, Takes: []string{"for"},
			Help: "delay a master's replication to its replica by for TTLs, both ways: its writes reach the replica that much later (for 0 ends it)",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
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
			}},
		"kill":        {Undo: restartIt, Needs: []string{"node"}, Help: "kill -9 a node", compile: onNode("kill -9 %s", (*nemesis.Nemesis).KillNode)},
		"power-loss":  {Undo: restartIt, Needs: []string{"node"}, Help: "kill -9 a node and lose what its disk had not synced", compile: onNode("power loss of %s", (*nemesis.Nemesis).PowerLossNode)},
		"pause-node":  {Undo: func(a Action) Action { return Action{Do: "resume-node", Node: a.Node} }, Needs: []string{"node"}, Help: "SIGSTOP a node", compile: onNode("pause %s", (*nemesis.Nemesis).PauseNode)},
		"resume-node": {Needs: []string{"node"}, Help: "SIGCONT a node", compile: onNode("resume %s", (*nemesis.Nemesis).ResumeNode)},
		"restart": {Needs: []string{"node"}, Takes: []string{"delay"}, delays: true, Help: "start a killed node again, delay TTLs from now",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				node, err := c.node(path+".node", a.Node)
				if err != nil {
					return nil, "", err
				}
				delay := a.Delay.in(c.e)
				if delay == 0 {
					return func(ctx context.Context, _ int) error { return c.e.Nemesis.RestartNode(ctx, node, 0) }, "restart " + node, nil
				}
				// The restart is recorded as it is decided, lasting its delay:
				// the history shows how long the node was down by design.
				return func(context.Context, int) error {
					bg := c.background()
					go func() { c.e.Gate.Fail(c.e.Nemesis.RestartNode(bg, node, delay)) }()
					return nil
				}, fmt.Sprintf("restart %s after %s", node, delay), nil
			}},
		"bump-clock": {Undo: func(a Action) Action { a.By = Num{}; return a }, Needs: []string{"node", "by"}, Help: "jump a node's clock by TTLs (libfaketime; topology clock)",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				node, err := c.node(path+".node", a.Node)
				if err != nil {
					return nil, "", err
				}
				by := a.By.in(c.e)
				return func(context.Context, int) error { return c.e.Nemesis.BumpClock(node, by) }, fmt.Sprintf("jump %s's clock %s forward", node, by), nil
			}},
		"skew-client": {Undo: func(a Action) Action { a.By = Num{}; return a }, Needs: []string{"client", "by"}, Help: "set a client's own clock by TTLs ahead",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				by := a.By.in(c.e)
				return c.withClient(path, a, fmt.Sprintf("skew client %s's clock %s ahead", a.Client, by),
					func(_ context.Context, i, _ int) error { return c.e.Nemesis.SkewClient(c.e.Clocks[i], by) })
			}},
		"pause-client": {Needs: []string{"client", "for"}, Help: "stop a client whole for TTLs",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				d := a.For.in(c.e)
				return c.withClient(path, a, fmt.Sprintf("pause client %s for %s", a.Client, d),
					func(_ context.Context, i, _ int) error { c.e.Gate.PauseClient(i, d); return nil })
			}},
		"promote": {Needs: []string{"node"}, Help: "make a replica the master by hand and point the clients at it (topology replicated)",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				node, err := c.node(path+".node", a.Node)
				if err != nil {
					return nil, "", err
				}
				if c.e.Primary == nil {
					return nil, "", fmt.Errorf("%s: promote needs a replica promoted by hand (topology replicated, without sentinel)", path)
				}
				return func(ctx context.Context, _ int) error { return c.e.Nemesis.Promote(ctx, c.e.Primary, node) }, "promote " + node, nil
			}},
		"await-promotion": {Needs: []string{"node"}, Takes: []string{"for"},
			Help: "wait (up to 10 s) for Sentinel or the cluster to promote a replica on its own; a promotion later than for TTLs, where given, did not happen as told (the run is starved)",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				node, err := c.node(path+".node", a.Node)
				if err != nil {
					return nil, "", err
				}
				var await func(ctx context.Context) error
				var name string
				switch {
				case c.e.Sentinels != nil:
					await = func(ctx context.Context) error {
						return c.e.Nemesis.AwaitSentinelPromotion(ctx, c.e.Sentinels, node, promotionWait)
					}
					name = "wait for Sentinel to promote " + node
				case c.e.Cluster != nil:
					await = func(ctx context.Context) error {
						return c.e.Nemesis.AwaitClusterPromotion(ctx, c.e.Cluster, node, promotionWait)
					}
					name = "wait for the cluster to promote " + node
				default:
					return nil, "", fmt.Errorf("%s: await-promotion needs Sentinel or a Redis Cluster in the topology", path)
				}
				bound := a.For.in(c.e)
				return func(ctx context.Context, _ int) error {
					start := time.Now()
					if err := await(ctx); err != nil {
						return err
					}
					if took := time.Since(start); bound > 0 && took > bound {
						return c.e.Nemesis.Late(node, took, bound)
					}
					return nil
				}, name, nil
			}},
		"kill-leader": {Help: "kill -9 the leader of a service's ensemble and wait until the others elect one",
			compile: simple("kill -9 the ensemble's leader, and wait until the others elect one", killLeader)},
		"evict":      {Needs: []string{"node"}, Help: "fill a node's memory until it evicts (topology args: a maxmemory)", compile: onNodeCtx("fill %s's memory until it evicts", (*nemesis.Nemesis).Evict)},
		"fail-saves": {Undo: func(a Action) Action { return Action{Do: "mend-saves", Node: a.Node} }, Needs: []string{"node"}, Help: "make a node's background saves fail (MISCONF)", compile: onNodeCtx("fail %s's background save (MISCONF)", (*nemesis.Nemesis).FailSaves)},
		"mend-saves": {Needs: []string{"node"}, Help: "let a node's saves succeed again", compile: onNodeCtx("save %s again (writes resume)", (*nemesis.Nemesis).MendSaves)},
		"migrate-start": {Needs: []string{"node"}, Help: "begin moving the lock key's slot to a master (topology cluster)",
			compile: migrate("begin moving the key's slot to %s", (*nemesis.Nemesis).MigrateStart)},
		"migrate-end": {Needs: []string{"node"}, Help: "hand the lock key's slot over to a master (topology cluster)",
			compile: migrate("hand the key's slot over to %s", (*nemesis.Nemesis).MigrateEnd)},
		"arm": {Undo: func(Action) Action { return Action{Do: "disarm"} }, Needs: []string{"trap"}, Help: "set a trap",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				t, name, err := c.trap(path+".trap", a.Trap)
				if err != nil {
					return nil, "", err
				}
				name = "arm: " + name
				return func(_ context.Context, caught int) error {
					set, err := t(caught)
					if err != nil {
						return err
					}
					c.e.Gate.Arm(set)
					return nil
				}, name, nil
			}},
		"disarm": {Help: "remove every trap still armed", compile: simple("disarm every trap", func(c *compiler) error { c.e.Gate.Disarm(); return nil })},
		"heal-all": {Help: "undo every fault still in place: disarm the traps, heal every link, restart the killed nodes, resume the paused ones",
			compile: simple("undo every fault still in place", healAll)},
		"crash-waiter": {Needs: []string{"for"}, Help: "kill the first client found inside an acquire that has lasted for TTLs",
			compile: func(c *compiler, _ string, a Action) (deed, string, error) {
				step := c.e.Gate.CrashWaiter(0, a.For.in(c.e))
				return func(ctx context.Context, _ int) error { return step.Do(ctx) }, step.Name, nil
			}},
		"when-acquiring": {Needs: []string{"client", "then"}, Help: "do then once a client is inside an acquire",
			compile: func(c *compiler, path string, a Action) (deed, string, error) {
				then, name, err := c.actionsOf(path+".then", a.Then)
				if err != nil {
					return nil, "", err
				}
				return c.withClient(path, a, fmt.Sprintf("%s, once client %s is inside an acquire", name, a.Client), func(ctx context.Context, i, caught int) error {
					return c.e.Gate.WhenAcquiring(0, i, name, func(ctx context.Context) error { return then(ctx, caught) }).Do(ctx)
				})
			}},
	}
}

// heal undoes a partition or a cut.
func heal(Action) Action { return Action{Do: "heal"} }

// restartIt undoes a kill.
func restartIt(a Action) Action { return Action{Do: "restart", Node: a.Node} }

// healAll undoes whatever may still be in place, so liveness is judged
// on a healed system.
func healAll(c *compiler) error {
	e := c.e
	e.Gate.Disarm()
	if err := e.Nemesis.Heal(); err != nil {
		return err
	}
	for _, name := range e.Nodes {
		nd := e.Nemesis.Node(name)
		switch {
		case nd == nil:
			return fmt.Errorf("no node %s", name)
		case nd.PID() == 0:
			if err := e.Nemesis.RestartNode(c.background(), name, 0); err != nil {
				return err
			}
		case nd.Paused():
			if err := e.Nemesis.ResumeNode(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// promotionWait bounds how long await-promotion waits: a failover told
// in seconds (Sentinel's, the cluster's) that has not happened in ten did
// not happen.
const promotionWait = 10 * time.Second

// simple is an action with no arguments.
func simple(name string, do func(c *compiler) error) func(*compiler, string, Action) (deed, string, error) {
	return func(c *compiler, _ string, _ Action) (deed, string, error) {
		return func(context.Context, int) error { return do(c) }, name, nil
	}
}

// onNode is an action on one node.
func onNode(format string, do func(*nemesis.Nemesis, string) error) func(*compiler, string, Action) (deed, string, error) {
	return func(c *compiler, path string, a Action) (deed, string, error) {
		node, err := c.node(path+".node", a.Node)
		if err != nil {
			return nil, "", err
		}
		return func(context.Context, int) error { return do(c.e.Nemesis, node) }, fmt.Sprintf(format, node), nil
	}
}

// onNodeCtx is an action on one node that takes time.
func onNodeCtx(format string, do func(*nemesis.Nemesis, context.Context, string) error) func(*compiler, string, Action) (deed, string, error) {
	return func(c *compiler, path string, a Action) (deed, string, error) {
		node, err := c.node(path+".node", a.Node)
		if err != nil {
			return nil, "", err
		}
		return func(ctx context.Context, _ int) error { return do(c.e.Nemesis, ctx, node) }, fmt.Sprintf(format, node), nil
	}
}

// migrate is a step of moving the lock key's slot to a master.
func migrate(format string, do func(*nemesis.Nemesis, context.Context, *cluster.RedisCluster, string, string) error) func(*compiler, string, Action) (deed, string, error) {
	return func(c *compiler, path string, a Action) (deed, string, error) {
		if c.e.Cluster == nil {
			return nil, "", fmt.Errorf("%s: moving a slot needs a Redis Cluster in the topology", path)
		}
		node, err := c.node(path+".node", a.Node)
		if err != nil {
			return nil, "", err
		}
		return func(ctx context.Context, _ int) error { return do(c.e.Nemesis, ctx, c.e.Cluster, c.e.Key, node) }, fmt.Sprintf(format, node), nil
	}
}

// partition compiles a partition's cuts.
func partition(c *compiler, path string, a Action) (deed, string, error) {
	type line struct {
		from  func(caught int) (string, error)
		nodes []string
	}
	var lines []line
	var words []string
	for i, cut := range a.Cuts {
		at := fmt.Sprintf("%s.cuts[%d]", path, i)
		from, err := c.peer(at+".from", cut.From)
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
			g[from] = append(g[from], l.nodes...)
		}
		return c.e.Nemesis.Partition(g)
	}, "cut off " + strings.Join(words, "; "), nil
}

// withClient is an action on one client: do gets its index in the run
// (known, for caught and other, only when the trap springs), and the
// client the trap running it caught, for actions of its own.
func (c *compiler) withClient(path string, a Action, name string, do func(ctx context.Context, i, caught int) error) (deed, string, error) {
	who, err := c.client(path+".client", a.Client, false)
	if err != nil {
		return nil, "", err
	}
	return func(ctx context.Context, caught int) error {
		i, err := who(caught)
		if err != nil {
			return err
		}
		return do(ctx, i, caught)
	}, name, nil
}

// withClientNode is an action on a client's link to a node.
func (c *compiler) withClientNode(path string, a Action, name string, do func(ctx context.Context, peer, node string) error) (deed, string, error) {
	node, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	return c.withClient(path, a, name, func(ctx context.Context, i, _ int) error { return do(ctx, c.e.Clients[i], node) })
}

// peer resolves a cut's from: "client REF" or "replication of NODE".
func (c *compiler) peer(path, ref string) (func(caught int) (string, error), error) {
	if r, ok := strings.CutPrefix(ref, "client "); ok {
		who, err := c.client(path, r, false)
		if err != nil {
			return nil, err
		}
		return func(caught int) (string, error) {
			i, err := who(caught)
			if err != nil {
				return "", err
			}
			return c.e.Clients[i], nil
		}, nil
	}
	if r, ok := strings.CutPrefix(ref, "replication of "); ok {
		node, err := c.node(path, r)
		if err != nil {
			return nil, err
		}
		peer := cluster.ReplicationPeer(node)
		return func(int) (string, error) { return peer, nil }, nil
	}
	return nil, fmt.Errorf(`%s: %q is no peer ("client N", "client caught", "replication of NODE")`, path, ref)
}

// NodeRoles are the names a plan may give a node by its role, resolved in
// each run, and what each names.
var NodeRoles = map[string]string{
	"primary":      "the lock's first node, the master of a replicated pair",
	"replica":      "the replica of a replicated pair",
	"slot-master":  "in a Redis Cluster, the master of the lock key's slot (slot-master+1: the master after it)",
	"slot-replica": "in a Redis Cluster, the replica of the lock key's master",
	"middle":       "of an odd number of lock nodes, the one in the middle (n3 of five): the node two majorities share",
	"below-middle": "in a cut, every lock node before the middle one (n1, n2 of five)",
	"above-middle": "in a cut, every lock node after the middle one (n4, n5 of five)",
	"all":          "in a cut, every lock node",
}

// nodes resolves a cut's node reference, which may name several: all, or
// the lock nodes either side of the middle one.
func (c *compiler) nodes(path, ref string) ([]string, error) {
	n := c.e.Nodes
	switch ref {
	case "all":
		return n, nil
	case "below-middle", "above-middle":
		if len(n)%2 == 0 {
			return nil, fmt.Errorf("%s: %s, but the lock has %d nodes, no middle one", path, ref, len(n))
		}
		if ref == "below-middle" {
			return n[:len(n)/2], nil
		}
		return n[len(n)/2+1:], nil
	}
	one, err := c.node(path, ref)
	return []string{one}, err
}

// node resolves a node reference: a node's name, or its role.
func (c *compiler) node(path, ref string) (string, error) {
	e := c.e
	switch {
	case ref == "primary":
		if len(e.Nodes) == 0 {
			return "", fmt.Errorf("%s: primary, but the lock has no node", path)
		}
		return e.Nodes[0], nil
	case ref == "middle":
		if len(e.Nodes)%2 == 0 {
			return "", fmt.Errorf("%s: middle, but the lock has %d nodes, no middle one", path, len(e.Nodes))
		}
		return e.Nodes[len(e.Nodes)/2], nil
	case ref == "replica":
		if e.Replica == "" {
			return "", fmt.Errorf("%s: replica, but the topology has no replica", path)
		}
		return e.Replica, nil
	case strings.HasPrefix(ref, "slot-"):
		if e.Cluster == nil {
			return "", fmt.Errorf("%s: %s, but the topology has no Redis Cluster", path, ref)
		}
		master, replica, err := e.Cluster.Owner(context.Background(), e.Key)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if ref == "slot-replica" {
			return replica.Name, nil
		}
		rest, ok := strings.CutPrefix(ref, "slot-master")
		step := 0
		if ok && rest != "" {
			step, err = strconv.Atoi(strings.TrimPrefix(rest, "+"))
			ok = err == nil && strings.HasPrefix(rest, "+") && step > 0
		}
		i := slices.Index(e.Cluster.Masters, master)
		if !ok || i < 0 {
			return "", fmt.Errorf("%s: %q is no role (slot-master, slot-master+N, slot-replica)", path, ref)
		}
		return e.Cluster.Masters[(i+step)%len(e.Cluster.Masters)].Name, nil
	case e.Nemesis.Node(ref) != nil:
		return ref, nil
	}
	return "", fmt.Errorf("%s: no node %q in this run (its nodes: %s; or a role: primary, replica, middle, slot-master, slot-replica)", path, ref, strings.Join(e.Nodes, ", "))
}

// killLeader kills the ensemble's leader and waits for a new one.
func killLeader(c *compiler) error {
	ctx := c.background()
	leader, err := leaderOf(ctx, c.e, "", time.Second)
	if err != nil {
		return err
	}
	if err := c.e.Nemesis.KillNode(leader); err != nil {
		return err
	}
	_, err = leaderOf(ctx, c.e, leader, electionWait)
	return err
}

// electionWait bounds how long leader-failover waits for the two members
// left to elect a leader: hundreds of milliseconds idle, seconds beside
// busy loops. A story whose election never comes did not happen.
const electionWait = 15 * time.Second

// leaderOf is the lock node other than not that says it leads its
// ensemble, asked until one does or within has passed (an election may be
// under way).
func leaderOf(ctx context.Context, e *Env, not string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		for _, name := range e.Nodes {
			if name == not {
				continue
			}
			if role, err := e.Nemesis.Node(name).Role(ctx); err == nil && role == "leader" {
				return name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no lock node says it leads its ensemble within %s", within)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
