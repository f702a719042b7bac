package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/locktorture/locktorture/history"
)

// ErrCrashed is what a client gets at a point where the nemesis crashed it.
var ErrCrashed = errors.New("client crashed by the nemesis")

// AnyClient lets a trap spring on whichever client reaches its point first.
const AnyClient = -1

// Trap waits at a named point of client code for the next client to reach
// it, and then does one thing to that client.
type Trap struct {
	Point string
	// Client is the client it waits for, or AnyClient.
	Client int
	// Pause stops the client for this long. The whole client stops, its
	// lock's watchdog included, as a process in a stop-the-world pause does
	// (Kleppmann's GC pause), unless Stall is set.
	Pause time.Duration
	// Stall pauses only the goroutine at the point: slow work in the
	// critical section while the rest of the client (its watchdog) lives.
	Stall bool
	// Crash kills the client at the point instead: it must stop as a dead
	// process would.
	Crash bool
	// Then runs when the trap springs, before the pause: how the nemesis
	// acts at the exact moment a client stands at a point (bump a clock,
	// kill a node while a holder is inside its critical section).
	Then func(ctx context.Context, client, process int) error
	// After runs when the pause ends.
	After func(ctx context.Context, client, process int) error
}

// Gate stands at every named point of client code (the workload's own,
// like the critical section's before-write, and the locks' protocol points,
// like RedLock's before-replies) and springs the traps the nemesis armed
// there: the in-process twin of a GC pause or a process death at exactly
// the wrong moment.
type Gate struct {
	rec *history.Recorder

	mu         sync.Mutex
	traps      []Trap
	pauseUntil map[int]time.Time
	err        error
}

// NewGate records its actions in rec.
func NewGate(rec *history.Recorder) *Gate {
	return &Gate{rec: rec, pauseUntil: map[int]time.Time{}}
}

// Arm sets a trap; traps at one point spring in the order they were armed.
func (g *Gate) Arm(t Trap) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.traps = append(g.traps, t)
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
	return Step{At: at, Name: fmt.Sprintf("%s the next client at %s", what, t.Point),
		Do: func(context.Context) error { g.Arm(t); return nil }}
}

// Err is the first error a trap's Then or After returned: a fault that
// could not be injected, which makes the run meaningless.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// PauseClient stops client at every point it reaches in the next d, its
// lock's watchdog included. Work already between two points (a command in
// flight) completes.
func (g *Gate) PauseClient(client int, d time.Duration) {
	g.mu.Lock()
	g.pauseUntil[client] = time.Now().Add(d)
	g.mu.Unlock()
	_ = record(g.rec, history.Pause, &history.Value{Target: fmt.Sprintf("client %d", client), Duration: int64(d)}, nil)
	time.AfterFunc(d, func() {
		_ = record(g.rec, history.Resume, &history.Value{Target: fmt.Sprintf("client %d", client)}, nil)
	})
}

// take removes and returns the first trap at point for client.
func (g *Gate) take(client int, point string) (Trap, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, t := range g.traps {
		if t.Point == point && (t.Client == AnyClient || t.Client == client) {
			g.traps = append(g.traps[:i], g.traps[i+1:]...)
			return t, true
		}
	}
	return Trap{}, false
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

// At is called by client code when process (of client) reaches point. It
// returns at once unless a trap waits there or the client is paused: then
// it pauses, or returns ErrCrashed and the caller must stop as a dead
// process would.
func (g *Gate) At(ctx context.Context, client, process int, point string) error {
	if g == nil {
		return nil
	}
	if t, ok := g.take(client, point); ok {
		target := fmt.Sprintf("process %d at %s", process, point)
		if t.Then != nil {
			g.fail(t.Then(ctx, client, process))
		}
		if t.Crash {
			_ = record(g.rec, "crash", &history.Value{Target: target}, nil)
			return ErrCrashed
		}
		if t.Pause > 0 {
			f := history.Pause
			if t.Stall {
				f = "stall"
			} else {
				g.mu.Lock()
				g.pauseUntil[client] = time.Now().Add(t.Pause)
				g.mu.Unlock()
			}
			_ = record(g.rec, f, &history.Value{Target: target, Duration: int64(t.Pause)}, nil)
			sleep(ctx, t.Pause)
			_ = record(g.rec, history.Resume, &history.Value{Target: target}, nil)
		}
		if t.After != nil {
			g.fail(t.After(ctx, client, process))
		}
		return nil
	}
	g.mu.Lock()
	until := g.pauseUntil[client]
	g.mu.Unlock()
	if rest := time.Until(until); rest > 0 {
		sleep(ctx, rest)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
