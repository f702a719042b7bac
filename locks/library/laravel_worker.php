<?php
// A locktorture worker that serves Laravel's cache lock (Debian's
// php-illuminate-cache 8.83) as a Laravel 8 application gets it, used
// without the framework.
//
// The harness runs it after protocol.php (library.phpWorker), whose names
// (LtWorker, LtRedis, lt_traced, lt_serve...) it uses without requiring
// anything.
//
// What a Laravel 8 application gets from Cache::lock($name, $seconds):
//   - config/database.php of laravel/laravel v8.6.12 says
//     'client' => env('REDIS_CLIENT', 'phpredis'), and
//     Illuminate/Redis/RedisServiceProvider.php builds
//     new RedisManager($app, Arr::pull($config, 'client', 'phpredis'), $config):
//     php-redis is the default, through Connectors/PhpRedisConnector.php
//     and Connections/PhpRedisConnection.php.
//   - config/cache.php's redis store ('connection' => 'cache',
//     'lock_connection' => 'default'); CacheManager::createRedisDriver builds
//     new RedisStore($redis, $prefix, $connection) and
//     setLockConnection(...), in a Repository, whose __call hands lock() to
//     the store.
//   - RedisStore::lock($name, $seconds, $owner = null) makes a PhpRedisLock
//     (a RedisLock) on the lock connection when it is a PhpRedisConnection.
//   - RedisLock::acquire: SET name owner EX seconds NX (Cache/RedisLock.php);
//     PhpRedisLock::release: EVAL LuaScripts::releaseLock() (GET, compare
//     the owner, DEL) and (bool) of its answer; Lock::get() tries once,
//     Lock::block($seconds) tries every 250 ms (sleepMilliseconds) until
//     Carbon::now()->getTimestamp() - $seconds >= its start, whole seconds
//     both (Support/InteractsWithTime::currentTime), then throws
//     LockTimeoutException. The owner defaults to Str::random() (Lock's
//     constructor), kept on the Lock object for release().
//
// As the worker uses it: the laravel/laravel 8 config with the harness's
// node as the 'default' connection, no key prefix (a prefix changes nothing
// a lock does), and 'timeout' and 'read_timeout' of 500 ms (connection
// parameters Laravel's docs list for PhpRedis; without them php-redis waits
// default_socket_timeout, 60 s, on a cut link). The lease's seconds are the
// TTL rounded up to whole seconds (EX takes no fraction: a 1.5 s story TTL
// locks for 2 s); the wait is block(ceil(wait)), or get() when the harness
// gives no wait.
//
// Command traps: the connector the RedisManager is extended with
// (RedisManager::extend, Laravel's way to add a driver) makes
// PhpRedisConnection's client an LtRedis (protocol.php), so SET and EVAL
// are command-boundary events; PhpRedisConnection's "went away" reconnect
// goes through the same connector.
//
// Laravel's lock has no loss signal (no renewal, nothing watches the key),
// so no "lost" events.

final class LaravelWorker extends LtWorker
{
    /** @var int client-clock ns just before the last SET was written,
     * after the harness's go (LaravelWorker::tracedRedis) */
    public static $setSentNs = 0;
    /** @var LaravelWorker|null the one worker of this process */
    public static $self;

    /** @var \Illuminate\Cache\Repository|null */
    private $cache;
    /** @var int the lock's seconds (RedisLock's EX) */
    private $seconds = 1;
    /** @var int block()'s seconds; 0: get() */
    private $waitS = 0;
    /** @var array owner => \Illuminate\Cache\RedisLock: a lease's lock */
    private $leases = [];

    public function hello(array $h): array
    {
        self::$self = $this;
        // Loaded here, not at the top, so that a library that fails on this
        // PHP answers hello with its one-line error.
        try {
            require_once 'Illuminate/Cache/autoload.php';
            require_once 'Illuminate/Redis/autoload.php';
            if (!class_exists('Redis', false) || !class_exists('LtRedis', false)) {
                return ['err' => 'unknown', 'msg' => 'php-redis (the Redis extension) is not loaded'];
            }
            [$host, $port] = lt_host_port($h['nodes'][0]);
            // laravel/laravel 8's config/database.php 'redis' array, less
            // the prefix, with timeouts.
            $config = [
                'options' => ['cluster' => 'redis'],
                'default' => ['host' => $host, 'port' => $port, 'database' => 0, 'timeout' => 0.5, 'read_timeout' => 0.5],
            ];
            $manager = new \Illuminate\Redis\RedisManager(null, 'phpredis', $config);
            $manager->extend('phpredis', function () {
                return LaravelWorker::connector();
            });
            // CacheManager::createRedisDriver, with config/cache.php's store.
            $store = new \Illuminate\Cache\RedisStore($manager, '', 'default');
            $store->setLockConnection('default');
            $this->cache = new \Illuminate\Cache\Repository($store);
        } catch (\Throwable $e) {
            return ['err' => 'unknown', 'msg' => 'laravel: '.lt_describe($e)];
        }
        $this->seconds = (int) max(1, (int) ceil($h['ttl_ns'] / 1e9));
        $wait = (int) ($h['wait_ns'] ?? 0);
        $this->waitS = $wait > 0 ? (int) ceil($wait / 1e9) : 0;
        $this->connectStore($h);
        return [];
    }

    /**
     * Laravel's PhpRedisConnector with one change: the client it makes is
     * a traced \Redis. createClient is PhpRedisConnector::createClient less
     * what the config above never sets (password, database other than 0,
     * prefix, scan, name, serializer, compression): establishConnection is
     * Laravel's own (connect(host, port, timeout, null, retry_interval,
     * read_timeout)).
     */
    public static function connector(): \Illuminate\Redis\Connectors\PhpRedisConnector
    {
        return new class() extends \Illuminate\Redis\Connectors\PhpRedisConnector {
            protected function createClient(array $config)
            {
                $client = LaravelWorker::tracedRedis();
                $this->establishConnection($client, $config);
                if (!empty($config['read_timeout'])) {
                    $client->setOption(\Redis::OPT_READ_TIMEOUT, $config['read_timeout']);
                }
                return $client;
            }
        };
    }

    /** An LtRedis that notes when the SET that takes a lock is written. */
    public static function tracedRedis(): \Redis
    {
        return new class() extends LtRedis {
            public function set($key, $value, $opts = null)
            {
                // LtRedis::set's events, with the time taken between the
                // harness's go and the write: the lease counts from there.
                return lt_traced(lt_words('set', [$key, $value, $opts]), function () use ($key, $value, $opts) {
                    LaravelWorker::$setSentNs = LaravelWorker::$self->nowNs();
                    return null === $opts ? \Redis::set($key, $value) : \Redis::set($key, $value, $opts);
                });
            }
        };
    }

    public function acquire(string $key): array
    {
        self::$setSentNs = 0;
        try {
            // Cache::lock($name, $seconds): a PhpRedisLock with a random
            // owner (its first use connects: a refused connect is unknown,
            // as a lost one is).
            $lock = $this->cache->lock($key, $this->seconds);
            if ($this->waitS > 0) {
                $lock->block($this->waitS);
            } elseif (!$lock->get()) {
                return ['err' => 'not-acquired', 'msg' => 'get(): the lock is taken'];
            }
        } catch (\Illuminate\Contracts\Cache\LockTimeoutException $e) {
            // Every SET of the wait was answered (an error would have thrown
            // out of block() at once): none took the key.
            return ['err' => 'not-acquired', 'msg' => 'block('.$this->waitS.'): LockTimeoutException'];
        } catch (\Throwable $e) {
            return ['err' => 'unknown', 'msg' => 'acquire: '.lt_describe($e)];
        }
        $owner = (string) $lock->owner();
        $this->leases[$owner] = $lock;
        // The key lives $seconds from the SET that took it (EX), and
        // Laravel promises the lock for those seconds: the deadline counts
        // from just before that SET was written.
        $from = self::$setSentNs ?: $this->nowNs();
        return ['lease' => ['key' => $key, 'token' => $owner, 'valid_until_ns' => $from + $this->seconds * 1000000000]];
    }

    public function release(array $lease): array
    {
        $token = (string) ($lease['token'] ?? '');
        $lock = $this->leases[$token] ?? null;
        unset($this->leases[$token]);
        try {
            if (null === $lock) {
                // A lease released before, or another process's: Laravel's
                // documented way to release by owner (Cache::restoreLock).
                $lock = $this->cache->restoreLock((string) ($lease['key'] ?? ''), $token);
            }
            // php-redis answers an error reply whose code is ERR (and a few
            // others) with false instead of a RedisException, keeping the
            // error as its last; release() casts either to false.
            $this->cache->getStore()->lockConnection()->client()->clearLastError();
            $released = $lock->release();
        } catch (\Throwable $e) {
            return ['err' => 'unknown', 'msg' => 'release: '.lt_describe($e)];
        }
        if (!$released) {
            $refused = $this->cache->getStore()->lockConnection()->client()->getLastError();
            if (null !== $refused) {
                // Refused, not answered 0: the key may still be this owner's.
                return ['err' => 'unknown', 'msg' => 'release() returned false on an error reply: '.$refused];
            }
            // The script answered 0: the key was gone or someone else's.
            return ['err' => 'not-held', 'msg' => 'release() returned false: the key is not this owner\'s'];
        }
        return [];
    }
}

lt_serve(new LaravelWorker(), 'laravel-worker');
