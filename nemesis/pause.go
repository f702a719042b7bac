package nemesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/locktorture/locktorture/history"
)

// ClientPauser stalls a client at a named point in its code (the workload
// names its points), the in-process
// twin of a stop-the-world GC pause: the client's goroutine stops, its lease
// keeps ticking in Redis.
type ClientPauser struct {
	rec *history.Recorder

	mu    sync.Mutex
	armed map[string]time.Duration
}

// NewClientPauser records its actions in rec.
func NewClientPauser(rec *history.Recorder) *ClientPauser {
	return &ClientPauser{rec: rec, armed: map[string]time.Duration{}}
}

// Arm makes the next client that reaches point stop there for d.
func (p *ClientPauser) Arm(point string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed[point] = d
}

// At is called by a workload when process reaches point. If the point is
// armed, this client takes the pause (one client per arming) and returns
// when it is over or ctx ends.
func (p *ClientPauser) At(ctx context.Context, process int, point string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	d, ok := p.armed[point]
	delete(p.armed, point)
	p.mu.Unlock()
	if !ok {
		return
	}
	target := fmt.Sprintf("process %d at %s", process, point)
	record(p.rec, history.Pause, &history.Value{Target: target, Duration: int64(d)})
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	record(p.rec, history.Resume, &history.Value{Target: target})
}

// ArmStep is a schedule step that arms point for d at offset at.
func (p *ClientPauser) ArmStep(at time.Duration, point string, d time.Duration) Step {
	return Step{At: at, Name: fmt.Sprintf("pause next client at %s for %s", point, d),
		Do: func(context.Context) error { p.Arm(point, d); return nil }}
}
