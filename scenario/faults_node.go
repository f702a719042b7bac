package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
)

// nodeActions are the faults of a node's process, disk and memory: paused,
// killed, restarted, its saves failed, its memory filled. Each is named as
// the op it records; node-pause, node-resume, save-fail and save-mend were
// pause-node, resume-node, fail-saves and mend-saves, which still read.
var nodeActions = []ActionKind{
	{Name: "node-pause", Aliases: []string{"pause-node"}, Ops: ops(fault.PauseNode),
		Undo: func(a Action) Action { return Action{Do: "node-resume", Node: a.Node} }, Needs: []string{"node"},
		Help: "SIGSTOP a node", compile: onNode("pause %s", (*nemesis.Nemesis).PauseNode),
		draws: []draw{{rank: 5, op: fault.PauseNode, lasts: true, action: func(e *Env, pick *rand.Rand) Action {
			return Action{Do: "node-pause", Node: pickNode(e, pick)}
		}}}},
	{Name: "node-resume", Aliases: []string{"resume-node"}, Ops: ops(fault.ResumeNode), Needs: []string{"node"},
		Help: "SIGCONT a node", compile: onNode("resume %s", (*nemesis.Nemesis).ResumeNode)},
	{Name: "kill", Ops: ops(fault.Kill), Undo: restartIt, Needs: []string{"node"},
		Help: "kill -9 a node", compile: onNode("kill -9 %s", (*nemesis.Nemesis).KillNode),
		draws: []draw{{rank: 6, op: fault.Kill, lasts: true, action: func(e *Env, pick *rand.Rand) Action {
			return Action{Do: "kill", Node: pickNode(e, pick)}
		}}}},
	{Name: "power-loss", Ops: ops(fault.PowerLoss), Undo: restartIt, Needs: []string{"node"},
		Help: "kill -9 a node and lose what its disk had not synced", compile: onNode("power loss of %s", (*nemesis.Nemesis).PowerLossNode)},
	{Name: "restart", Ops: ops(fault.Restart), Needs: []string{"node"}, Takes: []string{"delay"}, delays: true,
		Help: "start a killed node again, delay TTLs from now", compile: compileRestart},
	{Name: "kill-leader", Ops: ops(fault.Kill, fault.Starved),
		Help:    "kill -9 the leader of a service's ensemble and wait until the others elect one (an election that outlasts the run leaves it starved)",
		compile: simple("kill -9 the ensemble's leader, and wait until the others elect one", killLeader)},
	{Name: "evict", Ops: ops(fault.Evict, fault.Starved), Needs: []string{"node"},
		Help:    "fill a node's memory until it evicts (topology args: a maxmemory)",
		compile: insidePause(onNodeCtx("fill %s's memory until it evicts", (*nemesis.Nemesis).Evict)),
		undrawn: "a node evicts only under a maxmemory (topology args), which the random story's topology has not"},
	{Name: "save-fail", Aliases: []string{"fail-saves"}, Ops: ops(fault.SaveFail),
		Undo: func(a Action) Action { return Action{Do: "save-mend", Node: a.Node} }, Needs: []string{"node"},
		Help:    "make a node's background saves fail (MISCONF)",
		compile: onNodeCtx("fail %s's background save (MISCONF)", (*nemesis.Nemesis).FailSaves),
		undrawn: "a failed BGSAVE is a Redis node's fault, and random runs every lock, on ZooKeeper, etcd, PostgreSQL and memcached nodes too"},
	{Name: "save-mend", Aliases: []string{"mend-saves"}, Ops: ops(fault.SaveMend), Needs: []string{"node"},
		Help: "let a node's saves succeed again", compile: onNodeCtx("save %s again (writes resume)", (*nemesis.Nemesis).MendSaves)},
}

// restartIt undoes a kill.
func restartIt(a Action) Action { return Action{Do: "restart", Node: a.Node} }

// compileRestart compiles a restart, at once or after its delay.
func compileRestart(c *compiler, path string, a Action) (deed, string, error) {
	node, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	delay := a.Delay.in(c.e)
	if delay == 0 {
		return func(ctx context.Context, _ int) error { return c.e.Nemesis.RestartNode(ctx, node, 0) }, "restart " + node, nil
	}
	// The restart is recorded as it is decided, lasting its delay: the
	// history shows how long the node was down by design.
	return c.later(func(ctx context.Context) error { return c.e.Nemesis.RestartNode(ctx, node, delay) }),
		fmt.Sprintf("restart %s after %s", node, delay), nil
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
	// The story waits for the election before the holder goes on.
	_, err = awaitElection(c, leader, fmt.Sprintf("the ensemble had elected no leader in place of %s when the run ended", leader))
	return err
}

// awaitElection waits, up to electionWait, for a lock node other than not
// to lead its ensemble, and reports whether one does. An election that
// outlasts the run, on a machine too busy to elect (idle: hundreds of
// milliseconds), leaves the story untold: it is recorded as such (what,
// with how long it waited), so the run is starved and runs again, not an
// error.
func awaitElection(c *compiler, not, what string) (led bool, err error) {
	since := time.Now()
	ctx := c.background()
	_, err = leaderOf(ctx, c.e, not, electionWait)
	if err != nil && nemesis.CutShort(ctx, err) == nil {
		return false, c.e.Nemesis.Untold(what, not, time.Since(since))
	}
	return err == nil, err
}

// electionWait bounds how long leader-failover waits for the two members
// left to elect a leader: hundreds of milliseconds idle, seconds beside
// busy loops. A story whose election never comes did not happen.
const electionWait = 15 * time.Second

// leaderOf is the lock node other than not that says it leads its
// ensemble, asked until one does or within has passed (an election may be
// under way).
func leaderOf(ctx context.Context, e *Env, not string, within time.Duration) (string, error) {
	began := time.Now()
	deadline := began.Add(within)
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
			// Said in words around the context's error, which cuts
			// the wait short where the run's end ended it (CutShort).
			who := "a lock node"
			if not != "" {
				who += " other than " + not
			}
			return "", fmt.Errorf("the run ended %s into the wait, before %s said it leads its ensemble: %w",
				time.Since(began).Round(time.Millisecond), who, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
