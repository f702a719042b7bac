package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// AnyClient lets a trap spring on whichever client reaches it first.
const AnyClient = -1

// Trap waits for the next client to reach a place, and then does one thing
// to that client. The place is a command boundary on the client's own
// connections (Command), which needs nothing from the lock, or a named
// point that client code calls (Point: the workload's own, or one a user's
// lock offers for what no command shows).
type Trap struct {
	// Command, when set, is the command boundary the trap stands at.
	Command *Command
	// Point is the named point, when Command is nil.
	Point string
	// Client is the client it waits for, or AnyClient.
	Client int
	// Pause stops the client for this long. The whole client stops: every
	// connection it has freezes (no command leaves, replies wait; its
	// lock's watchdog and pub/sub included), as a process in a
	// stop-the-world pause does (Kleppmann's GC pause), unless Stall is set.
	Pause time.Duration
	// InLease, when set, ends the pause this long before the lease the
	// client holds runs out (its acquire's recorded deadline), however long
	// Then took: a story whose holder must wake inside its own lease keeps
	// that order on a machine where a restart is slow. Pause is then the
	// longest the pause lasts. Where Then itself ran past that point, the
	// holder no longer holds as its story tells, and the run is recorded
	// starved (fault.Starved), even with no pause to cut.
	InLease time.Duration
	// Outlast, when set, lets the pause go on past Pause, up to Outlast
	// more, until a write has been answered since the trap sprang (the
	// caught client is paused: another's), and no further into the lease
	// than InLease lets Pause: a story whose holder must wake after a
	// successor wrote keeps that order where the others come back slowly
	// (new worker processes on a loaded machine). Where a write comes in
	// time, the pause is Pause.
	Outlast time.Duration
	// MinPause is the shortest pause the story can be told with: a pause
	// that InLease cuts below it is recorded as a starved run
	// (fault.Starved), whose verdict is not evidence.
	MinPause time.Duration
	// Stall pauses only the goroutine at the place: slow work while the
	// rest of the client (its watchdog) lives.
	Stall bool
	// Crash kills the client's process there instead: the command does not
	// go out (or its reply is never seen), every connection of the process
	// is closed and no new one opens, as if the process died.
	Crash bool
	// Cancel cancels the context of the lock op the process is in, as its
	// caller gives up there (a request's deadline, a shutdown, Java's
	// interrupt): at a command's reply the command fails with the
	// context's error though it ran, as a reply that came after its caller
	// left. The process lives on (Gate.Abandoned), and so does whatever
	// its lock left running.
	Cancel bool
	// Then runs when the trap springs, before the pause: how the nemesis
	// acts at the exact moment a client stands there (bump a clock, kill a
	// node while a holder is inside its critical section).
	Then func(ctx context.Context, client, process int) error
	// ThenName says what Then does, for the schedule listing ("jump n3's
	// clock 5s forward"): a fault that happens inside a trap is still a
	// line of the schedule a person reads.
	ThenName string
	// After runs when the pause ends.
	After func(ctx context.Context, client, process int) error
}

// where says where the trap stands, for the schedule and the history.
func (t Trap) where() string {
	if t.Command != nil {
		return t.Command.String()
	}
	return t.Point
}

// Arm sets a trap; traps at one place spring in the order they were armed.
func (g *Gate) Arm(t Trap) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.traps = append(g.traps, t)
}

// Disarm removes every trap still armed: a fault phase that ends must not
// leave one behind to spring in the next.
func (g *Gate) Disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.traps = nil
}

// Idle says the gate has nothing left to do to the clients: no trap
// armed, none sprung and still at work, no client paused or waiting for
// its next acquire (WhenAcquiring). A run may end early only then.
func (g *Gate) Idle() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.traps) > 0 || g.springing > 0 {
		return false
	}
	for _, c := range g.clients {
		if c.restOf() > 0 || c.atAcquire != nil {
			return false
		}
	}
	return true
}

// ArmStep is a schedule step that arms t at offset at.
func (g *Gate) ArmStep(at time.Duration, t Trap) Step {
	return Step{At: at, Name: t.String(), Arms: true,
		Do: func(context.Context) error { g.Arm(t); return nil }}
}

// String says what the trap does and to whom, as a schedule lists it.
func (t Trap) String() string {
	what := fmt.Sprintf("pause %s", t.Pause)
	switch {
	case t.Crash:
		what = "crash"
	case t.Cancel:
		what = "cancel the op of"
	case t.Stall:
		what = fmt.Sprintf("stall %s", t.Pause)
	}
	if t.Outlast > 0 {
		what += fmt.Sprintf(" (up to %s more until another client has written)", t.Outlast)
	}
	switch {
	case t.InLease > 0 && t.Pause == 0:
		what += fmt.Sprintf(" (its actions done at least %s before its lease ends)", t.InLease)
	case t.InLease > 0:
		what += fmt.Sprintf(" (at most to %s before its lease ends)", t.InLease)
	}
	who := "the next client"
	if t.Client != AnyClient {
		who = fmt.Sprintf("client %d", t.Client)
	}
	name := fmt.Sprintf("%s %s at %s", what, who, t.where())
	if t.ThenName != "" {
		name += ", and there " + t.ThenName
	}
	return name
}

// take removes and returns the first trap that fits.
func (g *Gate) take(client int, fits func(Trap) bool) (Trap, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeLocked(client, fits)
}

// takeLocked is take with g.mu held. A trap that fits while the gate is
// held (Hold) stays armed. A trap taken is counted as springing from here
// (Idle), and its caller springs it, which ends the count.
func (g *Gate) takeLocked(client int, fits func(Trap) bool) (Trap, bool) {
	for i, t := range g.traps {
		if (t.Client == AnyClient || t.Client == client) && fits(t) {
			if !g.readyLocked() {
				return Trap{}, false
			}
			g.traps = append(g.traps[:i], g.traps[i+1:]...)
			g.springing++
			return t, true
		}
	}
	return Trap{}, false
}

// Hold keeps traps from springing before ready says the clients have made
// the traffic the story needs before its fault. A trap that fits before
// then is suspended for wait, every trap with it, and fits again at its
// first chance after; moved is told each suspension as it starts (the
// run moves its later steps and its time limit as far). A suspension that
// would take them past max is not begun: traps then spring as armed.
// Hold(nil, ...) ends the hold (the run's clients are done).
//
// Not springing at the first chance after ready is the point: that
// chance is mostly the next step of the client whose answer made the
// traffic, the client whose acquire just ended, and a trap there told
// another story (2 of 4 RedLock runs so held read safe). After a
// suspension much longer than a lock op the trap catches whichever
// client comes next, as one armed at a time of the plan's does.
func (g *Gate) Hold(ready func() bool, wait, max time.Duration, moved func(time.Duration)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = trapHold{ready: ready, wait: wait, max: max, moved: moved}
}

// readyLocked says whether traps may spring (Hold), with g.mu held.
func (g *Gate) readyLocked() bool {
	h := &g.hold
	if h.ready == nil || h.seen {
		return true
	}
	now := time.Now()
	if now.Before(h.until) {
		return false
	}
	if h.seen = h.ready() || h.total+h.wait > h.max; h.seen {
		return true
	}
	h.until, h.total = now.Add(h.wait), h.total+h.wait
	if h.moved != nil {
		h.moved(h.wait)
	}
	return false
}

// spring carries out trap t on process of client, standing at where: in
// words, and as a site (its point, or its command boundary). own says the
// process's own code stands there, between ops (At): a crash then records
// the process's end before the kill (endBefore).
func (g *Gate) spring(ctx context.Context, t Trap, client, process int, where string, at history.Site, own bool) error {
	target := fmt.Sprintf("process %d at %s", process, where)
	site := &at
	site.Client, site.Process = history.IDOf(client), history.IDOf(process)
	// takeLocked counted the trap as springing when it took it.
	defer func() {
		g.mu.Lock()
		g.springing--
		g.mu.Unlock()
	}()
	written, _ := g.rec.Writes()
	if t.Then != nil {
		g.Fail(ctx, t.Then(ctx, client, process))
	}
	if t.Crash {
		ended := own && g.endBefore(client, process)
		g.kill(client, process, target, site)
		if ended {
			return errDied
		}
		return ErrCrashed
	}
	if t.Cancel {
		g.cancelOp(client, process, target, site)
	}
	pause := g.pauseFor(t, process, target, site)
	// A stall holds only the goroutine at the place, which outlast
	// keeps; a pause holds the whole client past its end meanwhile.
	held := !t.Stall && t.Outlast > 0
	if pause > 0 {
		f := fault.Pause
		switch {
		case t.Stall:
			f = fault.Stall
		case held:
			g.holdPast(client, true)
			g.freeze(client, pause)
			// A pending read's deadline goes on by as long as the pause
			// may: a held one outlasts pause by up to Outlast.
			g.extendConns(client, t.Outlast)
		default:
			g.freeze(client, pause)
		}
		_ = record(g.rec, f, &history.Value{Target: target, Duration: int64(pause), Site: site}, nil)
		more := g.outlast(ctx, t, process, pause, written)
		if held {
			g.holdPast(client, false)
		}
		// A pause that went on says by how much, on its resume.
		_ = record(g.rec, fault.Resume, &history.Value{Target: target, Duration: int64(more), Site: site}, nil)
	}
	if t.After != nil {
		g.Fail(ctx, t.After(ctx, client, process))
	}
	return nil
}

// At is called by the workload's code when process (of client) reaches a
// named point between its ops. It returns at once unless a trap waits there
// or the client is paused: then it pauses, or returns ErrCrashed and the
// caller must stop as a dead process would. Where the trap crashed the
// process there, the error is history.ErrEndRecorded too: the gate has
// recorded the process's end, and the caller records nothing more of it.
func (g *Gate) At(ctx context.Context, client, process int, point string) error {
	return g.at(ctx, client, process, point, true)
}

// LockPoint is At for a point of a lock's own (locks.Config.Point), which
// any goroutine of the lock may reach, inside an op or between the
// workload's ops (a watchdog's): a crash there leaves the process's end to
// its own code, as one inside a command does.
func (g *Gate) LockPoint(ctx context.Context, client, process int, point string) error {
	return g.at(ctx, client, process, point, false)
}

func (g *Gate) at(ctx context.Context, client, process int, point string, own bool) error {
	if g == nil {
		return nil
	}
	if g.Dead(process) {
		return ErrCrashed
	}
	if t, ok := g.take(client, func(t Trap) bool { return t.Command == nil && t.Point == point }); ok {
		return g.spring(ctx, t, client, process, point, history.Site{Point: point}, own)
	}
	g.waitThaw(ctx, client)
	return nil
}
