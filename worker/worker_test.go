package worker_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/internal/procstat"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/worker"
	"github.com/locktorture/locktorture/workloads"
)

// The test binary is its own worker.
func TestMain(m *testing.M) {
	worker.ServeIfWorker(locks.Lookup)
	os.Exit(m.Run())
}

type env struct {
	t     *testing.T
	node  *cluster.Node
	store *cluster.Node
	gate  *nemesis.Gate
	rec   *history.Recorder
	redis *redis.Client // the harness's own look at the lock node
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	cl, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	n, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	c := cluster.NewClient(n.Addr(), cluster.ClientOptions{})
	t.Cleanup(func() { c.Close() })
	return &env{t: t, node: n, store: st, gate: nemesis.NewGate(rec), rec: rec, redis: c}
}

// start starts a worker for process of client; its links are the nodes'
// own addresses (a link adds nothing these tests look at).
func (e *env) start(lock string, client, process int, ttl time.Duration) *worker.Proc {
	e.t.Helper()
	p, err := worker.Start(context.Background(), worker.Options{
		Hello: worker.Hello{Lock: lock, Nodes: []string{e.node.Addr()}, Store: e.store.Addr(), TTLNS: int64(ttl), WaitNS: int64(ttl / 10),
			Owner: fmt.Sprintf("c%d", client)},
		Gate: e.gate, Client: client, Process: process, Clock: &nemesis.ClientClock{}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(p.Close)
	return p
}

// state is the one-letter state of pid in /proc (R, S, T for stopped, ...).
func state(t *testing.T, pid int) string {
	t.Helper()
	return cmp.Or(procstat.State(pid), "gone")
}

// waitState polls pid's state until ok accepts it or within has passed,
// and returns the last state read.
func waitState(t *testing.T, pid int, ok func(string) bool, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := state(t, pid)
		if ok(s) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A worker paused by the nemesis is stopped by the kernel: its watchdog
// stops renewing, and the lock key's PTTL in Redis runs out, though nothing
// in the lock was asked to cooperate. Before the pause the same watchdog
// keeps the key alive past its TTL, so the test could fail either way.
func TestSIGSTOPpedWorkersWatchdogStopsRenewing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	p := e.start("reentrant", 0, 0, ttl)
	e.gate.Begin(context.Background(), 0, 0, history.Acquire)
	lease, err := p.Acquire(ctx, "lock")
	e.gate.End(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)
	if pttl := e.redis.PTTL(ctx, "lock").Val(); pttl <= 0 {
		t.Fatalf("a running worker's watchdog must keep the key alive 3 TTLs on; PTTL %v", pttl)
	}
	e.gate.PauseClient(0, 6*ttl)
	paused := time.Now()
	// The state is polled, not read after a fixed sleep: a busy machine
	// may deliver the stop, and the continue, late.
	if s := waitState(t, p.PID(), func(s string) bool { return s == "T" }, 3*time.Second); s != "T" {
		t.Fatalf("a paused worker must be stopped by the kernel; state %s", s)
	}
	// The key, last renewed at most a third of a TTL before the pause,
	// lapses a TTL into it; even read after the pause, it stays gone.
	time.Sleep(3*ttl - time.Since(paused))
	if pttl := e.redis.PTTL(ctx, "lock").Val(); pttl != -2*time.Nanosecond {
		t.Fatalf("a SIGSTOPped worker's watchdog renewed its key: PTTL %v, want the key gone (-2)", pttl)
	}
	if s := waitState(t, p.PID(), func(s string) bool { return s != "T" }, 6*ttl+3*time.Second-time.Since(paused)); s == "T" || s == "gone" {
		t.Fatalf("after the pause the worker must run again; state %s", s)
	}
	// Its lease is gone: the release deletes nothing.
	if err := p.Release(ctx, lease); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("release after the key lapsed: %v, want ErrNotHeld", err)
	}
}

// A command trap springs inside a worker without any call from its lock:
// the crash at the reply of the SETNX that took the key is a SIGKILL, so
// EXPIRE never leaves, the acquire's outcome is unknown, and the key stays
// in Redis with no TTL.
func TestCommandTrapKillsAWorker(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	p := e.start("setnx-expire", 0, 0, time.Second)
	e.gate.Arm(nemesis.Trap{Client: nemesis.AnyClient, Crash: true,
		Command: &nemesis.Command{In: history.Acquire, Match: "SETNX|SET NX", Reply: true, Succeeded: true}})
	e.gate.Begin(context.Background(), 0, 0, history.Acquire)
	_, err := p.Acquire(ctx, "lock")
	crashed := e.gate.End(0, 0)
	if !crashed || !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("acquire through a killed worker: crashed %v, err %v; want crashed and ErrUnknown", crashed, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for state(t, p.PID()) != "gone" && state(t, p.PID()) != "Z" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := state(t, p.PID()); s != "gone" && s != "Z" {
		t.Fatalf("the killed worker is still there: state %s", s)
	}
	if pttl := e.redis.PTTL(ctx, "lock").Val(); pttl != -1*time.Nanosecond {
		t.Fatalf("PTTL %v: want the key left with no TTL (-1), EXPIRE never sent", pttl)
	}
}

// Errors cross the pipe as the lock and the store returned them.
func TestWorkerErrorsKeepTheirMeaning(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.start("set-nx-px-fenced", 0, 0, time.Second)
	b := e.start("set-nx-px-fenced", 1, 1, time.Second)
	la, err := a.Acquire(ctx, "lock")
	if err != nil || la.Fence == 0 || la.ValidUntil.IsZero() {
		t.Fatalf("acquire: %+v, %v", la, err)
	}
	if _, err := b.Acquire(ctx, "lock"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("second acquire: %v, want ErrNotAcquired", err)
	}
	if err := b.Release(ctx, locks.Lease{Key: "lock", Token: "not-mine"}); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("release of someone else's lock: %v, want ErrNotHeld", err)
	}
	if err := a.Write(ctx, "register", 7, la.Fence); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Read(ctx, "register"); err != nil || v != 7 {
		t.Fatalf("read %d, %v; want 7", v, err)
	}
	if err := b.Write(ctx, "register", 8, la.Fence); !errors.Is(err, workloads.ErrStale) {
		t.Fatalf("write with a used fence: %v, want ErrStale", err)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	// A worker that dies mid-call leaves the outcome unknown.
	_ = syscall.Kill(b.PID(), syscall.SIGKILL)
	if _, err := b.Acquire(ctx, "lock"); !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("acquire through a dead worker: %v, want ErrUnknown", err)
	}
}

// A lock the worker cannot build fails at start, with the worker's reason.
func TestWorkerRefusesAnUnknownLock(t *testing.T) {
	e := newEnv(t)
	_, err := worker.Start(context.Background(), worker.Options{
		Hello: worker.Hello{Lock: "no-such-lock", Nodes: []string{e.node.Addr()}, Store: e.store.Addr(), TTLNS: int64(time.Second)}})
	if err == nil || !strings.Contains(err.Error(), "no-such-lock") {
		t.Fatalf("start with an unknown lock: %v", err)
	}
}

// A worker that cannot start says why in the error, where it wrote that
// on its stdout: a JVM whose working directory is gone writes its error
// there, then a stack, and exits 1.
func TestAWorkerThatCannotStartSaysWhy(t *testing.T) {
	script := `echo "Error occurred during initialization of VM"
echo "java.lang.Error: Properties init: Could not determine current working directory."
for i in 1 2 3 4 5; do echo "	at frame$i"; done
exit 1`
	_, err := worker.Start(context.Background(), worker.Options{
		Command: func(string) *exec.Cmd { return exec.Command("sh", "-c", script) },
		Hello:   worker.Hello{Lock: "curator", TTLNS: int64(time.Second)}})
	if err == nil {
		t.Fatal("a worker that exited at once started")
	}
	want := `worker exited (exit status 1); it wrote "Error occurred during initialization of VM | java.lang.Error: Properties init: Could not determine current working directory. | at frame1 | … at frame5"`
	if !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %q\ndoes not end %q", err, want)
	}
	// Four lines are all kept, and nothing is said to be left out.
	_, err = worker.Start(context.Background(), worker.Options{
		Command: func(string) *exec.Cmd {
			return exec.Command("sh", "-c", "echo one; echo two; echo three; echo four; exit 2")
		},
		Hello: worker.Hello{Lock: "curator", TTLNS: int64(time.Second)}})
	if err == nil || !strings.HasSuffix(err.Error(), `; it wrote "one | two | three | four"`) {
		t.Errorf("four lines: %v", err)
	}
}

// A lock that tells losses tells them across the process boundary: the
// harness's lease from a worker carries a Lost that closes when the
// worker's watchdog fails a renewal, and a lock that does not has none.
func TestAWorkersLeaseLossReachesTheHarness(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	acquire := func(p *worker.Proc, client int, key string) locks.Lease {
		e.gate.Begin(context.Background(), client, client, history.Acquire)
		lease, err := p.Acquire(ctx, key)
		e.gate.End(client, client)
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	if l := acquire(e.start("reentrant", 0, 0, ttl), 0, "quiet"); l.Lost != nil {
		t.Fatal("reentrant's lease from a worker has a Lost: its lock tells nothing")
	}
	l := acquire(e.start("reentrant-lost", 1, 1, ttl), 1, "lock")
	select {
	case <-l.Lost:
		t.Fatal("a live holder's lease was said lost")
	case <-time.After(ttl):
	}
	e.redis.Del(ctx, "lock")
	select {
	case <-l.Lost:
	case <-time.After(3 * time.Second):
		t.Fatal("the worker's watchdog found its key gone and the harness was not told")
	}
}
