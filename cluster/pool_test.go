package cluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
)

// leftBehind is what a run's clients leave in a server of one kind, with
// a session still open as a killed worker's would be until its server
// notices, and how to see from a new session that it is there.
type leftBehind struct {
	kind, binary string
	members      int
	// leave writes through a session it keeps open until end is called.
	leave func(ctx context.Context, t *testing.T, addr string) (end func())
	// found says what of it a new session still finds ("" for nothing).
	found func(ctx context.Context, t *testing.T, addr string) string
}

// Every kind with a reset: what clients left (keys with and without
// leases, znodes ephemeral and not, tables, a lock held by a session
// still open) is there before Reset, and gone after it, on every member.
func TestResetEmptiesWhatClientsLeft(t *testing.T) {
	for _, k := range []leftBehind{redisLeft, zooKeeperLeft, etcdLeft, postgresLeft, mariadbLeft} {
		t.Run(k.kind, func(t *testing.T) {
			if _, err := exec.LookPath(k.binary); err != nil {
				t.Skipf("%s not installed (scripts/setup.sh installs it)", k.binary)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var opts []NodeOptions
			for i := 1; i <= k.members; i++ {
				opts = append(opts, NodeOptions{Name: fmt.Sprintf("n%d", i), Kind: k.kind})
			}
			nodes, err := c.AddNodes(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			end := k.leave(ctx, t, nodes[0].Addr())
			defer end()
			// A client's link, which Reset must close.
			l, err := nodes[0].Link("c0")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				if got := k.found(ctx, t, n.Addr()); got == "" {
					t.Fatalf("%s: nothing found of what was left: the check cannot fail", n.Name)
				}
			}
			if err := c.Reset(ctx); err != nil {
				t.Fatalf("reset: %v", err)
			}
			for _, n := range nodes {
				if got := k.found(ctx, t, n.Addr()); got != "" {
					t.Errorf("%s after the reset: %s", n.Name, got)
				}
			}
			if dials(l.Addr()) {
				t.Error("the client's link still accepts after the reset")
			}
		})
	}
}

var redisLeft = leftBehind{kind: "redis", binary: "redis-server", members: 1,
	leave: func(ctx context.Context, t *testing.T, addr string) func() {
		c := NewClient(addr, ClientOptions{})
		for _, cmd := range [][]any{{"SET", "lock", "me", "PX", 60000}, {"SET", "register", 7}, {"SCRIPT", "LOAD", "return 1"}} {
			if err := c.Do(ctx, cmd...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		return func() { c.Close() }
	},
	found: func(ctx context.Context, t *testing.T, addr string) string {
		c := NewClient(addr, ClientOptions{})
		defer c.Close()
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		scripts, err := c.ScriptExists(ctx, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 || scripts[0] {
			return fmt.Sprintf("%d keys, script loaded %v", n, scripts[0])
		}
		return ""
	}}

var zooKeeperLeft = leftBehind{kind: "zookeeper", binary: "java", members: 3,
	leave: func(ctx context.Context, t *testing.T, addr string) func() {
		c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(zooKeeperQuiet{}), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		acl := zk.WorldACL(zk.PermAll)
		for _, p := range []struct {
			path  string
			flags int32
		}{{"/locks", 0}, {"/locks/key", 0}, {"/locks/key/lock-", zk.FlagEphemeral | zk.FlagSequence}} {
			if _, err := c.Create(p.path, nil, p.flags, acl); err != nil {
				t.Fatalf("create %s: %v", p.path, err)
			}
		}
		return c.Close
	},
	found: func(ctx context.Context, t *testing.T, addr string) string {
		c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(zooKeeperQuiet{}), zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Sync("/"); err != nil {
			t.Fatal(err)
		}
		children, _, err := c.Children("/")
		if err != nil {
			t.Fatal(err)
		}
		if len(children) != 1 {
			return fmt.Sprintf("znodes under /: %v", children)
		}
		return ""
	}}

var etcdLeft = leftBehind{kind: "etcd", binary: "etcd", members: 3,
	leave: func(ctx context.Context, t *testing.T, addr string) func() {
		var lease struct {
			ID string `json:"ID"`
		}
		if err := etcdPost(ctx, addr, "/v3/lease/grant", `{"TTL":60}`, &lease); err != nil {
			t.Fatal(err)
		}
		// "lock/key" held on the lease, "register" on none.
		for _, put := range []string{fmt.Sprintf(`{"key":"bG9jay9rZXk=","value":"bWU=","lease":%q}`, lease.ID), `{"key":"cmVnaXN0ZXI=","value":"Nw=="}`} {
			if err := etcdPost(ctx, addr, "/v3/kv/put", put, nil); err != nil {
				t.Fatal(err)
			}
		}
		return func() {}
	},
	found: func(ctx context.Context, t *testing.T, addr string) string {
		var count struct {
			Count string `json:"count"`
		}
		if err := etcdPost(ctx, addr, "/v3/kv/range", "{"+etcdEveryKey+`,"count_only":true}`, &count); err != nil {
			t.Fatal(err)
		}
		var leases struct {
			Leases []struct{} `json:"leases"`
		}
		if err := etcdPost(ctx, addr, "/v3/lease/leases", `{}`, &leases); err != nil {
			t.Fatal(err)
		}
		if count.Count != "" && count.Count != "0" || len(leases.Leases) > 0 {
			return fmt.Sprintf("%s keys, %d leases", count.Count, len(leases.Leases))
		}
		return ""
	}}

var postgresLeft = leftBehind{kind: "postgres", binary: postgresBin + "postgres", members: 1,
	leave: func(ctx context.Context, t *testing.T, addr string) func() {
		c, err := pgx.Connect(ctx, postgresDSN(addr))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`CREATE TABLE leases (key text PRIMARY KEY, owner text)`, `INSERT INTO leases VALUES ('key', 'me')`,
			`SELECT pg_advisory_lock(42)`} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		return func() { c.Close(context.Background()) }
	},
	found: func(ctx context.Context, t *testing.T, addr string) string {
		c, err := pgx.Connect(ctx, postgresDSN(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var relations int
		var free bool
		if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace), pg_try_advisory_lock(42)`).Scan(&relations, &free); err != nil {
			t.Fatal(err)
		}
		if relations != 0 || !free {
			return fmt.Sprintf("%d relations in public, advisory lock free %v", relations, free)
		}
		return ""
	}}

var mariadbLeft = leftBehind{kind: "mariadb", binary: "mariadbd", members: 1,
	leave: func(ctx context.Context, t *testing.T, addr string) func() {
		db := mariadbDB(t, addr, 5*time.Second)
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`CREATE TABLE leases (k VARCHAR(64) PRIMARY KEY, owner TEXT)`, `INSERT INTO leases VALUES ('key', 'me')`,
			`DO GET_LOCK('key', 0)`} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		return func() { c.Close() }
	},
	found: func(ctx context.Context, t *testing.T, addr string) string {
		db := mariadbDB(t, addr, 5*time.Second)
		var tables, free int
		q := `SELECT (SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'locktorture'), IS_FREE_LOCK('key')`
		if err := db.QueryRowContext(ctx, q).Scan(&tables, &free); err != nil {
			t.Fatal(err)
		}
		if tables != 0 || free != 1 {
			return fmt.Sprintf("%d tables, lock free %d", tables, free)
		}
		return ""
	}}

// A pool keeps a healthy cluster for its key and hands it back once,
// reset; it refuses a cluster whose node took a fault or an admin
// command, closing it; it keeps no more than its size, closing the
// oldest; it does not hand out a cluster whose server died while kept;
// it keeps no more of a key than the runs to come want; and Close closes
// what it keeps.
func TestPoolKeepsOnlyWhatNoFaultTouched(t *testing.T) {
	ctx := context.Background()
	start := func() *Cluster {
		c, err := Start(ctx, Options{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	p := NewPool(2)
	defer p.Close()

	a := start()
	if err := p.Put(ctx, "k", "first/run", a); err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Take(ctx, "other"); c != nil {
		t.Fatal("a cluster kept for k was handed out for another key")
	}
	if c, from := p.Take(ctx, "k"); c != a || from != "first/run" {
		t.Fatalf("took %p from %q, want the kept %p from first/run", c, from, a)
	}
	if c, _ := p.Take(ctx, "k"); c != nil {
		t.Fatal("a kept cluster was handed out twice")
	}

	paused := start()
	if err := paused.Node("n1").Pause(); err != nil {
		t.Fatal(err)
	}
	if err := paused.Node("n1").Resume(); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(ctx, "k", "paused/run", paused); err == nil || !strings.Contains(err.Error(), "pause") || !paused.closed() {
		t.Fatalf("a paused and resumed node: Put said %v, closed %v; want refused as paused, and closed", err, paused.closed())
	}
	configured := start()
	if _, err := configured.Node("n1").Do(ctx, "CONFIG", "SET", "maxmemory", "1mb"); err != nil {
		t.Fatal(err)
	}
	if err := p.Put(ctx, "k", "config/run", configured); err == nil || !strings.Contains(err.Error(), "admin") || !configured.closed() {
		t.Fatalf("a node given CONFIG SET: Put said %v, closed %v; want refused, and closed", err, configured.closed())
	}

	oldest, died, latest := start(), start(), start()
	for _, c := range []*Cluster{oldest, died, latest} {
		if err := p.Put(ctx, "k", "run", c); err != nil {
			t.Fatal(err)
		}
	}
	if !oldest.closed() || died.closed() || latest.closed() {
		t.Fatalf("a pool of 2 given 3: closed %v %v %v, want the oldest only", oldest.closed(), died.closed(), latest.closed())
	}
	// Killed behind the cluster's back, as a crash would: no fault is
	// recorded, and the pool must see it does not answer.
	pid := died.Node("n1").PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if c, _ := p.Take(ctx, "k"); c != latest {
		t.Fatal("the latest kept cluster was not handed out first")
	}
	if c, _ := p.Take(ctx, "k"); c != nil || !died.closed() {
		t.Fatalf("a kept cluster whose server died: handed out %v, closed %v; want closed instead", c != nil, died.closed())
	}

	// Two runs of w to come: the first's servers are kept for the
	// second, the second's closed.
	p.Want("w", 2)
	if c, _ := p.Take(ctx, "w"); c != nil {
		t.Fatal("a cluster of w before any was kept")
	}
	first := start()
	if err := p.Put(ctx, "w", "run", first); err != nil || first.closed() {
		t.Fatalf("servers one more run wants: Put said %v, closed %v", err, first.closed())
	}
	if c, _ := p.Take(ctx, "w"); c != first {
		t.Fatal("the wanted cluster was not handed out")
	}
	if err := p.Put(ctx, "w", "run", first); err == nil || !first.closed() {
		t.Fatalf("servers no run wants: Put said %v, closed %v; want refused, and closed", err, first.closed())
	}

	kept := start()
	if err := p.Put(ctx, "k", "run", kept); err != nil {
		t.Fatal(err)
	}
	p.Close()
	late := start()
	if !kept.closed() || p.Put(ctx, "k", "run", late) == nil || !late.closed() {
		t.Fatalf("after Close: kept closed %v, a Put's cluster closed %v; want both closed", kept.closed(), late.closed())
	}
}

// dials says whether addr accepts a TCP connection.
func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err == nil {
		c.Close()
	}
	return err == nil
}
