<?php
// A locktorture worker that serves Symfony Lock 5.4 (Debian's
// php-symfony-lock) on the stores the Lock component ships: RedisStore on
// php-redis and on Predis, a CombinedStore of RedisStores with the
// ConsensusStrategy (Symfony's RedLock), PostgreSqlStore (advisory locks),
// PdoStore on PostgreSQL and on MySQL (MariaDB; a lock table with an
// expiry column) and MemcachedStore. It speaks the worker protocol through
// protocol.php, which the harness runs ahead of this file
// (library.phpWorker).
//
// The lock is used as Symfony's docs show it (components/lock.rst):
// new LockFactory($store), $factory->createLock($resource, $ttl) (its
// autoRelease left at its default, true), acquire(), release(); stores
// built as the docs build them, with the stores' defaults (RedisStore's,
// PdoStore's and MemcachedStore's $initialTtl of 300 s included). refresh()
// is not called: the docs ask for it only "in case of long-running tasks",
// and a holder here works for microseconds.
//
// Waiting. acquire(true) waits without bound ("To wait (indefinitely)
// until the lock can be created, pass true", Lock::acquire: a store without
// BlockingStoreInterface is retried every 100 ± 10 ms for ever, and
// PostgreSqlStore::waitAndSave blocks in pg_advisory_lock). A user who
// wants a bound writes the loop themselves: acquire(false), retried every
// 100 ± 10 ms (Symfony's own delay) until the wait runs out.
//
// Answers. acquire() returning false (LockConflictedException inside) is
// not-acquired; LockAcquiringException (a store's error, or
// LockExpiredException when the taking outlasted the TTL, both wrapped by
// Lock::acquire's catch (\Exception)) is unknown. release() returning is
// released: Symfony reports nothing else, whether its delete deleted
// anything or not (RedisStore::delete ignores its script's answer,
// PdoStore::delete its row count, MemcachedStore::delete returns when the
// item is not its own); LockReleasingException is unknown.
//
// Deadline. The lease's valid_until_ns is the one Symfony keeps in its Key
// (Key::reduceLifetime: microtime(true) before the command that set the
// TTL, plus the TTL; Lock::getRemainingLifetime reads it), turned to the
// client's clock: Lock::isExpired() is that deadline passing, the only
// loss signal Symfony has (it renews nothing). PostgreSqlStore sets no
// lifetime: 0.

require_once 'Symfony/Component/Lock/autoload.php';

final class SymfonyWorker extends LtWorker
{
    /** @var \Symfony\Component\Lock\LockFactory */
    private $factory;
    /** @var float seconds */
    private $ttl;
    /** @var float seconds */
    private $wait;
    /** @var float seconds: each node's timeout in a CombinedStore */
    private $nodeTimeout;
    /** @var array token => the Lock: Symfony's handle on the lease */
    private $leases = [];

    public function hello(array $h): array
    {
        $this->ttl = $h['ttl_ns'] / 1e9;
        $this->wait = (($h['wait_ns'] ?? 0) ?: $h['ttl_ns']) / 1e9;
        $this->nodeTimeout = (($h['node_timeout_ns'] ?? 0) ?: 500000000) / 1e9;
        $this->factory = new \Symfony\Component\Lock\LockFactory($this->store($h['lock'], $h['nodes']));
        $this->connectStore($h);
        return [];
    }

    /** The store, built as Symfony's docs build it for the named lock. */
    private function store(string $lock, array $nodes): \Symfony\Component\Lock\PersistingStoreInterface
    {
        switch ($lock) {
            case 'symfony-redis':
                return new \Symfony\Component\Lock\Store\RedisStore(self::phpRedis($nodes[0]));
            case 'symfony-predis':
                return new \Symfony\Component\Lock\Store\RedisStore(new \Predis\Client(lt_predis_params($nodes[0], 0.5), lt_predis_options()));
            case 'symfony-redlock3':
            case 'symfony-redlock5':
                // components/lock.rst, CombinedStore: one RedisStore per
                // server, ConsensusStrategy (a simple majority). Each node's
                // connect and read timeout is the harness's RedLock bound
                // (the hello's node_timeout_ns), as RedLock asks of a
                // client, php-lock-redlock's too: CombinedStore asks its
                // stores one after another, so two unreachable nodes at
                // 500 ms each would spend a 1 s lease before the refresh,
                // and no acquire would ever hold.
                $stores = [];
                foreach ($nodes as $n) {
                    $stores[] = new \Symfony\Component\Lock\Store\RedisStore(lt_connect_redis($n, $this->nodeTimeout));
                }
                return new \Symfony\Component\Lock\Store\CombinedStore($stores, new \Symfony\Component\Lock\Strategy\ConsensusStrategy());
            case 'symfony-postgres':
                // A DSN, connected lazily (PostgreSqlStore::getConnection);
                // libpq's connect_timeout (2 s is its least) bounds only the
                // connect: PDO has no bound on a query.
                return new \Symfony\Component\Lock\Store\PostgreSqlStore(self::pgDsn($nodes[0]), ['db_username' => 'postgres']);
            case 'symfony-pdo-pg':
                $store = new \Symfony\Component\Lock\Store\PdoStore(self::pgDsn($nodes[0]), ['db_username' => 'postgres']);
                // The docs: "you can use createTable() to create the table";
                // save() creates it too on a missing table, but two clients
                // doing so at once fail one of their first acquires.
                try {
                    $store->createTable();
                } catch (\PDOException $e) {
                    // Another client made it first (42P07 duplicate table;
                    // 23505 or 42710, duplicate object, when both raced to
                    // make its row type in pg_type): it exists.
                    if (!in_array($e->errorInfo[0] ?? '', ['42P07', '23505', '42710'], true)) {
                        throw $e;
                    }
                }
                return $store;
            case 'symfony-pdo-mysql':
                // The docs' PdoStore on a DSN, connected lazily
                // (PdoStore::getConnection: new \PDO($dsn, db_username,
                // db_password, db_connection_options)); MySQL's DSN takes no
                // timeout, so db_connection_options, PdoStore's own option
                // for "driver-specific connection options", carries
                // PDO::ATTR_TIMEOUT, pdo_mysql's connect timeout (30 s by
                // default), 2 s as symfony-pdo-pg's libpq connect_timeout.
                // It bounds only the connect: PDO has no bound on a query
                // but mysqlnd.net_read_timeout (php.ini, 86400 s by
                // default), which is PHP's, not Symfony's.
                $store = new \Symfony\Component\Lock\Store\PdoStore(self::mysqlDsn($nodes[0]),
                    ['db_username' => 'root', 'db_connection_options' => [\PDO::ATTR_TIMEOUT => 2]]);
                // createTable()'s MySQL branch: key_id VARCHAR(64) primary
                // key, key_token VARCHAR(44), key_expiration INTEGER
                // UNSIGNED, COLLATE utf8mb4_bin, InnoDB. Made here as for
                // symfony-pdo-pg: save() makes it on a missing table (1146)
                // only outside a transaction.
                try {
                    $store->createTable();
                } catch (\PDOException $e) {
                    // Another client made it first (42S01, 1050: table
                    // already exists): it exists.
                    if ('42S01' !== ($e->errorInfo[0] ?? '')) {
                        throw $e;
                    }
                }
                return $store;
            case 'symfony-memcached':
                [$host, $port] = lt_host_port($nodes[0]);
                $m = new \Memcached();
                // libmemcached's defaults wait 4 s to connect and 5 s for a
                // reply; 500 ms as every other client here.
                $m->setOption(\Memcached::OPT_CONNECT_TIMEOUT, 500);
                $m->setOption(\Memcached::OPT_POLL_TIMEOUT, 500);
                $m->addServer($host, $port);
                return new \Symfony\Component\Lock\Store\MemcachedStore($m);
        }
        throw new \InvalidArgumentException('no such lock in this worker: '.$lock);
    }

    /** A php-redis client whose commands are events, 500 ms to connect and
     * per reply, as the harness's own clients: a user who sets no timeout
     * waits default_socket_timeout (60 s) on a cut link. */
    private static function phpRedis(string $addr): \Redis
    {
        return lt_connect_redis($addr, 0.5);
    }

    private static function pgDsn(string $addr): string
    {
        [$host, $port] = lt_host_port($addr);
        return sprintf('pgsql:host=%s;port=%d;dbname=postgres;connect_timeout=2', $host, $port);
    }

    /** The docs' MySQL DSN (components/lock.rst: 'mysql:host=127.0.0.1;dbname=app')
     * on the node's address and the harness's database. */
    private static function mysqlDsn(string $addr): string
    {
        [$host, $port] = lt_host_port($addr);
        return sprintf('mysql:host=%s;port=%d;dbname=locktorture', $host, $port);
    }

    public function acquire(string $key): array
    {
        $lock = $this->factory->createLock($key, $this->ttl);
        $deadline = microtime(true) + $this->wait;
        while (true) {
            try {
                $got = $lock->acquire(false);
            } catch (\Symfony\Component\Lock\Exception\LockAcquiringException $e) {
                self::drop($lock);
                return ['err' => 'unknown', 'msg' => 'acquire: '.lt_describe($e)];
            }
            if ($got) {
                break;
            }
            $left = $deadline - microtime(true);
            if ($left <= 0) {
                self::drop($lock);
                return ['err' => 'not-acquired', 'msg' => 'acquire(false) refused until the wait ran out'];
            }
            usleep((int) min((100 + random_int(-10, 10)) * 1000, $left * 1e6));
        }
        $token = bin2hex(random_bytes(12));
        $this->leases[$token] = $lock;
        // Symfony's deadline, on the client's clock: read from the machine's
        // clock as Key does, plus the harness's skew.
        $left = $lock->getRemainingLifetime();
        $until = null === $left ? 0 : self::machineNs() + (int) round($left * 1e9) + $this->clockNs;
        return ['lease' => ['key' => $key, 'token' => $token, 'valid_until_ns' => $until]];
    }

    public function release(array $lease): array
    {
        $lock = $this->leases[$lease['token'] ?? ''] ?? null;
        if (null === $lock) {
            return ['err' => 'unknown', 'msg' => 'a lease this worker never handed out'];
        }
        unset($this->leases[$lease['token']]);
        try {
            $lock->release();
        } catch (\Symfony\Component\Lock\Exception\LockReleasingException $e) {
            return ['err' => 'unknown', 'msg' => 'release: '.lt_describe($e)];
        } finally {
            self::drop($lock);
        }
        return [];
    }

    /**
     * Lets the lock go out of scope as a user's does: its destructor
     * (autoRelease, Lock::__destruct) asks the store whether a lock it
     * believes taken is still held (a failed release, an acquire whose save
     * landed and whose refresh failed) and releases it if so. What that
     * throws goes to stderr: the op's answer is the call's, not the
     * destructor's.
     */
    private static function drop(?\Symfony\Component\Lock\LockInterface &$lock): void
    {
        try {
            $lock = null;
        } catch (\Throwable $e) {
            fwrite(STDERR, 'symfony-worker: a lock\'s destructor: '.lt_describe($e)."\n");
        }
    }
}

lt_serve(new SymfonyWorker(), 'symfony-worker');
