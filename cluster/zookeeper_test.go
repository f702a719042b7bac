package cluster

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// needZooKeeper skips a test on a machine without a JRE or Debian's
// ZooKeeper jars: nothing else is a reason not to run it.
func needZooKeeper(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		tb.Skip("java not installed (apt-get install openjdk-17-jre-headless)")
	}
	for _, p := range ZooKeeperJars {
		if _, err := os.Stat(p); err != nil {
			tb.Skipf("zookeeper not installed (apt-get install zookeeper): %v", err)
		}
	}
}

// startZooKeeper starts a three-member ensemble z1..z3 in a new cluster.
func startZooKeeper(tb testing.TB) (*Cluster, []*Node) {
	tb.Helper()
	c, err := New(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	nodes, err := c.AddNodes(context.Background(), zooKeeperMembers(""))
	if err != nil {
		c.Close()
		tb.Fatal(err)
	}
	return c, nodes
}

func zooKeeperMembers(p Persistence) []NodeOptions {
	var o []NodeOptions
	for i := 1; i <= 3; i++ {
		o = append(o, NodeOptions{Name: fmt.Sprintf("z%d", i), Kind: ZooKeeperKind.Name, Persistence: p})
	}
	return o
}

// roles asks every node for its role; a node that does not answer is
// "down".
func roles(ctx context.Context, nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		r, err := n.Role(ctx)
		if err != nil {
			r = "down"
		}
		out[i] = r
	}
	return out
}

// A ZooKeeper ensemble through the seam: started together, one leader;
// the leader killed, the other two elect one of themselves; the old
// leader started again rejoins as a follower, which its Ready requires.
func TestZooKeeperEnsembleFailover(t *testing.T) {
	needZooKeeper(t)
	ctx := context.Background()
	c0, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	if _, err := c0.AddNodes(ctx, zooKeeperMembers(NoPersistence)); err == nil || !strings.Contains(err.Error(), "no persistence") {
		t.Errorf("zookeeper without its fsynced log: %v, want a refusal", err)
	}
	if _, err := c0.AddNode(ctx, NodeOptions{Name: "z0", Kind: ZooKeeperKind.Name}); err == nil || !strings.Contains(err.Error(), "AddNodes") {
		t.Errorf("a lone zookeeper member: %v, want a refusal naming AddNodes", err)
	}

	start := time.Now()
	c, nodes := startZooKeeper(t)
	defer c.Close()
	t.Logf("ensemble of 3 ready in %v", time.Since(start).Round(time.Millisecond))

	rs := roles(ctx, nodes)
	leaders := []int{}
	for i, r := range rs {
		switch r {
		case "leader":
			leaders = append(leaders, i)
		case "follower":
		default:
			t.Fatalf("roles %v: %s is %q", rs, nodes[i].Name, r)
		}
		if info := nodes[i].Info(); info.Kind != "zookeeper" || info.Persistence != AOFAlways || info.PID == 0 {
			t.Errorf("%s: info %+v", nodes[i].Name, info)
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("roles %v: want exactly one leader", rs)
	}
	old := nodes[leaders[0]]
	pid := old.PID()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("the killed leader's pid %d is alive", pid)
	}
	// The followers see the leader's sockets close at once; an election
	// among two takes a few hundred milliseconds at 100 ms ticks. The
	// bound leaves a loaded machine room.
	const bound = 10 * time.Second
	killed := time.Now()
	var newLeader string
	for newLeader == "" {
		rs = roles(ctx, nodes)
		for i, r := range rs {
			if r == "leader" {
				if nodes[i] == old {
					t.Fatalf("roles %v: the killed node answers as leader", rs)
				}
				newLeader = nodes[i].Name
			}
		}
		if newLeader == "" && time.Since(killed) > bound {
			t.Fatalf("no new leader %v after the leader was killed: roles %v", bound, rs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s leads %v after %s was killed", newLeader, time.Since(killed).Round(time.Millisecond), old.Name)

	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := old.Role(ctx); err != nil || r != "follower" {
		t.Fatalf("%s restarted as %q (%v), want follower", old.Name, r, err)
	}
	rs = roles(ctx, nodes)
	if n := len(slices.DeleteFunc(slices.Clone(rs), func(r string) bool { return r != "leader" })); n != 1 {
		t.Fatalf("after the rejoin roles are %v: want one leader", rs)
	}
}

// BenchmarkZooKeeperEnsembleStart measures what a run pays to start a
// three-member ensemble until every member serves, its members started
// from their class-data archive and without one; run it with
// -bench ZooKeeper -benchtime 5x for the median of 5 of each.
func BenchmarkZooKeeperEnsembleStart(b *testing.B) {
	needZooKeeper(b)
	if _, err := zooKeeperArchive(ZooKeeperKind); err != nil {
		b.Fatal(err)
	}
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "archive", false: "jars"}[shared]
		b.Run(name, func(b *testing.B) {
			if !shared {
				archive := zooKeeperArchive
				zooKeeperArchive = func(*Kind) (string, error) { return "", fmt.Errorf("not in this benchmark") }
				defer func() { zooKeeperArchive = archive }()
			}
			var took []time.Duration
			for range b.N {
				start := time.Now()
				c, _ := startZooKeeper(b)
				took = append(took, time.Since(start))
				c.Close()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
			b.Logf("starts: %v", took)
		})
	}
}

// A member started again alone, its ensemble down, listens on its port
// and serves nothing until a second member joins it: its start can be
// timed apart from the quorum's (scenario's restart-ensemble does).
func TestZooKeeperMemberListensBeforeItServes(t *testing.T) {
	needZooKeeper(t)
	ctx := context.Background()
	c, nodes := startZooKeeper(t)
	defer c.Close()
	for _, n := range nodes {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if nodes[0].Listens(ctx) {
		t.Fatalf("%s listens, killed", nodes[0].Name)
	}
	served := make(chan error, 1)
	go func() { served <- nodes[0].Start(ctx) }()
	for !nodes[0].Listens(ctx) {
		select {
		case err := <-served:
			t.Fatalf("%s's start ended (%v) before it listened", nodes[0].Name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if role, err := nodes[0].Role(ctx); err == nil {
		t.Fatalf("%s alone says it is a %s", nodes[0].Name, role)
	}
	select {
	case err := <-served:
		t.Fatalf("%s's start ended (%v) with no quorum", nodes[0].Name, err)
	case <-time.After(time.Second):
	}
	if err := nodes[1].Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("%s once %s joined: %v", nodes[0].Name, nodes[1].Name, err)
	}
}

// TestZooKeeperTakenElectionPortIsAddrInUse holds a member's election port
// before it starts: the JVM logs a stack trace, retries the bind and
// exits 14, and the start must read that as a taken port, which the
// backend answers with new ports, not as a failed server or a ready one.
// In an ensemble of three whose other two never start, the member exits
// before it is ready; alone, it leads (and answers) before it exits.
func TestZooKeeperTakenElectionPortIsAddrInUse(t *testing.T) {
	needZooKeeper(t)
	for _, members := range []int{1, 3} {
		t.Run(fmt.Sprintf("of %d", members), func(t *testing.T) {
			t.Parallel()
			held, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			ports := freePorts(t, 3*members-1)
			p, err := (&local{dir: t.TempDir()}).prepare(ServerSpec{Name: "z1", Kind: ZooKeeperKind})
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			p.port = ports[0]
			election := held.Addr().(*net.TCPAddr).Port
			at := Place{Bind: "127.0.0.1", Port: p.port, Dir: p.dir, ID: 1, PeerPorts: []int{ports[1], election}}
			p.readyPeers = p.kind.readyPorts(at)
			at.Members = []Place{at}
			for id, rest := 2, ports[2:]; id <= members; id, rest = id+1, rest[3:] {
				at.Members = append(at.Members, Place{Bind: "127.0.0.1", ID: id, Port: rest[0], PeerPorts: rest[1:3]})
			}
			if p.args, err = zooKeeperArgs(p.spec, at); err != nil {
				t.Fatal(err)
			}
			err = startTogether(context.Background(), []*process{p})
			// The exit code, not a timeout or the log, says the port was taken.
			want := fmt.Sprintf("exit code %d: %v", ZooKeeperKind.BindExit, errAddrInUse)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("start with the election port held: %v, want %q", err, want)
			}
			t.Log(err)
		})
	}
}

// freePorts picks n distinct free ports, as a start does.
func freePorts(t *testing.T, n int) []int {
	taken, holder := portPicker{}, &process{kind: &Kind{}}
	t.Cleanup(holder.close)
	out := make([]int, n)
	for i := range out {
		port, err := taken.pick(&holder.claims)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = port
	}
	return out
}

// Every member of an ensemble starts from the members' class-data archive
// (made on first need): the JVM maps the archive's file, so each member's
// memory map names it. A member started without it, or with one the JVM
// refused (made with other jars or flags), maps no such file.
func TestZooKeeperMembersStartFromTheirClassArchive(t *testing.T) {
	needZooKeeper(t)
	c, nodes := startZooKeeper(t)
	defer c.Close()
	path, err := zooKeeperArchive(ZooKeeperKind)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", n.PID()))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(maps), path) {
			t.Errorf("member %s (pid %d) does not map %s", n.Name, n.PID(), path)
		}
	}
}

// A manifest's Class-Path is read across its continuation lines (a
// header's value goes on in lines that begin with one space), relative
// entries from the jar's own directory.
func TestManifestClassPath(t *testing.T) {
	dir := t.TempDir()
	jar := func(name, manifest string) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		z := zip.NewWriter(f)
		w, err := z.Create("META-INF/MANIFEST.MF")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, manifest); err != nil {
			t.Fatal(err)
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	with := jar("with.jar", "Manifest-Version: 1.0\r\nClass-Path: /usr/share/java/a.jar /usr/share/j\r\n ava/b.jar lib/c.jar\r\nCreated-By: test\r\n\r\n")
	got, err := manifestClassPath(with)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/share/java/a.jar", "/usr/share/java/b.jar", filepath.Join(dir, "lib/c.jar")}
	if !slices.Equal(got, want) {
		t.Errorf("Class-Path %q, want %q", got, want)
	}
	if got, err := manifestClassPath(jar("without.jar", "Manifest-Version: 1.0\n\n")); err != nil || len(got) != 0 {
		t.Errorf("a manifest without a Class-Path: %q, %v, want none", got, err)
	}
}
