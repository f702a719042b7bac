package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// clientActions are the faults of a client: paused whole, or caught by a
// trap at a point or a command boundary and paused, stalled, crashed or
// cancelled there, and the steps that set traps and take them away. pause
// is named as its op (it was pause-client, which still reads); a trap's
// fault is the trap's to say (Trap), so arm records whichever it is.
var clientActions = []ActionKind{
	{Name: "pause", Aliases: []string{"pause-client"}, Ops: ops(fault.Pause, fault.Resume), Needs: []string{"client", "for"},
		Help: "stop a client whole for TTLs", compile: compilePause,
		draws: []draw{{rank: 7, op: fault.Pause, action: func(e *Env, pick *rand.Rand) Action {
			return Action{Do: "pause", Client: pickClient(e, pick), For: TTLs(2)}
		}}}},
	{Name: "arm", Ops: ops(fault.Pause, fault.Stall, fault.Resume, fault.Crash, fault.Cancel, fault.Starved),
		Undo: func(Action) Action { return Action{Do: "disarm"} }, Needs: []string{"trap"},
		Help: "set a trap", compile: compileArm,
		draws: []draw{boundaryPauseDraw(8, history.Acquire), boundaryPauseDraw(9, history.Release), {rank: 10, op: fault.Crash, lasts: true,
			action: func(_ *Env, pick *rand.Rand) Action {
				in := []string{history.Acquire, history.Release}[pick.IntN(2)]
				return armed(Trap{Command: pickBoundary(pick, in), Client: "any", Crash: true})
			}}},
		undrawn: "a cancel trap is not among random's draws yet: a draw added gives every seed another schedule, so it waits for a change meant to"},
	{Name: "disarm", Help: "remove every trap still armed",
		compile: simple("disarm every trap", func(c *compiler) error { c.e.Gate.Disarm(); return nil })},
	{Name: "crash-waiter", Ops: ops(fault.Crash), Needs: []string{"for"},
		Help: "kill the first client found inside an acquire that has lasted for TTLs", compile: compileCrashWaiter},
	{Name: "when-acquiring", Needs: []string{"client", "then"},
		Help: "do then once a client is inside an acquire", compile: compileWhenAcquiring},
}

// Random's traps wait at a command boundary drawn from the seed: where a
// lock that sends two commands for one step (GET then DEL) is caught
// between them. Either side of a command is drawn: after its reply,
// before the lock sees it, and before it is sent, after whatever the
// client decided on its own since the last reply (a check of its clock),
// which is not the same place. A pause inside an acquire and one inside a
// release are draws of their own; a crash is one more. They catch
// whichever client gets there first: one client named in advance can lose
// every race for the lock while the trap is armed, and a trap that never
// springs is a fault drawn and not done. Package explore tries every
// boundary in turn instead of drawing.

// boundaryPauseDraw draws a trap that pauses the first client at a
// command boundary of in (an acquire or a release) for 2 TTLs.
func boundaryPauseDraw(rank int, in string) draw {
	return draw{rank: rank, op: fault.Pause, lasts: true, action: func(_ *Env, pick *rand.Rand) Action {
		return armed(Trap{Command: pickBoundary(pick, in), Client: "any", Pause: TTLs(2)})
	}}
}

// pickBoundary draws a command boundary of in: its side, then which of
// the op's first two commands.
func pickBoundary(pick *rand.Rand, in string) *nemesis.Command {
	reply := pick.IntN(2) == 0
	return &nemesis.Command{In: in, Nth: 1 + pick.IntN(2), Reply: reply}
}

// compilePause compiles a client's pause.
func compilePause(c *compiler, path string, a Action) (deed, string, error) {
	d := a.For.in(c.e)
	return c.withClient(path, a, fmt.Sprintf("pause client %s for %s", a.Client, d),
		func(_ context.Context, i, _ int) error { c.e.Gate.PauseClient(i, d); return nil })
}

// compileArm compiles the setting of a trap, whose client may be known
// only once the trap running this one springs.
func compileArm(c *compiler, path string, a Action) (deed, string, error) {
	t, name, err := c.trap(path+".trap", a.Trap)
	if err != nil {
		return nil, "", err
	}
	return func(_ context.Context, caught int) error {
		set, err := t(caught)
		if err != nil {
			return err
		}
		c.e.Gate.Arm(set)
		return nil
	}, "arm: " + name, nil
}

// compileCrashWaiter compiles the crash of the first client found waiting.
func compileCrashWaiter(c *compiler, _ string, a Action) (deed, string, error) {
	step := c.e.Gate.CrashWaiter(0, a.For.in(c.e))
	return func(ctx context.Context, _ int) error { return step.Do(ctx) }, step.Name, nil
}

// compileWhenAcquiring compiles then, done once a client is inside an
// acquire.
func compileWhenAcquiring(c *compiler, path string, a Action) (deed, string, error) {
	then, name, err := c.actionsOf(path+".then", a.Then)
	if err != nil {
		return nil, "", err
	}
	return c.withClient(path, a, fmt.Sprintf("%s, once client %s is inside an acquire", name, a.Client), func(ctx context.Context, i, caught int) error {
		return c.e.Gate.WhenAcquiring(0, i, name, func(ctx context.Context) error { return then(ctx, caught) }).Do(ctx)
	})
}
