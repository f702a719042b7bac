package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func startOne(t *testing.T) (*Cluster, *Node) {
	t.Helper()
	c, err := Start(context.Background(), Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.Nodes()[0]
}

func TestMissingBinaryIsNamed(t *testing.T) {
	_, err := New(Options{Server: "redis-server-that-does-not-exist"})
	if err == nil || !strings.Contains(err.Error(), "redis-server-that-does-not-exist not found") {
		t.Fatalf("want a clear not-found error, got %v", err)
	}
}

func TestNodeThroughLinkKillRestartPause(t *testing.T) {
	ctx := context.Background()
	_, n := startOne(t)
	l, err := n.Link("c1")
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClient(l.Addr(), ClientOptions{Timeout: time.Second})
	defer cl.Close()
	if err := cl.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set through link: %v", err)
	}

	// kill -9 without persistence: the restarted node on the same port is empty.
	pid := n.PID()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d still alive after Kill", pid)
	}
	if err := cl.Get(ctx, "k").Err(); err == nil {
		t.Fatal("GET succeeded against a killed node")
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	cl = NewClient(l.Addr(), ClientOptions{Timeout: time.Second})
	defer cl.Close()
	if v, err := cl.Exists(ctx, "k").Result(); err != nil || v != 0 {
		t.Fatalf("after restart without persistence want k gone, got %d, %v", v, err)
	}

	// SIGSTOP: commands time out; SIGCONT: they work again.
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cl.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a paused node")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("paused node took %v to time out, want about the 1s client timeout", d)
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	cl = NewClient(l.Addr(), ClientOptions{Timeout: time.Second})
	defer cl.Close()
	if err := cl.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}
}

func TestLinkCutHealLatency(t *testing.T) {
	ctx := context.Background()
	_, n := startOne(t)
	l1, _ := n.Link("c1")
	l2, _ := n.Link("c2")
	c1 := NewClient(l1.Addr(), ClientOptions{Timeout: time.Second})
	c2 := NewClient(l2.Addr(), ClientOptions{Timeout: time.Second})
	defer c1.Close()
	defer c2.Close()
	// A connection on a link no fault touched lives through a heal: only
	// the cut link's connections are dropped.
	raw, err := net.DialTimeout("tcp", l2.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	pong := func(when string) {
		t.Helper()
		raw.SetDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 7)
		if _, err := raw.Write([]byte("PING\r\n")); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if _, err := io.ReadFull(raw, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("%s: %q, %v", when, buf, err)
		}
	}
	pong("before the cut")

	if err := l1.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := c1.Ping(ctx).Err(); err == nil {
		t.Fatal("c1 reached the node through a cut link")
	}
	if err := c2.Ping(ctx).Err(); err != nil {
		t.Fatalf("c2's link was not cut but PING failed: %v", err)
	}
	if err := l1.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := l2.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := c1.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after heal: %v", err)
	}
	pong("on the untouched link after the heal")
	// Heal reopens the link's port: one no connection's source port and
	// no probe for a free port is drawn from.
	lo, hi := linkPorts()
	for _, l := range []*Link{l1, l2} {
		_, p, _ := net.SplitHostPort(l.Addr())
		if port, _ := strconv.Atoi(p); port < lo || port >= hi {
			t.Fatalf("link %s->%s listens on %d, want from %d to below the ephemeral range's %d", l.Peer, l.Node, port, lo, hi)
		}
	}

	if err := l2.SetLatency(60*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c2.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 120*time.Millisecond { // 60ms each way
		t.Fatalf("PING took %v through a 60ms-each-way link", d)
	}
	if err := l2.SetLatency(0, 0); err != nil {
		t.Fatal(err)
	}
}

// A one-way cut of the replies lets a write land while its client times
// out (the indeterminate op a checker must allow for); a cut of the
// requests keeps it off the node. Locally a server's link other than
// replication is refused, as it would be a link nobody dials.
// A write made on the master as soon as ReplicaOf returns reaches the
// replica at once, every time: a replication story's lock is on the
// replica unless the story keeps it off.
func TestReplicaOfStreamsAtOnce(t *testing.T) {
	ctx := context.Background()
	for i := range 5 {
		c, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		m, err := c.AddNode(ctx, NodeOptions{Name: "m"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.AddNode(ctx, NodeOptions{Name: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ReplicaOf(ctx, m); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Do(ctx, "SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for {
			if v, _ := r.Do(ctx, "GET", "k"); v == "v" {
				break
			}
			if time.Since(start) > 200*time.Millisecond {
				t.Fatalf("sync %d: the replica has not had a write 200ms after it was made", i)
			}
			time.Sleep(2 * time.Millisecond)
		}
		c.Close()
	}
}

func TestOneWayCut(t *testing.T) {
	ctx := context.Background()
	c, n := startOne(t)
	for _, tc := range []struct {
		direction string
		lands     bool
	}{{"downstream", true}, {"upstream", false}} {
		l, err := n.Link("c-" + tc.direction)
		if err != nil {
			t.Fatal(err)
		}
		cl := NewClient(l.Addr(), ClientOptions{Timeout: time.Second})
		defer cl.Close()
		if err := cl.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.CutDirection(tc.direction); err != nil {
			t.Fatal(err)
		}
		if err := cl.Set(ctx, tc.direction, "1", 0).Err(); err == nil {
			t.Fatalf("%s cut: SET was answered", tc.direction)
		}
		time.Sleep(50 * time.Millisecond)
		got, err := n.Do(ctx, "EXISTS", tc.direction)
		if err != nil {
			t.Fatal(err)
		}
		if landed := got == int64(1); landed != tc.lands {
			t.Errorf("%s cut: the write landed: %v, want %v", tc.direction, landed, tc.lands)
		}
		if err := l.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	if l, _ := n.Link("c-sideways"); l.CutDirection("sideways") == nil {
		t.Error("a cut in no direction was taken")
	}
	if _, err := c.AddNode(ctx, NodeOptions{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Link("other"); err == nil || !strings.Contains(err.Error(), "only replication") {
		t.Errorf("a local link between two servers: %v", err)
	}
	if _, err := n.Link(ReplicationPeer("other")); err != nil {
		t.Errorf("the replication link: %v", err)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	c, err := Start(context.Background(), Options{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, info := range c.Info() {
		pids = append(pids, info.PID)
	}
	if err := c.Nodes()[1].Pause(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("redis-server pid %d outlived Close", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	dir := c.backend.(*local).dir
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir %s left behind", dir)
	}
}

func TestStopIsGracefulEvenWhenPausedAndRestarts(t *testing.T) {
	ctx := context.Background()
	_, n := startOne(t)
	addr := n.Addr()
	pid := n.PID()
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	// SIGCONT then SIGTERM: a clean exit, well before the 5 s kill fallback.
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Stop of a paused node took %v", d)
	}
	if alive(pid) || n.PID() != 0 {
		t.Fatalf("pid %d still alive after Stop", pid)
	}
	if err := n.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n.Addr() != addr {
		t.Fatalf("restarted on %s, not %s", n.Addr(), addr)
	}
	if pid, err := Answering(addr); err != nil || pid != n.PID() {
		t.Fatalf("restarted node does not answer as itself: pid %d, %v", pid, err)
	}
}

// A node whose port another run's node took between the pick and the bind
// must not count as started because something on its port answers: that
// once gave two concurrent runs one store between them.
func TestStartIsNotFooledByAnotherNodeOnItsPort(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other := c.Node("n1")
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(other.Info().Port), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	err = waitReady(ctx, RedisKind, other.Addr(), cmd.Process.Pid, exited)
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("waitReady with another node on the port: %v, want %v", err, errAddrInUse)
	}
}

// A pipeline's commands each get their own reply: the writes a full node
// refuses (OOM) are told apart from those it took, and a node that does
// not answer is the pipeline's error, not a command's.
func TestPipelineRepliesCommandByCommand(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{ExtraArgs: []string{"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n := c.Nodes()[0]
	payload := strings.Repeat("x", 64<<10)
	var cmds [][]any
	for i := range 64 {
		cmds = append(cmds, []any{"SET", "k" + strconv.Itoa(i), payload})
	}
	errs, err := n.Pipeline(ctx, cmds...)
	if err != nil {
		t.Fatal(err)
	}
	took, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil && refused == 0:
			took++
		case err != nil && strings.HasPrefix(err.Error(), "OOM"):
			refused++
		default:
			t.Fatalf("command %d: %v after %d taken and %d refused: want the taken ones first, then OOM", i, err, took, refused)
		}
	}
	if took == 0 || refused == 0 {
		t.Fatalf("%d taken, %d refused: a 2 MB node takes some of 64 writes of 64 KiB, not all", took, refused)
	}
	if got, err := n.Do(ctx, "DBSIZE"); err != nil || got != int64(took) {
		t.Fatalf("DBSIZE %v (%v), want the %d writes taken", got, err, took)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if errs, err := n.Pipeline(ctx, []any{"PING"}); err == nil {
		t.Fatalf("a killed node's pipeline: replies %v, want the connection's error", errs)
	}
}

// A cut that lands while another goroutine heals the same link is undone
// by the next heal: the traps' and the delayed actions' faults run beside
// the schedule's, and a cut left on after the run's last heal would
// leave the liveness checker judging a system never healed.
func TestACutBesideAHealIsUndoneByTheNext(t *testing.T) {
	ctx := context.Background()
	_, n := startOne(t)
	stuck := 0
	for i := range 40 {
		l, err := n.Link(fmt.Sprintf("race-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		healed := make(chan struct{})
		go func() {
			defer close(healed)
			for {
				select {
				case <-stop:
					return
				default:
					l.Heal()
				}
			}
		}()
		for range 50 {
			if err := l.Cut(); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		<-healed
		if err := l.Heal(); err != nil {
			t.Fatal(err)
		}
		c := NewClient(l.Addr(), ClientOptions{Timeout: 2 * time.Second})
		if c.Ping(ctx).Err() != nil {
			stuck++
		}
		c.Close()
	}
	if stuck > 0 {
		t.Fatalf("%d of 40 links still cut after their last heal", stuck)
	}
}

// A heal closes its link's listener and reopens it on the same port; in
// that moment no other link, of this run or any other, may take the port,
// or the healed link's clients would reconnect to that link's server.
// With the range narrowed to the healed link's one port, a new link finds
// none free.
func TestAHealKeepsItsPort(t *testing.T) {
	_, n := startOne(t)
	l, err := n.Link("c1")
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(l.Addr())
	port, _ := strconv.Atoi(p)
	saved := linkRange
	t.Cleanup(func() { linkRange = saved })
	linkRange = func() (int, int) { return port, port + 1 }
	l.proxy.Stop() // a heal's gap, held open
	if stranger, err := n.Link("c2"); err == nil {
		t.Fatalf("a new link took %s, the port of a link being healed", stranger.Addr())
	}
	if err := l.proxy.Start(); err != nil {
		t.Fatalf("the healed link could not reopen its port: %v", err)
	}
}

// A node's port stays its own machine-wide until the node is closed: the
// unit tests and the matrix start clusters side by side, and an etcd
// member whose peer port another process's member was handed reached
// that ensemble ("request cluster ID mismatch"). Another process's picker
// tries the same claim before it takes a port.
func TestANodesPortIsClaimedUntilItCloses(t *testing.T) {
	holder := &process{kind: &Kind{}}
	port, err := portPicker{}.pick(&holder.claims)
	if err != nil {
		t.Fatal(err)
	}
	name := "@locktorture-node." + strconv.Itoa(port)
	if l, err := net.Listen("unix", name); err == nil {
		l.Close()
		holder.close()
		t.Fatalf("port %d was not claimed while its node lives", port)
	}
	holder.close()
	l, err := net.Listen("unix", name)
	if err != nil {
		t.Fatalf("port %d still claimed after its node closed: %v", port, err)
	}
	l.Close()
}
