package library_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/worker"
	"github.com/locktorture/locktorture/workloads"
)

// python-etcd3's Lock in real workers on a real three-member etcd: a
// second client is refused (at once: the packaged acquire cannot wait); a
// release answers, and a second one, or one of a lease that expired, is
// not-held; an expired lease's key goes to the next client with a greater
// create revision, which the store then holds the woken holder's stale
// write to; and a stopped member or a cut link times out: unknown.
func TestEtcd3Worker(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import etcd3, redis").Run(); err != nil {
		t.Skipf("python3-etcd3 or python3-redis not installed (apt-get install python3-etcd3 python3-redis): %v", err)
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd not installed (apt-get install etcd-server)")
	}
	ctx := context.Background()
	cl, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	var o []cluster.NodeOptions
	for _, n := range []string{"n1", "n2", "n3"} {
		o = append(o, cluster.NodeOptions{Name: n, Kind: cluster.EtcdKind.Name})
	}
	nodes, err := cl.AddNodes(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	store, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	open := func(lock, owner string, ttl time.Duration) *worker.Proc {
		t.Helper()
		hello := worker.Hello{Lock: lock, Store: store.Addr(), TTLNS: int64(ttl), WaitNS: int64(ttl / 3), Owner: owner}
		for _, n := range nodes {
			link, err := n.Link(owner)
			if err != nil {
				t.Fatal(err)
			}
			hello.Nodes = append(hello.Nodes, link.Addr())
		}
		return startWorker(t, hello, worker.Options{})
	}
	a, b := open("etcd3-fenced", "a", ttl), open("etcd3-fenced", "b", ttl)

	sent := time.Now()
	la, err := a.Acquire(ctx, "k")
	returned := time.Now()
	is(t, "first acquire", err, nil)
	if la.Fence <= 0 {
		t.Fatalf("fenced lease without a fence: %+v", la)
	}
	// The TTL granted (1 s: the harness's etcd raises nothing below it),
	// counted from the worker's clock before it began the acquire.
	if la.ValidUntil.Before(sent.Add(ttl)) || la.ValidUntil.After(returned.Add(ttl)) {
		t.Fatalf("lease valid until %s, want a TTL (%s) after a time between the request (%s) and its answer (%s)",
			la.ValidUntil.Format(time.StampMicro), ttl, sent.Format(time.StampMicro), returned.Format(time.StampMicro))
	}
	began := time.Now()
	_, err = b.Acquire(ctx, "k")
	is(t, "acquire while a holds", err, locks.ErrNotAcquired)
	t.Logf("the refused acquire took %s of its %s wait (Lock.acquire's TypeError under tenacity 8)", time.Since(began).Round(time.Millisecond), ttl/3)
	is(t, "release", a.Release(ctx, la), nil)
	is(t, "release again", a.Release(ctx, la), locks.ErrNotHeld)

	// Nothing renews the lease: it expires (the lessor looks every 500 ms
	// and revokes through the log), the next client takes the key, created
	// again at a greater revision, and the store refuses the old holder.
	la, err = a.Acquire(ctx, "k")
	is(t, "acquire before the lease lapses", err, nil)
	is(t, "a's write", a.Write(ctx, "register-etcd3", 1, la.Fence), nil)
	var lb locks.Lease
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if lb, err = b.Acquire(ctx, "k"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	is(t, "acquire once a's lease expired", err, nil)
	if lb.Fence <= la.Fence {
		t.Fatalf("fence went from %d to %d", la.Fence, lb.Fence)
	}
	is(t, "b's write", b.Write(ctx, "register-etcd3", 2, lb.Fence), nil)
	is(t, "the lapsed holder's stale write", a.Write(ctx, "register-etcd3", 3, la.Fence), workloads.ErrStale)
	is(t, "release of the lapsed lease", a.Release(ctx, la), locks.ErrNotHeld)
	is(t, "release", b.Release(ctx, lb), nil)

	// The plain lock carries no fence; a TTL of 1.5 s is a lease of 2.
	c := open("etcd3", "c", 1500*time.Millisecond)
	sent = time.Now()
	lc, err := c.Acquire(ctx, "plain")
	returned = time.Now()
	is(t, "plain acquire", err, nil)
	if lc.Fence != 0 || lc.ValidUntil.Before(sent.Add(2*time.Second)) || lc.ValidUntil.After(returned.Add(2*time.Second)) {
		t.Fatalf("the plain lock's lease at a TTL of 1.5 s: %+v, want no fence and a deadline 2 s after its acquire began", lc)
	}
	is(t, "plain release", c.Release(ctx, lc), nil)

	// Every worker dials its link to n1 (python-etcd3 0.12 takes one host):
	// a stopped n1 answers no call within its deadline (TTL/2).
	la, err = a.Acquire(ctx, "stopped")
	is(t, "acquire before the member stops", err, nil)
	if err := nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	is(t, "release to a stopped member", a.Release(ctx, la), locks.ErrUnknown)
	_, err = b.Acquire(ctx, "stopped-2")
	is(t, "acquire from a stopped member", err, locks.ErrUnknown)
	if err := nodes[0].Resume(); err != nil {
		t.Fatal(err)
	}

	// A cut link: the same.
	link, err := nodes[0].Link("c")
	if err != nil {
		t.Fatal(err)
	}
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, "cut")
	is(t, "acquire over a cut link", err, locks.ErrUnknown)
}
