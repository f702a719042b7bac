package cluster

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktorture/locktorture/internal/prereq"
)

// mariadbDatabase is the database every node's template holds for the
// locks' tables: a client names it when it connects.
const mariadbDatabase = "locktorture"

// mariadbBin is Debian's MariaDB server (mariadb-server-core), off the
// PATH of a user who is not root.
const mariadbBin = "/usr/sbin/mariadbd"

// mariadbShared are the settings both the template's bootstrap and every
// server run with: a redo log made at one size and opened at another is
// rebuilt at start, and the database locktorture takes the server's
// character set when it is made.
var mariadbShared = []string{
	// Debian's mariadb-server config (50-server.cnf) sets utf8mb4, which
	// --no-defaults does not read; the server's own default is latin1.
	"--character-set-server=utf8mb4",
	"--collation-server=utf8mb4_general_ci",
	// 32 MB of buffer pool for a few lock tables (the default 128 MB is
	// memory a 2-core machine running three nodes has no use for).
	"--innodb-buffer-pool-size=32M",
	// An 8 MB redo log rather than the default 96 MB: each node's copy of
	// the template writes it whole, and a crash recovery replays at most
	// that much.
	"--innodb-log-file-size=8M",
	// A temporary tablespace of 1 MB rather than 12 MB: InnoDB writes it
	// whole at every start, and it holds only temporary tables, which
	// no lock makes.
	"--innodb-temp-data-file-path=ibtmp1:1M:autoextend",
	// No io_uring (10.11 uses it where the kernel allows, as here): a
	// ring per server takes locked memory and system calls a container's
	// seccomp profile may refuse, and InnoDB's own I/O threads serve a
	// lock table as well.
	"--innodb-use-native-aio=0",
}

// MariaDBKind is one MariaDB 10.11 server (Debian 12's mariadbd): a data
// dir copied from a template made once per machine, on loopback, without
// grant tables, every client root with no password, its locks' tables in
// the database locktorture. A power loss of a node is a plain kill -9 and
// loses nothing answered: with innodb_flush_log_at_trx_commit=2 every
// commit's redo is written to the file before the commit is answered and
// fsynced once a second, and the harness cannot drop the machine's page
// cache, where every written commit is. So the kind offers aof-always
// only, as PostgreSQL's with fsync off does. The lock-relevant settings
// (wait_timeout, innodb_lock_wait_timeout, lock_wait_timeout) are
// MariaDB's defaults: the stories judge what users run. Under libfaketime
// (a node's Clock) mariadbd runs as usual and NOW() moves with the offset
// at once; its timed waits count on that clock too: a GET_LOCK waiting
// 5 s gave up 1 s in when the clock jumped an hour ahead.
//
// Its library pairs (PHP and Python workers) take a core, not the
// machine: measured beside two busy loops, none ran late
// (docs/ci-and-benchmarks.md). So Alone is unset.
var MariaDBKind = &Kind{
	Name:        "mariadb",
	Binary:      mariadbBin,
	Install:     "install it (apt-get install mariadb-server-core mariadb-client-core) or name its path in Options.Binaries",
	Persistence: []Persistence{AOFAlways},
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		data := filepath.Join(at.Dir, "data")
		if _, err := os.Stat(filepath.Join(data, mariadbDatabase)); err != nil {
			tpl, err := mariadbTemplate(at.Dir)
			if err != nil {
				return nil, err
			}
			if out, err := exec.Command("cp", "-a", tpl, data).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("cluster: copy the MariaDB template: %v: %s", err, out)
			}
		}
		// --no-defaults must come first: no /etc/mysql config is read.
		a := append([]string{"--no-defaults"}, mariadbUser()...)
		a = append(a, "--datadir="+data, "--port="+strconv.Itoa(at.Port), "--bind-address="+at.Bind,
			"--socket="+filepath.Join(at.Dir, "mysqld.sock"), "--pid-file="+filepath.Join(at.Dir, "mariadbd.pid"),
			// Every client is root with every privilege, and the
			// grant tables are never read (nor recovered after a kill).
			"--skip-grant-tables",
			// A client on 127.0.0.1 is not looked up by name.
			"--skip-name-resolve",
			// Each commit is written to the redo log before it is
			// answered and fsynced once a second: the harness never
			// loses the page cache, and an fsync per commit would make
			// every lock operation wait on a disk the machine shares.
			"--innodb-flush-log-at-trx-commit=2")
		a = append(a, mariadbShared...)
		return append(a, spec.Args...), nil
	},
	Ready:   mariadbReady,
	Session: mariadbSession,
	Reset:   mariadbReset,
	// mariadbd is one process with threads: it forks nothing, so a signal
	// to it reaches every thread that serves a client.
	ProcessGroup: false,
	// SIGTERM (the default StopSignal) is MariaDB's clean shutdown.
	// Measured on 2 cores beside other runs (load 4.5 to 7.5): a node
	// answers 0.17 to 0.49 s (medians of 5) after AddNode began, the copy
	// of the template included; making the template, once per machine in
	// Args, took 1.1 to 1.5 s (medians of 5, 1.0 to 4.4 s in all). The
	// margin is a loaded machine's.
	StartTimeout: 20 * time.Second,
	// Log is empty: with --no-defaults mariadbd writes its errors to
	// stderr, which the local backend keeps in output.log.
	//
	// Measured: 0.12 to 0.21 s from a kill -9 to answering again (medians
	// of 5 beside other runs, load 4.5 to 7.5; 0.1 to 0.16 s with up to 100,000
	// rows committed just before the kill), the slowest 0.75 s. InnoDB
	// replays its redo log since the last checkpoint (an 8 MB log bounds
	// it) before the server opens its port.
	Recovery: time.Second,
	// Nothing is left outside the dir: no System V or POSIX shared
	// memory, and InnoDB's temporary files are unlinked when made.
}

// mariadbUser is the --user a server needs when the harness runs as
// root: mariadbd refuses root without being told to, and a --user it
// cannot switch to is a warning when it does not.
func mariadbUser() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// mariadbTemplate is a data dir fresh from mariadb-install-db holding the
// database locktorture, made once per machine and kept in the cache: the
// install takes seconds, a copy of its files a tenth of one. It is made
// in dir and moved into the cache whole, so a run never sees half of one.
// Its name carries a hash of the server binary's size and time and of
// mariadbShared, so an upgraded MariaDB, or a change of those settings,
// makes its own.
func mariadbTemplate(dir string) (string, error) {
	st, err := os.Stat(mariadbBin)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	h := fnv.New64a()
	fmt.Fprintln(h, st.Size(), st.ModTime().UnixNano(), mariadbShared)
	tpl := filepath.Join(prereq.CacheDir(), fmt.Sprintf("mariadb-template-%016x", h.Sum64()))
	if _, err := os.Stat(filepath.Join(tpl, mariadbDatabase)); err == nil {
		return tpl, nil
	}
	build := filepath.Join(dir, "install-db")
	defer os.RemoveAll(build)
	// --no-defaults first (the script reads no config after it); no test
	// database and no anonymous users; root without a password (unused:
	// the server skips the grant tables); no host name looked up. The
	// other options go to the bootstrapping mariadbd, so the redo log is
	// made at the size the servers open it with.
	install := append([]string{"--no-defaults", "--datadir=" + build, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve", "--force"}, mariadbUser()...)
	cmd := exec.Command("mariadb-install-db", append(install, mariadbShared...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: mariadb-install-db: %v: %s", err, out)
	}
	boot := append(append([]string{"--no-defaults"}, mariadbUser()...), "--datadir="+build, "--bootstrap")
	cmd = exec.Command(mariadbBin, append(boot, mariadbShared...)...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("CREATE DATABASE " + mariadbDatabase + ";\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: create database %s: %v: %s", mariadbDatabase, err, out)
	}
	if _, err := os.Stat(filepath.Join(build, mariadbDatabase)); err != nil {
		return "", fmt.Errorf("cluster: the MariaDB bootstrap made no database %s: %w", mariadbDatabase, err)
	}
	if err := os.MkdirAll(prereq.CacheDir(), 0o755); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	tmp, err := os.MkdirTemp(prereq.CacheDir(), "mariadb-template-tmp-")
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("cp", "-a", build+"/.", tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cluster: keep the MariaDB template: %v: %s", err, out)
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	// Another process may have kept one first: either is as good.
	_ = os.Rename(tmp, tpl)
	return tpl, nil
}

// mariadbConfig is how a client reaches the database locktorture on addr:
// as root without a password, over TCP, each step bounded by timeout.
func mariadbConfig(addr string, timeout time.Duration) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.DBName = mariadbDatabase
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = timeout, timeout, timeout
	return cfg
}

// mariadbReady connects to addr and asks whether InnoDB is up: a server
// opens its port only once InnoDB has replayed its redo log, and one
// whose InnoDB failed has no row here. MariaDB tells a client its
// connection's id, not the server's pid, so it returns 0 and the backend
// checks that the listening socket is our mariadbd's.
func mariadbReady(ctx context.Context, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := mysql.NewConnector(mariadbConfig(addr, time.Second))
	if err != nil {
		return 0, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	var one int
	return 0, db.QueryRowContext(ctx, "SELECT 1 FROM information_schema.ENGINES WHERE ENGINE = 'InnoDB' AND SUPPORT IN ('YES', 'DEFAULT')").Scan(&one)
}

// mariadbSession is one connection to addr and a SELECT 1 on it, for the
// lateness meter: Ready's new connection each time would count a busy
// machine's thread start and handshake as the server's reply.
func mariadbSession(ctx context.Context, addr string) (func(context.Context) error, func(), error) {
	conn, err := mysql.NewConnector(mariadbConfig(addr, time.Second))
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(conn)
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	ask := func(ctx context.Context) error {
		var one int
		return c.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
	return ask, func() { c.Close(); db.Close() }, nil
}

// mariadbReset kills every other client's connection (and with it any
// GET_LOCK it held), waits up to 5 s for them to be gone, and drops and
// makes again the database locktorture with what clients made in it (the
// lock tables), as the template's bootstrap made it.
func mariadbReset(ctx context.Context, addr string) error {
	conn, err := mysql.NewConnector(mariadbConfig(addr, 5*time.Second))
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	const others = `SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon' AND USER <> 'system user'`
	deadline := time.Now().Add(5 * time.Second)
	for {
		ids, err := mariadbIDs(ctx, c, others)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("connections %v outlived KILL", ids)
		}
		for _, id := range ids {
			// One that ended since the list is no error of the reset's.
			_, _ = c.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, stmt := range []string{"DROP DATABASE " + mariadbDatabase, "CREATE DATABASE " + mariadbDatabase} {
		if _, err := c.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	tables, err := mariadbIDs(ctx, c, `SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = '`+mariadbDatabase+`'`)
	if err != nil {
		return err
	}
	ids, err := mariadbIDs(ctx, c, others)
	if err != nil {
		return err
	}
	if len(tables) != 0 || len(ids) != 0 {
		return fmt.Errorf("%d tables and connections %v left", len(tables), ids)
	}
	return nil
}

// mariadbIDs runs a query of one integer column on c.
func mariadbIDs(ctx context.Context, c *sql.Conn, query string) ([]int64, error) {
	rows, err := c.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
