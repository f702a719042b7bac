package library

import (
	_ "embed"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

// toozWorker is the worker program around OpenStack tooz's locks, one
// driver per lock (see its docstring).
//
//go:embed tooz_worker.py
var toozWorker string

// toozLibrary names the library as Debian ships it.
const toozLibrary = "tooz 3.1 (Debian's python3-tooz)"

// toozMemcachedMinTTL is the shortest lock_timeout tooz's memcached lock
// is run with. The driver counts it in whole seconds (MemcachedDriver's
// int() of lock_timeout), and memcached may drop an item up to two
// seconds before its exptime (its whole-second clock, see
// services.memcachedEarly), so an item touched with 4 s is sure to live
// 2 s: four of the heart's touches, 0.5 s apart with the worker's
// timeout=1 (MemcachedDriver.heartbeat returns min(membership, leader,
// lock timeout); Heart sleeps half of it). With 1 s the heart loses the
// lock between touches with nobody at fault (seen here: "Unable to
// heartbeat by updating key" while the holder still holds).
const toozMemcachedMinTTL = 4 * time.Second

// toozLocks registers tooz's locks as its docs show them
// (get_coordinator(url, member_id), start(start_heart=True),
// get_lock(name), acquire(blocking=<wait>), release()), each client a
// Python worker, one lock per driver. None is fenced: no driver hands out
// a revision or zxid (tooz/drivers/etcd3gw.py: "TODO(jd): save the created
// revision"; the kazoo Lock is private to ZooKeeperLock). None tells a
// loss: tooz's Heart retries a failed heartbeat forever and the drivers
// only log a lock they could not renew (RedisDriver.heartbeat,
// MemcachedLock.heartbeat). No lease has a deadline: the heart renews the
// Redis and memcached locks while the holder runs, and the others end
// with a session or a connection. Story TTLs are rounded up to whole
// seconds for the drivers that count in them (redis, memcached, etcd).
func toozLocks(register func(locks.Info)) {
	program := pythonWorker(toozWorker)
	register(locks.Info{
		Name: "tooz-redis",
		// RedisLock.__init__ names the key "%s_%s_lock" % (coord.namespace,
		// str(name)) with both bytes, so Python writes their reprs.
		NodeKey: func(k string) string { return "b'_tooz'_b'" + k + "'_lock" },
		// redis-py's Lock under RedisLock (tooz/drivers/redis.py): SET NX PX
		// lock_timeout with a random token, a Lua compare-and-delete to
		// release, and the coordinator's heart renewing it (RedisLock.
		// heartbeat -> Lock.reacquire, a token-checked PEXPIRE) every
		// lock_timeout/2 while the holder's process runs and reaches Redis.
		Traits:  locks.Traits{Ends: locks.Renewed, Release: locks.OwnerChecked, Clock: locks.ServerWall},
		Library: toozLibrary,
		Summary: "tooz's redis driver (Debian's python3-tooz 3.1): redis-py's Lock (SET NX PX, Lua compare-and-delete) " +
			"renewed by the coordinator's heart; each client a Python worker",
		// A watchdog lock's (locks.WatchdogClaims): tooz's docs,
		// doc/source/user/drivers.rst, Redis: "Primitives are often based on
		// TTL(s) that may expire before being renewed". A holder that
		// stops or is cut off loses the key when its PX runs out and is
		// never told (Partition, ClientPause, NodePause not claimed); a
		// dead holder's key lapses (ClientCrash); no client clock is read
		// (redis-py waits on time.monotonic); latency below half the TTL
		// leaves the renewals in time. Not NodeCrash: the driver's
		// docstring asks for AOF "when used for locks", and a restart
		// without it loses the key.
		Claims:  locks.WatchdogClaims,
		MinTTL:  time.Second, // lock_timeout and socket_timeout are whole seconds (int())
		Program: program,
	})
	register(locks.Info{
		Name: "tooz-memcached",
		// MemcachedLock (tooz/drivers/memcached.py): add(name, member_id,
		// expire=lock_timeout); the heart touches it; release reads the
		// item and deletes it if it holds the coordinator's member id. The
		// item's life is memcached's whole-second clock, a count of
		// CLOCK_MONOTONIC (ServerMonotonic).
		//
		// Release is owner-checked, but not atomically: a get, then a
		// delete (MemcachedLock.release's NOTE(harlowja): "this has the
		// potential to delete others locks"; drivers.rst: "Lacks certain
		// primitives (compare and delete) so certain functionality is
		// fragile and/or broken"). A holder whose item lapses between the
		// two deletes its successor's. No trap can reach between them (the
		// worker reports no memcached commands), so a story sees the check.
		Traits:  locks.Traits{Ends: locks.Renewed, Release: locks.OwnerChecked, Clock: locks.ServerMonotonic},
		Library: toozLibrary,
		Summary: "tooz's memcached driver (Debian's python3-tooz 3.1): add with a whole-second exptime, touched by the " +
			"coordinator's heart; release is a get then a delete; each client a Python worker",
		Server: "memcached",
		// A watchdog lock's, as tooz-redis: drivers.rst, memcached: "Less
		// resilient than other backends", "Primitives are often based on
		// TTL(s) that may expire before being renewed". A dead holder's
		// item lapses (ClientCrash); memcached's monotonic clock and the
		// client's are read by no one (ClientClock). Not NodePause: a
		// stopped memcached's clock catches up when it resumes and drops
		// the item its holder could not touch meanwhile. Not NodeCrash:
		// memcached keeps nothing.
		Claims:  locks.WatchdogClaims,
		MinTTL:  toozMemcachedMinTTL,
		Program: program,
	})
	register(locks.Info{
		Name: "tooz-postgres",
		// PostgresLock (tooz/drivers/pgsql.py): a connection of its own per
		// lock, pg_try_advisory_lock on it until it holds or the wait runs
		// out, pg_advisory_unlock and a close to release; drivers.rst,
		// PostgreSQL: "When a lock is acquired it will release either when
		// explicitly released or automatically when the database session
		// ends".
		Traits:  locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked},
		Library: toozLibrary,
		Summary: "tooz's postgresql driver (Debian's python3-tooz 3.1): pg_try_advisory_lock on a connection of the lock's " +
			"own, held until released or the session ends; each client a Python worker",
		Server: "postgres",
		// pg-advisory's (package services): held while the session lives
		// and nothing expires, so a paused or slow holder keeps it, and a
		// dead one's session ends with its connection. Not NodeCrash (a
		// restarted server has no sessions and no locks while their holders
		// still believe), not Partition (a holder cut off silently keeps
		// its lock until the server notices). The driver sets no timeout on
		// its connection (PostgresDriver.get_connection), so on a paused
		// server or a cut link its calls wait past their blocking=; the
		// worker calls such a call's outcome unknown after its bound.
		Claims:  []fault.Kind{fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock},
		Program: program,
	})
	register(locks.Info{
		Name: "tooz-mysql",
		// MySQLLock (tooz/drivers/mysql.py, on PyMySQL): a connection of its
		// own per lock (MySQLLock.__init__: get_connection(..., defer_connect=
		// True), connected by the first try), "SELECT GET_LOCK(%s, 0)" on it
		// until it returns 1 or the wait runs out (tooz's retry, a TryAgain
		// per refusal), "SELECT RELEASE_LOCK(%s)" and a close to release.
		// RELEASE_LOCK lets go only of a lock its own session holds, and the
		// server drops a session's locks when its connection ends;
		// drivers.rst, MySQL: "When a lock is acquired it will release either
		// when explicitly released or automatically when the database session
		// ends (for example if the program using the lock crashes)". tooz
		// ignores RELEASE_LOCK's answer (MySQLLock.release: cur.fetchone(),
		// then True), but on a live connection the session still holds what
		// it took, and on a dead one the call raises: the answer is never a
		// quiet no.
		Traits:  locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked},
		Library: toozLibrary,
		Summary: "tooz's mysql driver (Debian's python3-tooz 3.1, python3-pymysql 1.0) on MariaDB 10.11: GET_LOCK(name, 0) " +
			"polled on a connection of the lock's own, held until released or the session ends; each client a Python worker",
		Server: "mariadb",
		// tooz-postgres's, for the same reasons: a lock of the session,
		// nothing expires, so a paused or slow holder keeps it and a dead
		// one's ends with its connection (ClientCrash); no clock is read.
		// Not NodeCrash (a restarted server has no sessions and no locks
		// while their holders still believe), not Partition (a holder cut
		// off keeps believing, and the server keeps its idle session for
		// wait_timeout, eight hours by default). drivers.rst's own caveats
		// are not faults here: "Does not work correctly on some MySQL
		// versions" (before 5.7.5 a second GET_LOCK on a connection let go
		// of the first: MySQLLock tracks self.acquired for it, and each lock
		// has its own connection) and "Does not work when MySQL replicates"
		// (one server here). The driver sets no timeout on its connections:
		// MySQLDriver.get_connection passes PyMySQL only host, port, user,
		// password, database, ssl_* and unix_socket (the docstring's table),
		// so PyMySQL's defaults hold: connect_timeout 10 s for the TCP
		// connect alone, no read_timeout nor write_timeout (the handshake
		// after the connect and every query wait without bound). On a
		// paused server or a cut link a call waits past its blocking=; the
		// worker calls its outcome unknown after its bound, as tooz-postgres's.
		Claims:  []fault.Kind{fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock},
		Program: program,
	})
	// The kazoo driver (tooz/drivers/zookeeper.py) is kazoo's Lock recipe
	// with kazoo's defaults: KazooDriver._make_client builds
	// KazooClient(hosts, timeout, connection_retry=None, command_retry=None,
	// randomize_hosts=True), get_lock is client.Lock(path, member_id), and
	// ZooKeeperLock.acquire/release call the recipe's acquire(blocking=True,
	// timeout=...) and release(). So it is judged as kazoo is
	// (zooKeeperLibrary's claims and traits): tooz adds a heart that reads
	// the namespace node, which neither keeps nor ends the session.
	register(zooKeeperLibrary("tooz-zookeeper", toozLibrary,
		"tooz's zookeeper driver (Debian's python3-tooz 3.1): kazoo's Lock recipe with kazoo's defaults, "+
			"the session timeout the TTL; each client a Python worker",
		false, false, false, program))
	register(locks.Info{
		Name: "tooz-etcd",
		// Etcd3Lock (tooz/drivers/etcd3.py) over python3-etcd3's Lock: a
		// lease of lock_timeout per try, a create-if-absent transaction
		// putting the key on it, the heart refreshing the lease, a
		// value-compared delete to release. A lease the cluster keeps while
		// its holder refreshes it: a session (as services' etcd lock).
		Traits:  locks.Traits{Ends: locks.Session, Release: locks.OwnerChecked, Quorum: true, OneMember: true},
		Library: toozLibrary,
		Summary: "tooz's etcd3 driver (Debian's python3-tooz 3.1) DOES NOT RUN AS PACKAGED: an acquire that finds the lock taken " +
			"raises TypeError (python3-etcd3 0.12's tenacity wait() vs tenacity 8.2); etcd3+http: TypeError at start (etcd3gw 2.0 " +
			"takes no api_path)",
		Server: "etcd",
		Nodes:  3,
		// The driver takes one host:port (Etcd3Driver.__init__:
		// etcd3.client(host, port)), so every client talks to the first
		// member only, and a crash, pause or cut of that member stops every
		// refresh while the lease runs out on the others: not NodeCrash,
		// NodePause nor Failover (services' etcd lock, dialling every
		// member, claims them). A stopped or cut-off holder's lease lapses
		// unseen (drivers.rst says nothing else). A dead holder's lapses
		// (ClientCrash); no client clock is read; latency below half the
		// TTL keeps the refreshes in time. The contended acquire's
		// TypeError comes after a refused transaction, so it never holds;
		// the worker still reports it as tooz raised it: unknown.
		Claims:  []fault.Kind{fault.ClientCrash, fault.ClientClock, fault.Latency},
		MinTTL:  time.Second, // lock_timeout is whole seconds (int()), and etcd's leases too
		Program: program,
	})
}
