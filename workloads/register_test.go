package workloads_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// A client that dies between SETNX and EXPIRE, caught by a command trap on
// its connections (the lock calls nothing): its acquire is info, its
// process retired (never heard of again), and the key stays as Redis has
// it, with no TTL.
func TestClientCrashMidProtocol(t *testing.T) {
	ctx := context.Background()
	lockNode, storeNode := lockAndStore(t)
	ops := runTrapped(t, lockNode, storeNode, "setnx-expire", nemesis.Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SET NX", Reply: true, Succeeded: true},
		Client: nemesis.AnyClient, Crash: true})
	crashed := -1
	for _, op := range ops {
		if op.F == history.Acquire && op.Type == history.Info && strings.Contains(op.Error, "crashed") {
			crashed = op.Process
		}
	}
	if crashed < 0 {
		t.Fatal("no info acquire from the crashed client")
	}
	seenInfo := false
	for _, op := range ops {
		if op.Process == crashed && op.Type == history.Info {
			seenInfo = true
		} else if op.Process == crashed && seenInfo {
			t.Fatalf("retired process %d went on: %+v", crashed, op)
		}
	}
	if ttl := cluster.NewClient(lockNode.Addr(), cluster.ClientOptions{}).PTTL(ctx, "lock").Val(); ttl != -1 {
		t.Fatalf("the crashed client's key should be there with no TTL (PTTL -1), got %v", ttl)
	}
}

// A client crashed at its write ends once in the history, and the gate
// records that end before the kill (nemesis.Gate.At): the workload retires
// the process and records nothing more of it.
func TestAPointCrashEndsTheProcessOnce(t *testing.T) {
	lockNode, storeNode := lockAndStore(t)
	ops := runTrapped(t, lockNode, storeNode, "set-nx-px", nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Crash: true})
	var ends []history.Op
	dead := -1
	for _, op := range ops {
		if op.F == history.Crash && op.Process != history.NemesisProcess {
			ends, dead = append(ends, op), op.Process
		} else if dead >= 0 && op.Process == dead {
			t.Fatalf("process %d went on after its end: %+v", dead, op)
		}
	}
	if len(ends) != 2 || ends[0].Type != history.Invoke || ends[1].Type != history.Info || ends[0].Process != ends[1].Process {
		t.Fatalf("the crashed process's end: %+v; want one invoke and one info of %s", ends, history.Crash)
	}
}

// runTrapped runs two clients of the named lock for 500 ms with trap armed
// on their gate, and returns their history.
func runTrapped(t *testing.T, lockNode, storeNode *cluster.Node, name string, trap nemesis.Trap) []history.Op {
	t.Helper()
	rec := history.NewRecorder(nil, 2)
	gate := nemesis.NewGate(rec)
	gate.Arm(trap)
	o := workloads.Options{Keys: workloads.KeysOf(1), Gate: gate}
	for i := 0; i < 2; i++ {
		o.Clients = append(o.Clients, workloads.Client{
			Clock: locks.SystemClock{},
			Open: func(process int) (workloads.Process, error) {
				return openProcess(lockNode, storeNode, name, locks.Config{Wait: 100 * time.Millisecond},
					func(lc, sc *redis.Client) {
						lc.AddHook(gate.Hook(i, process, true))
						sc.AddHook(gate.Hook(i, process, false))
					})
			},
		})
	}
	clients, err := workloads.Open(rec, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := clients.Run(stop, ctx); err != nil {
		t.Fatal(err)
	}
	return rec.Ops()
}

// unknownOnce answers its first acquire unknown, as a worker whose server
// went away does, so the workload retires its process.
type unknownOnce struct {
	locks.Lock
	failed *atomic.Bool
}

func (u unknownOnce) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	if u.failed.CompareAndSwap(false, true) {
		return locks.Lease{}, fmt.Errorf("%w: the server went away", locks.ErrUnknown)
	}
	return u.Lock.Acquire(ctx, key)
}

// A retired process whose successor cannot open yet (a worker's hello
// finds its server down: unknown) is tried again until it opens, and the
// client goes on; an open that fails otherwise ends the run with its
// error, not a panic.
func TestReopenAfterRetire(t *testing.T) {
	ctx := context.Background()
	lockNode, storeNode := lockAndStore(t)
	for _, tc := range []struct {
		name    string
		openErr error
	}{
		{"unknown", fmt.Errorf("%w: connecting: refused", locks.ErrUnknown)},
		{"broken", errors.New("the worker broke the protocol")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := history.NewRecorder(nil, 1)
			var opens atomic.Int32
			var failed atomic.Bool
			o := workloads.Options{Keys: []workloads.Key{{Lock: "lock-" + tc.name, Register: "register-" + tc.name}}}
			o.Clients = []workloads.Client{{Clock: locks.SystemClock{}, Open: func(process int) (workloads.Process, error) {
				if n := opens.Add(1); n == 2 || n == 3 {
					return workloads.Process{}, tc.openErr
				}
				p, err := openProcess(lockNode, storeNode, "set-nx-px", locks.Config{}, nil)
				p.Lock = unknownOnce{p.Lock, &failed}
				return p, err
			}}}
			clients, err := workloads.Open(rec, o)
			if err != nil {
				t.Fatal(err)
			}
			stop, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
			defer cancel()
			err = clients.Run(stop, ctx)
			if tc.name == "broken" {
				if err == nil || !strings.Contains(err.Error(), "broke the protocol") || strings.Contains(err.Error(), "panicked") {
					t.Fatalf("Run: %v, want the open's error, not a panic", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := opens.Load(); n < 4 {
				t.Fatalf("%d opens: the client did not try again after two refused", n)
			}
			acquired := 0
			for _, op := range rec.Ops() {
				if op.F == history.Acquire && op.Type == history.OK && op.Process > 0 {
					acquired++
				}
			}
			if acquired == 0 {
				t.Fatal("the reopened process never acquired")
			}
		})
	}
}

// lockAndStore starts two Redis nodes for the test: the lock's and the
// protected store's.
func lockAndStore(t *testing.T) (lock, store *cluster.Node) {
	t.Helper()
	cl, err := cluster.Start(context.Background(), cluster.Options{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl.Nodes()[0], cl.Nodes()[1]
}

// openProcess opens one process of the named lock on lock, with cfg and a
// TTL of a second, its register on store, and hook, if set, given both
// clients before the lock is built.
func openProcess(lock, store *cluster.Node, name string, cfg locks.Config, hook func(lc, sc *redis.Client)) (workloads.Process, error) {
	lc := cluster.NewClient(lock.Addr(), cluster.ClientOptions{})
	sc := cluster.NewClient(store.Addr(), cluster.ClientOptions{})
	if hook != nil {
		hook(lc, sc)
	}
	cfg.Clients, cfg.TTL = []redis.UniversalClient{lc}, time.Second
	l, err := locks.New(name, cfg)
	return workloads.Process{Lock: l, Store: workloads.NewStore(sc), Close: func() { lc.Close(); sc.Close() }}, err
}

// preparing is a lock with one-off work (locks.Preparer) that counts its
// Prepare calls and answers each with err; it is never acquired.
type preparing struct {
	locks.Lock
	calls *atomic.Int32
	err   error
}

func (p preparing) Prepare(ctx context.Context) error {
	p.calls.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("a Prepare with no deadline")
	}
	return p.err
}

// Open prepares every client's first process's lock before it returns, so
// the lock's one-off work is done before anything times the story; a
// Prepare that fails fails Open with the process and the lock's error.
func TestOpenPreparesEachClientsLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"prepared", nil, ""},
		{"refused", errors.New("no table"), "process 0: prepare the lock: no table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			closed := 0
			o := workloads.Options{}
			for range 3 {
				o.Clients = append(o.Clients, workloads.Client{Clock: locks.SystemClock{},
					Open: func(int) (workloads.Process, error) {
						return workloads.Process{Lock: preparing{calls: &calls, err: tc.err}, Close: func() { closed++ }}, nil
					}})
			}
			o.Clients[1].Open = func(int) (workloads.Process, error) {
				return workloads.Process{Lock: preparing{calls: &calls}, Close: func() { closed++ }}, nil
			}
			_, err := workloads.Open(history.NewRecorder(nil, 3), o)
			if n := calls.Load(); n != 3 {
				t.Errorf("%d Prepare calls for 3 clients", n)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "prepare the lock: no table")):
				t.Fatalf("Open = %v, want %q", err, tc.want)
			case tc.want != "" && closed != 3:
				t.Fatalf("%d of 3 processes closed after a failed Prepare", closed)
			}
		})
	}
}
