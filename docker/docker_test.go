package docker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
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
	c := cluster.NewClient(n.Addr(), cluster.ClientOptions{Timeout: 300 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// The node image's Dockerfile builds with the network off (nothing can be
// pulled) on the debootstrapped base, and holds both servers the backend
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
