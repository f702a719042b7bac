package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Local is the default backend's name: real server processes (of any
// Kind) on free loopback ports.
const Local = "local"

// local runs every server as a child process with its files in a temp dir
// of the run's own.
type local struct {
	opts Options
	// server is the redis-server binary, found when the backend is made:
	// the harness's own store is a Redis node in every run.
	server string
	dir    string

	mu    sync.Mutex
	procs []*process
}

func newLocal(opts Options) (Backend, error) {
	server, err := opts.lookBinary(RedisKind)
	if err != nil {
		return nil, err
	}
	// The pid in the name lets a later run tell a dead run's leftovers
	// (kill -9 leaves them) from a live run's dir: RemoveLeftovers.
	dir, err := os.MkdirTemp(opts.Dir, fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &local{opts: opts, server: server, dir: dir}, nil
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
	servers, err := b.start(ctx, []ServerSpec{spec}, false)
	if err != nil {
		return nil, err
	}
	return servers[0], nil
}

// StartEnsemble starts an ensemble's members on ports picked together,
// each told every member's place.
func (b *local) StartEnsemble(ctx context.Context, specs []ServerSpec) ([]Server, error) {
	return b.start(ctx, specs, true)
}

// start launches one process per spec, then waits until each answers as
// itself. A port another process took before ours bound it fails the
// start with errAddrInUse, and the whole set is tried again on new ports:
// an ensemble's members name each other's ports in their configs.
func (b *local) start(ctx context.Context, specs []ServerSpec, ensemble bool) ([]Server, error) {
	procs := make([]*process, len(specs))
	for i, spec := range specs {
		p, err := b.prepare(spec)
		if err != nil {
			return nil, err
		}
		procs[i] = p
	}
	// A start that fails before its processes launch gives their ports
	// back (a launched one's close does).
	unclaim := func(err error) ([]Server, error) {
		for _, p := range procs {
			p.unclaim()
		}
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		places := make([]Place, len(procs))
		taken := portPicker{}
		for i, p := range procs {
			var err error
			if p.port, err = taken.pick(&p.claims); err != nil {
				return unclaim(err)
			}
			places[i] = Place{Bind: "127.0.0.1", Port: p.port, Dir: p.dir}
			if ensemble {
				places[i].ID = i + 1
			}
			for range p.kind.PeerPorts {
				port, err := taken.pick(&p.claims)
				if err != nil {
					return unclaim(err)
				}
				places[i].PeerPorts = append(places[i].PeerPorts, port)
			}
			p.readyPeers = p.kind.readyPorts(places[i])
		}
		for i, p := range procs {
			at := places[i]
			if ensemble {
				at.Members = places
			}
			var err error
			if p.args, err = p.kind.Args(p.spec, at); err != nil {
				return unclaim(err)
			}
		}
		if lastErr = startTogether(ctx, procs); lastErr == nil {
			b.mu.Lock()
			b.procs = append(b.procs, procs...)
			b.mu.Unlock()
			out := make([]Server, len(procs))
			for i, p := range procs {
				out[i] = p
			}
			return out, nil
		}
		if !strings.Contains(lastErr.Error(), errAddrInUse.Error()) {
			break
		}
	}
	return nil, lastErr
}

// portPicker picks free ports, none twice: the kernel may hand a port it
// just handed out again once its probe closed, so one start's ports are
// kept apart, and each is claimed machine-wide for the process that
// listens on it (claimPort, "locktorture-node.PORT"), so another
// locktorture process's start
// (make test runs the unit tests and the matrix side by side) cannot be
// handed it too: before, an etcd member's peer port once reached another
// ensemble's member ("request cluster ID mismatch").
type portPicker map[int]bool

// pick returns a port, its claim added to claims (the process's, which
// it holds until it is closed).
func (taken portPicker) pick(claims *[]net.Listener) (int, error) {
	for range 100 {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		if taken[port] {
			continue
		}
		claim, err := claimPort("node", port)
		if err != nil {
			continue // another locktorture process's node holds it
		}
		taken[port] = true
		*claims = append(*claims, claim)
		return port, nil
	}
	return 0, errors.New("cluster: no free port that no other locktorture node holds")
}

// startTogether launches every process before it waits for any, and
// kills them all if one fails.
func startTogether(ctx context.Context, procs []*process) error {
	errs := make([]error, len(procs))
	launched := 0
	for _, p := range procs {
		if errs[launched] = p.launch(); errs[launched] != nil {
			break
		}
		launched++
	}
	var wg sync.WaitGroup
	for i, p := range procs[:launched] {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.await(ctx) }()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		for _, p := range procs {
			p.close()
		}
	}
	return err
}

// prepare makes a process's dir and finds its binary, under libfaketime
// when its spec asks for a faked clock.
func (b *local) prepare(spec ServerSpec) (*process, error) {
	k := spec.ServerKind()
	dir, err := os.MkdirTemp(b.dir, spec.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	s := &process{spec: spec, kind: k, dir: dir}
	if s.cred, err = account(k, dir); err != nil {
		return nil, err
	}
	if k == RedisKind {
		s.bin = b.server
	} else if s.bin, err = b.opts.lookBinary(k); err != nil {
		return nil, err
	}
	if spec.Clock {
		if s.bin, s.env, err = b.faketime(k, s.bin); err != nil {
			return nil, err
		}
		s.clockFile = filepath.Join(dir, "faketime")
		s.env = append(s.env, "FAKETIME_TIMESTAMP_FILE="+s.clockFile)
		if err := writeClockFile(s.clockFile, 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// faketime is the binary and environment that run kind k under
// libfaketime: the kind's own build for a faked clock, if it has one,
// else bin.
func (b *local) faketime(k *Kind, bin string) (string, []string, error) {
	if k.FaketimeBinary != nil {
		var err error
		if bin, err = k.FaketimeBinary(b.opts); err != nil {
			return "", nil, err
		}
	}
	lib := b.opts.Faketime
	if lib == "" {
		found, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
		if len(found) == 0 {
			return "", nil, errors.New("cluster: libfaketime.so.1 not found: run `go run github.com/locktorture/locktorture/cmd/setup` (apt-get install libfaketime)")
		}
		lib = found[0]
	}
	return bin, FaketimeEnv(lib), nil
}

// FaketimeEnv is the environment that runs a server under libfaketime
// at lib, reading its offset from a file named by FAKETIME_TIMESTAMP_FILE.
func FaketimeEnv(lib string) []string {
	return []string{
		"LD_PRELOAD=" + lib,
		"FAKETIME_NO_CACHE=1",
		// Redis's event loop must keep real time, or serverCron stalls.
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// removeFaketimeSegments removes what libfaketime keeps in /dev/shm for
// the process pid, its shared memory and its semaphore, named by the pid:
// libfaketime removes them as its process exits, but a server killed by
// SIGKILL leaves them to the machine.
func removeFaketimeSegments(pid int) {
	for _, name := range []string{"faketime_shm_%d", "sem.faketime_sem_%d"} {
		_ = os.Remove(filepath.Join("/dev/shm", fmt.Sprintf(name, pid)))
	}
}

// process is one server run by the local backend.
type process struct {
	spec ServerSpec
	kind *Kind
	port int
	dir  string
	bin  string
	env  []string
	args []string
	// clockFile is libfaketime's timestamp file; empty when the clock is
	// the machine's.
	clockFile string
	// cred is the account the process runs as (Kind.User); nil: ours.
	cred *syscall.Credential
	// readyPeers are the peer ports a ready process listens on
	// (Kind.ReadyPeers).
	readyPeers []int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	aof    *aofSampler
	// claims hold the process's ports machine-wide until it is closed
	// (portPicker): a restart listens on them again.
	claims []net.Listener
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
	return NodeInfo{Name: s.spec.Name, Backend: Local, Kind: s.kind.Name, Addr: s.Addr(), Port: s.port, PID: pid, Dir: s.dir,
		Persistence: s.spec.Persistence, Server: s.bin, Sentinel: s.kind == SentinelKind}
}

// Start runs the process and waits until it answers as itself.
func (s *process) Start(ctx context.Context) error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.await(ctx)
}

// launch starts the process without waiting for it to answer.
func (s *process) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("cluster: node %s already running (pid %d)", s.spec.Name, s.cmd.Process.Pid)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), s.env...)
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	if s.kind.Log == "" {
		// The child writes the file itself; the harness copies nothing.
		out, err := os.OpenFile(filepath.Join(s.dir, outputLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("cluster: start node %s: %w", s.spec.Name, err)
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
	}
	if err := StartProcess(cmd); err != nil {
		return fmt.Errorf("cluster: start node %s: %w", s.spec.Name, err)
	}
	exited := make(chan struct{})
	faked, pid := s.clockFile != "", cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		if faked {
			removeFaketimeSegments(pid)
		}
		close(exited)
	}()
	s.cmd, s.exited, s.paused = cmd, exited, false
	return nil
}

// await waits until the launched process answers as itself, and kills it
// if it does not.
func (s *process) await(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", s.spec.Name)
	}
	deadline := time.Now().Add(s.kind.startTimeout())
	err := waitReady(ctx, s.kind, s.Addr(), s.cmd.Process.Pid, s.exited)
	if err == nil {
		err = s.awaitPeers(ctx, deadline)
	}
	if err != nil {
		tail := s.logTail()
		if s.bindFailed() {
			tail = fmt.Sprintf(": exit code %d: %v", s.kind.BindExit, errAddrInUse)
		}
		s.killLocked()
		return fmt.Errorf("cluster: node %s on port %d: %w%s", s.spec.Name, s.port, err, tail)
	}
	if glob, _ := s.kind.unsynced(s.spec.Persistence); glob != "" && s.aof == nil {
		s.aof = startAOFSampler(filepath.Join(s.dir, glob))
	}
	return nil
}

// awaitPeers waits until the process listens on each of its ready peer
// ports (Kind.ReadyPeers), by the start's deadline. The caller holds s.mu.
func (s *process) awaitPeers(ctx context.Context, deadline time.Time) error {
	for _, port := range s.readyPeers {
		for !listensOn(s.cmd.Process.Pid, port) {
			select {
			case <-s.exited:
				return fmt.Errorf("%s exited during start, not listening on its peer port %d", s.kind.Binary, port)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				if len(listening(port)) > 0 {
					return fmt.Errorf("%w: another process listens on peer port %d", errAddrInUse, port)
				}
				return fmt.Errorf("not listening on its peer port %d within %v", port, s.kind.startTimeout())
			}
		}
	}
	return nil
}

// bindFailed says whether the process has exited with its kind's
// BindExit code. The caller holds s.mu.
func (s *process) bindFailed() bool {
	if s.kind.BindExit == 0 {
		return false
	}
	select {
	case <-s.exited:
		// Wait has returned, so ProcessState is set.
		return s.cmd.ProcessState.ExitCode() == s.kind.BindExit
	default:
		return false
	}
}

// outputLog holds the stdout and stderr of a server whose Kind names no
// log file of its own.
const outputLog = "output.log"

var errAddrInUse = errors.New("address already in use")

// waitReady polls the node until the process answering on addr is pid,
// the process exits, or ctx or the kind's start timeout runs out. An
// answer alone is not enough: the port was free when picked, but until
// our server binds it another run's node, or a proxy in front of one, may
// take it and answer, and two runs sharing a store would each read the
// other's writes as stale. Our process then fails to
// bind and exits, and the caller picks another port. A server whose
// protocol names its pid is ours when the pid is; one whose protocol
// names none is ours when the socket listening on the port is.
func waitReady(ctx context.Context, k *Kind, addr string, pid int, exited <-chan struct{}) error {
	timeout := k.startTimeout()
	deadline := time.Now().Add(timeout)
	_, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	for {
		got, err := k.Ready(ctx, addr)
		if err == nil && got == 0 {
			if listensOn(pid, port) {
				return nil
			}
			got = -1 // something answers, and it is not ours
		}
		if err == nil && got == pid {
			return nil
		}
		select {
		case <-exited:
			switch {
			case got == -1:
				return fmt.Errorf("%w: a process not ours answers there", errAddrInUse)
			case got != 0 && got != pid:
				return fmt.Errorf("%w: process %d answers there", errAddrInUse, got)
			}
			return fmt.Errorf("%s exited during start", k.Binary)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from our own process within %v", timeout)
		}
	}
}

func (s *process) logTail() string {
	log := s.kind.Log
	if log == "" {
		log = outputLog
	}
	b, err := os.ReadFile(filepath.Join(s.dir, log))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// A server may say more after the bind failed (PostgreSQL that it
	// shut down, a JVM its exit code): the last few lines are read.
	for _, l := range lines[max(0, len(lines)-8):] {
		if strings.Contains(strings.ToLower(l), errAddrInUse.Error()) {
			return ": " + errAddrInUse.Error()
		}
	}
	return ": " + log + ": " + lines[len(lines)-1]
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
	if _, err := s.send(sig); err != nil {
		return fmt.Errorf("cluster: %v node %s: %w", sig, s.spec.Name, err)
	}
	s.paused = paused
	if paused {
		pids := []int{s.cmd.Process.Pid}
		if s.kind.ProcessGroup {
			pids = members(s.cmd.Process.Pid)
		}
		if err := waitStopped(pids, stopWithin); err != nil {
			return fmt.Errorf("cluster: pause node %s: %w", s.spec.Name, err)
		}
	}
	return nil
}

// stopWithin bounds how long a paused server may take to stop: a machine
// that cannot schedule it in that long cannot run a timed story anyway.
const stopWithin = 5 * time.Second

// send signals the server: its process, or, for a kind whose forked
// children serve clients, its whole process group and every process
// descended from it. It returns the processes it signalled.
func (s *process) send(sig syscall.Signal) ([]int, error) {
	pid := s.cmd.Process.Pid
	if !s.kind.ProcessGroup {
		return []int{pid}, s.cmd.Process.Signal(sig)
	}
	// The descendants outside the group are found before the group is
	// signalled: a killed leader's children go to init, and one that
	// left the group (PostgreSQL's backends call setsid) is no longer
	// found as its descendant. Then the group, so its leader stops
	// forking, then whatever descends from it now.
	before := members(pid)
	err := syscall.Kill(-pid, sig)
	all := append(before, members(pid)...)
	slices.Sort(all)
	all = slices.Compact(all)
	for _, p := range all {
		_ = syscall.Kill(p, sig)
	}
	return all, err
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	st := procState(pid)
	return pid > 0 && st != 0 && st != 'Z' && st != 'X'
}

func (s *process) Kill() error { return s.kill(false) }

// PowerLoss cuts the files the kind fsyncs on a timer back to their size
// that long ago (Redis's AOF under appendfsync everysec: one second): a
// plain kill keeps everything in the page cache, fsynced or not. With
// appendfsync always nothing is lost; without persistence everything is.
func (s *process) PowerLoss() error { return s.kill(true) }

func (s *process) kill(loseUnsynced bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("cluster: node %s is not running", s.spec.Name)
	}
	s.killLocked()
	if _, lag := s.kind.unsynced(s.spec.Persistence); loseUnsynced && s.aof != nil {
		return s.aof.truncateToSynced(lag)
	}
	return nil
}

func (s *process) killLocked() {
	killed, _ := s.send(syscall.SIGKILL)
	<-s.exited
	if s.kind.ProcessGroup {
		// The group's other members die on their own time; a server
		// started again before they are gone may find them still
		// holding its files (PostgreSQL refuses to start while an old
		// backend is attached to its shared memory).
		for deadline := time.Now().Add(stopWithin); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if len(members(s.cmd.Process.Pid)) == 0 && !slices.ContainsFunc(killed, alive) {
				break
			}
		}
	}
	s.cmd, s.exited, s.paused = nil, nil, false
}

// Stop is the kind's stop signal, SIGTERM unless it says otherwise (a
// paused process is continued first so it can hear it), then kill after
// 5 s.
func (s *process) Stop() error {
	s.stop(5 * time.Second)
	return nil
}

// stop is Stop with a kill after wait; it says whether the process exited
// on its own.
func (s *process) stop(wait time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return true
	}
	if s.paused {
		_, _ = s.send(syscall.SIGCONT)
	}
	_, _ = s.send(s.kind.stopSignal())
	select {
	case <-s.exited:
		s.cmd, s.exited, s.paused = nil, nil, false
		return true
	case <-time.After(wait):
		s.killLocked()
		return false
	}
}

// close kills the process for good: nothing on disk is needed after the
// run, and a graceful shutdown only makes Ctrl-C slower.
func (s *process) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.killLocked()
	}
	if s.kind.Cleanup != nil {
		s.kind.Cleanup(s.dir)
	}
	if s.aof != nil {
		s.aof.close()
	}
	s.unclaimLocked()
}

// unclaim gives the process's ports back (portPicker).
func (s *process) unclaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unclaimLocked()
}

func (s *process) unclaimLocked() {
	for _, c := range s.claims {
		c.Close()
	}
	s.claims = nil
}

func (s *process) SetClockOffset(d time.Duration) error { return writeClockFile(s.clockFile, d) }

func (s *process) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// writeClockFile replaces libfaketime's timestamp file atomically: Redis
// exits if it ever reads a half-written one, and no server is better off
// reading one.
func writeClockFile(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(FaketimeOffset(d)+"\n"), 0o644); err != nil {
		return fmt.Errorf("cluster: clock file: %w", err)
	}
	return os.Rename(tmp, path)
}

// account is the credential a server of kind k runs as, with dir handed
// to it: nil unless the harness is root and the kind names a User.
func account(k *Kind, dir string) (*syscall.Credential, error) {
	if k.User == "" || os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(k.User)
	if err != nil {
		return nil, fmt.Errorf("cluster: a %s node runs as %s: %w", k.Name, k.User, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The run's dir is root's own (0700): the account may pass through it
	// to its node's dir, and read nothing there.
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// RunAs runs cmd as kind k's User where a server of k would run so (a
// kind's Args preparing its data dir, as initdb does): the same rule as
// the server's own start.
func (k *Kind) RunAs(cmd *exec.Cmd, dir string) error {
	cred, err := account(k, dir)
	if err != nil || cred == nil {
		return err
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = cred
	return nil
}
