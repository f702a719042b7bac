package library_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library/java"
	"github.com/locktorture/locktorture/worker"
	"github.com/locktorture/locktorture/workloads"
)

// zkSession is the workers' session timeout in these tests: the shortest
// the libraries are run with.
const zkSession = time.Second

// Curator's and kazoo's real workers on a real three-member ensemble, one
// ensemble for every case since each JVM start costs seconds: each sorts
// its library's answers (a second client refused, a released lease
// released again not-held); a holder stopped (SIGSTOP) past its session
// loses its node to the next waiter, which the fenced variant's store
// then tells by refusing the woken holder's stale token; and the listener
// variant tells its woken holder the lease is lost, so a careful holder
// withholds its write.
func TestZooKeeperLibrariesWorkers(t *testing.T) {
	nodes, store := zkEnsemble(t)
	for _, lib := range []string{"curator", "kazoo"} {
		t.Run(lib, func(t *testing.T) {
			needLibrary(t, lib)
			ctx := context.Background()
			a, b := zkWorker(t, lib+"-fenced", nodes, store, "a"), zkWorker(t, lib+"-fenced", nodes, store, "b")
			key := lib
			la, err := a.Acquire(ctx, key)
			is(t, "first acquire", err, nil)
			if la.Fence <= 0 {
				t.Fatalf("fenced lease without a fence: %+v", la)
			}
			_, err = b.Acquire(ctx, key)
			is(t, "acquire while a holds", err, locks.ErrNotAcquired)
			is(t, "release", a.Release(ctx, la), nil)
			is(t, "release again", a.Release(ctx, la), locks.ErrNotHeld)

			la, err = a.Acquire(ctx, key)
			is(t, "acquire before the pause", err, nil)
			is(t, "a's write", a.Write(ctx, "register-"+lib, 1, la.Fence), nil)
			stop(t, a, 3*time.Second, func() {
				// The ensemble expires a's session a session after it
				// fell silent; b's waits of half a session try until then.
				var lb locks.Lease
				var err error
				for try := 0; try < 4; try++ {
					if lb, err = b.Acquire(ctx, key); !errors.Is(err, locks.ErrNotAcquired) {
						break
					}
				}
				is(t, "acquire while a is stopped past its session", err, nil)
				if lb.Fence <= la.Fence {
					t.Fatalf("fence went from %d to %d", la.Fence, lb.Fence)
				}
				is(t, "b's write", b.Write(ctx, "register-"+lib, 2, lb.Fence), nil)
			})
			is(t, "the woken holder's stale write", a.Write(ctx, "register-"+lib, 3, la.Fence), workloads.ErrStale)

			l := zkWorker(t, lib+"-listener", nodes, store, "l")
			ll, err := l.Acquire(ctx, key+"-listened")
			is(t, "listener's acquire", err, nil)
			if ll.Lost == nil {
				t.Fatal("the listener's lease says it cannot tell a loss")
			}
			stop(t, l, 2500*time.Millisecond, func() {})
			select {
			case <-ll.Lost:
			case <-time.After(5 * time.Second):
				t.Fatal("the listener's holder, stopped past its session, was not told its lease is lost")
			}
		})
	}
}

// stop stops w with SIGSTOP for d, doing meanwhile while it is stopped,
// then lets it go on.
func stop(t *testing.T, w *worker.Proc, d time.Duration, meanwhile func()) {
	t.Helper()
	if err := syscall.Kill(w.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(d)
	meanwhile()
	time.Sleep(time.Until(until))
	if err := syscall.Kill(w.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// needLibrary skips on a machine without what lib's worker runs on:
// Curator's jars and a JDK, or kazoo and redis-py for Debian's python3.
func needLibrary(t *testing.T, lib string) {
	t.Helper()
	if lib == "curator" {
		if _, err := exec.LookPath("javac"); err != nil {
			t.Skip("javac not installed (make setup)")
		}
		for _, jar := range java.CuratorClasspath {
			if _, err := os.Stat(jar); err != nil {
				t.Skipf("Curator not installed (make setup): %v", err)
			}
		}
		return
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import kazoo, redis").Run(); err != nil {
		t.Skipf("python3-kazoo or python3-redis not installed (make setup): %v", err)
	}
}

// zkEnsemble starts a three-member ensemble and a store, skipping on a
// machine without java or Debian's ZooKeeper.
func zkEnsemble(t *testing.T) ([]*cluster.Node, *cluster.Node) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java not installed (make setup)")
	}
	for _, p := range cluster.ZooKeeperJars {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("zookeeper not installed (make setup): %v", err)
		}
	}
	c, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var o []cluster.NodeOptions
	for _, n := range []string{"z1", "z2", "z3"} {
		o = append(o, cluster.NodeOptions{Name: n, Kind: cluster.ZooKeeperKind.Name})
	}
	nodes, err := c.AddNodes(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	store, err := c.AddNode(context.Background(), cluster.NodeOptions{Name: "store"})
	if err != nil {
		t.Fatal(err)
	}
	return nodes, store
}

// zkWorker starts one worker of lock, a client of the ensemble named
// owner.
func zkWorker(t *testing.T, lock string, nodes []*cluster.Node, store *cluster.Node, owner string) *worker.Proc {
	t.Helper()
	hello := worker.Hello{Lock: lock, Store: store.Addr(), TTLNS: int64(zkSession), WaitNS: int64(zkSession / 2), Owner: owner,
		StoreTimeoutNS: int64(time.Second)}
	for _, n := range nodes {
		hello.Nodes = append(hello.Nodes, n.Addr())
	}
	return startWorker(t, hello, worker.Options{})
}
