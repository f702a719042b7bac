package cluster

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Persistence says what a node writes to disk, which decides what survives a
// kill -9 (K5: RedLock crash-restart). The modes are named after Redis's,
// and mean the same promise for any kind that offers them (Kind.Persistence).
type Persistence string

// Persistence modes.
const (
	// NoPersistence: nothing on disk; a restarted node is empty.
	NoPersistence Persistence = "none"
	// AOFEverySec: a log on disk fsynced once a second (Redis's
	// append-only file under appendfsync everysec); a power loss takes
	// the last second.
	AOFEverySec Persistence = "aof-everysec"
	// AOFAlways: every write fsynced before its reply (appendfsync
	// always); a power loss takes nothing that was answered.
	AOFAlways Persistence = "aof-always"
)

// Node is one real server (redis-server, redis-sentinel, or another Kind)
// as the cluster's backend runs it, reached by clients only through its
// Links.
type Node struct {
	// Name is the node's name in the cluster and in the history ("n1", "store").
	Name string

	cluster *Cluster
	srv     Server
	spec    ServerSpec

	mu          sync.Mutex
	links       map[string]*Link
	clockOffset time.Duration
	// faulted names the first thing the harness did to the node's process,
	// clock or data (Pause, Kill, Stop, Start, SetClockOffset, Do, ...):
	// a node left as its start made it, but for what its clients wrote,
	// is the only kind Cluster.Reset readies for another run.
	faulted string
}

// fault records what the harness is doing to the node, once.
func (n *Node) fault(what string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.faulted == "" {
		n.faulted = what
	}
}

// Faulted says what the harness did to the node first, beyond serving its
// clients ("" for nothing): a pause, a kill, a restart, a clock offset or
// an admin command.
func (n *Node) Faulted() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faulted
}

// NodeInfo is what a person (or a test) needs to find a node's process.
type NodeInfo struct {
	Name string `json:"name"`
	// Backend ran the node; Addr is where the harness reaches it.
	Backend string `json:"backend"`
	// Kind is the server's kind by name (Kind.Name).
	Kind string `json:"kind"`
	Addr string `json:"addr"`
	// Port and PID are a local node's; PID is 0 while it is down.
	Port int `json:"port,omitempty"`
	PID  int `json:"pid,omitempty"`
	// Container is a docker node's container id.
	Container string `json:"container,omitempty"`
	// Dir holds the node's files (inside the container for docker).
	Dir         string      `json:"dir"`
	Persistence Persistence `json:"persistence"`
	// Server is the binary: Debian's, or the libc-allocator build when the
	// node's clock is faked.
	Server   string `json:"server"`
	Sentinel bool   `json:"sentinel,omitempty"`
}

// Addr is where the harness reaches the node. Clients must use a Link
// instead; this is for the harness's out-of-band checks and admin commands.
func (n *Node) Addr() string { return n.srv.Addr() }

// Listens says whether the node's port accepts a connection: a member of
// an ensemble listens once its JVM has started, before it loads its data
// and long before a quorum lets it serve (Kind.Ready), so its own start
// can be timed apart from the others'. The port is the node's, claimed
// machine-wide (portPicker), so nothing else of the harness listens on
// it; unlike Kind.Ready, who listens is not asked.
func (n *Node) Listens(ctx context.Context) bool {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", n.Addr())
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// PID is the pid of a local node's running process, 0 when it is down or
// is not a local process.
func (n *Node) PID() int { return n.srv.Info().PID }

// Info describes the node.
func (n *Node) Info() NodeInfo { return n.srv.Info() }

// Kind is the server the node runs.
func (n *Node) Kind() *Kind { return n.spec.Kind }

// LogFile is the file a local node's server logs to (its kind's Log, or
// output.log), which grows across its restarts and the runs that reuse
// it; "" for a node of another backend, whose files are in a container.
func (n *Node) LogFile() string {
	info := n.Info()
	if info.Backend != Local || info.Dir == "" {
		return ""
	}
	return filepath.Join(info.Dir, cmp.Or(n.Kind().Log, outputLog))
}

// Link returns peer's own link to this node, creating it on first use.
//
// A peer is a client of the harness, or a server of the cluster: by its
// name, or as the replication link of a replica (ReplicationPeer). On a
// backend with a Firewall a server's link is the network between the two,
// and every pair of servers has one, so a grudge can cut a sentinel off
// from a master. Elsewhere servers share the loopback and only
// replication is routed through a proxy; a link from any other server
// would be one nobody dials, and a cut of it a fault that never fires, so
// asking for it is an error.
func (n *Node) Link(peer string) (*Link, error) {
	server := strings.TrimPrefix(peer, replicationPrefix)
	from := n.cluster.Node(server)
	if from == n {
		return nil, fmt.Errorf("cluster: %s has no link to itself", n.Name)
	}
	fw, firewall := n.cluster.backend.(Firewall)
	key := peer
	if from != nil && firewall {
		// The replication link and the server's other traffic are the
		// same packets: one link, whichever name asked first.
		key = replicationPrefix + server
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.links[key]; ok {
		return l, nil
	}
	var l *Link
	switch {
	case from != nil && firewall:
		l = &Link{Peer: peer, Node: n.Name, addr: n.srv.PeerAddr(), drop: func(direction string, on bool) error {
			if direction == "upstream" {
				return fw.Drop(from.srv, n.srv, on)
			}
			return fw.Drop(n.srv, from.srv, on)
		}}
	case from != nil && peer == server:
		return nil, fmt.Errorf("cluster: no link from %s to %s on the %s backend: its servers share the loopback, so only replication (peer %s) goes through a link; a backend whose servers have addresses of their own (docker) can cut any two",
			server, n.Name, n.Info().Backend, ReplicationPeer(server))
	default:
		var err error
		if l, err = newLink(n.cluster.proxies, peer, n.Name, n.srv.Addr()); err != nil {
			return nil, err
		}
	}
	n.links[key] = l
	return l, nil
}

// Links returns every link to this node.
func (n *Node) Links() []*Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*Link, 0, len(n.links))
	for _, l := range n.links {
		out = append(out, l)
	}
	return out
}

// Start starts a stopped or killed node again: same address, and what
// its disk kept.
func (n *Node) Start(ctx context.Context) error {
	if n.cluster.closed() {
		return fmt.Errorf("cluster: node %s: cluster is closed", n.Name)
	}
	n.fault("start")
	return n.srv.Start(ctx)
}

// Answering asks the Redis (or Sentinel) on addr, on one connection, for
// its process id (INFO server) and whether its data is loaded (PING: INFO
// answers while an AOF is still loading, PING does not).
func Answering(addr string) (pid int, err error) {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("INFO server\r\nPING\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	line := func() (string, error) {
		l, err := r.ReadString('\n')
		return strings.TrimSpace(l), err
	}
	head, err := line()
	if err != nil {
		return 0, err
	}
	size, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
	if !strings.HasPrefix(head, "$") || err != nil {
		return 0, fmt.Errorf("INFO answered %q", head)
	}
	info := make([]byte, size+2)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, err = strconv.Atoi(v)
		}
	}
	if pid == 0 || err != nil {
		return 0, fmt.Errorf("INFO server without a process_id: %v", err)
	}
	if pong, err := line(); err != nil || pong != "+PONG" {
		return pid, fmt.Errorf("process %d answered PING %q: its data is not loaded yet", pid, pong)
	}
	return pid, nil
}

// Paused reports whether the node is frozen by Pause.
func (n *Node) Paused() bool { return n.srv.Paused() }

// Pause freezes the node whole (SIGSTOP locally, to its process group
// for a Kind with ProcessGroup; the cgroup freezer in docker): it keeps its state and its port, connects still succeed, and
// nothing is answered until Resume.
func (n *Node) Pause() error {
	n.fault("pause")
	return n.srv.Pause()
}

// Resume continues a paused node.
func (n *Node) Resume() error {
	n.fault("resume")
	return n.srv.Resume()
}

// Kill is kill -9: no shutdown, no final fsync; what survives is what the
// persistence mode had already put on disk.
func (n *Node) Kill() error {
	n.fault("kill")
	return n.srv.Kill()
}

// Restart starts a stopped or killed node again after delay (0: at once),
// at the same address with the same data: what it finds is what survived.
func (n *Node) Restart(ctx context.Context, delay time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(delay):
	}
	return n.Start(ctx)
}

// PowerLoss is kill -9 plus the loss of what the disk had not been told to
// keep: for appendfsync everysec the last second of the AOF, the most that
// policy may lose; with appendfsync always nothing; without persistence
// everything.
func (n *Node) PowerLoss() error {
	n.fault("power loss")
	return n.srv.PowerLoss()
}

// Stop shuts the node down gracefully, and kills it if it has not exited
// within 5 s.
func (n *Node) Stop() error {
	n.fault("stop")
	return n.srv.Stop()
}

// SetClockOffset moves the wall clock the node reads (Redis's key expiry)
// by d from the machine's (libfaketime; the node must have been added
// with Clock). The monotonic clock stays true: Redis's event loop runs
// on it.
func (n *Node) SetClockOffset(d time.Duration) error {
	if !n.spec.Clock {
		return fmt.Errorf("cluster: node %s was not started with a faked clock (NodeOptions.Clock)", n.Name)
	}
	n.fault("clock offset")
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.srv.SetClockOffset(d); err != nil {
		return err
	}
	n.clockOffset = d
	return nil
}

// ClockOffset is the node's current clock offset.
func (n *Node) ClockOffset() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.clockOffset
}

// Heal restores every link to the node.
func (n *Node) Heal() error {
	for _, l := range n.Links() {
		if err := l.Heal(); err != nil {
			return err
		}
	}
	return nil
}

// SetLatency delays every link to the node.
func (n *Node) SetLatency(latency, jitter time.Duration) error {
	for _, l := range n.Links() {
		if err := l.SetLatency(latency, jitter); err != nil {
			return err
		}
	}
	return nil
}
