package cluster

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// An ensemble starts as one, elects one leader, elects another when the
// leader is killed, and takes the old one back as a follower.
func TestEnsembleFailsOverAndRejoins(t *testing.T) {
	for _, kind := range []struct{ name, binary string }{{"etcd", "etcd"}} {
		t.Run(kind.name, func(t *testing.T) {
			if _, err := exec.LookPath(kind.binary); err != nil {
				t.Skipf("%s not installed (scripts/setup.sh installs it)", kind.binary)
			}
			c, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			began := time.Now()
			nodes, err := c.AddNodes(ctx, []NodeOptions{{Name: "n1", Kind: kind.name}, {Name: "n2", Kind: kind.name}, {Name: "n3", Kind: kind.name}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s ensemble of 3 up in %v", kind.name, time.Since(began).Round(time.Millisecond))
			if _, err := c.AddNode(ctx, NodeOptions{Name: "alone", Kind: kind.name}); err == nil {
				t.Error("a lone member of an ensemble kind was started")
			}
			leader := leaderOf(t, nodes, nil)
			if err := leader.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			next := leaderOf(t, nodes, leader)
			t.Logf("new leader %s after %v", next.Name, time.Since(killed).Round(time.Millisecond))
			if err := leader.Start(ctx); err != nil {
				t.Fatalf("the old leader does not rejoin: %v", err)
			}
			if role, err := leader.Role(ctx); err != nil || role != "follower" {
				t.Fatalf("the old leader came back as %q (%v), want follower", role, err)
			}
		})
	}
}

// leaderOf waits (5 s at most) until exactly one live node other than
// gone says it leads.
func leaderOf(t *testing.T, nodes []*Node, gone *Node) *Node {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var leaders []*Node
		for _, n := range nodes {
			if n == gone {
				continue
			}
			if role, err := n.Role(context.Background()); err == nil && role == "leader" {
				leaders = append(leaders, n)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leaders after 5 s", len(leaders))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
