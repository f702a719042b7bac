package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
)

// A plan's actions are kept by family of fault, one file each:
//
//	faults_network.go   partition, heal, cut, latency, lag
//	faults_node.go      node-pause, node-resume, kill, power-loss, restart,
//	                    kill-leader, evict, save-fail, save-mend
//	faults_failover.go  promote, await-promotion, migrate-start, migrate-end
//	faults_clock.go     clock-bump, clock-strobe, clock-skew
//	faults_client.go    pause, arm, disarm, crash-waiter, when-acquiring
//
// and heal-all below. One entry is one action: the nemesis ops it records
// (fault.Op, whose row in package fault's table gives each its label,
// kind, shape and end), the fields it reads, its help, its undo, how it
// compiles, and what random exploration draws of it (or why it draws
// none). Adding a fault kind is its ops and rows in package fault, the
// nemesis code that carries it out, and its entry in the file of its
// family; the tests in actions_test.go fail until the entry names every
// op the table calls a fault and says whether random draws it.

// ActionKind is one action a plan can take: the fields it reads (Needs
// must be set; Takes may be) and how it compiles.
type ActionKind struct {
	// Name is what a plan's step calls it (Action.Do): the op it records
	// where it records one fault (node-pause, clock-bump, kill), else
	// what it does (partition, heal, arm: faults_network.go says why
	// partition is not partition-start).
	Name string
	// Aliases are names it had before it was named as its op: a plan
	// written with one (a user's file, a stored run's scenario.json)
	// still reads, and prints as it was written.
	Aliases []string
	// Ops are the nemesis ops it records in a history, its faults and
	// their ends; none for one that records none itself (disarm;
	// when-acquiring, whose then does the faults).
	Ops          []fault.Op
	Needs, Takes []string
	// Help says what it does, for -list.
	Help string
	// Undo, when set, is the action that undoes a (a step's Until).
	Undo func(a Action) Action
	// delays says the action takes its Delay itself (a restart records
	// the time it was down).
	delays  bool
	compile func(c *compiler, path string, a Action) (deed, string, error)
	// draws are the faults of this action random exploration draws
	// (random.go). undrawn says, in one line, why random draws no fault
	// of a kind this action's ops carry out, where no action's draw does.
	draws   []draw
	undrawn string
}

// actionFamilies are the files of actions, each a family of faults.
var actionFamilies = [][]ActionKind{networkActions, nodeActions, ensembleActions, failoverActions, clockActions, clientActions, {healAllAction}}

// actions are the actions of a plan, by name and by alias. It is filled
// in init: arm and when-acquiring compile actions of their own through it.
var actions map[string]ActionKind

func init() { actions = actionIndex(actionFamilies) }

// actionIndex indexes the families' actions by every name a plan may use;
// an action's help names its aliases, so -list says they still read.
func actionIndex(families [][]ActionKind) map[string]ActionKind {
	out := map[string]ActionKind{}
	for _, family := range families {
		for _, k := range family {
			if len(k.Aliases) > 0 {
				k.Help += fmt.Sprintf("; old name %s, still read", strings.Join(k.Aliases, ", "))
			}
			for _, name := range append([]string{k.Name}, k.Aliases...) {
				if _, twice := out[name]; twice {
					panic("scenario: two actions are called " + name)
				}
				out[name] = k
			}
		}
	}
	return out
}

// LookupAction finds the action name, or one of its old names, as -list
// describes it: its Name is the name it goes by now.
func LookupAction(name string) (ActionKind, bool) {
	k, ok := actions[name]
	return k, ok
}

// ActionNames lists the actions a plan can take by the names they go by,
// sorted; their old names are in their help.
func ActionNames() []string {
	var out []string
	for name, k := range actions {
		if name == k.Name {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// draw is one fault random exploration draws of an action (random.go):
// where it stands in the list a seed's faults are drawn from, the op the
// action it draws records, whether it lasts until its span ends, and the
// action, its targets picked from the seed's stream as it is drawn.
type draw struct {
	// rank is the draw's place in that list. Every seed's schedule
	// depends on the list's order and length: a draw added or moved
	// gives every seed another schedule.
	rank int
	op   fault.Op
	// lasts says the drawn step is undone at its span's end
	// (Step.Until); otherwise its action has a length of its own.
	lasts bool
	// only, when set, says whether e's run allows the draw.
	only   func(e *Env) bool
	action func(e *Env, pick *rand.Rand) Action
}

// healAllAction undoes whatever may still be in place, so liveness is
// judged on a healed system: every random plan ends with it.
var healAllAction = ActionKind{Name: "heal-all",
	Ops:     []fault.Op{fault.PartitionEnd, fault.Restart, fault.ResumeNode},
	Help:    "undo every fault still in place: disarm the traps, heal every link, restart the killed nodes, resume the paused ones",
	compile: simple("undo every fault still in place", healAll)}

// healAll undoes whatever may still be in place.
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

// ops is the list of ops an action records.
func ops(o ...fault.Op) []fault.Op { return o }

// later runs do in the schedule's context, without holding up the steps
// after it: a fault that lasts (a restart's wait, a strobe) records its
// own end, and an error fails the run (Gate.Fail) unless the run's end
// cut it short.
func (c *compiler) later(do func(ctx context.Context) error) deed {
	return func(context.Context, int) error {
		c.aside(func(bg context.Context) { c.e.Gate.Fail(bg, do(bg)) })
		return nil
	}
}

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

// insidePause is compile for an action told inside the pause of the
// client its trap caught (a node's memory filled while the holder is
// stopped, a delay into the pause): one that begins in that pause and
// does not end inside it did not happen as its story tells, and the run
// is noted starved (nemesis.Gate.Outran) rather than judged. That is one
// that ended after the pause; one the run's end cut short, inside the
// pause or after it, which without the note would read vacuous; and one
// that failed after the pause was over (a fill's write timed out on a
// loaded machine), the note saying why, rather than the run failing: the
// machine, not the harness, is what it tells of. The lateness meter
// reads such an action's own time against half a TTL, and a pause may
// leave it less.
func insidePause(compile func(*compiler, string, Action) (deed, string, error)) func(*compiler, string, Action) (deed, string, error) {
	return func(c *compiler, path string, a Action) (deed, string, error) {
		do, name, err := compile(c, path, a)
		if err != nil {
			return nil, "", err
		}
		return func(ctx context.Context, caught int) error {
			inside := caught >= 0 && c.e.Gate.Paused(caught)
			err := do(ctx, caught)
			switch {
			case !inside:
				return err
			case err != nil && ctx.Err() != nil:
				how := "which failed as the run ended"
				if nemesis.CutShort(ctx, err) == nil {
					how = "which the run's end cut short"
				}
				c.e.Gate.Outran(fmt.Sprintf("%s (%s: %v)", name, how, err), caught)
			case c.e.Gate.Paused(caught):
				return err
			case err == nil:
				c.e.Gate.Outran(name, caught)
			default:
				c.e.Gate.Outran(fmt.Sprintf("%s (which failed: %v)", name, err), caught)
			}
			return nil
		}, name, nil
	}
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
