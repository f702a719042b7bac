package locks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// waitPair is a master and its replica, replicating through the
// replica's own link, and a set-nx-px-wait handle on the master.
type waitPair struct {
	master, replica *cluster.Node
	// admin reaches each node straight, not through a link.
	masterAdmin, replicaAdmin *redis.Client
	lock                      locks.Lock
}

func newWaitPair(t *testing.T, cfg locks.Config) *waitPair {
	t.Helper()
	ctx := context.Background()
	cl, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	master, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	replica, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.ReplicaOf(ctx, master); err != nil {
		t.Fatal(err)
	}
	p := &waitPair{master: master, replica: replica,
		masterAdmin:  cluster.NewClient(master.Addr(), cluster.ClientOptions{}),
		replicaAdmin: cluster.NewClient(replica.Addr(), cluster.ClientOptions{}),
	}
	t.Cleanup(func() { p.masterAdmin.Close(); p.replicaAdmin.Close() })
	// The lock's own connection to the master, as the harness dials it
	// (500 ms read timeout, no retries).
	own := cluster.NewClient(master.Addr(), cluster.ClientOptions{})
	t.Cleanup(func() { own.Close() })
	cfg.Clients = []redis.UniversalClient{own}
	if p.lock, err = locks.New("set-nx-px-wait", cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

// With its replica replicating, the lock is granted, and the replica has
// the holder's token the moment Acquire returns: WAIT confirmed it.
func TestWaitLockIsOnTheReplicaWhenAcquired(t *testing.T) {
	ctx := context.Background()
	p := newWaitPair(t, locks.Config{Owner: "a:1", TTL: 5 * time.Second})
	for i := range 20 {
		lease, err := p.lock.Acquire(ctx, "k")
		if err != nil {
			t.Fatalf("acquire %d with a live replica: %v", i, err)
		}
		if got, err := p.replicaAdmin.Get(ctx, "k").Result(); err != nil || got != lease.Token {
			t.Fatalf("acquire %d: the replica has %q (%v) right after, want the lease's token %q", i, got, err, lease.Token)
		}
		if err := p.lock.Release(ctx, lease); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// With replication cut (the master still counts its replica as
// connected), no replica acknowledges the SET: as Redisson, the lock
// deletes its key again, tries again a few times, and then fails, well
// before its wait runs out; the master keeps no key, and a lease that
// was never confirmed is never handed out.
func TestWaitLockGivesUpAndLeavesNoKeyWhenReplicationIsCut(t *testing.T) {
	ctx := context.Background()
	wait := 5 * time.Second
	p := newWaitPair(t, locks.Config{Owner: "a:1", TTL: time.Second, Wait: wait})
	l, err := p.master.Link(cluster.ReplicationPeer(p.replica.Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lease, err := p.lock.Acquire(ctx, "k")
	took := time.Since(start)
	if err == nil {
		t.Fatalf("acquired %+v with replication cut: no replica can have acknowledged it", lease)
	}
	if !errors.Is(err, locks.ErrNotAcquired) || errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("want a definite ErrNotAcquired, got %v", err)
	}
	if !strings.Contains(err.Error(), "acknowledged") {
		t.Errorf("want the error to say no replica acknowledged the lock, got %v", err)
	}
	// Five attempts of a 100 ms WAIT each: it gave up on the attempts,
	// as Redisson's retryAttempts does, not on the 5 s wait.
	if took >= wait {
		t.Errorf("gave up after %v, the whole wait: want after the retries", took)
	}
	if n, err := p.masterAdmin.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("the master still has the lock key after the failed acquire (exists %d, %v)", n, err)
	}
	if n, err := p.replicaAdmin.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("the cut-off replica has the key (exists %d, %v)", n, err)
	}
}

// A master that counts no replica (the replica gone, or the master just
// promoted) is sent no WAIT, as Redisson sends none: once the lock has
// learnt the count again (its WAIT 1 answered 0, so it reads INFO), it
// takes the lock unconfirmed.
func TestWaitLockWithoutReplicasTakesTheLockUnconfirmed(t *testing.T) {
	ctx := context.Background()
	p := newWaitPair(t, locks.Config{Owner: "a:1", TTL: 5 * time.Second, Wait: 2 * time.Second})
	// The lock counts one replica.
	lease, err := p.lock.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.lock.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	// The replica leaves: the master counts none at once.
	if _, err := p.replica.Do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := p.masterAdmin.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the master still counts its replica: %v %s", err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lease, err = p.lock.Acquire(ctx, "k"); err != nil {
		t.Fatalf("a master with no replicas: want the lock unconfirmed, got %v", err)
	}
	if got, _ := p.masterAdmin.Get(ctx, "k").Result(); got != lease.Token {
		t.Fatalf("the master has %q, want the lease's token", got)
	}
	if got, _ := p.replicaAdmin.Get(ctx, "k").Result(); got == lease.Token {
		t.Fatal("the detached replica has the new lease: the test did not cut it off")
	}
}
