package scenario

import (
	"context"
	"fmt"

	"github.com/locktorture/locktorture/fault"
)

// clockActions are the faults of clocks: a node's moved (libfaketime, so
// its keys expire early or late) and a client's own. Each is named as its
// op; clock-bump and clock-skew were bump-clock and skew-client, which
// still read. clock-strobe records clock-strobe-start, a clock-bump per
// flip, and clock-strobe-end when it is over: one action, named as its
// fault.
var clockActions = []ActionKind{
	{Name: "clock-bump", Aliases: []string{"bump-clock"}, Ops: ops(fault.ClockBump),
		Undo: func(a Action) Action { a.By = Num{}; return a }, Needs: []string{"node", "by"},
		Help: "jump a node's clock by TTLs (libfaketime; topology clock)", compile: compileClockBump,
		undrawn: nodeClockUndrawn},
	{Name: "clock-strobe", Ops: ops(fault.ClockStrobeStart, fault.ClockBump, fault.ClockStrobeEnd), Needs: []string{"node", "by", "for"},
		Help:    fmt.Sprintf("flip a node's clock between by TTLs ahead and where it was, every %g TTL, for TTLs (libfaketime; topology clock)", strobePeriod),
		compile: compileClockStrobe,
		undrawn: nodeClockUndrawn},
	{Name: "clock-skew", Aliases: []string{"skew-client"}, Ops: ops(fault.ClockSkew),
		Undo: func(a Action) Action { a.By = Num{}; return a }, Needs: []string{"client", "by"},
		Help: "set a client's own clock by TTLs ahead", compile: compileClockSkew,
		undrawn: "not among random's draws yet: a draw added gives every seed another schedule, so it waits for a change meant to"},
}

// nodeClockUndrawn is why random moves no node's clock.
const nodeClockUndrawn = "a node's clock moves only under libfaketime (topology clock), which the random story's topology has not"

// strobePeriod is how often, in TTLs, a strobe flips a node's clock: four
// times a lease, so every lease sees the clock jump both ways.
const strobePeriod = 0.25

// compileClockBump compiles a jump of a node's clock.
func compileClockBump(c *compiler, path string, a Action) (deed, string, error) {
	node, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	by := a.By.in(c.e)
	return func(context.Context, int) error { return c.e.Nemesis.BumpClock(node, by) }, fmt.Sprintf("jump %s's clock %s forward", node, by), nil
}

// compileClockStrobe compiles a strobe of a node's clock, which goes on
// beside the steps after it until its length has passed (or the run ends)
// and records its own end.
func compileClockStrobe(c *compiler, path string, a Action) (deed, string, error) {
	node, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	by, d, period := a.By.in(c.e), a.For.in(c.e), c.e.TTLs(strobePeriod)
	return c.later(func(ctx context.Context) error { return c.e.Nemesis.StrobeClock(ctx, node, by, period, d) }),
		fmt.Sprintf("strobe %s's clock %s ahead and back every %s for %s", node, by, period, d), nil
}

// compileClockSkew compiles a move of a client's own clock.
func compileClockSkew(c *compiler, path string, a Action) (deed, string, error) {
	by := a.By.in(c.e)
	return c.withClient(path, a, fmt.Sprintf("skew client %s's clock %s ahead", a.Client, by),
		func(_ context.Context, i, _ int) error { return c.e.Nemesis.SkewClient(c.e.Clocks[i], by) })
}
