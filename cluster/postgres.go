package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/locktorture/locktorture/internal/prereq"
)

// postgresBin is where Debian's postgresql-15 keeps its server programs
// (off PATH, as Debian keeps one directory per major version).
const postgresBin = "/usr/lib/postgresql/15/bin/"

// PostgresKind is one PostgreSQL 15 server: a cluster made by initdb in
// the node's own dir, on loopback, trusting local connections as user
// postgres. A power loss of a node is a plain kill -9 and loses nothing
// answered: the harness cannot drop the machine's page cache, where every
// commit is, synced or not. So the server runs with fsync off: with it on,
// crash recovery first fsyncs every file of the data dir (a fresh copy
// of the template, all of it unwritten), and a restart's time would be the
// disk's, shared with whatever else the machine writes.
//
// Its library pairs keep the machine: at a core beside two busy loops
// the server answered up to 4.4 times its limit late (a backend process
// per connection), and one pair's story did not happen
// (docs/ci-and-benchmarks.md).
var PostgresKind = &Kind{
	Alone:       "a PostgreSQL backend process per client connection and a library's worker process per client (PHP, Python) take more than a core of two",
	Name:        "postgres",
	Binary:      postgresBin + "postgres",
	Install:     "install it (apt-get install postgresql-15) or name its path in Options.Binaries",
	Persistence: []Persistence{AOFAlways},
	// PostgreSQL refuses to run as root.
	User: "postgres",
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		data := filepath.Join(at.Dir, "data")
		if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
			tpl, err := postgresTemplate(spec.ServerKind(), at.Dir)
			if err != nil {
				return nil, err
			}
			if out, err := exec.Command("cp", "-a", tpl, data).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("cluster: copy the PostgreSQL template: %v: %s", err, out)
			}
		}
		return append([]string{"-D", data, "-p", strconv.Itoa(at.Port), "-k", at.Dir,
			"-c", "listen_addresses=" + at.Bind, "-c", "shared_buffers=16MB", "-c", "max_connections=64",
			// Dynamic shared memory in files of the data dir (pg_dynshmem),
			// not in /dev/shm, where a postmaster killed for good leaves
			// its segments behind the run that removes its dir.
			"-c", "dynamic_shared_memory_type=mmap",
			"-c", "fsync=off", "-c", "logging_collector=off",
			// Each session's start and end, to the millisecond, in the log
			// a run that did not match keeps: whether a dead client's
			// session (and its advisory locks) outlived it is told there.
			"-c", "log_connections=on", "-c", "log_disconnections=on", "-c", "log_line_prefix=%m [%p] "}, spec.Args...), nil
	},
	Ready:   postgresReady,
	Session: postgresSession,
	Reset:   postgresReset,
	Cleanup: removePostgresSegment,
	// The postmaster forks a backend per connection: a pause or a kill
	// must reach them all.
	ProcessGroup: true,
	// Fast shutdown: SIGTERM would wait for every client to leave.
	StopSignal:   syscall.SIGINT,
	StartTimeout: 20 * time.Second,
	// Measured: 0.6 to 2 s from a kill -9 to answering again (crash
	// recovery replays the WAL since the last checkpoint), idle.
	Recovery: 2 * time.Second,
}

// postgresTemplate is a cluster fresh from initdb, made once per machine
// and kept in the cache: initdb takes seconds, a copy of its files a
// tenth of one. It is made in dir (where the server's account may write)
// and moved into the cache whole, so a run never sees half of one.
func postgresTemplate(k *Kind, dir string) (string, error) {
	tpl := filepath.Join(prereq.CacheDir(), "postgres-15-template")
	if _, err := os.Stat(filepath.Join(tpl, "PG_VERSION")); err == nil {
		return tpl, nil
	}
	build := filepath.Join(dir, "initdb")
	// --no-sync: the harness never loses the page cache under these
	// files, and syncing them would be most of initdb's time.
	cmd := exec.Command(postgresBin+"initdb", "-D", build, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	cmd.Dir = dir
	if err := k.RunAs(cmd, dir); err != nil {
		return "", err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: initdb: %v: %s", err, out)
	}
	defer os.RemoveAll(build)
	if err := os.MkdirAll(prereq.CacheDir(), 0o755); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	tmp, err := os.MkdirTemp(prereq.CacheDir(), "postgres-15-template-")
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("cp", "-a", build+"/.", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: keep the PostgreSQL template: %v: %s", err, out)
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	// Another process may have kept one first: either is as good.
	_ = os.Rename(tmp, tpl)
	return tpl, nil
}

// removePostgresSegment removes the shared memory segment a killed
// postmaster leaves: the seventh line of postmaster.pid names it. A server that
// starts again in the same dir removes it itself; one killed for good
// would leave it to the machine.
func removePostgresSegment(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return
	}
	if id, err := strconv.Atoi(f[1]); err == nil {
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	}
}

// postgresSession is one connection to addr and a SELECT 1 on it.
func postgresSession(ctx context.Context, addr string) (func(context.Context) error, func(), error) {
	c, err := pgx.Connect(ctx, postgresDSN(addr))
	if err != nil {
		return nil, nil, err
	}
	ask := func(ctx context.Context) error {
		var one int
		return c.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
	return ask, func() { c.Close(context.Background()) }, nil
}

// postgresDSN is the harness's own connection to addr: user postgres,
// trusted on loopback, a second to connect.
func postgresDSN(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=1", host, port)
}

// postgresReady runs a query on addr: a server still recovering or
// starting says so and refuses it. PostgreSQL tells a client its
// backend's pid, not the postmaster's, so it returns 0 and the backend
// checks the listening socket is our postmaster's.
func postgresReady(ctx context.Context, addr string) (int, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, postgresDSN(addr))
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	var one int
	return 0, c.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// postgresReset ends every other client's session (and with it any
// advisory lock it held), waiting up to 5 s for each to go, then drops
// schema public with what clients made in it (the lock tables) and makes
// it again as initdb leaves it, and checks no other session and no
// relation in public is left.
func postgresReset(ctx context.Context, addr string) error {
	// Named, so a kept run's copy of the log (engine/serverlogs.go) tells
	// the reset's session from its clients'.
	c, err := pgx.Connect(ctx, postgresDSN(addr)+" application_name=locktorture-reset")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, sql := range []string{
		`SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
		`DROP SCHEMA public CASCADE`,
		`CREATE SCHEMA public AUTHORIZATION pg_database_owner`,
		`GRANT USAGE ON SCHEMA public TO PUBLIC`,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	var others, relations int
	err = c.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()),
		(SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace)`).Scan(&others, &relations)
	if err != nil {
		return err
	}
	if others != 0 || relations != 0 {
		return fmt.Errorf("%d other sessions and %d relations in public left", others, relations)
	}
	return nil
}
