package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// Options starts one worker for one process of a client.
type Options struct {
	// Command builds the command to start (nil: Self).
	Command func(lock string) *exec.Cmd
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
}

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
	cmd    *exec.Cmd
	ctx    context.Context // ends when the worker has exited or is closed
	cancel context.CancelFunc
	exited chan struct{}

	inMu sync.Mutex
	in   *json.Encoder

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan Reply
	places  map[int64][]int // a send event's commands' places, for its reply event
	why     error           // why the worker is gone

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
	cmd := o.Command(o.Hello.Lock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = o.Stderr
	if err := cluster.StartProcess(cmd); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	p := &Proc{o: o, cmd: cmd, in: json.NewEncoder(stdin), exited: make(chan struct{}),
		pending: map[int64]chan Reply{}, places: map[int64][]int{}, lost: map[string]chan struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if o.Gate != nil {
		o.Gate.Attach(o.Client, o.Process, cmd.Process)
	}
	go p.read(stdout)
	hello := o.Hello
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.call(hctx, Request{Op: OpHello, Hello: &hello}); err != nil {
		p.Close()
		return nil, fmt.Errorf("worker for %s: %w", o.Hello.Lock, err)
	}
	return p, nil
}

// read hands replies to their callers and events to the gate until the
// worker's stdout ends; then every call still waiting fails as unknown.
func (p *Proc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // not the protocol's: a stray print
		}
		var r Reply
		if err := json.Unmarshal(line, &r); err != nil {
			continue
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
		ch := p.pending[r.ID]
		delete(p.pending, r.ID)
		if r.Lease != nil && r.Lease.TellsLoss {
			p.lost[r.Lease.Token] = make(chan struct{})
		}
		p.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	err := p.cmd.Wait()
	if p.o.Gate != nil {
		p.o.Gate.Detach(p.o.Process)
	}
	p.mu.Lock()
	p.why = fmt.Errorf("worker exited (%v)", err)
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
			at := g.Sending(client, process, r.Cmds)
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
			if g.At(p.ctx, client, process, r.Point) != nil {
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
	select {
	case r := <-ch:
		return r, errorOf(r)
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
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Close kills the worker, as a process dies: nothing of it is released or
// renewed any more, and waits until it is gone.
func (p *Proc) Close() {
	_ = p.cmd.Process.Kill() // it may have exited already
	<-p.exited
}

var _ locks.Lock = (*Proc)(nil)
var _ workloads.Resource = (*Proc)(nil)
