package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperKind is one member of a ZooKeeper ensemble, run from Debian's
// zookeeper package on openjdk. Its clock is fast (100 ms ticks) so that
// sessions as short as a 500 ms lease can be granted and a lost leader is
// replaced in about a second. ZooKeeper fsyncs its transaction log before
// it acks a write (forceSync), so the one persistence it offers is
// AOFAlways and a power loss loses nothing a kill would not.
//
// Its library pairs (Curator's JVM workers, kazoo's Python ones) take a
// core, as its Go locks' do, not the machine: measured beside two busy
// loops, their 60 pairs matched 60 of 60, none starved, the worst timer
// 0.32 of its limit (docs/ci-and-benchmarks.md). So Alone is unset.
var ZooKeeperKind = &Kind{
	Name:        "zookeeper",
	Binary:      "java",
	Install:     "install ZooKeeper and a JRE (apt-get install zookeeper openjdk-17-jre-headless)",
	Persistence: []Persistence{AOFAlways},
	Args:        zooKeeperArgs,
	Ready:       zooKeeperReady,
	Role:        zooKeeperMode,
	Reset:       zooKeeperReset,
	// Three JVMs loading classes at once on two cores that also run the
	// tests take seconds each; a leader election follows.
	StartTimeout: 60 * time.Second,
	Ensemble:     true,
	PeerPorts:    2,
	// ZooKeeper's ExitCode.UNABLE_TO_BIND_QUORUM_PORT: the election
	// port, picked free, was taken before the member bound it.
	BindExit: 14,
	// Every member binds its election port; only a leader its quorum port.
	ReadyPeers: []int{1},
	// Measured: 1.5 to 4 s from a kill -9 to a member that has rejoined
	// its quorum (a JVM's start, then the leader's sync), idle.
	Recovery: 4 * time.Second,
}

// zooKeeperJar is Debian's server jar (libzookeeper-java), whose
// manifest names the rest of its jars (zooKeeperClasspath).
const zooKeeperJar = "/usr/share/java/zookeeper.jar"

// ZooKeeperJars are the files a member cannot start without, for a test
// to skip on a machine that lacks them.
var ZooKeeperJars = []string{zooKeeperJar}

// zooKeeperLogger is an slf4j binding from libslf4j-java (a dependency
// of the package). The package's launcher puts none on the classpath, so
// the server would log nothing; with it, warnings reach output.log and a
// failed start's last line says why.
const zooKeeperLogger = "/usr/share/java/slf4j-simple.jar"

// zooKeeperTick is the ensemble's tickTime, the unit of its timeouts.
const zooKeeperTick = 100 * time.Millisecond

// zooKeeperJVM are JVM flags for a fast start of a small server on a
// busy two-core machine: a small heap with the serial collector (no GC
// threads to schedule), only the quick C1 compiler, no perf-data file.
var zooKeeperJVM = []string{
	"-Xms32m", "-Xmx128m",
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-XX:-UsePerfData",
	"-Djava.net.preferIPv4Stack=true",
	// Leader election waits between rounds doubling up to a minute while
	// peers are not up yet; members started together would sit out the
	// doubled waits long after all of them are listening.
	"-Dzookeeper.fastleader.maxNotificationInterval=400",
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
}

// zooKeeperArgs writes the member's zoo.cfg and myid into its dir and
// returns the java command line that runs it, from the members'
// class-data archive where there is one (zookeeper_archive.go).
func zooKeeperArgs(spec ServerSpec, at Place) ([]string, error) {
	var share []string
	if path, err := zooKeeperArchive(spec.ServerKind()); err == nil {
		share = append(share, "-XX:SharedArchiveFile="+path)
	}
	return zooKeeperCommand(spec, at, share...)
}

// zooKeeperCommand is zooKeeperArgs with jvm, flags for the JVM, before
// the members' own.
func zooKeeperCommand(spec ServerSpec, at Place, jvm ...string) ([]string, error) {
	if at.ID == 0 || len(at.Members) == 0 {
		return nil, fmt.Errorf("cluster: a zookeeper node is a member of an ensemble (start it with AddNodes)")
	}
	tick := int(zooKeeperTick / time.Millisecond)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "tickTime=%d\n", tick)
	// A follower has 5 s to load and sync at start (initLimit) and must
	// keep up within 1 s after (syncLimit): a member that misses that is
	// dropped, so a busy machine must not miss it by scheduling alone.
	fmt.Fprintf(&cfg, "initLimit=50\nsyncLimit=10\n")
	fmt.Fprintf(&cfg, "dataDir=%s\n", at.Dir)
	fmt.Fprintf(&cfg, "clientPort=%d\nclientPortAddress=%s\n", at.Port, at.Bind)
	// Sessions from two ticks (the server's floor) up to a minute: the
	// session timeout is a lock's lease.
	fmt.Fprintf(&cfg, "minSessionTimeout=%d\nmaxSessionTimeout=60000\n", 2*tick)
	cfg.WriteString("4lw.commands.whitelist=srvr\nadmin.enableServer=false\n")
	cfg.WriteString("forceSync=yes\nstandaloneEnabled=false\nreconfigEnabled=false\n")
	for _, m := range at.Members {
		if len(m.PeerPorts) < 2 {
			return nil, fmt.Errorf("cluster: zookeeper member %d has %d peer ports, needs 2", m.ID, len(m.PeerPorts))
		}
		fmt.Fprintf(&cfg, "server.%d=%s:%d:%d\n", m.ID, m.Bind, m.PeerPorts[0], m.PeerPorts[1])
	}
	conf := filepath.Join(at.Dir, "zoo.cfg")
	if err := os.WriteFile(conf, []byte(cfg.String()), 0o644); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(at.Dir, "myid"), []byte(strconv.Itoa(at.ID)+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	args := append(slices.Clone(jvm), zooKeeperJVM...)
	args = append(args, "-cp", strings.Join(zooKeeperClasspath(), ":"), "org.apache.zookeeper.server.quorum.QuorumPeerMain", conf)
	return append(args, spec.Args...), nil
}

// zooKeeperMode asks the member on addr for its "srvr" report and returns
// its Mode line: "leader", "follower", or an error for a member that
// serves nothing (one outside a quorum says so instead of a report).
func zooKeeperMode(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	// The server closes the connection after its report.
	b, err := io.ReadAll(io.LimitReader(c, 64<<10))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			if mode == "leader" || mode == "follower" {
				return mode, nil
			}
			return "", fmt.Errorf("zookeeper is in mode %s", mode)
		}
	}
	return "", fmt.Errorf("zookeeper does not serve: %q", strings.TrimSpace(string(b)))
}

// zooKeeperReady is ready once the member leads or follows: a quorum has
// formed and it has synced with it. ZooKeeper names no pid, so it returns
// 0 and the backend checks who listens on the port.
func zooKeeperReady(ctx context.Context, addr string) (int, error) {
	_, err := zooKeeperMode(ctx, addr)
	return 0, err
}

// zooKeeperReset deletes every znode but ZooKeeper's own (/zookeeper),
// as seen from the member on addr once it has synced with the leader,
// and checks that member then sees none. Ephemeral nodes of a session
// that has not expired yet (a killed worker's) go too: any session may
// delete them.
func zooKeeperReset(ctx context.Context, addr string) error {
	c, _, err := zk.Connect([]string{addr}, 2*time.Second, zk.WithLogger(zooKeeperQuiet{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer c.Close()
	// The client's calls wait for a session however long it takes;
	// closing the connection ends them.
	stop := context.AfterFunc(ctx, c.Close)
	defer stop()
	if _, err := c.Sync("/"); err != nil {
		return err
	}
	var remove func(path string) error
	remove = func(path string) error {
		children, _, err := c.Children(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, child := range children {
			if path == "/" && child == "zookeeper" {
				continue
			}
			if err := remove(strings.TrimSuffix(path, "/") + "/" + child); err != nil {
				return err
			}
		}
		if path == "/" {
			return nil
		}
		if err := c.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	}
	if err := remove("/"); err != nil {
		return err
	}
	left, _, err := c.Children("/")
	if err != nil {
		return err
	}
	if len(left) != 1 || left[0] != "zookeeper" {
		return fmt.Errorf("znodes left under /: %v", left)
	}
	return nil
}

// zooKeeperQuiet drops the client library's log lines.
type zooKeeperQuiet struct{}

func (zooKeeperQuiet) Printf(string, ...any) {}
