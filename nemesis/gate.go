package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/locktorture/locktorture/history"
)

// ErrCrashed is what a client gets where the nemesis crashed it: at a point,
// or from every command and connection of its dead process.
var ErrCrashed = errors.New("client crashed by the nemesis")

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
	// longest the pause lasts.
	InLease time.Duration
	// MinPause is the shortest pause the story can be told with: a pause
	// that InLease cuts below it is recorded as a starved run
	// (history.Starved), whose verdict is not evidence.
	MinPause time.Duration
	// Stall pauses only the goroutine at the place: slow work while the
	// rest of the client (its watchdog) lives.
	Stall bool
	// Crash kills the client's process there instead: the command does not
	// go out (or its reply is never seen), every connection of the process
	// is closed and no new one opens, as if the process died.
	Crash bool
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

// Gate stands wherever a client can be caught: at every command boundary of
// the connections the harness hands a lock (through Hook), and at the named
// points client code calls (At). It springs the traps the nemesis armed,
// pauses whole clients and kills their processes: the in-process twin of a
// GC pause or a process death at exactly the wrong moment, which no lock
// can dodge as long as it talks to Redis through the clients it was given.
type Gate struct {
	rec *history.Recorder

	mu         sync.Mutex
	traps      []Trap
	pauseUntil map[int]time.Time
	clients    map[int]*clientState
	dead       map[int]bool
	conns      map[int]map[*frozenConn]bool
	procs      map[int]*osProcess
	// atAcquire runs in a client's next Begin of an acquire (WhenAcquiring).
	atAcquire map[int]func()
	err       error
}

// osProcess is a client process that runs as an OS process of its own.
type osProcess struct {
	client  int
	p       *os.Process
	stopped bool
}

// clientState is what the gate knows of a client's current lock op.
type clientState struct {
	process int
	op      string
	since   time.Time
	cmds    []sent
}

// NewGate records its actions in rec.
func NewGate(rec *history.Recorder) *Gate {
	return &Gate{rec: rec, pauseUntil: map[int]time.Time{}, clients: map[int]*clientState{},
		dead: map[int]bool{}, conns: map[int]map[*frozenConn]bool{}, procs: map[int]*osProcess{},
		atAcquire: map[int]func(){}}
}

// Attach tells the gate that process of client runs as OS process p (a
// worker): from then on a pause of the client stops it with SIGSTOP and
// resumes it with SIGCONT, so everything in it stops (timers, its
// watchdog, the Go runtime), and a crash is SIGKILL, so nothing of it
// survives and nothing needs its cooperation.
func (g *Gate) Attach(client, process int, p *os.Process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	op := &osProcess{client: client, p: p}
	g.procs[process] = op
	if time.Now().Before(g.pauseUntil[client]) {
		g.stopLocked(op)
	}
}

// Detach forgets process's OS process: it has exited.
func (g *Gate) Detach(process int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.procs, process)
}

// stopLocked sends SIGSTOP and has SIGCONT follow when the client's pause
// ends (however often it is extended meanwhile).
func (g *Gate) stopLocked(op *osProcess) {
	if op.stopped {
		return
	}
	if err := op.p.Signal(syscall.SIGSTOP); err != nil {
		return // it has exited: there is nothing to stop
	}
	op.stopped = true
	var cont func()
	cont = func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if rest := time.Until(g.pauseUntil[op.client]); rest > 0 {
			time.AfterFunc(rest, cont)
			return
		}
		op.stopped = false
		_ = op.p.Signal(syscall.SIGCONT)
	}
	time.AfterFunc(time.Until(g.pauseUntil[op.client]), cont)
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

// ArmStep is a schedule step that arms t at offset at.
func (g *Gate) ArmStep(at time.Duration, t Trap) Step {
	what := fmt.Sprintf("pause %s", t.Pause)
	switch {
	case t.Crash:
		what = "crash"
	case t.Stall:
		what = fmt.Sprintf("stall %s", t.Pause)
	}
	if t.InLease > 0 {
		what += fmt.Sprintf(" (at most to %s before its lease ends)", t.InLease)
	}
	name := fmt.Sprintf("%s the next client at %s", what, t.where())
	if t.ThenName != "" {
		name += ", and there " + t.ThenName
	}
	return Step{At: at, Name: name,
		Do: func(context.Context) error { g.Arm(t); return nil }}
}

// Err is the first error a trap's Then or After returned: a fault that
// could not be injected, which makes the run meaningless.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *Gate) fail(err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
	}
}

// PauseClient stops client for d, whole: its connections freeze and it
// waits at every point it reaches, its lock's watchdog included.
func (g *Gate) PauseClient(client int, d time.Duration) {
	g.freeze(client, d)
	_ = record(g.rec, history.Pause, &history.Value{Target: fmt.Sprintf("client %d", client), Duration: int64(d)}, nil)
	time.AfterFunc(d, func() {
		_ = record(g.rec, history.Resume, &history.Value{Target: fmt.Sprintf("client %d", client)}, nil)
	})
}

// freeze pauses client for d: an OS process of its own is stopped; the
// connections of one in this process freeze, and their reads and writes
// already under way have their deadlines pushed back by d, so a frozen
// process's pending read does not time out (the others wait at their next
// Read or Write).
func (g *Gate) freeze(client int, d time.Duration) {
	g.mu.Lock()
	if until := time.Now().Add(d); until.After(g.pauseUntil[client]) {
		g.pauseUntil[client] = until
	}
	for _, op := range g.procs {
		if op.client == client {
			g.stopLocked(op)
		}
	}
	var mine []*frozenConn
	for _, cs := range g.conns {
		for c := range cs {
			if c.client == client {
				mine = append(mine, c)
			}
		}
	}
	g.mu.Unlock()
	for _, c := range mine {
		c.extend(d)
	}
}

// waitThaw blocks while client is paused and returns how long it waited.
func (g *Gate) waitThaw(ctx context.Context, client int) time.Duration {
	start := time.Now()
	for {
		g.mu.Lock()
		rest := time.Until(g.pauseUntil[client])
		g.mu.Unlock()
		if rest <= 0 || !sleep(ctx, rest) {
			return time.Since(start)
		}
	}
}

// Begin tells the gate that process of client starts lock op f
// (history.Acquire or history.Release): command traps select by it.
func (g *Gate) Begin(client, process int, f string) {
	g.mu.Lock()
	g.clients[client] = &clientState{process: process, op: f, since: time.Now()}
	var run func()
	if f == history.Acquire {
		run = g.atAcquire[client]
		delete(g.atAcquire, client)
	}
	g.mu.Unlock()
	if run != nil {
		run()
	}
}

// End tells the gate the op ended, and reports whether the process died
// meanwhile: its outcome is then unknown whatever the lock returned.
func (g *Gate) End(client, process int) (crashed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.clients[client]; s != nil && s.process == process {
		s.op, s.cmds = "", nil
	}
	return g.dead[process]
}

// Dead reports whether the nemesis killed process.
func (g *Gate) Dead(process int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dead[process]
}

// kill ends process as a dying process ends: its connections close, none
// opens again, every command fails.
func (g *Gate) kill(process int, target string) {
	g.mu.Lock()
	g.dead[process] = true
	conns := g.conns[process]
	delete(g.conns, process)
	if op := g.procs[process]; op != nil {
		_ = op.p.Kill() // it may have exited already
	}
	g.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close() // already off the books
	}
	_ = record(g.rec, "crash", &history.Value{Target: target}, nil)
}

// CrashWaiter is a schedule step that, from at on, kills the first client
// found inside an acquire that has lasted at least waited: a waiter, queued
// or polling, whatever the lock does while it waits (S5).
func (g *Gate) CrashWaiter(at, waited time.Duration) Step {
	return Step{At: at, Name: fmt.Sprintf("crash the next client waiting %s in acquire", waited),
		Do: func(ctx context.Context) error {
			for {
				g.mu.Lock()
				victim, process := -1, 0
				for c, s := range g.clients {
					if s.op == history.Acquire && time.Since(s.since) >= waited && !g.dead[s.process] {
						victim, process = c, s.process
						break
					}
				}
				g.mu.Unlock()
				if victim >= 0 {
					g.kill(process, fmt.Sprintf("process %d waiting in acquire", process))
					return nil
				}
				if !sleep(ctx, 5*time.Millisecond) {
					return nil
				}
			}
		}}
}

// WhenAcquiring is a schedule step that, from at on, runs do once client
// is inside an acquire: at once if it is, else as its next acquire begins,
// in its own goroutine before the lock moves (an acquire that wins at once
// lasts a few ms, too short to be caught by looking). A client inside an
// acquire has no request to the store in flight: its last write was
// answered. Removing a delay from its store link while a write is held
// back lets that write land at once, ahead of a successor's, a race the
// story did not tell.
func (g *Gate) WhenAcquiring(at time.Duration, client int, name string, do func(context.Context) error) Step {
	return Step{At: at, Name: fmt.Sprintf("%s, once client %d is inside an acquire", name, client),
		Do: func(ctx context.Context) error {
			done := make(chan error, 1)
			run := func() { done <- do(ctx) }
			g.mu.Lock()
			if s := g.clients[client]; s != nil && s.op == history.Acquire {
				g.mu.Unlock()
				run()
			} else {
				g.atAcquire[client] = run
				g.mu.Unlock()
			}
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
				g.mu.Lock()
				delete(g.atAcquire, client)
				g.mu.Unlock()
				return nil
			}
		}}
}

// take removes and returns the first trap that fits.
func (g *Gate) take(client int, fits func(Trap) bool) (Trap, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.takeLocked(client, fits)
}

// takeLocked is take with g.mu held.
func (g *Gate) takeLocked(client int, fits func(Trap) bool) (Trap, bool) {
	for i, t := range g.traps {
		if (t.Client == AnyClient || t.Client == client) && fits(t) {
			g.traps = append(g.traps[:i], g.traps[i+1:]...)
			return t, true
		}
	}
	return Trap{}, false
}

// spring carries out trap t on process of client, standing at where.
func (g *Gate) spring(ctx context.Context, t Trap, client, process int, where string) error {
	target := fmt.Sprintf("process %d at %s", process, where)
	if t.Then != nil {
		g.fail(t.Then(ctx, client, process))
	}
	if t.Crash {
		g.kill(process, target)
		return ErrCrashed
	}
	pause := g.pauseFor(t, process, target)
	if pause > 0 {
		f := history.Pause
		if t.Stall {
			f = "stall"
		} else {
			g.freeze(client, pause)
		}
		_ = record(g.rec, f, &history.Value{Target: target, Duration: int64(pause)}, nil)
		sleep(ctx, pause)
		_ = record(g.rec, history.Resume, &history.Value{Target: target}, nil)
	}
	if t.After != nil {
		g.fail(t.After(ctx, client, process))
	}
	return nil
}

// pauseFor is how long trap t pauses process now that Then has run: Pause,
// cut to end InLease before the process's lease, and recorded as starved
// where that leaves less than MinPause.
func (g *Gate) pauseFor(t Trap, process int, target string) time.Duration {
	if t.InLease <= 0 {
		return t.Pause
	}
	deadline := g.rec.Deadline(process)
	if deadline == 0 {
		return t.Pause
	}
	left := time.Duration(deadline-g.rec.Now()) - t.InLease
	pause := max(0, min(t.Pause, left))
	if pause < t.MinPause {
		_ = record(g.rec, history.Starved, &history.Value{Target: fmt.Sprintf(
			"the pause of %s could last only %s to end %s inside its lease, and the story needs %s",
			target, max(0, left).Round(time.Millisecond), t.InLease, t.MinPause), Duration: int64(t.MinPause - pause)}, nil)
	}
	return pause
}

// At is called by client code when process (of client) reaches a named
// point. It returns at once unless a trap waits there or the client is
// paused: then it pauses, or returns ErrCrashed and the caller must stop as
// a dead process would.
func (g *Gate) At(ctx context.Context, client, process int, point string) error {
	if g == nil {
		return nil
	}
	if g.Dead(process) {
		return ErrCrashed
	}
	if t, ok := g.take(client, func(t Trap) bool { return t.Command == nil && t.Point == point }); ok {
		return g.spring(ctx, t, client, process, point)
	}
	g.waitThaw(ctx, client)
	return nil
}

// sleep waits d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
