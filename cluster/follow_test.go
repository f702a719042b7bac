package cluster

import (
	"context"
	"testing"
	"time"
)

// A follower's connections reach the master of the moment they are
// accepted, through the peer's own link: a cut link cuts them, a promotion
// moves only the connections opened after it.
func TestFollowerReachesTheMasterOfTheMoment(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, b := c.Node("n1"), c.Node("n2")
	p := NewPrimary(a)
	f, err := c.Follow("c1", func(context.Context) (*Node, error) { return p.Node(), nil })
	if err != nil {
		t.Fatal(err)
	}
	before := NewClient(f.Addr(), ClientOptions{PoolSize: 1})
	defer before.Close()
	if err := before.Set(ctx, "k", "on n1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.node = b // a promotion by hand, without REPLICAOF: only the target moves
	p.mu.Unlock()
	after := NewClient(f.Addr(), ClientOptions{PoolSize: 1})
	defer after.Close()
	if err := after.Set(ctx, "k", "on n2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := before.Set(ctx, "k2", "still n1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[*Node][2]string{a: {"on n1", "still n1"}, b: {"on n2", ""}} {
		got, _ := node.Do(ctx, "GET", "k")
		got2, _ := node.Do(ctx, "GET", "k2")
		if got != want[0] || (want[1] != "" && got2 != want[1]) {
			t.Fatalf("%s holds k=%v k2=%v, want %q %q", node.Name, got, got2, want[0], want[1])
		}
	}
	l, err := b.Link("c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	cut := NewClient(f.Addr(), ClientOptions{PoolSize: 1, Timeout: 200 * time.Millisecond})
	defer cut.Close()
	if err := cut.Ping(ctx).Err(); err == nil {
		t.Fatal("the peer's link to the master is cut, and a connection through the follower still answered")
	}
}
