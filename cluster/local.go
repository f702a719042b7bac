package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Local is the default backend's name: real redis-server and
// redis-sentinel processes on free loopback ports.
const Local = "local"

func init() { RegisterBackend(Local, newLocal) }

// local runs every server as a child process with its files in a temp dir
// of the run's own.
type local struct {
	opts   Options
	server string
	dir    string

	mu    sync.Mutex
	procs []*process
}

func newLocal(opts Options) (Backend, error) {
	server := opts.Server
	if server == "" {
		server = "redis-server"
	}
	path, err := exec.LookPath(server)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s not found: install it with `make setup` (apt-get install redis-server) or pass its path", server)
	}
	// The pid in the name lets a later run tell a dead run's leftovers
	// (kill -9 leaves them) from a live run's dir: RemoveLeftovers.
	dir, err := os.MkdirTemp(opts.Dir, fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &local{opts: opts, server: path, dir: dir}, nil
}

// Close kills every process the backend started and removes their files.
func (b *local) Close() error {
	b.mu.Lock()
	procs := b.procs
	b.procs = nil
	b.mu.Unlock()
	for _, p := range procs {
		p.close()
	}
	return os.RemoveAll(b.dir)
}

// Start picks a free port and starts the process; a port grabbed by
// someone else before the bind is retried.
func (b *local) Start(ctx context.Context, spec ServerSpec) (Server, error) {
	dir, err := os.MkdirTemp(b.dir, spec.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	s := &process{spec: spec, dir: dir, bin: b.server}
	if spec.Sentinel != nil {
		bin := b.opts.Sentinel
		if bin == "" {
			bin = "redis-sentinel"
		}
		if s.bin, err = exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("cluster: %s not found: install it with `make setup` (apt-get install redis-sentinel)", bin)
		}
	} else if spec.Clock {
		if s.bin, s.env, err = b.faketime(); err != nil {
			return nil, err
		}
		s.clockFile = filepath.Join(dir, "faketime")
		s.env = append(s.env, "FAKETIME_TIMESTAMP_FILE="+s.clockFile)
		if err := writeClockFile(s.clockFile, 0); err != nil {
			return nil, err
		}
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if s.port, err = FreePort(); err != nil {
			return nil, err
		}
		if spec.Sentinel != nil {
			conf := filepath.Join(dir, "sentinel.conf")
			// Written afresh for each port tried.
			if err := os.WriteFile(conf, []byte(spec.Sentinel.File("127.0.0.1", s.port, dir)), 0o644); err != nil {
				return nil, err
			}
			s.args = []string{conf}
		} else {
			s.args = spec.RedisArgs("127.0.0.1", s.port, dir)
		}
		if lastErr = s.Start(ctx); lastErr == nil {
			b.mu.Lock()
			b.procs = append(b.procs, s)
			b.mu.Unlock()
			return s, nil
		}
		if !strings.Contains(lastErr.Error(), errAddrInUse.Error()) {
			break
		}
	}
	return nil, lastErr
}

// faketime finds the libc-allocator redis-server and libfaketime.
func (b *local) faketime() (string, []string, error) {
	server := b.opts.FaketimeServer
	if server == "" {
		server = FaketimeServerPath()
	}
	if _, err := os.Stat(server); err != nil {
		return "", nil, fmt.Errorf("cluster: a faked node clock needs redis-server built with the libc allocator at %s: run `make setup` (scripts/build-faketime-redis.sh); Debian's jemalloc build hangs under libfaketime", server)
	}
	lib := b.opts.Faketime
	if lib == "" {
		found, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
		if len(found) == 0 {
			return "", nil, errors.New("cluster: libfaketime.so.1 not found: run `make setup` (apt-get install libfaketime)")
		}
		lib = found[0]
	}
	return server, FaketimeEnv(lib), nil
}

// FaketimeEnv is the environment that runs redis-server under libfaketime
// at lib, reading its offset from a file named by FAKETIME_TIMESTAMP_FILE.
func FaketimeEnv(lib string) []string {
	return []string{
		"LD_PRELOAD=" + lib,
		"FAKETIME_NO_CACHE=1",
		// Redis's event loop must keep real time, or serverCron stalls.
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// process is one server run by the local backend.
type process struct {
	spec ServerSpec
	port int
	dir  string
	bin  string
	env  []string
	args []string
	// clockFile is libfaketime's timestamp file; empty when the clock is
	// the machine's.
	clockFile string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	aof    *aofSampler
}

func (s *process) Addr() string     { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *process) PeerAddr() string { return s.Addr() }

func (s *process) Info() NodeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid := 0
	if s.cmd != nil {
		pid = s.cmd.Process.Pid
	}
	return NodeInfo{Name: s.spec.Name, Backend: Local, Addr: s.Addr(), Port: s.port, PID: pid, Dir: s.dir,
		Persistence: s.spec.Persistence, Server: s.bin, Sentinel: s.spec.Sentinel != nil}
}

// Start runs the process and waits until it answers as itself.
func (s *process) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("cluster: node %s already running (pid %d)", s.spec.Name, s.cmd.Process.Pid)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), s.env...)
	if err := StartProcess(cmd); err != nil {
		return fmt.Errorf("cluster: start node %s: %w", s.spec.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited, s.paused = cmd, exited, false
	if err := waitReady(ctx, s.Addr(), cmd.Process.Pid, exited); err != nil {
		s.killLocked()
		return fmt.Errorf("cluster: node %s on port %d: %w%s", s.spec.Name, s.port, err, s.logTail())
	}
	if s.spec.Persistence == AOFEverySec && s.aof == nil {
		s.aof = startAOFSampler(s.dir)
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
		got, err := Answering(addr)
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

func (s *process) logTail() string {
	log := "redis.log"
	if s.spec.Sentinel != nil {
		log = "sentinel.log"
	}
	b, err := os.ReadFile(filepath.Join(s.dir, log))
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

// Pause is SIGSTOP: connects still succeed, nothing is answered.
func (s *process) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume is SIGCONT.
func (s *process) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *process) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", s.spec.Name)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: %v node %s: %w", sig, s.spec.Name, err)
	}
	s.paused = paused
	return nil
}

func (s *process) Kill() error { return s.kill(false) }

// PowerLoss cuts the AOF back to its size one second ago for appendfsync
// everysec: a plain kill keeps everything in the page cache, fsynced or
// not. With appendfsync always nothing is lost; without persistence
// everything is.
func (s *process) PowerLoss() error { return s.kill(true) }

func (s *process) kill(loseUnsynced bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", s.spec.Name)
	}
	s.killLocked()
	if loseUnsynced && s.aof != nil {
		return s.aof.truncateToSynced(time.Second)
	}
	return nil
}

func (s *process) killLocked() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited, s.paused = nil, nil, false
}

// Stop is SIGTERM (a paused process is continued first so it can hear
// it), then kill after 5 s.
func (s *process) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	if s.paused {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		s.cmd, s.exited, s.paused = nil, nil, false
	case <-time.After(5 * time.Second):
		s.killLocked()
	}
	return nil
}

// close kills the process for good: nothing on disk is needed after the
// run, and a graceful shutdown only makes Ctrl-C slower.
func (s *process) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.killLocked()
	}
	if s.aof != nil {
		s.aof.close()
	}
}

func (s *process) SetClockOffset(d time.Duration) error { return writeClockFile(s.clockFile, d) }

func (s *process) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// writeClockFile replaces libfaketime's timestamp file atomically: Redis
// exits if it ever reads a half-written one.
func writeClockFile(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(FaketimeOffset(d)+"\n"), 0o644); err != nil {
		return fmt.Errorf("cluster: clock file: %w", err)
	}
	return os.Rename(tmp, path)
}
