package services

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktorture/locktorture/locks"
)

const mariadbServer = "/usr/sbin/mariadbd"

// mysqlClient is client peer's handle on b's lock with its own wait (the
// bench's clients wait 50 ms).
func mysqlClient(b *bench, peer string, wait time.Duration) locks.Lock {
	b.t.Helper()
	l, err := b.nodes[0].Link(peer)
	if err != nil {
		b.t.Fatal(err)
	}
	lk, err := locks.Build(b.info, locks.Config{TTL: time.Second, Wait: wait, Addrs: []string{l.Addr()}})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = lk.(interface{ Close() error }).Close() })
	return lk
}

// mysqlSession is a session of its own on b's node, through peer's link.
func mysqlSession(b *bench, peer string) *sql.Conn {
	b.t.Helper()
	l, err := b.nodes[0].Link(peer)
	if err != nil {
		b.t.Fatal(err)
	}
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", l.Addr(), mysqlDatabase
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	c.InterpolateParams = true
	conn, err := mysql.NewConnector(c)
	if err != nil {
		b.t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	b.t.Cleanup(func() { db.Close() })
	s, err := db.Conn(context.Background())
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { s.Close() })
	return s
}

// The server answers as the locks' comments say: GET_LOCK's fractional
// and negative timeouts, RELEASE_LOCK's 0 and NULL, the error numbers the
// locks sort by, a lock wait timeout rolling back its statement only, and
// a sequence's value kept through a rollback.
func TestMySQLServerAnswersAsTheLocksRead(t *testing.T) {
	b := start(t, "mysql-row", mariadbServer)
	ctx := context.Background()
	s1, s2 := mysqlSession(b, "p1"), mysqlSession(b, "p2")
	one := func(s *sql.Conn, q string, args ...any) sql.NullFloat64 {
		t.Helper()
		var v sql.NullFloat64
		if err := s.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	errno := func(err error) uint16 {
		t.Helper()
		if n := mysqlErrno(err); n != 0 {
			return n
		}
		t.Fatalf("not the server's answer: %v", err)
		return 0
	}
	var version string
	if err := s1.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s", version)

	// GET_LOCK: 1, then 0 for another session after a fractional wait;
	// a negative wait is NULL, not forever.
	if v := one(s1, "SELECT GET_LOCK('probe', 0)"); v.Float64 != 1 {
		t.Fatalf("GET_LOCK on a free name: %v", v)
	}
	began := time.Now()
	if v := one(s2, "SELECT GET_LOCK(?, ?)", "probe", 0.3); !v.Valid || v.Float64 != 0 {
		t.Fatalf("GET_LOCK of a held name: %v, want 0", v)
	}
	waited := time.Since(began)
	t.Logf("GET_LOCK(name, 0.3) on a held name waited %v", waited)
	if waited < 250*time.Millisecond || waited > 900*time.Millisecond {
		t.Errorf("GET_LOCK(name, 0.3) waited %v: the fraction is not honoured", waited)
	}
	began = time.Now()
	if v := one(s2, "SELECT GET_LOCK('probe', -1)"); v.Valid {
		t.Errorf("GET_LOCK(name, -1): %v, want NULL", v)
	}
	t.Logf("GET_LOCK(name, -1) on a held name: NULL after %v", time.Since(began))
	if v := one(s2, "SELECT RELEASE_LOCK('probe')"); !v.Valid || v.Float64 != 0 {
		t.Errorf("RELEASE_LOCK of another session's lock: %v, want 0", v)
	}
	if v := one(s1, "SELECT RELEASE_LOCK('probe')"); v.Float64 != 1 {
		t.Errorf("RELEASE_LOCK of its own lock: %v, want 1", v)
	}
	if v := one(s1, "SELECT RELEASE_LOCK('probe')"); v.Valid {
		t.Errorf("RELEASE_LOCK of nobody's lock: %v, want NULL", v)
	}

	// The lock table's duplicate key.
	if _, err := s1.ExecContext(ctx, createLockRows); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.ExecContext(ctx, insertLockRow, "probe", "a"); err != nil {
		t.Fatal(err)
	}
	_, err := s2.ExecContext(ctx, insertLockRow, "probe", "b")
	if n := errno(err); n != mysqlDupKey {
		t.Errorf("a second INSERT: %v, want %d", err, mysqlDupKey)
	}
	t.Logf("a second INSERT: %v", err)

	// innodb_lock_wait_timeout takes whole seconds only.
	_, err = s2.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 0.5")
	t.Logf("innodb_lock_wait_timeout = 0.5: %v, now %v", err, one(s2, "SELECT @@innodb_lock_wait_timeout"))

	// A lock wait timeout: 1205 after the wait, the transaction still open.
	for _, q := range []string{createForUpdateRows, "INSERT IGNORE INTO locktorture_for_update (name) VALUES ('probe')",
		"BEGIN", "SELECT name FROM locktorture_for_update WHERE name = 'probe' FOR UPDATE"} {
		if _, err := s1.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range []string{"SET SESSION innodb_lock_wait_timeout = 1", "BEGIN"} {
		if _, err := s2.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	began = time.Now()
	_, err = s2.ExecContext(ctx, "SELECT name FROM locktorture_for_update WHERE name = 'probe' FOR UPDATE")
	t.Logf("FOR UPDATE of a locked row: %v after %v", err, time.Since(began))
	if n := errno(err); n != mysqlLockWaitTimeout {
		t.Errorf("FOR UPDATE of a locked row: %v, want %d", err, mysqlLockWaitTimeout)
	}
	if v := one(s2, "SELECT @@in_transaction"); v.Float64 != 1 {
		t.Errorf("after 1205 the transaction is over: in_transaction %v", v)
	}
	if _, err := s2.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	// The fence counter: bumped by autocommit on another session while
	// s1's transaction holds the lock's row, without waiting for it; the
	// bump's value is the statement's LAST_INSERT_ID.
	for _, q := range []string{createFences, "INSERT IGNORE INTO locktorture_fences (name, fence) VALUES ('probe', 0)"} {
		if _, err := s2.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for want := int64(1); want <= 2; want++ {
		began = time.Now()
		res, err := s2.ExecContext(ctx, bumpFence, "probe")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := res.LastInsertId(); err != nil || got != want || time.Since(began) > 500*time.Millisecond {
			t.Fatalf("a bump beside the lock's transaction: %d, %v after %v, want %d", got, err, time.Since(began), want)
		}
	}
	if v := one(s1, "SELECT @@in_transaction"); v.Float64 != 1 {
		t.Errorf("the lock's transaction is over: in_transaction %v", v)
	}
	if _, err := s1.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}

// A second INSERT of the lock's row is refused by the unique key: the
// second client is not acquired within its wait. Only the owner's token
// deletes the row.
func TestMySQLRowRefusesASecondInsert(t *testing.T) {
	b := start(t, "mysql-row", mariadbServer)
	c1, c2, lease := holding(t, b)
	ctx := context.Background()
	began := time.Now()
	if _, err := c2.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("a second INSERT: %v, want ErrNotAcquired", err)
	}
	if d := time.Since(began); d < 50*time.Millisecond || d > time.Second {
		t.Errorf("the refused acquire took %v, its wait is 50 ms", d)
	}
	if err := c2.Release(ctx, locks.Lease{Key: "k", Token: "not-the-owner"}); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a release by another owner: %v, want ErrNotHeld", err)
	}
	if err := c1.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := c1.Release(ctx, lease); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a second release: %v, want ErrNotHeld", err)
	}
}

// The row outlives its holder's death, and a kill -9 and restart of the
// server: every other client is refused until the dead holder's token
// deletes it.
func TestMySQLRowSurvivesItsHolderAndAServerKill(t *testing.T) {
	b := start(t, "mysql-row", mariadbServer)
	ctx := context.Background()
	c1, c2 := b.lock("c1", 0), b.lock("c2", 0)
	lease, err := c1.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.(*mysqlRow).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("the dead holder's row is gone: %v", err)
	}
	if err := b.nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := b.nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	c3 := b.lock("c3", 0)
	if _, err := c3.Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("after a kill -9 and a restart the row is gone: %v", err)
	}
	// c2's session died with the server: its first request is unknown.
	if _, err := c2.Acquire(ctx, "k"); !errors.Is(err, locks.ErrUnknown) && !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("an acquire on a session the restart ended: %v, want ErrUnknown or ErrNotAcquired", err)
	} else {
		t.Logf("an acquire on a session the restart ended: %v", err)
	}
	if err := c3.Release(ctx, lease); err != nil {
		t.Fatalf("the dead holder's token, from a new client: %v", err)
	}
	got, err := c3.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("the deleted row: %v", err)
	}
	if err := c3.Release(ctx, got); err != nil {
		t.Fatal(err)
	}
}

// A second client's FOR UPDATE, started while the row is locked, waits on
// the server and is granted when the holder COMMITs, not before.
func TestMySQLForUpdateBlocksUntilTheCommit(t *testing.T) {
	b := start(t, "mysql-for-update", mariadbServer)
	c1, _, lease := holding(t, b)
	ctx := context.Background()
	waiter := mysqlClient(b, "c3", 3*time.Second)
	type result struct {
		lease locks.Lease
		err   error
		at    time.Time
	}
	done := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "k")
		done <- result{l, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("the waiter's acquire returned while the row was locked: %v", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	released := time.Now()
	if err := c1.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the waiter after the COMMIT: %v", r.err)
	}
	if r.at.Before(released) {
		t.Fatalf("the waiter was granted %v before the COMMIT", released.Sub(r.at))
	}
	t.Logf("the waiter was granted %v after the COMMIT was sent", r.at.Sub(released))
	if err := c1.Release(ctx, lease); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a second release: %v, want ErrNotHeld", err)
	}
	if err := waiter.Release(ctx, r.lease); err != nil {
		t.Fatal(err)
	}
}

// MariaDB frees a session's named lock when its connection dies: another
// client has it at once, and the dead session's release cannot claim it.
func TestMySQLGetLockIsReleasedWithItsSession(t *testing.T) {
	releasedWithItsSession(t, start(t, "mysql-get-lock", mariadbServer))
}

// The fencing token grows from holder to holder, past a holder whose
// connection died while it held the lock (its transaction rolled back),
// and past a kill -9 and restart of the server.
func TestMySQLForUpdateFencedTokenGrows(t *testing.T) {
	b := start(t, "mysql-for-update-fenced", mariadbServer)
	c1, c2 := b.lock("c1", 0), b.lock("c2", 0)
	exclusive(t, c1, c2)
	ctx := context.Background()
	var last int64
	next := func(c locks.Lock, who string) locks.Lease {
		t.Helper()
		l, err := c.Acquire(ctx, "k")
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if l.Fence <= last {
			t.Fatalf("%s: fence %d after %d", who, l.Fence, last)
		}
		last = l.Fence
		return l
	}
	l1 := next(c1, "first holder")
	if err := c1.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	dead := next(c2, "second holder")
	if err := c2.(*mysqlForUpdate).Close(); err != nil {
		t.Fatal(err)
	}
	l3 := next(c1, "the holder after a dead one")
	if err := c2.Release(ctx, dead); !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("a release on a dead session: %v, want ErrUnknown", err)
	}
	if err := c1.Release(ctx, l3); err != nil {
		t.Fatal(err)
	}
	if err := b.nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := b.nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	l4 := next(b.lock("c3", 0), "the holder after a restart")
	t.Logf("fences %d, %d, %d, %d", l1.Fence, dead.Fence, l3.Fence, l4.Fence)
}

// Prepare does a first acquire's one-off work before it: the session, the
// tables and the fenced form's second session. Its CREATE waits out
// another session's hold on a table, where an acquire's CREATE, bounded
// like a request that waits for nothing, gives up; and against a server
// it cannot reach it returns once its ctx ends.
func TestMySQLPrepareCreatesTheTablesAndWaitsForThem(t *testing.T) {
	b := start(t, "mysql-for-update-fenced", mariadbServer)
	ctx := context.Background()
	prepare := func(l locks.Lock, d time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return l.(locks.Preparer).Prepare(pctx)
	}
	c1 := mysqlClient(b, "c1", 50*time.Millisecond)
	if err := prepare(c1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if fu := c1.(*mysqlForUpdate); fu.conn == nil || fu.fence.conn == nil || !fu.ready {
		t.Fatal("Prepare left a session unopened or the tables unmade")
	}
	s := mysqlSession(b, "p1")
	var n int
	if err := s.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?
		AND table_name IN ('locktorture_for_update', 'locktorture_fences')`, mysqlDatabase).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of the 2 tables after Prepare (%v)", n, err)
	}
	if _, err := s.ExecContext(ctx, "LOCK TABLES locktorture_for_update WRITE"); err != nil {
		t.Fatal(err)
	}
	if _, err := mysqlClient(b, "c2", 50*time.Millisecond).Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("an acquire whose CREATE waits on a locked table: %v, want ErrNotAcquired", err)
	}
	c3 := mysqlClient(b, "c3", 50*time.Millisecond)
	prepared := make(chan error, 1)
	go func() { prepared <- prepare(c3, 20*time.Second) }()
	time.Sleep(time.Second) // longer than an acquire's CREATE waits (its margin, 500 ms at this TTL)
	if _, err := s.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	if err := <-prepared; err != nil {
		t.Fatalf("a Prepare whose CREATE waited on a locked table: %v", err)
	}
	lease, err := c3.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c3.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	b.cut("c4")
	if err := prepare(mysqlClient(b, "c4", 50*time.Millisecond), 500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Prepare cut off from the server: %v, want its deadline", err)
	}
}
