package cluster

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// needMariaDB skips a test on a machine without Debian's MariaDB server.
func needMariaDB(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(mariadbBin); err != nil {
		tb.Skip("mariadbd not installed (apt-get install mariadb-server-core mariadb-client-core)")
	}
}

// mariadbDB is a pool on the database locktorture at addr whose reads and
// writes wait up to timeout.
func mariadbDB(tb testing.TB, addr string, timeout time.Duration) *sql.DB {
	tb.Helper()
	conn, err := mysql.NewConnector(mariadbConfig(addr, timeout))
	if err != nil {
		tb.Fatal(err)
	}
	db := sql.OpenDB(conn)
	tb.Cleanup(func() { db.Close() })
	return db
}

// startMariaDB starts a cluster with one MariaDB node per name.
func startMariaDB(tb testing.TB, names ...string) (*Cluster, []*Node) {
	tb.Helper()
	c, err := New(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	var nodes []*Node
	for _, name := range names {
		n, err := c.AddNode(context.Background(), NodeOptions{Name: name, Kind: MariaDBKind.Name})
		if err != nil {
			tb.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	return c, nodes
}

// Two nodes from the one template answer on their own ports, each as our
// own process, and share nothing: a table made on one is not on the other.
func TestMariaDBNodesStartFromTheTemplate(t *testing.T) {
	needMariaDB(t)
	ctx := context.Background()
	_, nodes := startMariaDB(t, "m1", "m2")
	m1, m2 := nodes[0], nodes[1]
	if m1.Addr() == m2.Addr() || m1.Info().Dir == m2.Info().Dir {
		t.Fatalf("two nodes on %s and %s, in %s and %s", m1.Addr(), m2.Addr(), m1.Info().Dir, m2.Info().Dir)
	}
	for _, n := range nodes {
		if info := n.Info(); info.Kind != "mariadb" || info.Persistence != AOFAlways || info.PID == 0 {
			t.Errorf("%s: kind %q, persistence %q, pid %d", n.Name, info.Kind, info.Persistence, info.PID)
		}
		if _, err := mariadbReady(ctx, n.Addr()); err != nil {
			t.Fatalf("%s is not ready: %v", n.Name, err)
		}
		if !listensOn(n.PID(), n.Info().Port) {
			t.Errorf("%s: the socket on port %d is not pid %d's", n.Name, n.Info().Port, n.PID())
		}
		var one int
		if err := mariadbDB(t, n.Addr(), time.Second).QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("%s: SELECT 1 is %d, %v", n.Name, one, err)
		}
	}
	if _, err := mariadbDB(t, m1.Addr(), time.Second).ExecContext(ctx, "CREATE TABLE only_here (k INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	var n int
	err := mariadbDB(t, m2.Addr(), time.Second).QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'locktorture' AND TABLE_NAME = 'only_here'").Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("the second node has %d table(s) the first made (%v)", n, err)
	}
}

// A row committed before a kill -9 is there when the node has started
// again on the same port and dir: InnoDB replays its redo log.
func TestMariaDBRecoversACommitAfterAKill(t *testing.T) {
	needMariaDB(t)
	ctx := context.Background()
	_, nodes := startMariaDB(t, "m1")
	n := nodes[0]
	db := mariadbDB(t, n.Addr(), time.Second)
	for _, q := range []string{"CREATE TABLE kept (k INT PRIMARY KEY, v VARCHAR(16)) ENGINE=InnoDB", "INSERT INTO kept VALUES (1, 'before')"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	pid, addr := n.PID(), n.Addr()
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d alive after Kill", pid)
	}
	if _, err := mariadbReady(ctx, addr); err == nil {
		t.Fatal("a killed server is ready")
	}
	begun := time.Now()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("ready again %v after the kill", time.Since(begun).Round(time.Millisecond))
	if n.Addr() != addr || n.PID() == pid {
		t.Fatalf("started again at %s as %d, was %s as %d", n.Addr(), n.PID(), addr, pid)
	}
	var v string
	if err := mariadbDB(t, n.Addr(), time.Second).QueryRowContext(ctx, "SELECT v FROM kept WHERE k = 1").Scan(&v); err != nil || v != "before" {
		t.Fatalf("the committed row after a kill -9: %q, %v", v, err)
	}
}

// A paused server holds a query on an open connection unanswered; resumed,
// it answers it.
func TestMariaDBPauseHoldsAQuery(t *testing.T) {
	needMariaDB(t)
	ctx := context.Background()
	_, nodes := startMariaDB(t, "m1")
	n := nodes[0]
	conn, err := mariadbDB(t, n.Addr(), 30*time.Second).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var one int
		done <- conn.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}()
	select {
	case err := <-done:
		n.Resume()
		t.Fatalf("a paused server answered: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after resume: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer 10 s after resume")
	}
}

// mariadbd runs under libfaketime, and its NOW() moves with the node's
// clock at once (FAKETIME_NO_CACHE), without a restart.
func TestMariaDBClockMovesNow(t *testing.T) {
	needMariaDB(t)
	if found, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1"); len(found) == 0 {
		t.Skip("libfaketime not installed (apt-get install libfaketime)")
	}
	ctx := context.Background()
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n, err := c.AddNode(ctx, NodeOptions{Name: "m1", Kind: MariaDBKind.Name, Clock: true})
	if err != nil {
		t.Fatal(err)
	}
	db := mariadbDB(t, n.Addr(), time.Second)
	skew := func() time.Duration {
		t.Helper()
		var at float64
		if err := db.QueryRowContext(ctx, "SELECT UNIX_TIMESTAMP(NOW(6))").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return time.Duration(at*float64(time.Second)) - time.Duration(time.Now().UnixNano())
	}
	if d := skew(); d < -time.Minute || d > time.Minute {
		t.Fatalf("NOW() is %v off before the clock moved", d)
	}
	if err := n.SetClockOffset(time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := skew(); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("NOW() is %v off the machine's, want about an hour", d)
	}

	// A named lock's wait counts on the same clock: a waiter of 5 s gives
	// up once the clock has jumped past its deadline (MariaDB looks at it
	// each second of the wait).
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var got int
	if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK('k', 0)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d, %v", got, err)
	}
	waiter := mariadbDB(t, n.Addr(), 30*time.Second)
	done := make(chan error, 1)
	begun := time.Now()
	go func() {
		var got int
		err := waiter.QueryRowContext(ctx, "SELECT GET_LOCK('k', 5)").Scan(&got)
		if err == nil && got != 0 {
			err = fmt.Errorf("GET_LOCK answered %d, want 0 (timed out)", got)
		}
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := n.SetClockOffset(2 * time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("a 5 s GET_LOCK gave up %v in, the clock jumped another hour", time.Since(begun).Round(time.Millisecond))
	case <-time.After(4 * time.Second):
		t.Error("a 5 s GET_LOCK still waits 4 s in, though the clock jumped another hour, past its deadline")
	}
}

// Closing the cluster leaves no mariadbd and no dir behind.
func TestMariaDBCleanupLeavesNothing(t *testing.T) {
	needMariaDB(t)
	c, nodes := startMariaDB(t, "m1")
	n := nodes[0]
	pid, dir := n.PID(), n.Info().Dir
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pids := []int{pid, n.PID()}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if left := survivors(pids, 5*time.Second); len(left) > 0 {
		t.Errorf("mariadbd %v alive after Close", left)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after Close: %v", d, err)
		}
	}
}

// BenchmarkMariaDBStart measures a node's start from the template and its
// return after a kill -9 (idle: go test ./cluster -bench MariaDB
// -benchtime 5x).
func BenchmarkMariaDBStart(b *testing.B) {
	needMariaDB(b)
	ctx := context.Background()
	c, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// The template is made once, before anything is timed.
	if _, err := c.AddNode(ctx, NodeOptions{Name: "warm", Kind: MariaDBKind.Name}); err != nil {
		b.Fatal(err)
	}
	var starts, recoveries []time.Duration
	for i := range b.N {
		begun := time.Now()
		n, err := c.AddNode(ctx, NodeOptions{Name: "m" + string(rune('a'+i%26)), Kind: MariaDBKind.Name})
		if err != nil {
			b.Fatal(err)
		}
		starts = append(starts, time.Since(begun))
		if _, err := mariadbDB(b, n.Addr(), time.Second).ExecContext(ctx, "CREATE TABLE t (k INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
			b.Fatal(err)
		}
		if err := n.Kill(); err != nil {
			b.Fatal(err)
		}
		begun = time.Now()
		if err := n.Start(ctx); err != nil {
			b.Fatal(err)
		}
		recoveries = append(recoveries, time.Since(begun))
		if err := n.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(starts)
	slices.Sort(recoveries)
	b.ReportMetric(float64(starts[len(starts)/2].Milliseconds()), "start-median-ms")
	b.ReportMetric(float64(recoveries[len(recoveries)/2].Milliseconds()), "recovery-median-ms")
	b.Logf("starts from the template: %v; back after a kill -9: %v", starts, recoveries)
}

// BenchmarkMariaDBTemplate measures making the template from nothing, in
// a cache of its own.
func BenchmarkMariaDBTemplate(b *testing.B) {
	needMariaDB(b)
	var took []time.Duration
	for range b.N {
		b.Setenv("LOCKTORTURE_CACHE", b.TempDir())
		begun := time.Now()
		if _, err := mariadbTemplate(b.TempDir()); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(begun))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms")
	b.Logf("templates: %v", took)
}
