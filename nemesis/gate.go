package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Gate stands wherever a client can be caught: at every command boundary of
// the connections the harness hands a lock (through Hook), and at the named
// points client code calls (At). It springs the traps the nemesis armed,
// pauses whole clients and kills their processes: the in-process twin of a
// GC pause or a process death at exactly the wrong moment, which no lock
// can dodge as long as it talks to Redis through the clients it was given.
// Its families each have a file: traps.go (where a client is caught),
// pauses.go, crashes.go, procs.go (clients as OS processes) and hook.go
// (the connections' side).
//
// What it knows is kept two ways, because a client outlives its processes
// (a crashed client goes on as a new process): a pause is the client's, a
// death and the connections to close with it are one process's.
type Gate struct {
	rec *history.Recorder

	mu      sync.Mutex
	traps   []Trap
	clients map[int]*client
	procs   map[int]*proc
	err     error
	// profile is what the ops sent, op kind by op kind (Profile).
	profile Profile
	// hold keeps traps until the story's traffic is there (Hold).
	hold trapHold
	// springing counts the traps sprung and not yet over (Idle).
	springing int
	// trace is when each command was sent and answered (Trace).
	trace trace
}

// trapHold is the gate's Hold: what it was told, whether ready said yes
// (seen), when the suspension in force ends, and how long the
// suspensions were in all.
type trapHold struct {
	ready     func() bool
	wait, max time.Duration
	moved     func(time.Duration)
	seen      bool
	until     time.Time
	total     time.Duration
}

// client is what the gate knows of one client, across its processes.
type client struct {
	// pauseUntil is when its pause ends (PauseClient, a trap's pause).
	pauseUntil time.Time
	// held keeps it paused past pauseUntil while a trap's pause outlasts
	// (Trap.Outlast).
	held bool
	// op is its current lock op, nil before its first.
	op *currentOp
	// atAcquire runs in its next Begin of an acquire (WhenAcquiring).
	atAcquire func()
	// learnt names the op kinds of which process learntBy has ended one op: a
	// process's first op of a kind does its one-time work (a script's
	// loading, a question about the servers), which the profile leaves
	// out.
	learnt   map[string]bool
	learntBy int
	// newest is the latest process a hook was made for (hooked), the
	// client's current one: a trace calls an older one's commands
	// retired.
	newest int
	hooked bool
}

// currentOp is a client's current lock op, as the traps select it.
type currentOp struct {
	process int
	f       string
	since   time.Time
	cmds    []sent
	// cancel cancels the op's context: with errGaveUp for a Cancel trap.
	cancel context.CancelCauseFunc
}

// errGaveUp is why a Cancel trap cancelled an op's context: the hook tells
// it from a deadline of the lock's own (RedLock's per-node timeout) that a
// paused client's reply outlived.
var errGaveUp = errors.New("the caller gave up on the op")

// proc is what the gate knows of one process of a client.
type proc struct {
	client int
	dead   bool
	// abandoned: a Cancel trap gave up on its op for its caller.
	abandoned bool
	// conns are its open connections, closed when it is killed and
	// frozen when its client is paused.
	conns map[*frozenConn]bool
	// os is set while it runs as an OS process of its own (Attach).
	os *osProcess
}

// NewGate records its actions in rec.
func NewGate(rec *history.Recorder) *Gate {
	return &Gate{rec: rec, clients: map[int]*client{}, procs: map[int]*proc{}, profile: Profile{}}
}

// clientLocked is what the gate knows of client c, made on first use.
func (g *Gate) clientLocked(c int) *client {
	s := g.clients[c]
	if s == nil {
		s = &client{}
		g.clients[c] = s
	}
	return s
}

// procLocked is what the gate knows of process of client c, made on first
// use.
func (g *Gate) procLocked(c, process int) *proc {
	p := g.procs[process]
	if p == nil {
		p = &proc{client: c}
		g.procs[process] = p
	}
	return p
}

// forgetLocked drops a process with nothing left to freeze or refuse: long
// runs retire thousands of processes, and every pause walks those kept. A
// killed one is kept, so it can never connect again.
func (g *Gate) forgetLocked(process int) {
	if p := g.procs[process]; p != nil && !p.dead && p.os == nil && len(p.conns) == 0 {
		delete(g.procs, process)
	}
}

// deadLocked reports whether the nemesis killed process.
func (g *Gate) deadLocked(process int) bool {
	p := g.procs[process]
	return p != nil && p.dead
}

// Err is the first error a trap's Then or After returned: a fault that
// could not be injected, which makes the run meaningless.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Fail records err (when not nil) as Err, unless an earlier error is
// there or err is only the end of ctx, the run's (CutShort): how a fault
// done outside a schedule's steps (a restart delayed in its own
// goroutine) says it could not be injected.
func (g *Gate) Fail(ctx context.Context, err error) {
	if err = CutShort(ctx, err); err == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
	}
}

// Begin tells the gate that process of client starts lock op f
// (history.Acquire or history.Release): command traps select by it. The op
// runs under the context it returns, which a Cancel trap cancels as a
// caller that gives up would; End releases it.
func (g *Gate) Begin(ctx context.Context, client, process int, f string) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	g.mu.Lock()
	c := g.clientLocked(client)
	if c.op != nil && c.op.f == "" {
		// What the client sent since its last op ended is its renewals.
		g.profile.note(Renewal, c.op.cmds)
	}
	c.op = &currentOp{process: process, f: f, since: time.Now(), cancel: cancel}
	var run func()
	if f == history.Acquire {
		run, c.atAcquire = c.atAcquire, nil
	}
	g.mu.Unlock()
	if run != nil {
		run()
	}
	return ctx
}

// End tells the gate the op ended, and reports whether the process died
// meanwhile: its outcome is then unknown whatever the lock returned.
func (g *Gate) End(client, process int) (crashed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.clients[client]; c != nil && c.op != nil && c.op.process == process {
		if c.learnt == nil || c.learntBy != process {
			c.learnt, c.learntBy = map[string]bool{}, process
		}
		ours, apart := splitApart(c.op.cmds)
		if c.learnt[c.op.f] {
			g.profile.note(c.op.f, ours)
		}
		g.profile.note(Renewal, apart)
		c.learnt[c.op.f] = true
		c.op.f, c.op.cmds = "", nil
		if c.op.cancel != nil {
			c.op.cancel(nil)
			c.op.cancel = nil
		}
	}
	return g.deadLocked(process)
}

// Abandoned reports whether a Cancel trap gave up on an op of process for
// its caller. The process is not dead: whatever the lock left running for
// it (a watchdog) runs on, on its connections, as in an application whose
// request gave up while the process lived.
func (g *Gate) Abandoned(process int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.procs[process]
	return p != nil && p.abandoned
}

// cancelOp cancels the context of process's current op, for a Cancel
// trap, and records it.
func (g *Gate) cancelOp(client, process int, target string, site *history.Site) {
	g.mu.Lock()
	var cancel context.CancelCauseFunc
	if c := g.clients[client]; c != nil && c.op != nil && c.op.process == process {
		cancel = c.op.cancel
	}
	if cancel != nil {
		g.procLocked(client, process).abandoned = true
	}
	g.mu.Unlock()
	_ = record(g.rec, fault.Cancel, &history.Value{Target: target, Site: site}, func() error {
		if cancel == nil {
			return fmt.Errorf("nemesis: process %d is in no lock op to cancel", process)
		}
		cancel(errGaveUp)
		return nil
	})
}

// paused reports whether c is paused now.
func (c *client) paused() bool { return c.held || time.Now().Before(c.pauseUntil) }

// restOf is how long c's pause lasts at least from now: a held pause is
// looked at again after thawTick.
func (c *client) restOf() time.Duration {
	rest := time.Until(c.pauseUntil)
	if c.held {
		return max(rest, thawTick)
	}
	return rest
}

// thawTick is how often a held pause is looked at: how late after its
// hold ends a client goes on.
const thawTick = 5 * time.Millisecond
