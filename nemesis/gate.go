package nemesis

import (
	"sync"
	"time"

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
