package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// Options starts one worker for one process of a client.
type Options struct {
	// Command builds the command to start (nil: Self).
	Command func(lock string) *exec.Cmd
	// Forker, when set, starts the worker as its fork instead (Command is
	// then not used).
	Forker *Forker
	// Hello says what the worker builds.
	Hello Hello
	// Gate springs traps at the worker's command boundaries and named
	// points, and pauses and kills it with signals (nil: no faults).
	Gate            *nemesis.Gate
	Client, Process int
	// Clock is the client's clock; its offset goes with every request.
	Clock interface{ Offset() time.Duration }
	// Stderr receives what the worker writes there (nil: discarded).
	Stderr io.Writer
	// Patience is how long the worker may leave hello or any request
	// unanswered before it is taken as hung, killed, and reported as
	// misbehaving (0: DefaultPatience of the hello). It must outlast the
	// longest answer a working lock gives: its wait, a library's own
	// retries, a pause the nemesis holds it in.
	Patience time.Duration
	// Misbehaved, when set, hears the worker's ErrMisbehaved once, as it
	// is killed for it.
	Misbehaved func(error)
}

// DefaultPatience is how long a worker may be silent on a request: 30 s
// (a JVM's start and its first connection on a busy machine), plus the
// wait of an acquire, plus ten TTLs for the pauses and retries of a
// story.
func DefaultPatience(h Hello) time.Duration {
	return 30*time.Second + time.Duration(h.WaitNS) + 10*time.Duration(h.TTLNS)
}

// ErrMisbehaved is a worker that broke the protocol: a line that starts
// as the protocol's ('{') and is not JSON, a line past MaxLine, an answer
// to a request never made, or silence past its patience. It is killed; the run that started it
// cannot be judged (the pair's outcome is an error), because what the
// worker did is no lock's behaviour.
var ErrMisbehaved = errors.New("worker misbehaved")

// MaxLine bounds one line from a worker: an acquire's reply is a few
// hundred bytes, and a worker that writes more without a newline is not
// speaking the protocol.
const MaxLine = 1 << 20

// Self starts this program again as a worker for lock: the program must
// call ServeIfWorker before anything else.
func Self(lock string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), Env+"="+lock)
	return cmd
}

// Proc is the harness's end of one worker: a locks.Lock and a
// workloads.Resource whose every call is a request to the worker.
type Proc struct {
	o      Options
	proc   started
	ctx    context.Context // ends when the worker has exited or is closed
	cancel context.CancelFunc
	exited chan struct{} // closed once the worker is gone and read to its end
	gone   chan struct{} // closed once the worker has exited (wait)

	inMu sync.Mutex
	in   *json.Encoder

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan Reply
	places  map[int64][]int // a send event's commands' places, for its reply event
	why     error           // why the worker is gone
	exit    error           // how the worker exited
	// stray holds the first lines, and the last, that the worker wrote
	// on its stdout outside the protocol: a runtime that cannot start (a
	// JVM without a working directory, PHP without an extension) says
	// why there, and a hello that fails shows them (Start).
	stray    []string
	strayCut bool        // a line between the first ones and the last was dropped
	said     atomic.Bool // the worker answered hello: stray lines are no longer kept
	reaped   bool        // wait has reaped it
	closing  bool        // Close has killed it
	// misbehaved is how the worker broke the protocol, once it has
	// (ErrMisbehaved), for Misbehaved.
	misbehaved error

	// lost holds, by token, the Lost of each lease whose lock tells
	// losses, from its acquire's reply to its release.
	lost map[string]chan struct{}
}

// Start starts a worker and says hello; it fails if the worker cannot
// build the lock.
func Start(ctx context.Context, o Options) (*Proc, error) {
	if o.Command == nil {
		o.Command = Self
	}
	if o.Patience == 0 {
		o.Patience = DefaultPatience(o.Hello)
	}
	start := startExec
	if o.Forker != nil {
		start = startFork
	}
	proc, err := start(o)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	p := &Proc{o: o, proc: proc, in: json.NewEncoder(proc.stdin), exited: make(chan struct{}), gone: make(chan struct{}),
		pending: map[int64]chan Reply{}, places: map[int64][]int{}, lost: map[string]chan struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if o.Gate != nil {
		o.Gate.Attach(o.Client, o.Process, proc.os)
	}
	go p.wait()
	go p.read(proc.stdout)
	hello := o.Hello
	if _, err := p.call(ctx, Request{Op: OpHello, Hello: &hello}); err != nil {
		p.Close()
		if m := p.Misbehaved(); m != nil {
			return nil, m
		}
		// Close has waited for read to end, so every stray line is in.
		return nil, fmt.Errorf("worker for %s: hello: %w%s", o.Hello.Lock, err, p.wrote())
	}
	p.said.Store(true)
	return p, nil
}

// strayKept is how many of a worker's first stray lines are kept, besides
// its last: a JVM that cannot start writes its error in the first two,
// then a stack. strayBytes is the most of them an error shows.
const (
	strayKept  = 3
	strayBytes = 400
)

// keepStray keeps line, written outside the protocol, trimmed and cut to
// strayBytes, if it is among the first strayKept such lines or, for now,
// the last; a blank line is not kept. Once hello is answered nothing is:
// only a failed hello shows them, and a chatty library's lines would
// cost a copy each for the worker's life.
func (p *Proc) keepStray(line []byte) {
	if p.said.Load() {
		return
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	line = line[:min(len(line), strayBytes)]
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stray) > strayKept {
		p.stray, p.strayCut = p.stray[:strayKept], true
	}
	p.stray = append(p.stray, string(line))
}

// wrote says what the worker wrote outside the protocol, for an error,
// in at most strayBytes (an error is one line), with "…" where lines
// were left out; "" when it wrote nothing there.
func (p *Proc) wrote() string {
	p.mu.Lock()
	lines, cut := slices.Clone(p.stray), p.strayCut
	p.mu.Unlock()
	if len(lines) == 0 {
		return ""
	}
	if cut {
		lines[strayKept] = "… " + lines[strayKept]
	}
	s := strings.Join(lines, " | ")
	if len(s) > strayBytes {
		s = s[:strayBytes] + "…"
	}
	return fmt.Sprintf("; it wrote %q", s)
}

// misbehave records how the worker broke the protocol, the first time,
// and kills it: whatever it was asked is then unknown, and nothing it
// says later is read.
func (p *Proc) misbehave(format string, a ...any) {
	p.mu.Lock()
	if p.closing || p.reaped {
		// Killed by the harness, or dead already: whatever it wrote last
		// was cut off by its death, not a breach.
		p.mu.Unlock()
		return
	}
	first := p.misbehaved == nil
	if first {
		p.misbehaved = fmt.Errorf("%w: worker for %s (client %d, process %d, pid %d) %s", ErrMisbehaved,
			p.o.Hello.Lock, p.o.Client, p.o.Process, p.proc.pid, fmt.Sprintf(format, a...))
	}
	err := p.misbehaved
	p.mu.Unlock()
	p.kill()
	if first && p.o.Misbehaved != nil {
		p.o.Misbehaved(err)
	}
}

// Misbehaved says how the worker broke the protocol (wrapping
// ErrMisbehaved), or nil while it has kept to it.
func (p *Proc) Misbehaved() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.misbehaved
}

// wait waits until the worker has exited, the rest of its process group
// is killed and it is reaped (started.reap), then lets every waiter go.
func (p *Proc) wait() {
	err := p.proc.reap()
	if p.o.Gate != nil {
		p.o.Gate.Detach(p.o.Process)
	}
	// Its pidfd: a long run retires thousands of workers.
	_ = p.proc.os.Release()
	p.mu.Lock()
	p.exit, p.reaped = err, true
	p.mu.Unlock()
	close(p.gone)
}

// read hands replies to their callers and events to the gate until the
// worker's stdout ends; then every call still waiting fails as unknown.
func (p *Proc) read(stdout *os.File) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	// A last line with no newline is what a worker killed as it wrote
	// leaves: not a line of the protocol's, and no breach.
	cut := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			cut = true
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if cut || len(line) == 0 || line[0] != '{' {
			p.keepStray(line)
			continue // not the protocol's: a stray print, or a line cut off
		}
		var r Reply
		if err := json.Unmarshal(line, &r); err != nil {
			p.misbehave("wrote a line that is not the protocol's JSON (%v): %.80q", err, line)
			break
		}
		// Leases and their losses are kept here, in the order the
		// worker sent them, so a loss never overtakes its lease.
		if r.Event == EventLost {
			p.mu.Lock()
			if r.Lease != nil && p.lost[r.Lease.Token] != nil {
				close(p.lost[r.Lease.Token])
				delete(p.lost, r.Lease.Token)
			}
			p.mu.Unlock()
			continue
		}
		if r.Event != "" {
			go p.event(r)
			continue
		}
		p.mu.Lock()
		ch, asked := p.pending[r.ID]
		delete(p.pending, r.ID)
		if asked && r.Lease != nil && r.Lease.TellsLoss {
			p.lost[r.Lease.Token] = make(chan struct{})
		}
		p.mu.Unlock()
		if !asked {
			p.misbehave("answered request %d, which is not waiting for an answer", r.ID)
			break
		}
		ch <- r
	}
	if err := sc.Err(); err != nil {
		p.misbehave("wrote a line longer than %d bytes, or could not be read: %v", MaxLine, err)
	}
	// Read on to the end, which comes once the worker and its group are
	// dead (wait), so nothing blocks on a full pipe; a process that left
	// the group (setsid) and keeps the pipe open gets a second more.
	// Then the calls still waiting fail.
	go func() {
		<-p.gone
		_ = stdout.SetReadDeadline(time.Now().Add(time.Second))
	}()
	_, _ = io.Copy(io.Discard, stdout)
	stdout.Close()
	<-p.gone
	p.mu.Lock()
	p.why = fmt.Errorf("worker exited (%v)", p.exit)
	if p.misbehaved != nil {
		p.why = p.misbehaved
	}
	p.pending = map[int64]chan Reply{}
	p.mu.Unlock()
	p.cancel()
	close(p.exited)
}

// event lets the gate act at the worker's command boundary or point, then
// lets the worker go on, unless the gate killed it there.
func (p *Proc) event(r Reply) {
	g, client, process := p.o.Gate, p.o.Client, p.o.Process
	if g != nil {
		switch r.Event {
		case EventSend:
			sending := g.Sending
			if r.Apart {
				sending = g.SendingApart
			}
			at := sending(client, process, r.Cmds)
			p.mu.Lock()
			p.places[r.Seq] = at
			p.mu.Unlock()
			for _, i := range at {
				if g.Boundary(p.ctx, client, process, i, false, false) != nil {
					return
				}
			}
		case EventReply:
			p.mu.Lock()
			at := p.places[r.Seq]
			delete(p.places, r.Seq)
			p.mu.Unlock()
			for k, i := range at {
				if g.Boundary(p.ctx, client, process, i, true, k < len(r.OK) && r.OK[k]) != nil {
					return
				}
			}
		case EventPoint:
			if g.LockPoint(p.ctx, client, process, r.Point) != nil {
				return
			}
		}
	}
	p.write(Request{Op: OpGo, Seq: r.Seq})
}

func (p *Proc) write(req Request) {
	if p.o.Clock != nil {
		req.ClockNS = int64(p.o.Clock.Offset())
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	_ = p.in.Encode(req) // a dead worker's pipe: the read loop reports it
}

// call sends req and waits for its reply. A worker that exits or a ctx that
// ends first leaves the outcome unknown.
func (p *Proc) call(ctx context.Context, req Request) (Reply, error) {
	ch := make(chan Reply, 1)
	p.mu.Lock()
	if p.why != nil {
		p.mu.Unlock()
		return Reply{}, fmt.Errorf("%w: %v", locks.ErrUnknown, p.why)
	}
	p.nextID++
	req.ID = p.nextID
	p.pending[req.ID] = ch
	p.mu.Unlock()
	p.write(req)
	patience := time.NewTimer(p.o.Patience)
	defer patience.Stop()
	select {
	case r := <-ch:
		return r, errorOf(r)
	case <-patience.C:
		p.misbehave("left %s unanswered for %s", req.Op, p.o.Patience)
		<-p.exited
		return Reply{}, fmt.Errorf("%w: %v", locks.ErrUnknown, p.Misbehaved())
	case <-p.ctx.Done():
		p.mu.Lock()
		why := p.why
		p.mu.Unlock()
		return Reply{}, fmt.Errorf("%w: %v", locks.ErrUnknown, why)
	case <-ctx.Done():
		return Reply{}, fmt.Errorf("%w: %v", locks.ErrUnknown, ctx.Err())
	}
}

// errorOf turns a reply's error kind back into the error a lock or the
// store returns.
func errorOf(r Reply) error {
	switch r.Err {
	case "":
		return nil
	case ErrNotAcquired:
		return locks.ErrNotAcquired
	case ErrNotHeld:
		return locks.ErrNotHeld
	case ErrStale:
		return workloads.ErrStale
	}
	return fmt.Errorf("%w: %s", locks.ErrUnknown, r.Msg)
}

// Acquire asks the worker to take key.
func (p *Proc) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	r, err := p.call(ctx, Request{Op: OpAcquire, Key: key})
	if err != nil {
		return locks.Lease{}, err
	}
	if r.Lease == nil {
		return locks.Lease{}, fmt.Errorf("%w: worker's acquire reply has no lease", locks.ErrUnknown)
	}
	l := fromWire(*r.Lease)
	if r.Lease.TellsLoss {
		p.mu.Lock()
		if ch := p.lost[l.Token]; ch != nil {
			l.Lost = ch
		} else {
			l.Lost = closed // lost before its caller heard of it
		}
		p.mu.Unlock()
	}
	return l, nil
}

// closed is a Lost that has already happened.
var closed = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// Release asks the worker to give lease up.
func (p *Proc) Release(ctx context.Context, lease locks.Lease) error {
	p.mu.Lock()
	delete(p.lost, lease.Token)
	p.mu.Unlock()
	_, err := p.call(ctx, Request{Op: OpRelease, Lease: toWire(lease)})
	return err
}

// Read asks the worker to read the register key.
func (p *Proc) Read(ctx context.Context, key string) (int64, error) {
	r, err := p.call(ctx, Request{Op: OpRead, Key: key})
	return r.Value, err
}

// Write asks the worker to write the register key.
func (p *Proc) Write(ctx context.Context, key string, v, fence int64) error {
	_, err := p.call(ctx, Request{Op: OpWrite, Key: key, Value: v, Fence: fence})
	return err
}

// PID is the worker's process id.
func (p *Proc) PID() int { return p.proc.pid }

// Close kills the worker, as a process dies: nothing of it is released or
// renewed any more, and waits until it is gone.
func (p *Proc) Close() {
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.kill()
	<-p.exited
}

// kill kills the worker; wait then kills the rest of its process group
// (cluster.StartProcess gives it its own), so a worker started through a
// shell or a launcher leaves no child behind. It may have exited already.
func (p *Proc) kill() {
	_ = p.proc.os.Kill()
}

var _ locks.Lock = (*Proc)(nil)
var _ workloads.Resource = (*Proc)(nil)
