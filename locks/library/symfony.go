package library

import (
	_ "embed"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

// symfonyWorker is the worker program around Symfony's Lock component, one
// store per lock (see its header).
//
//go:embed symfony_worker.php
var symfonyWorker string

// symfonyLibrary names the library as Debian ships it.
const symfonyLibrary = "Symfony Lock 5.4 (Debian's php-symfony-lock)"

// symfonyLocks registers Symfony's Lock on the stores it ships, as its docs
// (components/lock.rst) build them: new LockFactory($store),
// createLock($resource, $ttl), acquire(), release(), the stores' defaults
// kept; each client a PHP worker. The wait is a loop of acquire(false),
// 100 ± 10 ms apart as Symfony's own blocking loop (Lock::acquire), until
// the wait runs out: acquire(true) waits for ever.
//
// What every store shares (Lock::acquire, Lock::refresh, Key): the store's
// save() takes the key with the store's $initialTtl (300 s by default for
// RedisStore, PdoStore and MemcachedStore), and then, since the lock has a
// TTL, Lock::acquire calls refresh(), whose putOffExpiration sets the TTL
// in a command of its own: a client that dies or loses its connection
// between the two leaves a key that lives 300 s, which every story counts
// as for good (ExpirySeparate). Before each of those commands Key notes
// microtime(true) + TTL (Key::reduceLifetime), and after them Lock::acquire
// gives the lock up with LockExpiredException if that has passed
// (Validity): that deadline is the lease's ValidUntil. Symfony renews
// nothing and tells no loss (Lock::isExpired is that same deadline).
// release() says nothing when it deleted nothing: the stores' delete()
// ignores what its command did, and Lock::release only checks the key is
// no longer its own. So a lapsed lease's release is released, never
// not-held.
func symfonyLocks(register func(locks.Info)) {
	program := phpWorker(symfonyWorker)
	// RedisStore (Store/RedisStore.php): the lock is a sorted set of
	// tokens scored by their expiry on Redis's TIME (getNowCode), taken,
	// renewed, checked and deleted by Lua scripts that first drop expired
	// members and test the caller's token (save, putOffExpiration,
	// exists, delete), the key's own life a PEXPIREAT of the latest
	// member: Redis's wall clock ends it, and only the token's holder
	// deletes it.
	redisTraits := locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall,
		ExpirySeparate: true, Validity: true, QuietRelease: true}
	// A lease's (locks.LeaseClaims), as the docs' Reliability section
	// words it: "Expiring stores (MemcachedStore and RedisStore) guarantee
	// that the lock is acquired only for the defined duration of time".
	// Not NodeCrash: "If the Redis service or the machine hosting it
	// restarts, every locks would be lost without notify running
	// processes". Not NodeClock: "If the date or time of the machine
	// changes, a Lock could be released sooner than expected". Nor
	// eviction, failover, a disk error (the docs ask for a dedicated
	// server, no FLUSHDB). The client's clock is read only to keep the
	// deadline (Key), which the worker reports on the harness's clock.
	register(locks.Info{
		Name:    "symfony-redis",
		Traits:  redisTraits,
		Library: symfonyLibrary,
		Summary: "Symfony Lock 5.4's RedisStore on php-redis (Debian's php-symfony-lock): Lua scripts on a sorted set " +
			"expiring on Redis's TIME; taken for 300 s, then set to the TTL; each client a PHP worker",
		Claims:  locks.LeaseClaims,
		Program: program,
	})
	// The same store on Predis: RedisStore::evaluate's other branch
	// (Predis's eval, its ServerException turned LockStorageException),
	// and the other client PHP users give it. Its connection and timeout
	// errors (Predis\Connection\ConnectionException) reach Lock::acquire
	// as php-redis's RedisException does.
	register(locks.Info{
		Name:    "symfony-predis",
		Traits:  redisTraits,
		Library: symfonyLibrary,
		Summary: "Symfony Lock 5.4's RedisStore on Predis 1.1 (Debian's php-symfony-lock, php-nrk-predis): as symfony-redis, " +
			"Predis's client; each client a PHP worker",
		Claims:  locks.LeaseClaims,
		Program: program,
	})
	// CombinedStore with ConsensusStrategy (Store/CombinedStore.php): each
	// RedisStore in turn, the lock held when more than half said yes,
	// stopping once that cannot be met. A store's error counts as a no, so
	// Symfony reports a majority it could not reach as
	// LockConflictedException (not-acquired), and deletes the key on every
	// store after a try that fell short (Retracts); its delete() swallows
	// every store's error, so a release that reached no node is released.
	// putOffExpiration gives each store what is left of one TTL counted
	// from before the first (CombinedStore::putOffExpiration's $expireAt).
	// The docs: "The CombinedStore will be, at best, as reliable than the
	// less reliable of all managed stores": a lease's claims, as RedLock's.
	for _, n := range []struct {
		name  string
		nodes int
	}{{"symfony-redlock3", 3}, {"symfony-redlock5", 5}} {
		traits := redisTraits
		traits.Retracts = true
		register(locks.Info{
			Name:    n.name,
			Traits:  traits,
			Library: symfonyLibrary,
			Nodes:   n.nodes,
			Summary: "Symfony Lock 5.4's CombinedStore of RedisStores with the ConsensusStrategy (Debian's php-symfony-lock): " +
				"a majority of independent Redis nodes, the harness's RedLock bound per node; each client a PHP worker",
			NodeTimeout: true,
			// CombinedStore asks the nodes in turn, and a cut one costs
			// its timeout on save and again on putOffExpiration: beside
			// two busy loops the client cut from A and B took C 200 to
			// 400 ms after C's restart, inside a 300 ms pause at a 500 ms
			// lease by 3 to 98 ms, and inside a 600 ms one at 1 s by 193
			// ms or more.
			SplitTTL: time.Second,
			Claims:   locks.LeaseClaims,
			Program:  program,
		})
	}
	// PostgreSqlStore (Store/PostgreSqlStore.php): pg_try_advisory_lock on
	// the client's one connection (save), pg_advisory_unlock of the
	// session's own lock (delete, after exists() reads pg_locks for
	// pg_backend_pid()); no expiry at all (putOffExpiration only checks it
	// still holds), so Key keeps no deadline. The docs: "Locks are
	// automatically released at the end of the session in case the client
	// cannot unlock for any reason".
	register(locks.Info{
		Name:    "symfony-postgres",
		Traits:  locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked, QuietRelease: true},
		Library: symfonyLibrary,
		Summary: "Symfony Lock 5.4's PostgreSqlStore (Debian's php-symfony-lock): pg_try_advisory_lock on the client's " +
			"connection, held until released or the session ends; each client a PHP worker",
		Server: "postgres",
		// An advisory lock's, as tooz-postgres and pg-advisory: held while
		// the session lives, so a paused or slow holder keeps it, a dead
		// one's ends with its connection. Not NodeCrash (a restarted server
		// has no sessions and no locks while their holders believe), not
		// Partition (a holder cut off keeps believing, and whether the
		// server keeps its session is TCP's). PDO bounds no query, so on a
		// stopped server or a cut link a call returns when the server
		// answers again.
		Claims:  []fault.Kind{fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock},
		Program: program,
	})
	// PdoStore (Store/PdoStore.php) on PostgreSQL: a row per key in
	// lock_keys, its expiry whole seconds of the server's clock
	// (CAST(EXTRACT(epoch FROM NOW()) AS INT) + ttl); save() INSERTs it
	// with $initialTtl (300 s), or on a conflict takes over a row whose
	// expiry has passed; putOffExpiration UPDATEs the expiry where the
	// token is the caller's; delete() DELETEs where it is. A TTL under a
	// second is refused (putOffExpiration: InvalidTtlException, "This store
	// does not support TTL lower than 1 second"): a story's 500 ms runs at
	// 1 s; 1.5 s is written as "+ 1.5" and rounded by PostgreSQL.
	register(locks.Info{
		Name: "symfony-pdo-pg",
		// ServerEndsEarly: the row's expiry is rounded to the second (a
		// cast to INT) and compared with a now rounded too, so the server keeps a
		// lease between ttl-1 s and ttl while Key counts the whole ttl.
		Traits: locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall,
			ExpirySeparate: true, Validity: true, ServerEndsEarly: true, QuietRelease: true},
		Library: symfonyLibrary,
		Summary: "Symfony Lock 5.4's PdoStore on PostgreSQL (Debian's php-symfony-lock, php-pgsql): a lock_keys row whose " +
			"expiry is whole seconds of the server's clock; each client a PHP worker",
		Server: "postgres",
		// A lease's, as the docs' Expiring Stores section words it (above);
		// not NodeCrash nor NodeClock as there.
		Claims:  locks.LeaseClaims,
		MinTTL:  time.Second,
		Program: program,
	})
	// PdoStore (Store/PdoStore.php) on MySQL, MariaDB here: the same
	// statements as on PostgreSQL with getCurrentTimestampStatement's
	// MySQL branch, UNIX_TIMESTAMP(), the server's wall clock in whole
	// seconds, truncated. save() INSERTs the row with $initialTtl (300 s);
	// a duplicate key (23000, 1062) is no missing table (isTableMissing:
	// 1146 only), so save() goes on to putOffExpiration, whose UPDATE takes
	// over the row where the token is the caller's or the expiry has
	// passed, one statement under InnoDB's row lock. MySQL counts the rows
	// an UPDATE changed, not those it matched, so a refresh within the
	// same second as the last changes none: putOffExpiration then asks
	// exists() (its comment: "If this method is called twice in the same
	// second, the row wouldn't be updated"), and throws
	// LockConflictedException only when the row is not the caller's
	// unexpired one. delete() DELETEs where the token is the caller's. The
	// table is createTable()'s MySQL one (key_expiration INTEGER UNSIGNED,
	// COLLATE utf8mb4_bin, ENGINE InnoDB). A TTL under a second is refused
	// (putOffExpiration's InvalidTtlException), as on PostgreSQL.
	register(locks.Info{
		Name: "symfony-pdo-mysql",
		// ServerEndsEarly: the row's expiry is UNIX_TIMESTAMP() + ttl, the
		// second the statement ran in, truncated, and the row is expired
		// once UNIX_TIMESTAMP() reaches it (putOffExpiration's
		// "expiration <= UNIX_TIMESTAMP()"), so the server keeps a lease
		// between ttl-1 s and ttl (a TTL of 1 s taken at .9 of a second
		// lives 0.1 s there) while Key counts the whole ttl. A fractional
		// TTL is written "+ 1.5" and rounded by MySQL into the integer
		// column.
		Traits: locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall,
			ExpirySeparate: true, Validity: true, ServerEndsEarly: true, QuietRelease: true},
		Library: symfonyLibrary,
		Summary: "Symfony Lock 5.4's PdoStore on MySQL (Debian's php-symfony-lock, php-mysql) on MariaDB 10.11: a lock_keys " +
			"row whose expiry is whole seconds of UNIX_TIMESTAMP(); each client a PHP worker",
		Server: "mariadb",
		// A lease's, as symfony-pdo-pg: the docs' Expiring Stores section
		// (above); a dead holder's row lives to its expiry, a connection's
		// end deleting nothing. Not NodeCrash nor NodeClock as there (a
		// server's wall clock set forward expires every row sooner). PDO
		// bounds no query (mysqlnd.net_read_timeout, 86400 s by default):
		// on a stopped server or a cut link a call returns when the server
		// answers again, or fails on a connection the server closed
		// (PDOException: unknown), and PdoStore never reconnects.
		Claims:  locks.LeaseClaims,
		MinTTL:  time.Second,
		Program: program,
	})
	// MemcachedStore (Store/MemcachedStore.php): add(key, token, 300),
	// then putOffExpiration's get-with-CAS and cas(token, ceil(ttl)); the
	// release reads the item with its CAS id, and if it is the caller's,
	// cas()es it to live 2 s and deletes it. memcached's whole-second item
	// clock counts CLOCK_MONOTONIC (ServerMonotonic). A TTL under a
	// second is refused ("Memcached does not support TTL lower than 1
	// second", InvalidTtlException): a story's 500 ms runs at 1 s, and 1.5
	// s is 2 s (ceil), which Key's deadline counts too. The store never
	// looks at the client's result codes but NOTFOUND: an add or a get that
	// failed on the network reads as someone else's lock (not-acquired),
	// and a delete that could not read the item as nothing to do
	// (released).
	register(locks.Info{
		Name: "symfony-memcached",
		// ServerEndsEarly: memcached's item clock ticks whole seconds and
		// may drop an item up to a tick before its expiry, while Key
		// counts the whole ceil(ttl).
		Traits: locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerMonotonic,
			ExpirySeparate: true, Validity: true, ServerEndsEarly: true, QuietRelease: true},
		Library: symfonyLibrary,
		Summary: "Symfony Lock 5.4's MemcachedStore (Debian's php-symfony-lock, php-memcached): add, then a CAS to " +
			"the TTL in whole seconds; each client a PHP worker",
		Server: "memcached",
		// A lease's, as the docs word it for "Expiring stores
		// (MemcachedStore and RedisStore)"; not NodeCrash ("If the
		// Memcached service or the machine hosting it restarts, every locks
		// would be lost") nor Eviction ("By default Memcached use a LRU
		// mechanism to remove old entries").
		Claims:  locks.LeaseClaims,
		MinTTL:  time.Second,
		Program: program,
	})
}
