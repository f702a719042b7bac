// Package workloads is what clients do: take a lock, touch the protected
// resource inside the critical section, let go. Workloads record ops; they
// never judge them.
package workloads

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
)

// Pause points the register workload passes.
const (
	// BeforeRead sits inside the critical section right after the acquire
	// and before the read: where a fault meant for a holder's requests to
	// the store (delayed-write's latency) begins on whoever holds, however
	// unfair the lock is to the others.
	BeforeRead = "before-read"
	// BeforeWrite sits inside the critical section after the read and
	// before the write: where Kleppmann's GC pause strikes (K1). Checking
	// the lock just before it would not help; the pause can fall after the
	// check.
	BeforeWrite = "before-write"
	// BeforeRelease sits after the write, before the release: where a
	// woken holder's owner-blind DEL can be timed to hit a successor (S3).
	BeforeRelease = "before-release"
)

// Gate is the nemesis's hand on clients. The workload tells it when a
// lock op begins and ends (command traps select by op), stops at its named
// points, and asks it whether a process was killed: the lock is never asked
// to cooperate.
type Gate interface {
	// At is called at a named point; a non-nil error means the process
	// died there, and one that is history.ErrEndRecorded that the gate
	// recorded its end.
	At(ctx context.Context, client, process int, point string) error
	// Begin and End bracket a lock op, which runs under the context Begin
	// returns (the gate may cancel it, as a caller that gives up); End
	// reports whether the process died meanwhile.
	Begin(ctx context.Context, client, process int, f string) context.Context
	End(client, process int) (crashed bool)
	// Dead reports whether the process was killed; Abandoned whether the
	// gate gave up on one of its ops for its caller, which leaves the
	// process alive.
	Dead(process int) bool
	Abandoned(process int) bool
	// Work spends d of the client's own time in its critical section: a
	// pause of the client meanwhile lengthens the work by as much.
	Work(ctx context.Context, client int, d time.Duration)
}

// Client is one logical client's equipment.
type Client struct {
	// Open starts a process of the client: its own connections (to the lock
	// nodes and the store) and its own handle on the lock under test. A
	// retired process is a dead one: its connections are closed (a
	// watchdog's renewals fail, nothing is released) and the next process
	// opens new ones, with a new owner id.
	Open func(process int) (Process, error)
	// Clock is the clock its lock reads, to turn ValidUntil into harness time.
	Clock locks.Clock
}

// Process is what one process of a client works with.
type Process struct {
	Lock locks.Lock
	// Store is the process's own way to the protected register: its own
	// connection, or a worker's.
	Store Resource
	// Close ends every connection of the process.
	Close func()
}

// Options configures the register workload.
type Options struct {
	Clients []Client
	// Keys are the lock keys the clients contend for, each guarding its
	// own register: each cycle takes one of them at random (KeysOf(1):
	// the one key every story is told on).
	Keys []Key
	// Think is the pause between a release and the next acquire.
	Think Dist
	// Hold is how long each client works inside the critical section
	// (before the write): the user's critical section, or, for a story,
	// long enough that waiters queue up and the order in which they are
	// served says something (S5). Zero: no time at all.
	Hold Dist
	// FenceReads has the store check a lease's fencing token on the read
	// as well as on the write (FencedReader), where the store can.
	FenceReads bool
	// Seed seeds each client's draws (its keys, holds and think times),
	// with the client's index: a run's seed gives every client the same
	// sequence of draws.
	Seed uint64
	// Gate may pause or crash a client (nil: never).
	Gate Gate
	// Final opens what the final reads go through once the clients have
	// stopped, as the given process: the store alone, and what closes it.
	// Nil: a new process of the first client, which, where a client is a
	// worker, starts an interpreter or a JVM to read a register.
	Final func(process int) (Resource, func(), error)
}

// Clients are the register workload's clients, each with its first
// process open and none started: Open makes them, Run runs them. The two
// are apart so the caller starts what times the story (the time limit, the
// nemesis) between them, once every client is up: a slow start (a worker
// process per client) then takes nothing from the story's time.
type Clients struct {
	rec *history.Recorder
	o   Options
	ws  []*worker
}

// Open opens every client's first process, all at once. On an error every
// process that did open is closed again.
func Open(rec *history.Recorder, o Options) (*Clients, error) {
	if len(o.Keys) == 0 {
		o.Keys = KeysOf(1)
	}
	c := &Clients{rec: rec, o: o}
	c.ws = make([]*worker, len(o.Clients))
	var opened sync.WaitGroup
	openErrs := make(chan error, len(o.Clients))
	for i, cl := range o.Clients {
		c.ws[i] = &worker{rec: rec, o: &c.o, c: cl, client: i, process: i, rng: mrand.New(mrand.NewPCG(o.Seed, uint64(i)))}
		opened.Add(1)
		go func() {
			defer opened.Done()
			if err := c.ws[i].open(); err != nil {
				openErrs <- err
			} else if err := c.ws[i].prepare(); err != nil {
				openErrs <- err
			}
		}()
	}
	opened.Wait()
	close(openErrs)
	if err := <-openErrs; err != nil {
		for _, w := range c.ws {
			if w.p.Close != nil {
				w.p.Close()
			}
		}
		return nil, err
	}
	return c, nil
}

// Run runs the increment workload: each client loops acquire → read
// register → pause point → write register+1 (fenced when the lease has a
// token) → release, until stop ends; abort ends everything at once. A
// process whose op had an unknown outcome is retired and the client goes on
// under a new process id, as in Jepsen. After the clients stop, a fresh
// process reads the register for the final count. Every process is closed
// when Run returns.
func (c *Clients) Run(stop, abort context.Context) error {
	o, rec := &c.o, c.rec
	var wg sync.WaitGroup
	errs := make(chan error, len(o.Clients))
	for i, w := range c.ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs <- fmt.Errorf("client %d panicked: %v\n%s", i, r, debug.Stack())
				}
			}()
			err := w.loop(stop, abort)
			w.close()
			if err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if abort.Err() != nil || len(o.Clients) == 0 {
		return nil
	}
	p := rec.NewProcess()
	store, closeStore, err := c.final(p)
	if err != nil {
		return fmt.Errorf("process %d: %w", p, err)
	}
	defer closeStore()
	for _, k := range o.Keys {
		inv := rec.Invoke(p, history.Read, k.Register, nil)
		v, err := store.Read(abort, k.Register)
		if err != nil {
			rec.Complete(inv, history.Info, nil, err)
			return nil
		}
		rec.Complete(inv, history.OK, &history.Value{Reg: history.Int64(v)}, nil)
	}
	return nil
}

// final opens the final reads' way to the store (Options.Final).
func (c *Clients) final(process int) (Resource, func(), error) {
	if c.o.Final != nil {
		return c.o.Final(process)
	}
	p, err := c.o.Clients[0].Open(process)
	if err != nil {
		return nil, nil, err
	}
	return p.Store, p.Close, nil
}

type worker struct {
	rec     *history.Recorder
	o       *Options
	c       Client
	client  int
	process int
	p       Process
	// left are the abandoned processes still running (retire).
	left []Process
	// rng draws the client's keys, holds and think times.
	rng *mrand.Rand
	// key is the cycle's.
	key Key
}

// close ends the current process and every abandoned one.
func (w *worker) close() {
	if w.p.Close != nil {
		w.p.Close()
	}
	for _, p := range w.left {
		p.Close()
	}
}

func (w *worker) open() error {
	p, err := w.c.Open(w.process)
	if err != nil {
		return fmt.Errorf("process %d: %w", w.process, err)
	}
	w.p = p
	return nil
}

// prepareTimeout bounds a first process's Prepare: a first session and
// its tables on a loaded machine take seconds at worst; a server that
// has not answered by then is not up.
const prepareTimeout = 20 * time.Second

// prepare does the lock's one-off work, where it has any
// (locks.Preparer), before the story starts.
func (w *worker) prepare() error {
	p, ok := w.p.Lock.(locks.Preparer)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
	defer cancel()
	if err := p.Prepare(ctx); err != nil {
		return fmt.Errorf("process %d: prepare the lock: %w", w.process, err)
	}
	return nil
}

// retire ends the process, as dead, after an unknown outcome or a crash,
// and goes on as a new one. A process whose op the gate gave up on for its
// caller is not dead: its connections stay open until the run ends, so
// whatever its lock left running (a watchdog) runs on.
func (w *worker) retire() {
	if w.o.Gate != nil && w.o.Gate.Abandoned(w.process) {
		w.left = append(w.left, w.p)
	} else {
		w.p.Close()
	}
	w.process = w.rec.NewProcess()
	w.p = Process{}
}

// reopenDelay is how long a client whose new process could not open waits
// before it tries again: a worker process costs a few hundred ms of CPU to
// start, which a tighter loop would take from the story's own processes.
const reopenDelay = 250 * time.Millisecond

// reopen opens the process retire left unopened, and reports whether it
// is open. Opening may fail where the first open did not: a worker
// process's hello connects to its server, which a fault may have stopped
// (a killed leader the library's client names), and answers unknown, as
// a restarted program of a user's would fail to start; the client waits
// and tries again, as a supervisor would restart it, until the run stops.
// Any other failure (a worker that broke the protocol) ends the run.
func (w *worker) reopen(stop, abort context.Context) (bool, error) {
	if w.p.Lock != nil {
		return true, nil
	}
	err := w.open()
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, locks.ErrUnknown) {
		return false, err
	}
	select {
	case <-stop.Done():
	case <-abort.Done():
	case <-time.After(reopenDelay):
	}
	return false, nil
}

// ErrLeaseLost is a write the holder did not send: its lock had told it
// the lease was lost (locks.Lease.Lost), as a careful user's code checks
// before it acts.
var ErrLeaseLost = errors.New(checker.ErrLeaseLost)

// errCrashed is the completion of an op whose process the nemesis killed.
var errCrashed = errors.New("process crashed by the nemesis")

// dead reports whether the nemesis killed the current process: whatever
// its op returned, the outcome is unknown.
func (w *worker) dead() bool { return w.o.Gate != nil && w.o.Gate.Dead(w.process) }

// lockOp runs a lock op with the gate told of it, and reports whether the
// process died meanwhile.
func (w *worker) lockOp(ctx context.Context, f string, op func(context.Context) error) (crashed bool, err error) {
	if w.o.Gate == nil {
		return false, op(ctx)
	}
	err = op(w.o.Gate.Begin(ctx, w.client, w.process, f))
	return w.o.Gate.End(w.client, w.process), err
}

func (w *worker) loop(stop, abort context.Context) error {
	for stop.Err() == nil && abort.Err() == nil {
		if open, err := w.reopen(stop, abort); err != nil {
			return err
		} else if !open {
			continue
		}
		w.key = w.o.Keys[w.rng.IntN(len(w.o.Keys))]
		w.cycle(abort)
		if d := w.o.Think.Draw(w.rng); d > 0 {
			select {
			case <-abort.Done():
			case <-time.After(d):
			}
		}
	}
	return nil
}

// skew is how far the nemesis has set the client's clock off (0 for a
// clock it cannot skew): read from the clock, not by comparing two
// readings, which a descheduled goroutine would make differ.
func (w *worker) skew() time.Duration {
	if c, ok := w.c.Clock.(interface{ Offset() time.Duration }); ok {
		return c.Offset()
	}
	return 0
}

// cycle is one pass through the critical section. Cycles started before
// stop always finish (with abort as the only way out), so a paused holder
// still gets to make its late write. Each step records its op and says
// whether the cycle goes on: not after a refused acquire, a stop at a
// pause point that killed the process, or an op that retired it.
func (w *worker) cycle(ctx context.Context) {
	lease, ok := w.acquire(ctx)
	if !ok || !w.pass(ctx, BeforeRead) {
		return
	}
	r, ok := w.read(ctx, lease)
	if !ok {
		return
	}
	w.work(ctx)
	if !w.pass(ctx, BeforeWrite) || !w.write(ctx, r+1, lease) || !w.pass(ctx, BeforeRelease) {
		return
	}
	w.release(ctx, lease)
}

// acquire takes the lock, recording the lease's deadline in harness time
// when it has one.
func (w *worker) acquire(ctx context.Context) (locks.Lease, bool) {
	key := w.key.Lock
	inv := w.rec.Invoke(w.process, history.Acquire, key, nil)
	var lease locks.Lease
	skew := w.skew()
	crashed, err := w.lockOp(ctx, history.Acquire, func(ctx context.Context) (err error) { lease, err = w.p.Lock.Acquire(ctx, key); return err })
	// A lease's ValidUntil is on the client's clock as it read it during
	// the acquire; a skew that moved meanwhile leaves no sound translation
	// to harness time, and no deadline is promised rather than a wrong one.
	skewMoved := w.skew() != skew
	switch {
	case crashed:
		w.rec.Complete(inv, history.Info, nil, errCrashed)
		w.retire()
		return lease, false
	case errors.Is(err, locks.ErrNotAcquired):
		w.rec.Complete(inv, history.Fail, nil, err)
		return lease, false
	case err != nil:
		w.rec.Complete(inv, history.Info, nil, err)
		w.retire()
		return lease, false
	}
	val := &history.Value{Token: lease.Token, Fence: lease.Fence}
	if !lease.ValidUntil.IsZero() && !skewMoved {
		val.Deadline = w.rec.Now() + int64(lease.ValidUntil.Sub(w.c.Clock.Now()))
	}
	w.rec.Complete(inv, history.OK, val, nil)
	return lease, true
}

// read reads the register, with the lease's token where the store
// checks tokens on reads (Options.FenceReads). A refused read ends the
// cycle with a release: the holder knows its lease is stale.
func (w *worker) read(ctx context.Context, lease locks.Lease) (int64, bool) {
	reg := w.key.Register
	inv := w.rec.Invoke(w.process, history.Read, reg, nil)
	var r int64
	var err error
	if fr, ok := w.p.Store.(FencedReader); ok && w.o.FenceReads && lease.Fence > 0 {
		r, err = fr.ReadFenced(ctx, reg, lease.Fence)
	} else {
		r, err = w.p.Store.Read(ctx, reg)
	}
	if errors.Is(err, ErrStale) && !w.dead() {
		w.rec.Complete(inv, history.Fail, nil, err)
		w.release(ctx, lease)
		return 0, false
	}
	if err != nil || w.dead() {
		err = cmp.Or(err, errCrashed)
		w.rec.Complete(inv, history.Info, nil, err)
		w.retire()
		return 0, false
	}
	w.rec.Complete(inv, history.OK, &history.Value{Reg: history.Int64(r)}, nil)
	return r, true
}

// work holds the lock for a draw of o.Hold, the work inside the critical
// section.
func (w *worker) work(ctx context.Context) {
	d := w.o.Hold.Draw(w.rng)
	switch {
	case d <= 0:
	case w.o.Gate != nil:
		w.o.Gate.Work(ctx, w.client, d)
	default:
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}

// pass stops at the gate's pause point, if there is a gate, and says
// whether the process lived through it.
func (w *worker) pass(ctx context.Context, point string) bool {
	if w.o.Gate != nil {
		if err := w.o.Gate.At(ctx, w.client, w.process, point); err != nil {
			if errors.Is(err, history.ErrEndRecorded) {
				w.retire()
			} else {
				w.crash(err)
			}
			return false
		}
	}
	return true
}

// write writes v to the register, fenced with the lease's token, unless
// the lock has said the lease was lost. A refused write leaves the
// process to release.
func (w *worker) write(ctx context.Context, v int64, lease locks.Lease) bool {
	reg := w.key.Register
	inv := w.rec.Invoke(w.process, history.Write, reg, &history.Value{Reg: history.Int64(v), Fence: lease.Fence})
	var err error
	select {
	case <-lease.Lost:
		err = ErrLeaseLost
	default:
		err = w.p.Store.Write(ctx, reg, v, lease.Fence)
	}
	switch {
	case w.dead():
		w.rec.Complete(inv, history.Info, nil, cmp.Or(err, errCrashed))
		w.retire()
		return false
	case errors.Is(err, ErrStale), errors.Is(err, ErrLeaseLost):
		w.rec.Complete(inv, history.Fail, nil, err)
	case err != nil:
		w.rec.Complete(inv, history.Info, nil, err)
		w.retire()
		return false
	default:
		w.rec.Complete(inv, history.OK, nil, nil)
	}
	return true
}

// release gives the lease back.
func (w *worker) release(ctx context.Context, lease locks.Lease) {
	inv := w.rec.Invoke(w.process, history.Release, w.key.Lock, &history.Value{Token: lease.Token})
	crashed, err := w.lockOp(ctx, history.Release, func(ctx context.Context) error { return w.p.Lock.Release(ctx, lease) })
	switch {
	case crashed:
		w.rec.Complete(inv, history.Info, nil, errCrashed)
		w.retire()
	case err == nil:
		w.rec.Complete(inv, history.OK, nil, nil)
	case errors.Is(err, locks.ErrNotHeld):
		w.rec.Complete(inv, history.Fail, nil, err)
	default:
		w.rec.Complete(inv, history.Info, nil, err)
		w.retire()
	}
}

// crash records that the process died where no op was in flight (an
// invoke and an info of history.Crash, so every invoke keeps its
// completion and checkers see the process end), and retires it.
func (w *worker) crash(err error) {
	w.rec.End(w.process, err)
	w.retire()
}

// ProcessName is how a client's peer name on its links is spelled, so a
// nemesis can find client i's links.
func ProcessName(client int) string { return "c" + strconv.Itoa(client) }
