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
	"syscall"
	"testing"
	"time"
)

// helloArg makes the test binary the hello server instead of running
// tests: "-cluster.hello-server ADDR [wrapper]".
const helloArg = "-cluster.hello-server"

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == helloArg {
		os.Exit(serveHello(os.Args[2], len(os.Args) > 3 && os.Args[3] == "wrapper"))
	}
	os.Exit(m.Run())
}

// serveHello is a server of a kind only these tests know: it counts its
// starts in a file in its working dir (the node's data dir) and greets
// every connection with "hello <starts>", which tells no pid. As a
// wrapper it only starts the real server as its child, in its process
// group, and waits, as a launcher script would.
func serveHello(addr string, wrapper bool) int {
	if wrapper {
		cmd := exec.Command(os.Args[0], helloArg, addr)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "hello wrapper:", err)
			return 1
		}
		return 0
	}
	b, _ := os.ReadFile("starts")
	starts, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	starts++
	if err := os.WriteFile("starts", []byte(strconv.Itoa(starts)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintf(c, "hello %d\n", starts)
		c.Close()
	}
}

// survivors is those of pids still alive after waiting up to within for
// them to die. A SIGKILLed process tears down in its own time, and the
// wrapper's child is reaped by init, not by us: on a loaded machine that
// can take far longer than a fixed sleep would allow.
func survivors(pids []int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// greet reads the greeting of the server at addr within a second.
func greet(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// helloKind is the hello server as a Kind: one file's worth of
// definition, and a line in kinds (which the test adds and removes).
func helloKind(t *testing.T, wrapper bool) *Kind {
	k := &Kind{
		Name:         fmt.Sprintf("hello-wrapper-%v", wrapper),
		Binary:       os.Args[0],
		Install:      "it is this test binary",
		Persistence:  []Persistence{AOFAlways},
		ProcessGroup: wrapper,
		Args: func(spec ServerSpec, at Place) ([]string, error) {
			a := []string{helloArg, net.JoinHostPort(at.Bind, strconv.Itoa(at.Port))}
			if wrapper {
				a = append(a, "wrapper")
			}
			return append(a, spec.Args...), nil
		},
		Ready: func(_ context.Context, addr string) (int, error) {
			g, err := greet(addr)
			if err == nil && !strings.HasPrefix(g, "hello ") {
				err = fmt.Errorf("greeted with %q", g)
			}
			return 0, err
		},
	}
	kinds[k.Name] = k
	t.Cleanup(func() { delete(kinds, k.Name) })
	return k
}

// group is the live processes of pid's process group.
func group(pid int) []int {
	var out []int
	for _, p := range members(pid) {
		if alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// A kind the cluster has never heard of runs through the seam, its
// faults included: readiness by the listening socket (its protocol tells
// no pid), kill -9 of the whole server, a restart on the same port with
// the same data dir, a pause, and a cut of its link. As a wrapper whose
// child listens, the socket is found in the process group, and a kill or
// pause reaches the child.
func TestAKindOfItsOwnThroughTheSeam(t *testing.T) {
	ctx := context.Background()
	for _, wrapper := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrapper=%v", wrapper), func(t *testing.T) {
			k := helloKind(t, wrapper)
			c, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			n, err := c.AddNode(ctx, NodeOptions{Name: "h1", Kind: k.Name})
			if err != nil {
				t.Fatal(err)
			}
			if info := n.Info(); info.Kind != k.Name || info.Persistence != AOFAlways {
				t.Errorf("info: kind %q, persistence %q: want the kind's name and its default", info.Kind, info.Persistence)
			}
			l, err := n.Link("c1")
			if err != nil {
				t.Fatal(err)
			}
			if g, err := greet(l.Addr()); g != "hello 1" {
				t.Fatalf("through the link: %q, %v", g, err)
			}

			pid, addr, procs := n.PID(), n.Addr(), group(n.PID())
			if wrapper && len(procs) != 2 {
				t.Fatalf("the wrapper's group is %v, want it and its child", procs)
			}
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
			if left := survivors(procs, 5*time.Second); len(left) > 0 {
				t.Errorf("pids %v of the killed server's group still alive", left)
			}
			if g, err := greet(l.Addr()); err == nil {
				t.Fatalf("a killed server greeted %q", g)
			}
			if err := n.Restart(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if n.Addr() != addr || n.PID() == pid {
				t.Fatalf("restarted at %s as %d, was %s as %d", n.Addr(), n.PID(), addr, pid)
			}
			// Same dir: the count the first start wrote is there.
			if g, err := greet(l.Addr()); g != "hello 2" {
				t.Fatalf("after restart: %q, %v", g, err)
			}

			if err := n.Pause(); err != nil {
				t.Fatal(err)
			}
			if g, err := greet(l.Addr()); err == nil {
				t.Fatalf("a paused server greeted %q", g)
			}
			if err := n.Resume(); err != nil {
				t.Fatal(err)
			}
			if g, err := greet(l.Addr()); g != "hello 2" {
				t.Fatalf("after resume: %q, %v", g, err)
			}

			if err := l.Cut(); err != nil {
				t.Fatal(err)
			}
			if g, err := greet(l.Addr()); err == nil {
				t.Fatalf("greeted %q through a cut link", g)
			}
			if err := l.Heal(); err != nil {
				t.Fatal(err)
			}
			if g, err := greet(l.Addr()); g != "hello 2" {
				t.Fatalf("after heal: %q, %v", g, err)
			}
			if _, err := n.Do(ctx, "PING"); err == nil || !strings.Contains(err.Error(), "Redis's protocol") {
				t.Errorf("Do on a server that speaks no RESP: %v", err)
			}
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
			if left := survivors(group(pid), 5*time.Second); n.PID() != 0 || len(left) > 0 {
				t.Errorf("after Stop: pid %d, group %v", n.PID(), left)
			}
		})
	}
}

// A server whose protocol names no pid is not ready because something
// greets on its port: the socket there must be its own, and when it exits
// (its bind failed) the port is reported taken, so a new one is tried.
func TestReadyByTheSocketIsNotFooledByANeighbour(t *testing.T) {
	k := helloKind(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello 1")
			c.Close()
		}
	}()
	// Ours is a process that never binds the port and exits soon after.
	ours := exec.Command("sleep", "0.3")
	if err := ours.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = ours.Wait(); close(exited) }()
	err = waitReady(context.Background(), k, l.Addr().String(), ours.Process.Pid, exited)
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("waitReady with a neighbour greeting on the port: %v, want %v", err, errAddrInUse)
	}
	if !listensOn(os.Getpid(), l.Addr().(*net.TCPAddr).Port) {
		t.Error("the test's own listener is not found as its own")
	}
}

// memcached, a real server of another kind, runs through the seam: ready
// by its own pid, reached through its link, killed and restarted empty on
// the same port (it keeps nothing), paused, cut off, and its clock faked
// by libfaketime.
func TestMemcachedThroughTheSeam(t *testing.T) {
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Skip("memcached not installed (apt-get install memcached)")
	}
	ctx := context.Background()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.AddNode(ctx, NodeOptions{Name: "m0", Kind: "memcached", Persistence: AOFAlways}); err == nil || !strings.Contains(err.Error(), "no persistence") {
		t.Errorf("memcached with an fsynced log: %v, want a refusal", err)
	}
	if _, err := c.AddNode(ctx, NodeOptions{Name: "x", Kind: "no-such-kind"}); err == nil || !strings.Contains(err.Error(), "memcached") {
		t.Errorf("an unknown kind: %v, want an error listing the kinds", err)
	}
	n, err := c.AddNode(ctx, NodeOptions{Name: "m1", Kind: "memcached"})
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := memcachedReady(ctx, n.Addr()); err != nil || pid != n.PID() {
		t.Fatalf("memcached answers as %d (%v), started as %d", pid, err, n.PID())
	}
	l, err := n.Link("c1")
	if err != nil {
		t.Fatal(err)
	}
	mc := func(cmd string) (string, error) {
		conn, err := net.DialTimeout("tcp", l.Addr(), time.Second)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write([]byte(cmd)); err != nil {
			return "", err
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		return strings.TrimSpace(line), err
	}
	if r, err := mc("add k 0 0 1\r\nv\r\n"); r != "STORED" {
		t.Fatalf("add through the link: %q, %v", r, err)
	}
	if r, err := mc("add k 0 0 1\r\nw\r\n"); r != "NOT_STORED" {
		t.Fatalf("a second add: %q, %v", r, err)
	}

	pid, addr := n.PID(), n.Addr()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d alive after Kill", pid)
	}
	if r, err := mc("get k\r\n"); err == nil {
		t.Fatalf("a killed memcached answered %q", r)
	}
	if err := n.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n.Addr() != addr {
		t.Fatalf("restarted on %s, not %s", n.Addr(), addr)
	}
	if r, err := mc("add k 0 0 1\r\nv\r\n"); r != "STORED" {
		t.Fatalf("after a restart without persistence the key should be gone: %q, %v", r, err)
	}

	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if r, err := mc("get k\r\n"); err == nil {
		t.Fatalf("a paused memcached answered %q", r)
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if r, err := mc("get k\r\n"); r != "VALUE k 0 1" {
		t.Fatalf("after resume: %q, %v", r, err)
	}
	if err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	if r, err := mc("get k\r\n"); err == nil {
		t.Fatalf("answered %q through a cut link", r)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if r, err := mc("get k\r\n"); r != "VALUE k 0 1" {
		t.Fatalf("after heal: %q, %v", r, err)
	}

	// memcached reads the wall clock once at start and counts on from it
	// by the monotonic clock: an offset set before a restart shows in its
	// "STAT time".
	if found, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1"); len(found) == 0 {
		t.Skip("libfaketime not installed: the clock is not tested")
	}
	f, err := c.AddNode(ctx, NodeOptions{Name: "m2", Kind: "memcached", Clock: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetClockOffset(time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := f.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := f.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	at, err := memcachedTime(f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if skew := time.Until(at); skew < 50*time.Minute || skew > 70*time.Minute {
		t.Errorf("memcached's clock is %v off the machine's, want about an hour", skew)
	}
}

// memcachedTime is the "STAT time" of the memcached on addr.
func memcachedTime(addr string) (time.Time, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		return time.Time{}, err
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "STAT time "); ok {
			s, err := strconv.ParseInt(v, 10, 64)
			return time.Unix(s, 0), err
		}
	}
	return time.Time{}, errors.New("stats without a time")
}

func TestMissingKindBinaryIsNamed(t *testing.T) {
	c, err := New(Options{Binaries: map[string]string{"memcached": "memcached-that-does-not-exist"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.AddNode(context.Background(), NodeOptions{Name: "m", Kind: "memcached"})
	if err == nil || !strings.Contains(err.Error(), "memcached-that-does-not-exist not found") {
		t.Fatalf("want a clear not-found error, got %v", err)
	}
}
