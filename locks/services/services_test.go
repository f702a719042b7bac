package services

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
)

// info is the registered Info of the named lock of this package.
func info(t *testing.T, name string) locks.Info {
	t.Helper()
	var found *locks.Info
	for _, f := range families {
		f(func(i locks.Info) {
			if i.Name == name {
				found = &i
			}
		})
	}
	if found == nil {
		t.Fatalf("no lock %s", name)
	}
	if found.Nodes == 0 {
		found.Nodes = 1
	}
	return *found
}

// bench is a real server (or ensemble) of a lock's kind, and its clients'
// links.
type bench struct {
	t     *testing.T
	cl    *cluster.Cluster
	nodes []*cluster.Node
	info  locks.Info
}

// start starts the nodes lock's Info asks for; it skips when the
// server's binary is not installed, which scripts/setup.sh installs.
func start(t *testing.T, lock string, binary string) *bench {
	t.Helper()
	if _, err := exec.LookPath(binary); err != nil {
		t.Skipf("%s not installed (scripts/setup.sh installs it)", binary)
	}
	in := info(t, lock)
	cl, err := cluster.New(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	var opts []cluster.NodeOptions
	for i := range in.Nodes {
		opts = append(opts, cluster.NodeOptions{Name: "n" + string(rune('1'+i)), Kind: in.ServerKind()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := cl.AddNodes(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &bench{t: t, cl: cl, nodes: nodes, info: in}
}

// lock is client peer's handle, dialling its own links.
func (b *bench) lock(peer string, ttl time.Duration) locks.Lock {
	b.t.Helper()
	cfg := locks.Config{TTL: max(ttl, b.info.MinTTL), Wait: 50 * time.Millisecond}
	for _, n := range b.nodes {
		l, err := n.Link(peer)
		if err != nil {
			b.t.Fatal(err)
		}
		cfg.Addrs = append(cfg.Addrs, l.Addr())
	}
	lk, err := locks.Build(b.info, cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	if c, ok := lk.(interface{ Close() error }); ok {
		b.t.Cleanup(func() { _ = c.Close() })
	}
	return lk
}

// cut cuts peer off from every node.
func (b *bench) cut(peer string) {
	b.t.Helper()
	for _, n := range b.nodes {
		l, err := n.Link(peer)
		if err != nil {
			b.t.Fatal(err)
		}
		if err := l.Cut(); err != nil {
			b.t.Fatal(err)
		}
	}
}

// exclusive checks that a second client cannot take a lock the first
// holds, and can once it is released.
func exclusive(t *testing.T, a, b locks.Lock) {
	t.Helper()
	ctx := context.Background()
	lease, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if _, err := b.Acquire(ctx, "k"); err != locks.ErrNotAcquired {
		t.Fatalf("second acquire while held: %v, want ErrNotAcquired", err)
	}
	if err := a.Release(ctx, lease); err != nil {
		t.Fatalf("release: %v", err)
	}
	lease, err = b.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if err := b.Release(ctx, lease); err != nil {
		t.Fatalf("second release: %v", err)
	}
}

// holding is two clients of b's lock, each shown to exclude the other,
// the first holding "k".
func holding(t *testing.T, b *bench) (c1, c2 locks.Lock, lease locks.Lease) {
	t.Helper()
	c1, c2 = b.lock("c1", 0), b.lock("c2", 0)
	exclusive(t, c1, c2)
	lease, err := c1.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	return c1, c2, lease
}

// releasedWithItsSession: a session lock of b's is freed when the
// holder's connection closes: another client has it at once, and the dead
// session's release is unknown (the server may not have noticed yet).
func releasedWithItsSession(t *testing.T, b *bench) {
	t.Helper()
	c1, c2, lease := holding(t, b)
	ctx := context.Background()
	if err := c1.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := c2.Acquire(ctx, "k")
		if err == nil {
			if err := c2.Release(ctx, got); err != nil {
				t.Fatalf("the new holder's release: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock outlived its session: %v", err)
		}
	}
	if err := c1.Release(ctx, lease); !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("a release on a dead session: %v, want ErrUnknown", err)
	}
}
