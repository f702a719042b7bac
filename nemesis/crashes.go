package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// ErrCrashed is what a client gets where the nemesis crashed it: at a point,
// or from every command and connection of its dead process.
var ErrCrashed = errors.New("client crashed by the nemesis")

// errDied is ErrCrashed where the gate recorded the process's end itself
// (endBefore).
var errDied = fmt.Errorf("%w: %w", ErrCrashed, history.ErrEndRecorded)

// Dead reports whether the nemesis killed process.
func (g *Gate) Dead(process int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deadLocked(process)
}

// kill ends process of client as a dying process ends: its connections
// close, none opens again (one it never dialled included), every command
// fails. target and site say where it stood. The fault's op begins before
// the kill takes effect, so that nothing the kill lets another process do
// comes before it in the history.
func (g *Gate) kill(client, process int, target string, site *history.Site) {
	_ = record(g.rec, fault.Crash, &history.Value{Target: target, Site: site}, func() error {
		g.mu.Lock()
		p := g.procLocked(client, process)
		p.dead = true
		conns := p.conns
		p.conns = nil
		if p.os != nil {
			_ = p.os.p.Kill() // it may have exited already
		}
		g.mu.Unlock()
		for c := range conns {
			_ = c.Conn.Close() // already off the books
		}
		return nil
	})
}

// endBefore records the end of process (an invoke and an info of
// history.Crash) before the gate kills it, where no lock op of it is in
// flight, and reports whether it did. Its caller knows the process's own
// code stands in the gate (At), so no store op is in flight either. Left
// to that code, which records its end when it learns of the kill, the end
// came on a loaded machine after what the kill let another process do: a
// waiter granted the row the dead process's connection held read as a
// second holder beside it (killed-holder / mysql-for-update, 37 µs). With
// an op in flight, the op's own invoke came before the kill, and its
// completion ends it.
func (g *Gate) endBefore(client, process int) bool {
	g.mu.Lock()
	c := g.clientLocked(client)
	busy := c.op != nil && c.op.process == process && c.op.f != ""
	g.mu.Unlock()
	if busy {
		return false
	}
	g.rec.End(process, ErrCrashed)
	return true
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
					if op := s.op; op != nil && op.f == history.Acquire && time.Since(op.since) >= waited && !g.deadLocked(op.process) {
						victim, process = c, op.process
						break
					}
				}
				g.mu.Unlock()
				if victim >= 0 {
					g.kill(victim, process, fmt.Sprintf("process %d waiting in acquire", process), &history.Site{
						Client: history.IDOf(victim), Process: history.IDOf(process), In: history.Acquire, Waiting: true})
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
			if c := g.clientLocked(client); c.op != nil && c.op.f == history.Acquire {
				g.mu.Unlock()
				run()
			} else {
				c.atAcquire = run
				g.mu.Unlock()
			}
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
				g.mu.Lock()
				g.clientLocked(client).atAcquire = nil
				g.mu.Unlock()
				return nil
			}
		}}
}
