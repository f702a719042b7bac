package services

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// zkEnsemble starts a real three-member ZooKeeper ensemble, skipping on a
// machine without java or Debian's ZooKeeper jars.
func zkEnsemble(t *testing.T) []*cluster.Node {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java not installed (apt-get install openjdk-17-jre-headless)")
	}
	for _, p := range cluster.ZooKeeperJars {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("zookeeper not installed: %v", err)
		}
	}
	c, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var o []cluster.NodeOptions
	for _, n := range []string{"z1", "z2", "z3"} {
		o = append(o, cluster.NodeOptions{Name: n, Kind: cluster.ZooKeeperKind.Name})
	}
	nodes, err := c.AddNodes(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	zkFirstWrite(t, nodes)
	return nodes
}

// zkFirstWrite makes the lock root once, with time to spare: a new
// ensemble's first write (its epoch's first proposal, three JVMs
// compiling the write path) can outlast the lock's 500 ms bound on a
// loaded machine, which the cases' 300 ms waits would read as the
// lock's answer.
func zkFirstWrite(t *testing.T, nodes []*cluster.Node) {
	t.Helper()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	c, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The client's calls wait for a session however long it takes;
	// closing the connection ends them.
	stop := time.AfterFunc(30*time.Second, c.Close)
	defer stop.Stop()
	if _, err := c.Create(zkRoot, nil, 0, zkACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("the ensemble's first write: %v", err)
	}
}

// zkClient is one client's lock, dialing the ensemble through its own
// links, returned with them so a test can cut them.
func zkClient(t *testing.T, info locks.Info, nodes []*cluster.Node, peer string, ttl, wait time.Duration) (*zkLock, []*cluster.Link) {
	t.Helper()
	var addrs []string
	var links []*cluster.Link
	for _, n := range nodes {
		l, err := n.Link(peer)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, l)
		addrs = append(addrs, l.Addr())
	}
	lk, err := locks.Build(info, locks.Config{Addrs: addrs, TTL: ttl, Wait: wait, RetryDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	z := lk.(*zkLock)
	t.Cleanup(func() { z.Close() })
	return z, links
}

// One ensemble for every case, since each JVM start costs seconds.
func TestZKLock(t *testing.T) {
	nodes := zkEnsemble(t)
	t.Run("exclusion", func(t *testing.T) { testZKExclusion(t, nodes) })
	t.Run("session-expiry", func(t *testing.T) { testZKExpiry(t, nodes) })
	t.Run("close", func(t *testing.T) { testZKClose(t, nodes) })
	t.Run("protected", func(t *testing.T) { testZKProtected(t, nodes) })
	t.Run("node-pause", func(t *testing.T) { testZKNodePause(t, nodes) })
	// Last: it kills a member.
	t.Run("failover", func(t *testing.T) { testZKFailover(t, nodes) })
}

const zkTTL = 500 * time.Millisecond

// Two clients exclude each other, a waiter that gives up leaves no node
// behind, a waiter gets the lock when it is released, fences increase,
// and a released lease released again is ErrNotHeld.
func testZKExclusion(t *testing.T, nodes []*cluster.Node) {
	ctx := context.Background()
	info := info(t, "zk-fenced")
	a, _ := zkClient(t, info, nodes, "c1", zkTTL, 300*time.Millisecond)
	b, _ := zkClient(t, info, nodes, "c2", zkTTL, 300*time.Millisecond)

	la, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if la.Fence <= 0 {
		t.Fatalf("fenced lease without a fence: %+v", la)
	}
	start := time.Now()
	if _, err := b.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("second client while the first holds: %v, want ErrNotAcquired", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("gave up after %v, before its wait of 300ms", waited)
	}
	// The waiter that gave up deleted its node: it does not stand in the
	// queue between the holder and the next waiter. The holder's member
	// may not have applied the waiter's delete yet (a read is served by
	// the client's own member): a sync first brings it up to the leader.
	var kids []string
	err = a.call(ctx, time.Now().Add(5*time.Second), func() (err error) {
		if _, err = a.conn.Sync(zkRoot + "/k"); err != nil {
			return err
		}
		kids, _, err = a.conn.Children(zkRoot + "/k")
		return
	})
	if err != nil || len(kids) != 1 {
		t.Fatalf("lock dir holds %v (%v), want only the holder's node", kids, err)
	}

	// A waiter gets the lock as soon as the holder releases it.
	got := make(chan error, 1)
	var lb locks.Lease
	go func() {
		var err error
		lb, err = b.Acquire(ctx, "k")
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after release: %v", err)
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("fence went from %d to %d", la.Fence, lb.Fence)
	}
	if err := a.Release(ctx, la); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("releasing a released lease: %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// The session is the lease: cut the holder off from every member and the
// ensemble expires it, deleting its node, while the holder still has its
// lease in hand. A second client acquires with a greater fence, and the
// first one's release, once it reaches the ensemble again, is ErrNotHeld.
func testZKExpiry(t *testing.T, nodes []*cluster.Node) {
	ctx := context.Background()
	info := info(t, "zk-fenced")
	a, aLinks := zkClient(t, info, nodes, "c1", zkTTL, 300*time.Millisecond)
	la, err := a.Acquire(ctx, "expiry")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range aLinks {
		if err := l.Cut(); err != nil {
			t.Fatal(err)
		}
	}
	cut := time.Now()
	b, _ := zkClient(t, info, nodes, "c3", zkTTL, 5*time.Second)
	lb, err := b.Acquire(ctx, "expiry")
	if err != nil {
		t.Fatalf("no acquire after the holder's session should have expired: %v", err)
	}
	if took := time.Since(cut); took < zkTTL {
		t.Fatalf("acquired %v after the cut, before the holder's session of %v could expire", took, zkTTL)
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("fence after the expiry %d, not above the lost holder's %d", lb.Fence, la.Fence)
	}
	t.Logf("acquired %v after the holder was cut off", time.Since(cut).Round(time.Millisecond))
	if err := a.Release(ctx, la); !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("release through cut links: %v, want ErrUnknown", err)
	}
	for _, l := range aLinks {
		if err := l.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	// The client finds a member again within a second or two; until it
	// does, a release's outcome stays unknown.
	healed := time.Now()
	err = a.Release(ctx, la)
	for errors.Is(err, locks.ErrUnknown) && time.Since(healed) < 5*time.Second {
		time.Sleep(50 * time.Millisecond)
		err = a.Release(ctx, la)
	}
	if !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("release of a lease whose session expired: %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// Close, which the engine calls when a client's process ends, frees what
// the client held at once, not a session timeout later.
func testZKClose(t *testing.T, nodes []*cluster.Node) {
	ctx := context.Background()
	info := info(t, "zk")
	const ttl = 5 * time.Second
	a, _ := zkClient(t, info, nodes, "c1", ttl, time.Second)
	b, _ := zkClient(t, info, nodes, "c2", ttl, ttl)
	if _, err := a.Acquire(ctx, "close"); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "close")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(closed); took > ttl/2 {
		t.Fatalf("acquired %v after the holder closed, as if its session had timed out", took)
	}
	if lb.Fence != 0 {
		t.Fatalf("the plain lock gave a fence: %+v", lb)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// A create whose reply is lost is found again by its attempt's GUID:
// find names the node that create made, and nothing for a GUID no create
// used.
func testZKProtected(t *testing.T, nodes []*cluster.Node) {
	ctx := context.Background()
	a, _ := zkClient(t, info(t, "zk"), nodes, "c1", zkTTL, time.Second)
	c, err := a.session()
	if err != nil {
		t.Fatal(err)
	}
	dir := zkRoot + "/protected"
	const prefix = zkProtected + "0123456789abcdef0123456789abcdef-"
	node, err := a.create(ctx, c, dir, prefix, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	found, err := a.find(ctx, c, dir, prefix, time.Time{})
	if err != nil || dir+"/"+found != node {
		t.Fatalf("find %q: %q, %v; the create made %s", prefix, found, err, node)
	}
	if found, err := a.find(ctx, c, dir, zkProtected+"ffffffffffffffffffffffffffffffff-", time.Time{}); err != nil || found != "" {
		t.Fatalf("find of a GUID never used: %q, %v", found, err)
	}
	// A create lost before its dir was made: no dir, so no node, which
	// is "not made", not an unknown outcome.
	if found, err := a.find(ctx, c, zkRoot+"/never-made", prefix, time.Time{}); err != nil || found != "" {
		t.Fatalf("find in a dir never made: %q, %v", found, err)
	}
}

// Killing the leader leaves a quorum of two: the holder's session lives
// through the election, so nobody else gets the lock, and its release
// succeeds on the new leader's watch.
func testZKFailover(t *testing.T, nodes []*cluster.Node) {
	ctx := context.Background()
	info := info(t, "zk-fenced")
	// At the stories' TTL: the election must not cost the holder its
	// session, however short.
	a, _ := zkClient(t, info, nodes, "c1", zkTTL, time.Second)
	b, _ := zkClient(t, info, nodes, "c2", zkTTL, 1500*time.Millisecond)
	la, err := a.Acquire(ctx, "failover")
	if err != nil {
		t.Fatal(err)
	}
	var leader *cluster.Node
	for _, n := range nodes {
		if r, _ := n.Role(ctx); r == "leader" {
			leader = n
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if lb, err := b.Acquire(ctx, "failover"); err == nil {
		t.Fatalf("a second client got the lock %+v (%v) while the holder's session lives", lb, err)
	}
	err = a.Release(ctx, la)
	for errors.Is(err, locks.ErrUnknown) && time.Since(killed) < 30*time.Second {
		// The holder may still be reconnecting to a member of the new
		// quorum: beside other packages' servers, three JVMs' election
		// has taken over 10 s.
		time.Sleep(50 * time.Millisecond)
		err = a.Release(ctx, la)
	}
	if err != nil {
		t.Fatalf("release after the failover: %v", err)
	}
	lb, err := b.Acquire(ctx, "failover")
	if err != nil {
		t.Fatalf("acquire after the holder released: %v", err)
	}
	if lb.Fence <= la.Fence {
		t.Fatalf("fence across the failover went from %d to %d", la.Fence, lb.Fence)
	}
}

// Pausing the leader stops every write and every session's pings until
// the other two notice (syncLimit) and elect one: the holder, on the
// paused leader or on a follower that stops serving, must find a member
// of the new quorum within its session. Nobody else gets the lock
// meanwhile, and its release succeeds once it has. (With the library's
// own handshake timeout, ten receive timeouts, a holder connected to the
// paused leader lost its session every time.) At sessions of 500 ms and
// 1 s the holder still lost it now and then on a loaded machine (why
// zkClaims leaves NodePause out): the new leader gives every session a
// fresh timeout, and a client whose round of members includes the
// paused one may not be back within it. The test holds the lock to what
// it keeps at a session of a few seconds.
func testZKNodePause(t *testing.T, nodes []*cluster.Node) {
	ctx := context.Background()
	info := info(t, "zk-fenced")
	a, aLinks := zkClient(t, info, nodes, "c1", 3*time.Second, time.Second)
	b, _ := zkClient(t, info, nodes, "c2", zkTTL, 1500*time.Millisecond)
	la, err := a.Acquire(ctx, "node-pause")
	if err != nil {
		t.Fatal(err)
	}
	var leader *cluster.Node
	on := ""
	for i, n := range nodes {
		if r, _ := n.Role(ctx); r == "leader" {
			leader = n
		}
		if aLinks[i].Addr() == a.conn.Server() {
			on = n.Name
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	t.Logf("pausing the leader %s; the holder is connected to %s", leader.Name, on)
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	defer leader.Resume()
	// ErrUnknown is an honest answer too: no write is answered until the
	// other two elect a leader.
	if lb, err := b.Acquire(ctx, "node-pause"); err == nil {
		t.Fatalf("a second client got the lock %+v while the leader was paused", lb)
	}
	err = a.Release(ctx, la)
	for errors.Is(err, locks.ErrUnknown) && time.Since(paused) < 10*time.Second {
		time.Sleep(50 * time.Millisecond)
		err = a.Release(ctx, la)
	}
	if err != nil {
		t.Fatalf("release with the leader paused: %v", err)
	}
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
}
