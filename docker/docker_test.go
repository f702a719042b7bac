package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

var ctx = context.Background()

// pool is the engine, or a skip that says why there is none: a machine
// without Docker runs every other test.
func pool(t *testing.T) *dockertest.Pool {
	t.Helper()
	p, err := Pool()
	if err != nil {
		t.Skipf("docker backend not tested: %v", err)
	}
	return p
}

func newCluster(t *testing.T, o cluster.Options, nodes ...cluster.NodeOptions) *cluster.Cluster {
	t.Helper()
	pool(t)
	Register()
	o.Backend = Name
	cl, err := cluster.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, n := range nodes {
		if _, err := cl.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func direct(t *testing.T, n *cluster.Node) *redis.Client {
	c := cluster.NewClient(n.Addr(), cluster.ClientOptions{Timeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// The node image's Dockerfile builds with the network off (nothing can be
// pulled) on the mmdebstrapped base, and holds both servers the backend
// runs: Debian's and the libc-allocator build for the clock nemesis.
func TestImageBuildsWithTheNetworkOff(t *testing.T) {
	p := pool(t)
	if _, err := nodeImage(p, ImageOptions{}); err != nil { // the base, made once
		t.Fatal(err)
	}
	server, err := os.ReadFile(cluster.FaketimeServerPath())
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s:test-%d", NodeRepository, os.Getpid())
	if err := buildNode(ctx, p, BaseRepository+":"+hash(rootfsScript), name, server); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Client.RemoveImageExtended(name, dc.RemoveImageOptions{Force: true}) })
	res, err := p.RunWithOptions(&dockertest.RunOptions{Repository: NodeRepository, Tag: strings.TrimPrefix(name, NodeRepository+":"),
		Cmd: []string{"sh", "-c", "redis-server-libc --version && redis-server --version && redis-sentinel --version && iptables --version && ls /usr/lib/*/faketime/libfaketime.so.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Purge(res) }()
	code, err := p.Client.WaitContainer(res.Container.ID)
	var out strings.Builder
	_ = p.Client.Logs(dc.LogsOptions{Container: res.Container.ID, OutputStream: &out, ErrorStream: &out, Stdout: true, Stderr: true})
	if err != nil || code != 0 || !strings.Contains(out.String(), "malloc=libc") || !strings.Contains(out.String(), "malloc=jemalloc") {
		t.Fatalf("image contents: exit %d, %v:\n%s", code, err, out.String())
	}
}

// A paused node answers nothing and keeps its data; resumed, it answers
// again. Both ways: the cgroup freezer (docker pause) and SIGSTOP.
func TestPauseAndResume(t *testing.T) {
	for _, bySignal := range []bool{false, true} {
		t.Run(map[bool]string{false: "freezer", true: "sigstop"}[bySignal], func(t *testing.T) {
			cl := newCluster(t, cluster.Options{PauseBySignal: bySignal}, cluster.NodeOptions{Name: "n1"})
			n := cl.Node("n1")
			c := direct(t, n)
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			if !bySignal {
				ins, err := pool(t).Client.InspectContainer(n.Info().Container)
				if err != nil || !ins.State.Paused {
					t.Fatalf("docker does not see the container paused: %v", err)
				}
			}
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("a paused node answered PING")
			}
			if err := n.Resume(); err != nil {
				t.Fatal(err)
			}
			c2 := direct(t, n) // the first client's connection saw a timeout
			if v, err := c2.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("after resume: %q, %v", v, err)
			}
		})
	}
}

// A cut replication link drops real packets (the rules count them) and the
// replica falls behind; healed, it catches up.
func TestPartitionDropsPacketsAndHeals(t *testing.T) {
	cl := newCluster(t, cluster.Options{}, cluster.NodeOptions{Name: "m"}, cluster.NodeOptions{Name: "r"})
	m, r := cl.Node("m"), cl.Node("r")
	if err := r.ReplicaOf(ctx, m); err != nil {
		t.Fatal(err)
	}
	link, err := m.Link(cluster.ReplicationPeer("r"))
	if err != nil {
		t.Fatal(err)
	}
	if link.Addr() != m.Addr() {
		t.Fatalf("the replication link goes through %s, not straight to the master at %s", link.Addr(), m.Addr())
	}
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := direct(t, m).Set(ctx, "during", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the master and replica ping each other every second
	if n := direct(t, r).Exists(ctx, "during").Val(); n != 0 {
		t.Fatal("a write crossed the cut")
	}
	dropped := 0
	for _, name := range []string{"m", "r"} {
		out, err := server(t, cl, name).agent.do("sh iptables -w -L locktorture -v -x -n | awk 'NR>2 {s+=$1} END {print s}'")
		if err != nil {
			t.Fatal(err)
		}
		k, _ := strconv.Atoi(out)
		dropped += k
	}
	if dropped == 0 {
		t.Fatal("the cut dropped no packets")
	}
	if err := link.Heal(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for direct(t, r).Exists(ctx, "during").Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not catch up within 10s of the heal")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pair is an ordered pair of servers: the first PINGs the second.
type pair struct{ from, to string }

// pings sends each pair's PING from inside its first server, all at once,
// and says which got an answer within 3 s.
func pings(t *testing.T, cl *cluster.Cluster, pairs []pair) map[pair]bool {
	t.Helper()
	probes := map[string]string{}
	for _, p := range pairs {
		host, port, _ := net.SplitHostPort(cl.Node(p.to).Info().Addr)
		probes[p.from] += fmt.Sprintf("(timeout 3 redis-cli -h %s -p %s PING >/dev/null 2>&1 && echo %s) & ", host, port, p.to)
	}
	out := map[pair]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for from, probe := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := server(t, cl, from).agent.do("sh " + probe + "wait")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("probe from %s: %v", from, err)
			}
			for _, to := range strings.Fields(got) {
				out[pair{from, to}] = true
			}
		}()
	}
	wg.Wait()
	return out
}

// reachAsCut checks, from inside the containers, that exactly the pairs
// apart names fail to exchange a PING: what the packets allow, not what
// the harness thinks it cut. An answer across a cut fails at once. A pair
// that should talk and is silent is asked again for 20 s before it counts:
// a dropped packet never answers, but with the tests, the matrix and
// staticcheck on 2 cores (load 14) a container with an empty chain went
// unanswered for over 3 s now and then, and that is a slow machine, not a
// cut.
func reachAsCut(t *testing.T, cl *cluster.Cluster, names []string, apart func(a, b string) bool, what string) {
	t.Helper()
	var all, silent []pair
	for _, a := range names {
		for _, b := range names {
			if a != b {
				all = append(all, pair{a, b})
			}
		}
	}
	answered := pings(t, cl, all)
	for _, p := range all {
		switch {
		case answered[p] && apart(p.from, p.to):
			t.Errorf("%s: %s reaches %s across the cut", what, p.from, p.to)
		case !answered[p] && !apart(p.from, p.to):
			silent = append(silent, p)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); len(silent) > 0 && time.Now().Before(deadline); {
		t.Logf("%s: %v silent for 3 s; asking again", what, silent)
		answered = pings(t, cl, silent)
		silent = slices.DeleteFunc(silent, func(p pair) bool { return answered[p] })
	}
	for _, p := range silent {
		t.Errorf("%s: %s gets no answer from %s for 20 s, but nothing should keep them apart", what, p.from, p.to)
	}
}

// together is the grudge of a healed network: nobody is kept apart.
func together(string, string) bool { return false }

// Jepsen's grudge shapes drawn among the servers themselves are cut with
// iptables in the containers: after each, exactly the pairs the grudge
// keeps apart fail to exchange a PING, and after the heal every pair does.
func TestGrudgesSplitTheServers(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4", "n5"}
	var nodes []cluster.NodeOptions
	for _, n := range names {
		nodes = append(nodes, cluster.NodeOptions{Name: n})
	}
	cl := newCluster(t, cluster.Options{}, nodes...)
	nem := nemesis.New(history.NewRecorder(io.Discard, 0), cl)
	for _, c := range []struct {
		name string
		g    nemesis.Grudge
	}{
		{"isolate", nemesis.IsolateNode("n3", names)},
		{"halves", nemesis.Halves(names, names)},
		{"majorities ring", nemesis.MajoritiesRing(names, names)},
		{"bridge", nemesis.Bridge(names, names)},
	} {
		if err := nem.Partition(c.g); err != nil {
			t.Fatal(err)
		}
		reachAsCut(t, cl, names, c.g.Apart, fmt.Sprintf("%s (%s)", c.name, c.g))
		if err := nem.Heal(); err != nil {
			t.Fatal(err)
		}
		reachAsCut(t, cl, names, together, "after healing "+c.name)
	}
}

// A one-way cut drops packets in one direction only: the rule is in the
// receiver's chain alone and counts what the sender sent, and the
// receiver's own packets leave (the sender's chain stays empty).
func TestOneWayCutDropsOneDirection(t *testing.T) {
	cl := newCluster(t, cluster.Options{}, cluster.NodeOptions{Name: "a"}, cluster.NodeOptions{Name: "b"})
	nem := nemesis.New(history.NewRecorder(io.Discard, 0), cl)
	if err := nem.CutDirection("a", "b", "upstream"); err != nil {
		t.Fatal(err)
	}
	// A one-way drop stops TCP both ways: no handshake completes.
	reachAsCut(t, cl, []string{"a", "b"}, func(string, string) bool { return true }, "one-way cut a↛b")
	count := func(name string) (rules, packets int) {
		out, err := server(t, cl, name).agent.do("sh iptables -w -L locktorture -v -x -n | awk 'NR>2 {r++; s+=$1} END {print r+0, s+0}'")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(out, &rules, &packets); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		return rules, packets
	}
	if rules, packets := count("b"); rules != 1 || packets == 0 {
		t.Errorf("b, the receiver: %d rules dropped %d packets, want 1 rule and some packets", rules, packets)
	}
	if rules, _ := count("a"); rules != 0 {
		t.Errorf("a, the sender, has %d rules: the cut is not one-way", rules)
	}
	if err := nem.Heal(); err != nil {
		t.Fatal(err)
	}
	reachAsCut(t, cl, []string{"a", "b"}, together, "after the heal")
}

// With the ports published (an engine on another machine, or Docker
// Desktop) the harness reaches each node at the published port, servers
// still reach each other on the run's network, and the network is not
// internal, which could publish nothing. Here the "other machine" is this
// one's loopback: the path is the same but for the host's name.
func TestPublishedPortsReachTheNodes(t *testing.T) {
	t.Setenv(EnvPublish, "127.0.0.1")
	cl := newCluster(t, cluster.Options{}, cluster.NodeOptions{Name: "m"}, cluster.NodeOptions{Name: "r"})
	m, r := cl.Node("m"), cl.Node("r")
	for _, n := range []*cluster.Node{m, r} {
		if host, _, _ := net.SplitHostPort(n.Addr()); host != "127.0.0.1" {
			t.Fatalf("%s is reached at %s, not at a published port", n.Name, n.Addr())
		}
	}
	if err := r.ReplicaOf(ctx, m); err != nil {
		t.Fatal(err)
	}
	link, err := m.Link("c1")
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.NewClient(link.Addr(), cluster.ClientOptions{Timeout: time.Second})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for direct(t, r).Get(ctx, "k").Val() != "v" {
		if time.Now().After(deadline) {
			t.Fatal("the write through the published port did not replicate")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := cl.Backend().(*backend)
	nw, err := b.pool.Client.NetworkInfo(b.network)
	if err != nil {
		t.Fatal(err)
	}
	if nw.Internal {
		t.Error("the run's network is internal, which publishes no port")
	}
}

// server is the container behind a node.
func server(t *testing.T, cl *cluster.Cluster, name string) *container {
	t.Helper()
	b := cl.Backend().(*backend)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.servers {
		if c.spec.Name == name {
			return c
		}
	}
	t.Fatalf("no container for %s", name)
	return nil
}

// kill -9 and a restart on the same volume: with appendfsync always the
// node comes back at the same address with its keys; without persistence
// it comes back empty, so the restart really lost the process's memory.
func TestKilledNodeRestartsWithItsAOF(t *testing.T) {
	cl := newCluster(t, cluster.Options{},
		cluster.NodeOptions{Name: "aof", Persistence: cluster.AOFAlways}, cluster.NodeOptions{Name: "none"})
	for name, survives := range map[string]bool{"aof": true, "none": false} {
		n := cl.Node(name)
		addr := n.Addr()
		if err := direct(t, n).Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := direct(t, n).Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: a killed node's host should refuse connections, got %v", name, err)
		}
		if err := n.Restart(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if n.Addr() != addr {
			t.Fatalf("%s came back at %s, not %s", name, n.Addr(), addr)
		}
		n2, _ := direct(t, n).Exists(ctx, "k").Result()
		if (n2 == 1) != survives {
			t.Fatalf("%s: key after restart: %d, want survived=%v", name, n2, survives)
		}
	}
}

// The clock nemesis reaches into the container: a node's clock moved past
// a key's TTL expires it there.
func TestClockOffsetExpiresKeys(t *testing.T) {
	cl := newCluster(t, cluster.Options{}, cluster.NodeOptions{Name: "n1", Clock: true})
	n := cl.Node("n1")
	c := direct(t, n)
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.SetClockOffset(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if v := c.Exists(ctx, "k").Val(); v != 0 {
		t.Fatal("a key outlived a clock moved past its TTL")
	}
}

// A node of a kind the image does not hold is refused before anything is
// made, with an error that names the kind and where it runs instead; no
// engine is needed to say so.
func TestOtherKindsAreRefused(t *testing.T) {
	var b backend
	_, err := b.Start(ctx, cluster.ServerSpec{Name: "m1", Kind: cluster.MemcachedKind})
	if err == nil || !strings.Contains(err.Error(), "memcached node") || !strings.Contains(err.Error(), cluster.Local) {
		t.Fatalf("a memcached node on docker: %v, want a refusal naming the kind and the local backend", err)
	}
}
