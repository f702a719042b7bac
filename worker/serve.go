package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// ServeIfWorker makes this program a worker when it was started as one
// (Env is set): it serves the lock lookup finds by name on stdin and
// stdout, then exits. Call it first thing in main, or in TestMain of a test
// binary that runs scenarios with client processes; elsewhere it returns
// at once.
func ServeIfWorker(lookup func(name string) (locks.Info, error)) {
	if os.Getenv(Env) == "" {
		return
	}
	if err := Serve(os.Stdin, os.Stdout, lookup); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Serve is a worker: it reads requests from in and answers on out until in
// ends. Every Redis client it opens reports its command boundaries as
// events and waits for the harness's "go".
func Serve(in io.Reader, out io.Writer, lookup func(name string) (locks.Info, error)) error {
	s := &server{out: json.NewEncoder(out), waits: map[int64]chan struct{}{}, leases: map[string]locks.Lease{}, released: map[string]chan struct{}{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("bad request %q: %w", sc.Text(), err)
		}
		s.clock.Store(req.ClockNS)
		switch req.Op {
		case OpGo:
			s.release(req.Seq)
		case OpHello:
			if err := s.hello(req.Hello, lookup); err != nil {
				s.send(Reply{ID: req.ID, Err: ErrUnknown, Msg: err.Error()})
				return err
			}
			s.send(Reply{ID: req.ID})
		default:
			if s.lock == nil {
				return fmt.Errorf("%s before hello", req.Op)
			}
			// Ops run beside the reader: their commands wait for "go"s
			// that only the reader can hand them.
			go func() {
				r, then := s.do(req)
				s.send(r)
				if then != nil {
					then()
				}
			}()
		}
	}
	return sc.Err()
}

type server struct {
	outMu sync.Mutex
	out   *json.Encoder

	clock atomic.Int64 // the client clock's offset, ns
	seq   atomic.Int64

	mu     sync.Mutex
	waits  map[int64]chan struct{}
	leases map[string]locks.Lease // by token: what the lock returned, handed back on release
	// released is closed, by token, when the lease is given up: the lease's
	// Lost is watched until then.
	released map[string]chan struct{}

	lock  locks.Lock
	store *workloads.Store
}

func (s *server) send(r Reply) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_ = s.out.Encode(r) // the harness is gone: nothing left to tell
}

// event tells the harness about r and waits for its "go".
func (s *server) event(r Reply) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.waits[r.Seq] = ch
	s.mu.Unlock()
	s.send(r)
	<-ch
}

func (s *server) release(seq int64) {
	s.mu.Lock()
	ch := s.waits[seq]
	delete(s.waits, seq)
	s.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Now is the machine's clock plus the offset the harness last sent.
func (s *server) Now() time.Time { return time.Now().Add(time.Duration(s.clock.Load())) }

func (s *server) hello(h *Hello, lookup func(string) (locks.Info, error)) error {
	if h == nil || len(h.Nodes) == 0 || h.Store == "" {
		return errors.New("hello without nodes or store")
	}
	info, err := lookup(h.Lock)
	if err != nil {
		return err
	}
	cfg := locks.Config{TTL: time.Duration(h.TTLNS), Wait: time.Duration(h.WaitNS), WaiterTimeout: time.Duration(h.WaiterTimeoutNS),
		NodeTimeout: time.Duration(h.NodeTimeoutNS), Clock: s, Owner: h.Owner,
		// A crash at the point is a SIGKILL: the "go" never comes.
		Point: func(_ context.Context, point string) error {
			s.event(Reply{Event: EventPoint, Seq: s.seq.Add(1), Point: point})
			return nil
		}}
	for _, addr := range h.Nodes {
		c := cluster.NewClient(addr, cluster.ClientOptions{})
		c.AddHook(reporter{s})
		cfg.Clients = append(cfg.Clients, c)
	}
	cfg.Addrs = h.Nodes
	s.store = workloads.NewStore(cluster.NewClient(h.Store, cluster.ClientOptions{Timeout: time.Duration(h.StoreTimeoutNS)}))
	// Connected at hello, before the story's clock.
	s.store.Warm()
	s.lock, err = locks.Build(info, cfg)
	return err
}

// do carries out req, and returns its reply and what to do once the reply
// is sent: an acquired lease whose lock tells losses is watched from then
// on, so the harness hears of the lease before it hears it is lost.
func (s *server) do(req Request) (Reply, func()) {
	ctx := context.Background()
	r := Reply{ID: req.ID}
	var err error
	var then func()
	switch req.Op {
	case OpAcquire:
		var l locks.Lease
		if l, err = s.lock.Acquire(ctx, req.Key); err == nil {
			s.mu.Lock()
			s.leases[l.Token] = l
			var released chan struct{}
			if l.Lost != nil {
				released = make(chan struct{})
				s.released[l.Token] = released
			}
			s.mu.Unlock()
			r.Lease = toWire(l)
			if released != nil {
				then = func() { go s.watch(l, released) }
			}
		}
	case OpRelease:
		if req.Lease == nil {
			return Reply{ID: req.ID, Err: ErrUnknown, Msg: "release without a lease"}, nil
		}
		s.mu.Lock()
		l, ok := s.leases[req.Lease.Token]
		delete(s.leases, req.Lease.Token)
		if ch := s.released[req.Lease.Token]; ch != nil {
			close(ch)
			delete(s.released, req.Lease.Token)
		}
		s.mu.Unlock()
		if !ok {
			l = fromWire(*req.Lease)
		}
		err = s.lock.Release(ctx, l)
	case OpRead:
		r.Value, err = s.store.Read(ctx, req.Key)
	case OpWrite:
		err = s.store.Write(ctx, req.Key, req.Value, req.Fence)
	default:
		return Reply{ID: req.ID, Err: ErrUnknown, Msg: "unknown op " + req.Op}, nil
	}
	if err != nil {
		r.Err, r.Msg = kindOf(err), err.Error()
	}
	return r, then
}

// watch tells the harness when l's lock says it is lost, unless it is
// released first.
func (s *server) watch(l locks.Lease, released <-chan struct{}) {
	select {
	case <-l.Lost:
		s.send(Reply{Event: EventLost, Lease: &Lease{Key: l.Key, Token: l.Token}})
	case <-released:
	}
}

// kindOf is the wire name of a lock's or store's error.
func kindOf(err error) string {
	switch {
	case errors.Is(err, locks.ErrNotAcquired):
		return ErrNotAcquired
	case errors.Is(err, locks.ErrNotHeld):
		return ErrNotHeld
	case errors.Is(err, workloads.ErrStale):
		return ErrStale
	}
	return ErrUnknown
}

func toWire(l locks.Lease) *Lease {
	w := &Lease{Key: l.Key, Token: l.Token, Fence: l.Fence, TellsLoss: l.Lost != nil}
	if !l.ValidUntil.IsZero() {
		w.ValidUntilNS = l.ValidUntil.UnixNano()
	}
	return w
}

func fromWire(w Lease) locks.Lease {
	l := locks.Lease{Key: w.Key, Token: w.Token, Fence: w.Fence}
	if w.ValidUntilNS != 0 {
		l.ValidUntil = time.Unix(0, w.ValidUntilNS)
	}
	return l
}

// reporter is the hook on a worker's lock connections: every command
// boundary is an event the harness answers, so its traps spring here as
// they do on a client inside the harness.
type reporter struct{ s *server }

func (reporter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reporter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (h reporter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(cmds, func() error { return next(ctx, cmds) })
	}
}

func (h reporter) around(cmds []redis.Cmder, send func() error) error {
	seq := h.s.seq.Add(1)
	args := make([][]string, len(cmds))
	for i, c := range cmds {
		args[i] = nemesis.Args(c)
	}
	h.s.event(Reply{Event: EventSend, Seq: seq, Cmds: args})
	err := send()
	ok := make([]bool, len(cmds))
	for i, c := range cmds {
		ok[i] = nemesis.Succeeded(c)
	}
	h.s.event(Reply{Event: EventReply, Seq: seq, OK: ok})
	return err
}
