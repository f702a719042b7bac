// Package lateness measures how late the harness itself ran during a run:
// its own timers, the replies of a node that no fault touches, how far a
// pause or stall overran its planned end, and a restart's time to ready. A
// verdict that rests on timing is evidence only where these stayed well
// inside the lease; where they did not, the machine was starved and the
// run says so instead of judging. It also records, unjudged, how long the
// clients' worker processes waited for a core.
package lateness

import (
	"context"
	"sync"
	"time"
)

// Kind is what a sample measured.
type Kind string

// The kinds of lateness a run measures.
const (
	// Timer is how much later than asked a sleep of the harness woke: the
	// scheduler's and the Go runtime's delay, which every pause, trap and
	// lease check of the harness pays too.
	Timer Kind = "timer"
	// Reply is a round trip to a node no fault touches, straight to its
	// port: how long a server on this machine takes to answer anyone.
	Reply Kind = "reply"
	// Server is a round trip to a lock node that is not Redis (PostgreSQL,
	// memcached, ZooKeeper, etcd), straight to its port, in a story that
	// touches no lock node's process: how long the lock's own server takes
	// to answer anyone. It has a limit of its own (ServerFraction), because
	// such a server answers more slowly than Redis beside busy work and its
	// clients bound their requests to match; and past it, it starves a run
	// that came out vacuous or deadlocked, what a stalled server makes by
	// itself, and, in a story with a fault, a pass or a run that showed
	// less than expected, whose waiters it may have kept from the key or
	// let in late (package verdict); not a violation at least as serious
	// as expected.
	Server Kind = "server"
	// Pause is how long after its planned end a pause or stall of a
	// client was lifted: the one fault whose end a story places inside a
	// lease, so an overrun moves the story's order of events directly.
	Pause Kind = "pause"
	// Worker is how long a client's worker process (a library's PHP,
	// Python or JVM worker, or the harness's own with -client-procs) stood
	// runnable but not running over the trailing Options.Span: what the
	// machine kept it from a core. It is a figure for a reader, not a
	// limit (Over passes it by): a pair's own workers, retrying in a loop,
	// keep each other waiting as much as a neighbour does (misconf's
	// redis-py, alone on the machine, 375 ms within a 500 ms TTL), so the
	// wait cannot tell a neighbour's delay from the story's own.
	Worker Kind = "worker"
	// Wall is how far the machine's wall clock moved against its monotonic
	// clock since the run began: a step (settimeofday, a time daemon's or
	// a VM agent's step, a leap second). A slew moves both clocks alike,
	// so only a step parts them. The harness times every promise on its
	// monotonic clock, while Redis, PostgreSQL and MariaDB expire a key or
	// a row on their wall clocks, so a step forward ends their leases early
	// against the promises: a lock that keeps its word looks as if it
	// broke it. A window is noted only once the clocks are WallNoise apart
	// (they read the same counter, so a machine whose clock nobody sets
	// notes none).
	Wall Kind = "wall"
	// Fault is how much longer a fault's own work took than the schedule
	// planned: a restart's time to ready, which a story's schedule
	// measures and gives room to (a pause that follows it begins once the
	// node is back).
	Fault Kind = "fault"
)

// FromHistory says whether samples of k are read from the history, one per
// fault and named by What (Pause, Fault), rather than measured window by
// window: what a judge reads again and a chart draws as named points.
func (k Kind) FromHistory() bool { return k == Pause || k == Fault }

// Load says whether samples of k measure how late something ran, and so
// how loaded the machine is: every kind but Wall, a clock's step, which
// starves a run but says nothing of its load (a matrix does not narrow
// by it, a chart of lateness does not draw it).
func (k Kind) Load() bool { return k != Wall }

// Sample is the worst lateness of one kind in one window of the run (for
// Pause and Fault, one fault).
type Sample struct {
	// At is where the window (or the fault) starts, in harness ns.
	At   int64 `json:"at"`
	Kind Kind  `json:"kind"`
	// Late is the worst lateness seen there, in ns.
	Late int64 `json:"late"`
	// What names the fault, for Pause and Fault samples, which are read
	// from the history rather than measured window by window.
	What string `json:"what,omitempty"`
}

// Options configures a Meter. Zero values take the defaults.
type Options struct {
	// Now is the run's clock (history.Recorder.Now), so samples line up
	// with the history.
	Now func() int64
	// Pings are the nodes no fault touches, each pinged on its own
	// (none: no Reply or Server samples).
	Pings []Ping
	// Tick is how long each timer sample sleeps (default 2 ms): short
	// enough to see a stall of a few ms, cheap at 500 wake-ups a second.
	Tick time.Duration
	// Window is the span whose worst sample is kept (default 50 ms), so a
	// minute's run keeps a few thousand samples, not thirty thousand.
	Window time.Duration
	// Workers lists the pids of the clients' worker processes now (nil:
	// no Worker samples); each is read once a Window.
	Workers func() []int
	// Span is how far back a worker's run-queue wait is summed (default
	// 1 s): the run's TTL, the time a story's windows are measured in.
	Span time.Duration
	// Drift is how far the wall clock has moved against the monotonic one
	// since the meter started, or 0 where it could not be read (default:
	// read from time.Now, which carries both); a test sets its own.
	Drift func() time.Duration
}

// WallNoise is the least drift of the wall clock a Wall sample notes.
const WallNoise = 20 * time.Microsecond

// Ping is one node's round trip, made every Every (default 20 ms): a
// server whose ask is dear (a new PostgreSQL session) is asked less often.
type Ping struct {
	Do    func(context.Context) error
	Every time.Duration
	// Kind is what its samples are: Reply (the default) or Server.
	Kind Kind
}

func (o Options) withDefaults() Options {
	if o.Tick <= 0 {
		o.Tick = 2 * time.Millisecond
	}
	if o.Window <= 0 {
		o.Window = 50 * time.Millisecond
	}
	if o.Span <= 0 {
		o.Span = time.Second
	}
	if o.Now == nil {
		start := time.Now()
		o.Now = func() int64 { return int64(time.Since(start)) }
	}
	if o.Drift == nil {
		start, ok := together()
		o.Drift = func() time.Duration {
			now, read := together()
			switch {
			case !read:
				return 0
			case !ok:
				// The start is the first read taken together.
				start, ok = now, true
				return 0
			}
			// Round(0) strips the monotonic reading: wall minus monotonic.
			return now.Round(0).Sub(start.Round(0)) - now.Sub(start)
		}
	}
	return o
}

// together is a time.Now whose two readings, wall and monotonic, were
// taken together, or false when none of a few tries was. time.Now reads
// one clock and then the other, and a thread descheduled between the
// two (a millisecond, on a loaded machine) reads them that far apart, a
// move of the wall clock that never happened. A read between two whose
// monotonic readings are less than WallNoise/2 apart had both its
// readings inside that span, whichever it takes first.
func together() (time.Time, bool) {
	for range 8 {
		a, b, c := time.Now(), time.Now(), time.Now()
		if c.Sub(a) < WallNoise/2 {
			return b, true
		}
	}
	return time.Time{}, false
}

// Meter samples the harness's timers and a node's replies until stopped.
type Meter struct {
	o      Options
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	samples []Sample
	// open is the window being filled, per kind.
	open map[Kind]*Sample
}

// Start starts sampling; Stop ends it.
func Start(o Options) *Meter {
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Meter{o: o, cancel: cancel, open: map[Kind]*Sample{}}
	m.wg.Add(1)
	go m.timers(ctx)
	for _, p := range o.Pings {
		m.wg.Add(1)
		go m.replies(ctx, p)
	}
	if o.Workers != nil {
		m.wg.Add(1)
		go m.workers(ctx)
	}
	return m
}

// Stop ends sampling and returns the samples, window by window; called
// again, it returns the same samples.
func (m *Meter) Stop() []Sample {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range []Kind{Timer, Reply, Server, Worker, Wall} {
		if s := m.open[k]; s != nil {
			m.samples = append(m.samples, *s)
		}
	}
	m.open = map[Kind]*Sample{}
	return m.samples
}

// note keeps late in the window that at falls in.
func (m *Meter) note(k Kind, at, late int64) {
	w := int64(m.o.Window)
	start := at - at%w
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.open[k]
	if s != nil && start < s.At {
		// A slow ping of one node ends after another's began a later
		// window: kept as its own sample, the open window left open.
		m.samples = append(m.samples, Sample{At: start, Kind: k, Late: late})
		return
	}
	if s != nil && s.At != start {
		m.samples = append(m.samples, *s)
		s = nil
	}
	if s == nil {
		s = &Sample{At: start, Kind: k}
		m.open[k] = s
	}
	s.Late = max(s.Late, late)
}

func (m *Meter) timers(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTimer(m.o.Tick)
	defer t.Stop()
	for {
		from := m.o.Now()
		t.Reset(m.o.Tick)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.note(Timer, from, max(0, m.o.Now()-from-int64(m.o.Tick)))
		if d := m.o.Drift().Abs(); d >= WallNoise {
			m.note(Wall, from, int64(d))
		}
	}
}

func (m *Meter) replies(ctx context.Context, p Ping) {
	defer m.wg.Done()
	if p.Every <= 0 {
		p.Every = 20 * time.Millisecond
	}
	if p.Kind == "" {
		p.Kind = Reply
	}
	every(ctx, p.Every, func() {
		from := m.o.Now()
		// A ping cut short by Stop is kept as at least as late as it
		// was by then: a node stalled as the run ends stalled the run.
		p.Do(ctx)
		m.note(p.Kind, from, m.o.Now()-from)
	})
}

// every calls do each tick of d until ctx ends, and not after it has.
func every(ctx context.Context, d time.Duration, do func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		do()
		if ctx.Err() != nil {
			return
		}
	}
}
