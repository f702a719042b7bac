package services

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

// mysqlLocks registers the article's database locks on MySQL, run on
// MariaDB 10.11 (cluster's mariadb kind): a lock table's row, a row
// locked FOR UPDATE inside an open transaction, the server's named locks
// (GET_LOCK), and the FOR UPDATE lock with a fencing token from a
// committed counter. Each client has one connection of its own (the
// fenced one a second, for its counter), on the Go driver
// github.com/go-sql-driver/mysql.
func mysqlLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:   "mysql-row",
		Traits: locks.Traits{Ends: locks.Never, Release: locks.OwnerChecked},
		Summary: "MySQL (MariaDB): a lock table's row (name PRIMARY KEY, owner) taken by INSERT, refused by the unique key " +
			"(1062), DELETE by name and owner to release; no expiry; github.com/go-sql-driver/mysql",
		Server: "mariadb",
		// The row is the lock, committed by InnoDB when the INSERT
		// answers, and nothing but its owner's DELETE removes it: a cut-off,
		// slowed, paused or skewed holder keeps it, a paused server keeps
		// it, and a server killed and restarted still has it (the mariadb
		// kind loses nothing a commit answered, cluster.MariaDBKind).
		// Not ClientCrash: no two hold it even then, but a dead holder's
		// row is never deleted and every later acquire of its key is
		// refused for good (the article's drawback), so the lock is not
		// claimed to go on working through one. NodeClock is left out as
		// every service lock here leaves it, though nothing here reads a
		// clock.
		Claims: []fault.Kind{fault.Partition, fault.Latency, fault.NodePause, fault.NodeCrash, fault.ClientPause, fault.ClientClock},
		New:    func(c locks.Config) locks.Lock { return &mysqlRow{mysqlConn: newMySQLConn(c, 0)} },
	})
	// The connection's locks are pg-advisory's, for its reasons: held
	// while the session lives and nothing expires, so a paused or slow
	// holder keeps its lock and a dead one's session ends with its
	// connection (ClientCrash; the server reads the socket's end at once,
	// as it waits there for the session's next command); no clock is read.
	// Not NodeCrash: a restarted server has no sessions, no transactions
	// and no named locks while their holders still believe. Not Partition:
	// a holder cut off keeps believing while the server ends its session as
	// soon as the link closes it (a heal reopens the link's proxy), or
	// after wait_timeout (eight hours by default) if nothing does.
	connClaims := []fault.Kind{fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock}
	register(locks.Info{
		Name:   "mysql-for-update",
		Traits: locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked},
		Summary: "MySQL (MariaDB): SELECT … FOR UPDATE of the lock's row in a transaction left open on the client's connection, " +
			"the wait innodb_lock_wait_timeout (whole seconds), COMMIT to release; github.com/go-sql-driver/mysql",
		Server: "mariadb",
		Claims: connClaims,
		New:    func(c locks.Config) locks.Lock { return newMySQLForUpdate(c, false) },
	})
	register(locks.Info{
		Name:   "mysql-for-update-fenced",
		Traits: locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked},
		Summary: "MySQL (MariaDB): mysql-for-update with a fencing token from a counter row bumped by an autocommit UPDATE on a " +
			"second connection once the row is locked (a SEQUENCE's NEXTVAL does not survive a kill -9); github.com/go-sql-driver/mysql",
		Server: "mariadb",
		Fenced: true,
		Claims: connClaims,
		New:    func(c locks.Config) locks.Lock { return newMySQLForUpdate(c, true) },
	})
	register(locks.Info{
		Name:   "mysql-get-lock",
		Traits: locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked},
		Summary: "MySQL (MariaDB): GET_LOCK(name, wait) on the client's connection, RELEASE_LOCK to release; held while the " +
			"session lives; github.com/go-sql-driver/mysql",
		Server: "mariadb",
		Claims: connClaims,
		New:    func(c locks.Config) locks.Lock { return &mysqlGetLock{mysqlConn: newMySQLConn(c, c.Wait)} },
	})
}

// mysqlDatabase is the database the mariadb kind's nodes hold for the
// locks' tables (cluster.MariaDBKind).
const mysqlDatabase = "locktorture"

// The server's error numbers the locks read (MariaDB's error codes page).
const (
	// mysqlDupKey is ER_DUP_ENTRY: the INSERT met the unique key.
	mysqlDupKey = 1062
	// mysqlLockWaitTimeout is ER_LOCK_WAIT_TIMEOUT: the row lock was not
	// granted within innodb_lock_wait_timeout. Like ER_LOCK_DEADLOCK
	// (1213: InnoDB rolled the transaction back to break a deadlock), it
	// is a refusal, as every error the server answers with is.
	mysqlLockWaitTimeout = 1205
)

// mysqlErrno is the server's error number when err is the server's own
// answer (mysql.MySQLError: the statement failed, and nothing it would
// have done was done), or 0 when it is not (a broken or timed-out
// connection: the statement may or may not have run).
func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// mysqlConn is one client's session with the server: one connection,
// never a pool's. database/sql runs a statement again on another of a
// pool's connections after driver.ErrBadConn, and a session's lock (a
// named lock, an open transaction's row lock) belongs to the session that
// took it; so every statement goes through one *sql.Conn, from a pool of
// at most one connection that keeps none idle, and a connection that
// broke is closed and forgotten so the next statement dials a new one.
type mysqlConn struct {
	cfg locks.Config
	// wait is the longest this lock's statements wait on the server (a
	// lock wait): their reads are bounded by it plus bound's margin.
	wait time.Duration
	// setup runs on every new session before it is used.
	setup []string
	db    *sql.DB
	conn  *sql.Conn
}

func newMySQLConn(cfg locks.Config, wait time.Duration) mysqlConn {
	return mysqlConn{cfg: cfg, wait: wait}
}

// margin bounds one request that waits for nothing on the server: a reply
// later than this is an unknown outcome.
func (m *mysqlConn) margin() time.Duration {
	return max(m.cfg.TTL/2, 250*time.Millisecond)
}

// bound limits one request that may wait up to wait on the server.
func (m *mysqlConn) bound(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, wait+m.margin())
}

// session is the open connection, dialled through the client's own link
// (Config.Addrs[0]) on first use and after one broke.
func (m *mysqlConn) session(ctx context.Context) (*sql.Conn, error) {
	if m.conn != nil {
		return m.conn, nil
	}
	if m.db == nil {
		c := mysql.NewConfig()
		c.User, c.Net, c.Addr, c.DBName = "root", "tcp", m.cfg.Addrs[0], mysqlDatabase
		// The dial, and every read and write of a packet, bounded: a read
		// outlasts the longest lock wait a statement asks the server for.
		c.Timeout = m.margin()
		c.ReadTimeout = m.wait + m.margin()
		c.WriteTimeout = m.margin()
		// Arguments spliced into the statement by the driver: one round
		// trip per statement, no prepared statement to prepare and close.
		c.InterpolateParams = true
		c.Logger = &mysql.NopLogger{}
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		m.db = sql.OpenDB(conn)
		m.db.SetMaxOpenConns(1)
		m.db.SetMaxIdleConns(0)
	}
	ctx, cancel := m.bound(ctx, 0)
	defer cancel()
	c, err := m.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range m.setup {
		if _, err := c.ExecContext(ctx, s); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	m.conn = c
	return c, nil
}

// drop closes the session: the server ends it, and every lock it holds,
// once it reads the connection's end.
func (m *mysqlConn) drop() {
	if m.conn != nil {
		_ = m.conn.Close()
		m.conn = nil
	}
}

// failed drops the session when err is not the server's own answer: a
// connection that broke or timed out mid-request is in no known state.
func (m *mysqlConn) failed(err error) {
	if err != nil && mysqlErrno(err) == 0 {
		m.drop()
	}
}

// Close ends the session, and every session lock with it.
func (m *mysqlConn) Close() error {
	m.drop()
	if m.db == nil {
		return nil
	}
	err := m.db.Close()
	m.db = nil
	return err
}

// mysqlGone is the release of a session lock whose session is not the
// one that took it: the lock went with its session, or will once the
// server notices, and the release cannot tell which (pg-advisory's).
func mysqlGone(step string) error {
	return unknown(step, errors.New("the session that took the lock is gone; the server frees its locks when it notices"))
}

// mysqlRow is the lock table of the articles: a row per held lock, its
// primary key the lock's name, inserted to take the lock and deleted by
// its owner to release it. Nothing expires it.
type mysqlRow struct {
	mysqlConn
	table bool // the table is known to exist
}

const (
	createLockRows = `CREATE TABLE IF NOT EXISTS locktorture_lock_rows (
	name VARCHAR(191) PRIMARY KEY, owner VARCHAR(64) NOT NULL) ENGINE=InnoDB`
	insertLockRow = `INSERT INTO locktorture_lock_rows (name, owner) VALUES (?, ?)`
	deleteLockRow = `DELETE FROM locktorture_lock_rows WHERE name = ? AND owner = ?`
)

// ensure runs create once per client, before its first lock: CREATE ...
// IF NOT EXISTS lets every client race to it. wait is how long a
// statement may wait on the server: for the table's metadata lock, held
// by another client's CREATE, and for the files a CREATE makes.
func (m *mysqlConn) ensure(ctx context.Context, c *sql.Conn, done *bool, wait time.Duration, create ...string) error {
	if *done {
		return nil
	}
	qctx, cancel := m.bound(ctx, wait)
	defer cancel()
	for _, s := range create {
		if _, err := c.ExecContext(qctx, s); err != nil {
			m.failed(err)
			return err
		}
	}
	*done = true
	return nil
}

// ddlWait is how long a Prepare's CREATE may wait on the server. A
// CREATE the client gives up on runs on in the server, holding the
// table's metadata lock, so the next client's waits behind it: bounded
// by the margin of a request that waits for nothing, five clients' first
// CREATEs on a loaded machine gave up on one another for longer than a
// story's liveness allowance.
const ddlWait = 5 * time.Second

// prepare opens the session and creates the tables (none: the session
// alone), trying again until ctx ends (locks.Preparer).
func (m *mysqlConn) prepare(ctx context.Context, done *bool, create ...string) error {
	return prepareUntil(ctx, func() error {
		c, err := m.session(ctx)
		if err != nil || done == nil {
			return err
		}
		return m.ensure(ctx, c, done, ddlWait, create...)
	})
}

// Prepare opens the session and creates the lock table before the first
// acquire (locks.Preparer).
func (l *mysqlRow) Prepare(ctx context.Context) error {
	return l.prepare(ctx, &l.table, createLockRows)
}

// Acquire INSERTs the row (autocommit): a duplicate key is someone else's
// row, tried again until the wait runs out.
func (l *mysqlRow) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		c, err := l.session(ctx)
		if err != nil {
			// No session: nothing was asked, nothing is held.
			return locks.Lease{}, false, nil
		}
		if err := l.ensure(ctx, c, &l.table, 0, createLockRows); err != nil {
			return locks.Lease{}, false, nil
		}
		token := newToken()
		qctx, cancel := l.bound(ctx, 0)
		defer cancel()
		_, err = c.ExecContext(qctx, insertLockRow, key, token)
		switch {
		case err == nil:
			return locks.Lease{Key: key, Token: token}, true, nil
		case mysqlErrno(err) != 0:
			// The server refused the row: a duplicate key (1062) is
			// someone's lock; any other refusal inserted nothing either.
			return locks.Lease{}, false, nil
		}
		// The INSERT may have been committed: if it was, the row is this
		// client's, and nobody will ever delete it.
		l.drop()
		return locks.Lease{}, false, unknown("insert lock row", err)
	})
}

// Release deletes the row if it is still the lease's, on any session: the
// row does not belong to one.
func (l *mysqlRow) Release(ctx context.Context, lease locks.Lease) error {
	c, err := l.session(ctx)
	if err != nil {
		return unknown("connect", err)
	}
	qctx, cancel := l.bound(ctx, 0)
	defer cancel()
	res, err := c.ExecContext(qctx, deleteLockRow, lease.Key, lease.Token)
	if err != nil {
		// A refusal deleted nothing, but the row may still be the lease's:
		// not ErrNotHeld.
		l.failed(err)
		return unknown("delete lock row", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unknown("delete lock row", err)
	} else if n == 0 {
		return locks.ErrNotHeld
	}
	return nil
}

// mysqlForUpdate is the row lock of an open transaction: SELECT ... FOR
// UPDATE of the lock's row, held until the transaction ends (COMMIT, or
// its rollback when its connection dies). MariaDB's FOR UPDATE page: the
// rows read are locked against other transactions until this one commits
// or rolls back; a waiter waits up to innodb_lock_wait_timeout (whole
// seconds) and fails with 1205, which rolls back its statement only (the
// whole transaction only with innodb_rollback_on_timeout, off by
// default: InnoDB System Variables).
//
// The fenced form's token must outlive the holder's transaction: a
// counter bumped inside it is rolled back with a dead holder's
// connection, and the next holder is handed the same number. MariaDB's
// SEQUENCE is not rolled back ("the value will be reserved at once and
// will not be reused", NEXT VALUE for sequence_name), but on 10.11 it is
// not durable either: its writes reach the redo log file only with the
// next commit of an ordinary transaction or the once-a-second background
// flush, whatever innodb_flush_log_at_trx_commit says (measured: a kill
// -9 right after NEXTVAL handed out 1 to 5 restarted it at 1, and one
// right after CREATE SEQUENCE left a sequence whose every NEXTVAL fails
// with 1032, "Can't find record"). So the token is a counter row per key
// bumped by an autocommit UPDATE on a second connection of the client's
// (committed, so it survives the holder and a kill -9: cluster.MariaDBKind
// writes every commit's redo before answering), once the row lock is
// granted; then the lock's own session is asked whether its transaction
// is still open. Its answer, after the bump, says the lock was held
// throughout the bump, so every later holder's bump comes after this one.
type mysqlForUpdate struct {
	mysqlConn
	fenced bool
	// fence is the second connection, for the fenced form's counter.
	fence mysqlConn
	ready bool            // the tables are known to exist
	rows  map[string]bool // the keys whose rows are known to exist
	// held is the token of the lease whose transaction is open on this
	// session ("": none).
	held string
}

const (
	createForUpdateRows = `CREATE TABLE IF NOT EXISTS locktorture_for_update (
	name VARCHAR(191) PRIMARY KEY) ENGINE=InnoDB`
	createFences = `CREATE TABLE IF NOT EXISTS locktorture_fences (
	name VARCHAR(191) PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB`
	// hasForUpdateRow is a consistent read: it takes no lock, so it never
	// waits for a holder, where INSERT IGNORE of a row that exists takes a
	// shared lock on it and waits out the holder's exclusive one.
	hasForUpdateRow    = `SELECT COUNT(*) FROM locktorture_for_update WHERE name = ?`
	insertForUpdateRow = `INSERT IGNORE INTO locktorture_for_update (name) VALUES (?)`
	lockForUpdateRow   = `SELECT name FROM locktorture_for_update WHERE name = ? FOR UPDATE`
	// The fence row is only ever written by autocommit statements, so
	// their row locks last a statement.
	insertFence = `INSERT IGNORE INTO locktorture_fences (name, fence) VALUES (?, 0)`
	bumpFence   = `UPDATE locktorture_fences SET fence = LAST_INSERT_ID(fence + 1) WHERE name = ?`
)

// lockWaitSeconds is the wait as innodb_lock_wait_timeout takes it: whole
// seconds (the variable is an integer, and 0.5 is refused with 1232),
// rounded up so a waiter waits at least the wait it was given, and at
// least 1 (0 would refuse at once).
func lockWaitSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

func newMySQLForUpdate(cfg locks.Config, fenced bool) *mysqlForUpdate {
	n := lockWaitSeconds(cfg.Wait)
	l := &mysqlForUpdate{mysqlConn: newMySQLConn(cfg, time.Duration(n)*time.Second), fenced: fenced,
		fence: newMySQLConn(cfg, 0), rows: map[string]bool{}}
	l.setup = []string{fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", n)}
	return l
}

// row makes sure key's rows exist (autocommit, before any transaction):
// the FOR UPDATE locks a row, and finds none to lock for a new key.
func (l *mysqlForUpdate) row(ctx context.Context, c *sql.Conn, key string) error {
	if l.rows[key] {
		return nil
	}
	qctx, cancel := l.bound(ctx, 0)
	defer cancel()
	var n int
	if err := c.QueryRowContext(qctx, hasForUpdateRow, key).Scan(&n); err != nil {
		l.failed(err)
		return err
	}
	// A race with another client's INSERT IGNORE of the same key waits at
	// most the lock wait, as the shared lock on its row does.
	wctx, wcancel := l.bound(ctx, l.wait)
	defer wcancel()
	if n == 0 {
		if _, err := c.ExecContext(wctx, insertForUpdateRow, key); err != nil {
			l.failed(err)
			return err
		}
	}
	if l.fenced {
		if _, err := c.ExecContext(wctx, insertFence, key); err != nil {
			l.failed(err)
			return err
		}
	}
	l.rows[key] = true
	return nil
}

// rollback ends the transaction after a refusal; a ROLLBACK that fails
// drops the session, whose end rolls it back.
func (l *mysqlForUpdate) rollback(ctx context.Context, c *sql.Conn) error {
	qctx, cancel := l.bound(ctx, 0)
	defer cancel()
	_, err := c.ExecContext(qctx, "ROLLBACK")
	if err != nil {
		l.drop()
	}
	return err
}

// tables are the CREATEs of the lock's tables.
func (l *mysqlForUpdate) tables() []string {
	if l.fenced {
		return []string{createForUpdateRows, createFences}
	}
	return []string{createForUpdateRows}
}

// Prepare opens the session, and the fenced form's second one, and
// creates the tables before the first acquire (locks.Preparer).
func (l *mysqlForUpdate) Prepare(ctx context.Context) error {
	if err := l.prepare(ctx, &l.ready, l.tables()...); err != nil || !l.fenced {
		return err
	}
	return l.fence.prepare(ctx, nil) // a session with no tables of its own
}

func (l *mysqlForUpdate) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	if l.conn == nil {
		// The session that had a transaction open is gone, and its
		// transaction with it.
		l.held = ""
	}
	if l.held != "" {
		// A BEGIN would commit the open transaction and let its lock go.
		return locks.Lease{}, fmt.Errorf("%w: this client's transaction already holds a lock (one at a time)", locks.ErrNotAcquired)
	}
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		c, err := l.session(ctx)
		if err != nil {
			return locks.Lease{}, false, nil
		}
		// DDL commits any open transaction: it runs before BEGIN.
		if err := l.ensure(ctx, c, &l.ready, 0, l.tables()...); err != nil {
			return locks.Lease{}, false, nil
		}
		if err := l.row(ctx, c, key); err != nil {
			return locks.Lease{}, false, nil
		}
		bctx, bcancel := l.bound(ctx, 0)
		defer bcancel()
		if _, err := c.ExecContext(bctx, "BEGIN"); err != nil {
			// A transaction with nothing in it holds nothing.
			l.failed(err)
			return locks.Lease{}, false, nil
		}
		// The one statement that waits on the server: up to the lock wait,
		// then 1205.
		qctx, cancel := l.bound(ctx, l.wait)
		defer cancel()
		var name string
		err = c.QueryRowContext(qctx, lockForUpdateRow, key).Scan(&name)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// The row is gone (deleted by hand): made again next try.
			delete(l.rows, key)
			_ = l.rollback(ctx, c)
			return locks.Lease{}, false, nil
		case err != nil && mysqlErrno(err) != 0:
			// 1205 (lock wait timeout: only the statement was rolled
			// back) or 1213 (deadlock: the transaction was), or any other
			// refusal: nothing is locked; end the transaction.
			_ = l.rollback(ctx, c)
			return locks.Lease{}, false, nil
		case err != nil:
			l.drop()
			return locks.Lease{}, false, unknown("select for update", err)
		}
		lease := locks.Lease{Key: key, Token: newToken(), Handle: c}
		if l.fenced {
			fence, held, err := l.takeFence(ctx, c, key)
			if err != nil || !held {
				return locks.Lease{}, false, err
			}
			lease.Fence = fence
		}
		l.held = lease.Token
		return lease, true, nil
	})
}

// takeFence bumps key's counter on the second connection while c's
// transaction holds the row lock, then asks c whether it still does.
// Not held (nil error): the lock was let go, nothing was bumped, or the
// bump was refused. An error: the bump or the check's outcome is
// unknown, and the lock's session is dropped.
func (l *mysqlForUpdate) takeFence(ctx context.Context, c *sql.Conn, key string) (int64, bool, error) {
	f, err := l.fence.session(ctx)
	if err != nil {
		// Nothing was asked: let the lock go.
		_ = l.rollback(ctx, c)
		return 0, false, nil
	}
	fctx, fcancel := l.fence.bound(ctx, 0)
	defer fcancel()
	res, err := f.ExecContext(fctx, bumpFence, key)
	if err != nil && mysqlErrno(err) != 0 {
		_ = l.rollback(ctx, c)
		return 0, false, nil
	} else if err != nil {
		// Bumped or not, this client holds a lock whose token it does not
		// know: its session goes, and the lock with it.
		l.fence.drop()
		l.drop()
		return 0, false, unknown("bump fence", err)
	}
	var fence int64
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		// The fence row is gone (deleted by hand): made again next try.
		delete(l.rows, key)
		_ = l.rollback(ctx, c)
		return 0, false, nil
	} else if fence, err = res.LastInsertId(); err != nil {
		l.drop()
		return 0, false, unknown("bump fence", err)
	}
	qctx, cancel := l.bound(ctx, 0)
	defer cancel()
	var open int
	if err := c.QueryRowContext(qctx, "SELECT @@in_transaction").Scan(&open); err != nil {
		l.drop()
		return 0, false, unknown("check the lock after the fence", err)
	} else if open != 1 {
		// Nothing on a live session ends its transaction but itself; had
		// it ended, the lock went with it.
		_ = l.rollback(ctx, c)
		return 0, false, nil
	}
	return fence, true, nil
}

// Release COMMITs the transaction on the session that took the lock. On a
// live session nothing else ends it: it runs no statement, so neither a
// lock wait timeout nor a deadlock can roll it back.
func (l *mysqlForUpdate) Release(ctx context.Context, lease locks.Lease) error {
	if l.conn == nil || l.conn != lease.Handle {
		return mysqlGone("commit")
	}
	if l.held != lease.Token {
		// This session committed that lease's transaction already.
		return locks.ErrNotHeld
	}
	qctx, cancel := l.bound(ctx, 0)
	defer cancel()
	_, err := l.conn.ExecContext(qctx, "COMMIT")
	l.held = ""
	if err != nil {
		// A session whose COMMIT failed is in no state to keep: its end
		// rolls back whatever is left.
		l.drop()
		return unknown("commit", err)
	}
	return nil
}

// Close ends the sessions, and the transaction with them.
func (l *mysqlForUpdate) Close() error {
	l.held = ""
	return errors.Join(l.mysqlConn.Close(), l.fence.Close())
}

// mysqlGetLock is the server's named lock, GET_LOCK, held by the session
// that took it until RELEASE_LOCK or the session's end. MariaDB's GET_LOCK:
// returns 1 if obtained, 0 if the attempt timed out, NULL on an error
// (the thread killed); "released when ... your connection terminates
// (either normally or abnormally)"; a fractional timeout waits that long
// (MDEV-4018, since 10.1.2), a negative one is NULL with a warning
// (MDEV-4017), not MySQL's infinite wait. RELEASE_LOCK: 1 if released, 0
// if the lock is another session's, NULL if nobody holds it. The wait is
// the server's: one GET_LOCK with the whole wait, rather than polling.
type mysqlGetLock struct{ mysqlConn }

// Prepare opens the session before the first acquire (locks.Preparer).
func (l *mysqlGetLock) Prepare(ctx context.Context) error { return l.prepare(ctx, nil) }

func (l *mysqlGetLock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	deadline := time.Now().Add(l.cfg.Wait)
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		c, err := l.session(ctx)
		if err != nil {
			return locks.Lease{}, false, nil
		}
		// What is left of the wait (a dial that failed took some).
		wait := max(time.Until(deadline), 0)
		qctx, cancel := l.bound(ctx, wait)
		defer cancel()
		var got sql.NullInt64
		err = c.QueryRowContext(qctx, "SELECT GET_LOCK(?, ?)", key, wait.Seconds()).Scan(&got)
		switch {
		case err != nil && mysqlErrno(err) != 0:
			// A refusal (a deadlock among a session's named locks): not
			// taken.
			return locks.Lease{}, false, nil
		case err != nil:
			l.drop()
			return locks.Lease{}, false, unknown("get_lock", err)
		case !got.Valid:
			l.drop()
			return locks.Lease{}, false, unknown("get_lock", errors.New("GET_LOCK returned NULL (an error on the server)"))
		case got.Int64 == 0:
			return locks.Lease{}, false, nil
		}
		return locks.Lease{Key: key, Token: newToken(), Handle: c}, true, nil
	})
}

// Release lets the lock go on the session that took it.
func (l *mysqlGetLock) Release(ctx context.Context, lease locks.Lease) error {
	if l.conn == nil || l.conn != lease.Handle {
		return mysqlGone("release_lock")
	}
	qctx, cancel := l.bound(ctx, 0)
	defer cancel()
	var released sql.NullInt64
	if err := l.conn.QueryRowContext(qctx, "SELECT RELEASE_LOCK(?)", lease.Key).Scan(&released); err != nil {
		l.failed(err)
		return unknown("release_lock", err)
	}
	if !released.Valid || released.Int64 != 1 {
		// 0: another session's; NULL: nobody's.
		return locks.ErrNotHeld
	}
	return nil
}
