package services

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

func pgLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "pg-advisory",
		Traits:  locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked},
		Summary: "PostgreSQL: pg_try_advisory_lock on the client's session, pg_advisory_unlock to release; held while the session lives; github.com/jackc/pgx/v5",
		Server:  "postgres",
		// Held while the session lives, and nothing expires: a paused or
		// slow holder keeps it (its TCP connection stays open), a dead
		// one's session ends with its connection. A server that restarts
		// has no sessions and no locks while their holders still believe,
		// and a holder cut off silently keeps its lock until the server
		// notices: neither is claimed.
		Claims: []fault.Kind{fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock},
		New:    func(c locks.Config) locks.Lock { return &pgAdvisory{pgConn: pgConn{cfg: c}} },
	})
	register(locks.Info{
		Name:   "pg-lease",
		Traits: locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall},
		Summary: "PostgreSQL: a lock table's row (name, owner, expires_at) taken by INSERT … ON CONFLICT DO UPDATE … WHERE expired, " +
			"expiry on the server's clock; DELETE by owner to release; github.com/jackc/pgx/v5",
		Server: "postgres",
		// A lease whose row is committed and fsynced: a restarted server
		// still has it. Its expiry is on the server's clock, so a jump of
		// that clock is not claimed.
		Claims: append(append([]fault.Kind(nil), locks.LeaseClaims...), fault.NodeCrash),
		New:    func(c locks.Config) locks.Lock { return &pgLease{pgConn: pgConn{cfg: c}} },
	})
}

// pgConn is one client's session with the server: one connection, no
// pool, because a session lock belongs to the session that took it.
type pgConn struct {
	cfg  locks.Config
	conn *pgx.Conn
}

// session is the open connection, dialled on first use and after one
// broke.
func (p *pgConn) session(ctx context.Context) (*pgx.Conn, error) {
	if p.conn != nil && !p.conn.IsClosed() {
		return p.conn, nil
	}
	host, port, err := net.SplitHostPort(p.cfg.Addrs[0])
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port))
	if err != nil {
		return nil, err
	}
	p.conn = c
	return c, nil
}

// prepare opens the session, then runs then on it (nil: nothing), trying
// again until ctx ends (locks.Preparer).
func (p *pgConn) prepare(ctx context.Context, then func(*pgx.Conn) error) error {
	return prepareUntil(ctx, func() error {
		c, err := p.session(ctx)
		if err != nil || then == nil {
			return err
		}
		return then(c)
	})
}

// bound limits one request: a reply later than this is an unknown
// outcome (pgx then closes the connection, and the session with it).
func (p *pgConn) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(p.cfg.TTL/2, 250*time.Millisecond))
}

// Close ends the session, and every session lock with it.
func (p *pgConn) Close() error {
	if p.conn == nil {
		return nil
	}
	return p.conn.Close(context.Background())
}

// pgAdvisory is PostgreSQL's session-level advisory lock. It tries and
// retries rather than block in pg_advisory_lock: a blocked call can only
// be bounded by cancelling it, and a cancel that races the grant leaves a
// lock taken that the client believes it does not hold.
type pgAdvisory struct{ pgConn }

// Prepare opens the session before the first acquire (locks.Preparer).
func (l *pgAdvisory) Prepare(ctx context.Context) error { return l.prepare(ctx, nil) }

func (l *pgAdvisory) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		c, err := l.session(ctx)
		if err != nil {
			// No session: nothing was asked, nothing is held.
			return locks.Lease{}, false, nil
		}
		qctx, cancel := l.bound(ctx)
		defer cancel()
		var got bool
		if err := c.QueryRow(qctx, "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key).Scan(&got); err != nil {
			return locks.Lease{}, false, unknown("pg_try_advisory_lock", err)
		}
		if !got {
			return locks.Lease{}, false, nil
		}
		return locks.Lease{Key: key, Token: newToken(), Handle: c}, true, nil
	})
}

// Release unlocks on the session that took the lock. If that session is
// gone, so is the lock, or it will be once the server notices: the
// release cannot tell which.
func (l *pgAdvisory) Release(ctx context.Context, lease locks.Lease) error {
	if l.conn == nil || l.conn.IsClosed() || l.conn != lease.Handle {
		return unknown("pg_advisory_unlock", errors.New("the session that took the lock is gone; the server frees its locks when it notices"))
	}
	qctx, cancel := l.bound(ctx)
	defer cancel()
	var released bool
	if err := l.conn.QueryRow(qctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", lease.Key).Scan(&released); err != nil {
		return unknown("pg_advisory_unlock", err)
	}
	if !released {
		return locks.ErrNotHeld
	}
	return nil
}

// pgLease is the lock table of the articles: a row per lock with its
// owner and expiry, taken when missing or expired.
type pgLease struct {
	pgConn
	table bool // the table is known to exist
}

const (
	createLeases = `CREATE TABLE IF NOT EXISTS locktorture_leases (
	name text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL)`
	takeLease = `INSERT INTO locktorture_leases AS l (name, owner, expires_at)
	VALUES ($1, $2, now() + $3 * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
	WHERE l.expires_at < now()
	RETURNING owner`
	dropLease = `DELETE FROM locktorture_leases WHERE name = $1 AND owner = $2`
)

// Prepare opens the session and creates the table before the first
// acquire (locks.Preparer). The CREATE may wait as long as ctx allows:
// it waits for another client's, and writes files.
func (l *pgLease) Prepare(ctx context.Context) error {
	return l.prepare(ctx, func(c *pgx.Conn) error { return l.ensureTable(ctx, c) })
}

// ensureTable creates the table once, bounded by qctx; clients racing to
// create it may see the loser's duplicate errors, which mean it exists.
func (l *pgLease) ensureTable(qctx context.Context, c *pgx.Conn) error {
	if l.table {
		return nil
	}
	_, err := c.Exec(qctx, createLeases)
	var pe *pgconn.PgError
	if err != nil && !(errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07")) {
		return err
	}
	l.table = true
	return nil
}

func (l *pgLease) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		c, err := l.session(ctx)
		if err != nil {
			return locks.Lease{}, false, nil
		}
		tctx, tcancel := l.bound(ctx)
		err = l.ensureTable(tctx, c)
		tcancel()
		if err != nil {
			return locks.Lease{}, false, nil
		}
		token := newToken()
		start := l.cfg.Clock.Now()
		qctx, cancel := l.bound(ctx)
		defer cancel()
		var owner string
		err = c.QueryRow(qctx, takeLease, key, token, l.cfg.TTL.Microseconds()).Scan(&owner)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return locks.Lease{}, false, nil
		case err != nil:
			return locks.Lease{}, false, unknown("insert lease", err)
		}
		return locks.Lease{Key: key, Token: token, ValidUntil: start.Add(l.cfg.TTL)}, true, nil
	})
}

func (l *pgLease) Release(ctx context.Context, lease locks.Lease) error {
	c, err := l.session(ctx)
	if err != nil {
		return unknown("connect", err)
	}
	qctx, cancel := l.bound(ctx)
	defer cancel()
	tag, err := c.Exec(qctx, dropLease, lease.Key, lease.Token)
	if err != nil {
		return unknown("delete lease", err)
	}
	if tag.RowsAffected() == 0 {
		return locks.ErrNotHeld
	}
	return nil
}
