package library_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/worker"
)

// TestMain registers the adapters under test, as a program that runs them
// does.
func TestMain(m *testing.M) {
	library.Register()
	os.Exit(m.Run())
}

// ttl is every lease's; acquires wait a third of it, so one that finds the key
// taken gives up before the holder's lease could lapse. It and the clients'
// timeouts are long enough that a machine busy with stories answering late
// is not mistaken for a library's answer.
const ttl = time.Second

// handles are two clients of one lock over the same nodes, the way a
// scenario builds them; addrs are where the nodes listen.
type handles struct {
	a, b  locks.Lock
	nodes []*cluster.Node
	store *cluster.Node
}

func start(t *testing.T, name string) *handles {
	t.Helper()
	info, err := locks.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{}, info.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	h := &handles{nodes: cl.Nodes()}
	h.store, err = cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	open := func(owner string) locks.Lock {
		if info.Program != nil {
			hello := worker.Hello{Lock: name, Store: h.store.Addr(), TTLNS: int64(ttl), WaitNS: int64(ttl / 3), Owner: owner}
			for _, n := range h.nodes {
				hello.Nodes = append(hello.Nodes, n.Addr())
			}
			return startWorker(t, hello, worker.Options{})
		}
		// A tenth of a TTL between tries bounds how many a stopped node times
		// out: redsync tries Wait/RetryDelay+1 times.
		cfg := locks.Config{TTL: ttl, Wait: ttl / 3, RetryDelay: ttl / 10, Owner: owner, NodeTimeout: ttl / 2}
		for _, n := range h.nodes {
			c := cluster.NewClient(n.Addr(), cluster.ClientOptions{Timeout: ttl / 2})
			t.Cleanup(func() { c.Close() })
			cfg.Clients = append(cfg.Clients, c)
		}
		l, err := locks.Build(info, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	h.a, h.b = open("a"), open("b")
	return h
}

// redisAndStore starts a Redis node for the lock and one for the store,
// stopped when the test ends.
func redisAndStore(t *testing.T) (node, store *cluster.Node) {
	t.Helper()
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	store, err = cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	return cl.Nodes()[0], store
}

// startWorker starts one client of hello.Lock as its worker process, with
// o's other options (a gate, a clock), and closes it when the test ends.
func startWorker(t *testing.T, hello worker.Hello, o worker.Options) *worker.Proc {
	t.Helper()
	info, err := locks.Lookup(hello.Lock)
	if err != nil {
		t.Fatal(err)
	}
	o.Command = func(string) *exec.Cmd { return info.Program() }
	if info.NodeTimeout && hello.NodeTimeoutNS == 0 {
		// As the engine sends it (engine/processes.go).
		hello.NodeTimeoutNS = int64(locks.DefaultNodeTimeout(time.Duration(hello.TTLNS)))
	}
	o.Hello = hello
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	p, err := worker.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("%s: %v", hello.Lock, err)
	}
	t.Cleanup(p.Close)
	return p
}

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// Each adapter sorts its library's answers into the harness's three
// errors: held elsewhere is not-acquired, a lapsed lease's release is
// not-held, and a node that does not answer is unknown, for acquire and
// release alike.
func TestAdaptersClassifyTheLibrariesErrors(t *testing.T) {
	for _, name := range []string{"redsync", "redsync-redlock", "redislock", "redislock-refresh", "redis-py"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h := start(t, name)
			lease, err := h.a.Acquire(ctx, "k")
			is(t, "first acquire", err, nil)
			_, err = h.b.Acquire(ctx, "k")
			is(t, "acquire while a holds it", err, locks.ErrNotAcquired)
			is(t, "release", h.a.Release(ctx, lease), nil)

			lease, err = h.a.Acquire(ctx, "k")
			is(t, "acquire after release", err, nil)
			refreshed := name == "redislock-refresh"
			time.Sleep(2 * ttl)
			if refreshed {
				// The refresher keeps the key past its TTL.
				_, err = h.b.Acquire(ctx, "k")
				is(t, "acquire while a's refresher runs", err, locks.ErrNotAcquired)
				is(t, "release of a refreshed lease", h.a.Release(ctx, lease), nil)
			} else {
				is(t, "release of a lapsed lease", h.a.Release(ctx, lease), locks.ErrNotHeld)
			}

			lease, err = h.a.Acquire(ctx, "k")
			is(t, "acquire before the nodes stop", err, nil)
			for _, n := range h.nodes {
				if err := n.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			is(t, "release to stopped nodes", h.a.Release(ctx, lease), locks.ErrUnknown)
			_, err = h.b.Acquire(ctx, "k2")
			is(t, "acquire from stopped nodes", err, locks.ErrUnknown)
			for _, n := range h.nodes {
				if err := n.Resume(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
