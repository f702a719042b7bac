package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
	bin         string
	env         []string
	args        []string
	// clockFile is libfaketime's timestamp file; empty when the node's
	// clock is the machine's.
	clockFile string
	sentinel  bool

	mu          sync.Mutex
	cmd         *exec.Cmd
	exited      chan struct{}
	paused      bool
	links       map[string]*Link
	clockOffset time.Duration
	aof         *aofSampler
}

// NodeInfo is what a person (or a test) needs to find a node's process.
type NodeInfo struct {
	Name        string      `json:"name"`
	Port        int         `json:"port"`
	PID         int         `json:"pid"`
	Dir         string      `json:"dir"`
	Persistence Persistence `json:"persistence"`
	// Server is the binary: Debian's, or the libc-allocator build when the
	// node's clock is faked.
	Server   string `json:"server"`
	Sentinel bool   `json:"sentinel,omitempty"`
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
	return NodeInfo{Name: n.Name, Port: n.port, PID: n.PID(), Dir: n.dir, Persistence: n.persistence,
		Server: n.bin, Sentinel: n.sentinel}
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

// redisArgs is the command line of a data node.
func redisArgs(port int, dir string, p Persistence, extra []string) []string {
	a := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
		"--save", "",
		"--enable-debug-command", "local",
		// A replica's first sync would otherwise wait 5 s for company.
		"--repl-diskless-sync-delay", "0",
	}
	switch p {
	case AOFEverySec:
		a = append(a, "--appendonly", "yes", "--appendfsync", "everysec")
	case AOFAlways:
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	default:
		a = append(a, "--appendonly", "no")
	}
	return append(a, extra...)
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
	cmd := exec.Command(n.bin, n.args...)
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), n.env...)
	if err := StartProcess(cmd); err != nil {
		return fmt.Errorf("cluster: start node %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.cmd, n.exited, n.paused = cmd, exited, false
	if err := waitReady(ctx, n.Addr(), cmd.Process.Pid, exited); err != nil {
		n.killLocked()
		return fmt.Errorf("cluster: node %s on port %d: %w%s", n.Name, n.port, err, n.logTail())
	}
	if n.persistence == AOFEverySec && n.aof == nil {
		n.aof = startAOFSampler(n.dir)
	}
	return nil
}

var errAddrInUse = errors.New("address already in use")

// waitReady polls the node until the process answering on addr is pid,
// the process exits, or ctx/5 s runs out. A PONG alone is not enough: the
// port was free when picked, but until our redis-server binds it another
// run's node, or a proxy in front of one, may take it and answer. Such a
// run once shared its store with ours, and each saw the other's writes as
// stale reads. Our process then fails to bind and exits, and the caller
// picks another port.
func waitReady(ctx context.Context, addr string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := answering(addr)
		if err == nil && got == pid {
			return nil
		}
		select {
		case <-exited:
			if got != 0 && got != pid {
				return fmt.Errorf("%w: process %d answers there", errAddrInUse, got)
			}
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("no answer from our own process within 5s")
		}
	}
}

// answering asks the Redis (or Sentinel) on addr, on one connection, for
// its process id (INFO server) and whether its data is loaded (PING: INFO
// answers while an AOF is still loading, PING does not).
func answering(addr string) (pid int, err error) {
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

func (n *Node) logTail() string {
	log := "redis.log"
	if n.sentinel {
		log = "sentinel.log"
	}
	b, err := os.ReadFile(filepath.Join(n.dir, log))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if strings.Contains(last, "Address already in use") {
		return ": " + errAddrInUse.Error()
	}
	return ": " + log + ": " + last
}

// Paused reports whether the node is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
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

// Restart starts a stopped or killed node again after delay (0: at once),
// on the same port and data dir: what it finds there is what survived.
func (n *Node) Restart(ctx context.Context, delay time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(delay):
	}
	return n.Start(ctx)
}

// PowerLoss is kill -9 plus the loss of what the disk had not been told to
// keep. A plain kill keeps everything in the page cache, fsynced or not, so
// for appendfsync everysec the AOF is cut back to its size one second ago,
// the most that policy may lose. With appendfsync always nothing is lost;
// without persistence everything is.
func (n *Node) PowerLoss() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", n.Name)
	}
	n.killLocked()
	if n.aof != nil {
		return n.aof.truncateToSynced(time.Second)
	}
	return nil
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

// SetClockOffset moves the clock the node reads for key expiry by d from
// the machine's (libfaketime; the node must have been added with Clock).
// Redis's event loop runs on the monotonic clock, which stays true.
func (n *Node) SetClockOffset(d time.Duration) error {
	if n.clockFile == "" {
		return fmt.Errorf("cluster: node %s was not started with a faked clock (NodeOptions.Clock)", n.Name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := writeClockFile(n.clockFile, d); err != nil {
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

// writeClockFile replaces libfaketime's timestamp file atomically: Redis
// exits if it ever reads a half-written one. Offsets are fractional seconds
// ("+1.500s"): libfaketime reads "ms" as minutes.
func writeClockFile(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%+.3fs\n", d.Seconds())), 0o644); err != nil {
		return fmt.Errorf("cluster: clock file: %w", err)
	}
	return os.Rename(tmp, path)
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
