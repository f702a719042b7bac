package library_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/worker"
)

// portalocker's RedisLock in real workers on a real Redis: a second client
// is refused while the first holds and takes the lock once it is released;
// a hold ends with its connection (a holder whose subscribed connection the
// server drops is told so and the next client takes the lock at once, and
// so does a holder's crash), and with nothing else (a holder stopped past
// unavailable_timeout keeps it: check_or_kill_lock never kills; so does a
// holder cut off, whose connection the server keeps); and the library's
// answers are sorted: a release returns nothing, lapsed or not, and does
// not wait for the server (over a cut link or to a stopped node it
// answers at once); an acquire from a stopped node times out: unknown.
func TestPortalockerWorker(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import portalocker.redis, redis").Run(); err != nil {
		t.Skipf("python3-portalocker or python3-redis not installed (apt-get install python3-portalocker python3-redis): %v", err)
	}
	ctx := context.Background()
	cl, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	node, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	store, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	direct := cluster.NewClient(node.Addr(), cluster.ClientOptions{})
	t.Cleanup(func() { direct.Close() })
	open := func(owner string) *worker.Proc {
		t.Helper()
		link, err := node.Link(owner)
		if err != nil {
			t.Fatal(err)
		}
		hello := worker.Hello{Lock: "portalocker", Nodes: []string{link.Addr()}, Store: store.Addr(),
			TTLNS: int64(ttl), WaitNS: int64(ttl / 3), Owner: owner}
		return startWorker(t, hello, worker.Options{})
	}
	a, b := open("a"), open("b")

	la, err := a.Acquire(ctx, "k")
	is(t, "first acquire", err, nil)
	if la.Lost == nil || !la.ValidUntil.IsZero() || la.Fence != 0 {
		t.Fatalf("a lease that should tell its loss, with no deadline and no fence: %+v", la)
	}
	_, err = b.Acquire(ctx, "k")
	is(t, "acquire while a holds", err, locks.ErrNotAcquired)
	is(t, "release", a.Release(ctx, la), nil)
	// RedisLock.release returns None and, a second time, does nothing.
	is(t, "release again", a.Release(ctx, la), nil)

	// The server drops b's subscribed connection: b's PubSub thread dies
	// and interrupts the main thread, which the worker tells as a loss; the
	// lock is free at once.
	lb, err := b.Acquire(ctx, "k")
	is(t, "acquire after the release", err, nil)
	if err := direct.Do(ctx, "client", "kill", "type", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lb.Lost:
	case <-time.After(3 * time.Second):
		t.Fatal("the holder whose connection was killed was not told its lease is lost")
	}
	la, err = a.Acquire(ctx, "k")
	is(t, "acquire once the holder's connection is gone", err, nil)
	// portalocker answers a release of a lost hold as any other: nothing.
	is(t, "release of the lost hold", b.Release(ctx, lb), nil)

	// A holder's crash closes its connection: the next client takes the
	// lock at once.
	a.Close()
	lb, err = b.Acquire(ctx, "k")
	is(t, "acquire after the holder died", err, nil)
	is(t, "release", b.Release(ctx, lb), nil)

	// A stopped holder keeps the lock past unavailable_timeout (1 s): the
	// waiters' check_or_kill_lock takes its own SUBSCRIBE's confirmation
	// for the holder's answer and never kills it.
	c := open("c")
	lc, err := c.Acquire(ctx, "paused")
	is(t, "acquire before the pause", err, nil)
	stop(t, c, 1500*time.Millisecond, func() {
		for range 4 {
			_, err := b.Acquire(ctx, "paused")
			is(t, "acquire while the holder is stopped", err, locks.ErrNotAcquired)
		}
	})
	is(t, "release after the pause", c.Release(ctx, lc), nil)

	// A holder cut off keeps the lock: the server still has its
	// subscription (the link's proxy keeps the connection open). Its
	// release stops its thread, which closes the subscribed connection,
	// then writes an UNSUBSCRIBE on a pooled connection and returns without
	// reading its reply: it answers at once. The close is what lets the
	// lock go, and the link's proxy, cut or not, passes it on (a real
	// partition would lose it, and the server would keep the subscription
	// until its TCP keepalive gave up).
	lc, err = c.Acquire(ctx, "cut")
	is(t, "acquire before the cut", err, nil)
	link, err := node.Link("c")
	if err != nil {
		t.Fatal(err)
	}
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, "cut")
	is(t, "acquire while the holder is cut off", err, locks.ErrNotAcquired)
	is(t, "release over a cut link", c.Release(ctx, lc), nil)
	var lb2 locks.Lease
	for try := 0; try < 3; try++ {
		if lb2, err = b.Acquire(ctx, "cut"); err == nil {
			break
		}
	}
	is(t, "acquire after the cut-off holder's release", err, nil)
	is(t, "release", b.Release(ctx, lb2), nil)

	// A stopped node: a command's reply times out (500 ms): unknown. A
	// release answers at once, as over a cut link, and the server, resumed,
	// reads the holder's close and lets the lock go.
	lb, err = b.Acquire(ctx, "stopped")
	is(t, "acquire before the node stops", err, nil)
	if err := node.Pause(); err != nil {
		t.Fatal(err)
	}
	d := open("d")
	_, err = d.Acquire(ctx, "stopped-2")
	is(t, "acquire from a stopped node", err, locks.ErrUnknown)
	is(t, "release to a stopped node", b.Release(ctx, lb), nil)
	if err := node.Resume(); err != nil {
		t.Fatal(err)
	}
	ld, err := d.Acquire(ctx, "stopped")
	is(t, "acquire once the node resumed", err, nil)
	is(t, "release", d.Release(ctx, ld), nil)
}
