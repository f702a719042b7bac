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

// Gate stands at every named point of client code (the workload's own,
// like the critical section's before-write, and the locks' protocol points,
// like RedLock's before-replies) and lets the nemesis stall or kill the
// client there: the in-process twin of a stop-the-world GC pause or a
// process death at exactly the wrong moment.
type Gate struct {
	rec *history.Recorder

	mu         sync.Mutex
	pauseAt    map[string]time.Duration
	crashAt    map[string]bool
	pauseUntil map[int]time.Time
}

// NewGate records its actions in rec.
func NewGate(rec *history.Recorder) *Gate {
	return &Gate{rec: rec, pauseAt: map[string]time.Duration{}, crashAt: map[string]bool{}, pauseUntil: map[int]time.Time{}}
}

// ArmPause makes the next client that reaches point stop there for d.
func (g *Gate) ArmPause(point string, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauseAt[point] = d
}

// ArmCrash makes the next client that reaches point die there.
func (g *Gate) ArmCrash(point string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.crashAt[point] = true
}

// PauseClient stops client at every point it reaches in the next d, its
// lock's watchdog included: the whole client stands still, as a process
// in a stop-the-world pause does. Work already between two points (a
// command in flight) completes.
func (g *Gate) PauseClient(client int, d time.Duration) {
	g.mu.Lock()
	g.pauseUntil[client] = time.Now().Add(d)
	g.mu.Unlock()
	_ = record(g.rec, history.Pause, &history.Value{Target: fmt.Sprintf("client %d", client), Duration: int64(d)}, nil)
	time.AfterFunc(d, func() {
		_ = record(g.rec, history.Resume, &history.Value{Target: fmt.Sprintf("client %d", client)}, nil)
	})
}

// At is called by client code when process (of client) reaches point. It
// returns at once unless the nemesis stands there: then it pauses, or
// returns ErrCrashed and the caller must stop as a dead process would.
func (g *Gate) At(ctx context.Context, client, process int, point string) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	crash := g.crashAt[point]
	delete(g.crashAt, point)
	d, armed := g.pauseAt[point]
	if !crash {
		delete(g.pauseAt, point)
	}
	until := g.pauseUntil[client]
	g.mu.Unlock()
	target := fmt.Sprintf("process %d at %s", process, point)
	if crash {
		_ = record(g.rec, "crash", &history.Value{Target: target}, nil)
		return ErrCrashed
	}
	if armed {
		_ = record(g.rec, history.Pause, &history.Value{Target: target, Duration: int64(d)}, nil)
		sleep(ctx, d)
		_ = record(g.rec, history.Resume, &history.Value{Target: target}, nil)
	}
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

// ArmPauseStep is a schedule step that arms a pause at point.
func (g *Gate) ArmPauseStep(at time.Duration, point string, d time.Duration) Step {
	return Step{At: at, Name: fmt.Sprintf("pause next client at %s for %s", point, d),
		Do: func(context.Context) error { g.ArmPause(point, d); return nil }}
}
