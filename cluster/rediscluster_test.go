package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis Cluster forms and its client finds a key's master through the
// peer's own links. The key's slot moves while the key lives in it: the
// client follows ASK while it migrates and MOVED after, and the key keeps
// its time to live. A command cut off on the way is reported once, not
// sent again. When the slot's master dies its replica takes over and the
// client follows. One cluster for all of it: forming one takes 2 s.
func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	rc, err := c.AddRedisCluster(ctx, RedisClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("formed in %s", time.Since(start).Round(time.Millisecond))
	cl := rc.Client("c1", ClientOptions{})
	defer cl.Close()

	from, _, err := rc.Owner(ctx, "lock")
	if err != nil {
		t.Fatal(err)
	}
	to := rc.Masters[0]
	if to == from {
		to = rc.Masters[1]
	}
	slot, err := rc.Slot(ctx, "lock")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Set(ctx, "lock", "held", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := from.Do(ctx, "GET", "lock"); err != nil || got != "held" {
		t.Fatalf("the key is not on %s, its slot's master: %v %v", from.Name, got, err)
	}
	if err := rc.MigrateStart(ctx, slot, from, to); err != nil {
		t.Fatal(err)
	}
	// An absent key of the slot is the target's now: ASK.
	if err := cl.Set(ctx, "{lock}:other", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := from.Do(ctx, "GET", "{lock}:other"); err == nil || !strings.HasPrefix(err.Error(), "ASK ") {
		t.Fatalf("the source answers for a key it sent elsewhere: %v", err)
	}
	moved, err := rc.MigrateFinish(ctx, slot, from, to)
	if err != nil || moved != 1 {
		t.Fatalf("MigrateFinish moved %d keys, %v: want the one left on %s", moved, err, from.Name)
	}
	if got, err := cl.Get(ctx, "lock").Result(); err != nil || got != "held" {
		t.Fatalf("after the move: %q %v", got, err)
	}
	if ttl, err := cl.PTTL(ctx, "lock").Result(); err != nil || ttl < 5*time.Second {
		t.Fatalf("the key lost its time to live on the move: %s %v", ttl, err)
	}
	if _, err := from.Do(ctx, "GET", "lock"); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("the source still answers for the slot: %v", err)
	}
	master, replica, err := rc.Owner(ctx, "lock")
	if err != nil || master != to {
		t.Fatalf("Owner after the move: %v %v, want %s", master, err, to.Name)
	}

	// The client's traffic crosses its own link: cut, the SET fails once
	// with an unknown outcome, and is not sent again.
	l, err := master.Link("c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	err = cl.Set(ctx, "lock", "v2", 0).Err()
	var sent errSentOnce
	if err == nil || !errors.As(err, &sent) && !isDialErr(err) {
		t.Fatalf("a cut link: want a transport error, got %v", err)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for !rc.Promoted(ctx, replica) {
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("%s was not promoted within 15s", replica.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("promoted %s %s after the kill", replica.Name, time.Since(killed).Round(time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := cl.Set(ctx, "lock", "v3", 0).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client did not follow the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := replica.Do(ctx, "GET", "lock"); err != nil || got != "v3" {
		t.Fatalf("the write did not land on the promoted %s: %v %v", replica.Name, got, err)
	}
	if m, _, err := rc.Owner(ctx, "lock"); err != nil || m != replica {
		t.Fatalf("Owner after the failover: %v %v, want %s", m, err, replica.Name)
	}
	if _, err := cl.Get(ctx, "nothing").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("a missing key: %v", err)
	}
}

func isDialErr(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
