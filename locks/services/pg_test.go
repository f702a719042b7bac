package services

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktorture/locktorture/locks"
)

const postgresServer = "/usr/lib/postgresql/15/bin/postgres"

// PostgreSQL frees a session's advisory lock when its connection dies:
// another client has it at once, and the dead session's release cannot
// claim it back.
func TestPGAdvisoryIsReleasedWithItsSession(t *testing.T) {
	releasedWithItsSession(t, start(t, "pg-advisory", postgresServer))
}

// A lease row expires on the server's clock and is taken over; the old
// holder's release then removes nothing. A committed row survives a kill.
func TestPGLeaseExpiresAndSurvivesARestart(t *testing.T) {
	b := start(t, "pg-lease", postgresServer)
	c1, c2 := b.lock("c1", 300*time.Millisecond), b.lock("c2", 300*time.Millisecond)
	exclusive(t, c1, c2)
	ctx := context.Background()
	old, err := c1.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(old.ValidUntil) + 50*time.Millisecond)
	taken, err := c2.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("an expired row was not taken over: %v", err)
	}
	if err := c1.Release(ctx, old); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the expired holder's release: %v, want ErrNotHeld", err)
	}
	if err := c2.Release(ctx, taken); err != nil {
		t.Fatal(err)
	}

	long1, long2 := b.lock("c3", 10*time.Second), b.lock("c4", 10*time.Second)
	held, err := long1.Acquire(ctx, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := b.nodes[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := long2.Acquire(ctx, "k2"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("after a kill -9 and a restart the row is gone: %v", err)
	}
	// The holder's connection died with the server: its first request is
	// unknown, and a new session then finds the row still its own.
	if err := long1.Release(ctx, held); err != nil && !errors.Is(err, locks.ErrUnknown) {
		t.Fatalf("the holder's release after the restart: %v", err)
	} else if err != nil {
		if err := long1.Release(ctx, held); err != nil {
			t.Fatalf("the holder's release on a new session: %v", err)
		}
	}
}

// Prepare opens pg-lease's session and creates its table before the
// first acquire.
func TestPGLeasePrepareCreatesTheTable(t *testing.T) {
	b := start(t, "pg-lease", postgresServer)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := b.lock("c1", 0)
	if err := l.(locks.Preparer).Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	pl := l.(*pgLease)
	if !pl.table || pl.conn == nil {
		t.Fatal("Prepare left the session unopened or the table unmade")
	}
	var n int
	if err := pl.conn.QueryRow(ctx, `SELECT COUNT(*) FROM pg_tables WHERE tablename = 'locktorture_leases'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d lease tables after Prepare (%v)", n, err)
	}
	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
}
