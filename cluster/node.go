package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Persistence says what a node writes to disk, which decides what survives a
// kill -9 (K5: RedLock crash-restart).
type Persistence string

// Persistence modes.
const (
	// NoPersistence: nothing on disk; a restarted node is empty.
	NoPersistence Persistence = "none"
	// AOFEverySec: append-only file, fsync once a second.
	AOFEverySec Persistence = "aof-everysec"
	// AOFAlways: append-only file, fsync before every reply.
	AOFAlways Persistence = "aof-always"
)

// Node is one real redis-server process on a loopback port, reached only
// through its Links.
type Node struct {
	// Name is the node's name in the cluster and in the history ("n1", "store").
	Name string

	cluster     *Cluster
	port        int
	dir         string
	persistence Persistence

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	links  map[string]*Link
}

// NodeInfo is what a person (or a test) needs to find a node's process.
type NodeInfo struct {
	Name        string      `json:"name"`
	Port        int         `json:"port"`
	PID         int         `json:"pid"`
	Dir         string      `json:"dir"`
	Persistence Persistence `json:"persistence"`
}

// Addr is the node's own address. Clients must use a Link instead; this is
// for the harness's out-of-band checks and admin commands.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// PID is the pid of the running process, 0 when it is not running.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Info describes the node.
func (n *Node) Info() NodeInfo {
	return NodeInfo{Name: n.Name, Port: n.port, PID: n.PID(), Dir: n.dir, Persistence: n.persistence}
}

// Link returns peer's own link to this node, creating it on first use.
func (n *Node) Link(peer string) (*Link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.links[peer]; ok {
		return l, nil
	}
	l, err := newLink(n.cluster.proxies, peer, n.Name, n.Addr())
	if err != nil {
		return nil, err
	}
	n.links[peer] = l
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

func (n *Node) args() []string {
	a := []string{
		"--port", strconv.Itoa(n.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--dir", n.dir,
		"--logfile", filepath.Join(n.dir, "redis.log"),
		"--daemonize", "no",
		"--save", "",
		"--enable-debug-command", "local",
	}
	switch n.persistence {
	case AOFEverySec:
		a = append(a, "--appendonly", "yes", "--appendfsync", "everysec")
	case AOFAlways:
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	default:
		a = append(a, "--appendonly", "no")
	}
	return append(a, n.cluster.opts.ExtraArgs...)
}

// Start runs the process and waits until it answers PING. It is also the
// restart after Stop or Kill: same port, same data dir.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("cluster: node %s already running (pid %d)", n.Name, n.cmd.Process.Pid)
	}
	if n.cluster.closed() {
		return fmt.Errorf("cluster: node %s: cluster is closed", n.Name)
	}
	cmd := exec.Command(n.cluster.server, n.args()...)
	cmd.Dir = n.dir
	if err := startProcess(cmd); err != nil {
		return fmt.Errorf("cluster: start node %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.cmd, n.exited, n.paused = cmd, exited, false
	if err := waitReady(ctx, n.Addr(), exited); err != nil {
		n.killLocked()
		return fmt.Errorf("cluster: node %s on port %d: %w%s", n.Name, n.port, err, n.logTail())
	}
	return nil
}

var errAddrInUse = errors.New("address already in use")

// waitReady polls PING until +PONG, the process exits or ctx/5 s runs out.
func waitReady(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := ping(addr); err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("no PONG within 5s")
		}
	}
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func (n *Node) logTail() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if strings.Contains(last, "Address already in use") {
		return ": " + errAddrInUse.Error()
	}
	return ": redis.log: " + last
}

// Pause stops the process with SIGSTOP: it keeps its state and its port
// (connects still succeed) but answers nothing until Resume.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", n.Name)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: %v node %s: %w", sig, n.Name, err)
	}
	n.paused = paused
	return nil
}

// Kill is kill -9: no shutdown, no final fsync; what survives is what the
// persistence mode had already put on disk.
func (n *Node) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", n.Name)
	}
	n.killLocked()
	return nil
}

func (n *Node) killLocked() {
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.cmd, n.exited, n.paused = nil, nil, false
}

// Stop shuts the process down with SIGTERM (a paused one is continued
// first so it can hear it) and kills it if it has not exited within 5 s.
func (n *Node) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	if n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		n.cmd, n.exited, n.paused = nil, nil, false
	case <-time.After(5 * time.Second):
		n.killLocked()
	}
	return nil
}

// CutOff cuts every link to the node: nobody reaches it until Heal.
func (n *Node) CutOff() error {
	for _, l := range n.Links() {
		if err := l.Cut(); err != nil {
			return err
		}
	}
	return nil
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
