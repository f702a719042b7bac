package services

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktorture/locktorture/locks"
)

// The lock survives a change of leader while it is held; fences increase;
// a holder cut off from the cluster loses its lease to the next client,
// whose token is greater.
func TestEtcdLockSurvivesItsLeaderAndNotACutOffHolder(t *testing.T) {
	b := start(t, "etcd-fenced", "etcd")
	c1, c2, lease := holding(t, b)
	ctx := context.Background()
	var leader int
	for i, n := range b.nodes {
		if role, _ := n.Role(ctx); role == "leader" {
			leader = i
		}
	}
	if err := b.nodes[leader].Kill(); err != nil {
		t.Fatal(err)
	}
	// A new leader is elected; the holder's key is on the quorum.
	deadline := time.Now().Add(5 * time.Second)
	for changed := false; !changed; {
		for i, n := range b.nodes {
			if role, _ := n.Role(ctx); i != leader && role == "leader" {
				changed = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c2.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("the lock was lost with the leader: %v", err)
	}
	if err := c1.Release(ctx, lease); err != nil {
		t.Fatalf("the holder's release under the new leader: %v", err)
	}

	first, err := c1.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if first.Fence <= lease.Fence {
		t.Fatalf("fence %d after %d", first.Fence, lease.Fence)
	}
	b.cut("c1")
	c2 = b.lock("c2", 0)
	var second locks.Lease
	for deadline := time.Now().Add(4 * time.Second); ; {
		if second, err = c2.Acquire(ctx, "k"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off holder's lease did not lapse: %v", err)
		}
	}
	if second.Fence <= first.Fence {
		t.Fatalf("the next holder's fence %d is not above %d", second.Fence, first.Fence)
	}
	if err := c2.Release(ctx, second); err != nil {
		t.Fatal(err)
	}
}
