<?php
// A locktorture worker that serves php-lock's Redis mutex (Debian's
// php-malkusch-lock 2.2, php-lock/lock on Packagist): PHPRedisMutex, its
// RedLock over php-redis, on as many nodes as the harness gives it (one for
// php-lock-redis, as its README's example; five for php-lock-redlock).
//
// The harness runs it after protocol.php (library.phpWorker), whose names
// (LtWorker, lt_connect_redis...) it uses without requiring anything.
//
// The library, as Debian ships it (/usr/share/php/Malkusch/Lock/classes):
//   - Its API is Mutex::synchronized(callable): LockMutex::synchronized
//     runs lock(), the callable, and unlock() in a finally; lock() and
//     unlock() are protected. The README shows nothing else.
//   - SpinlockMutex::lock: Loop(timeout)->execute() tries until the
//     timeout's seconds are up (util/Loop.php: random sleeps of 10 ms
//     growing by 1.25 per try up to 500 ms, then TimeoutException); before
//     each try it notes $acquired = microtime(true), and each try is
//     acquire('lock_'.$name, $timeout + 1): the key lives a second longer
//     than the timeout "to ensure that we delete only our keys".
//   - RedisMutex::acquire (RedLock): a new random token per try, SET key
//     token NX EX expire on every node (PHPRedisMutex::add: set($key,
//     $value, ['nx', 'ex' => $expire])), a node's RedisException counted as
//     "errored" and logged; held when a majority said OK and the elapsed
//     time is <= expire (the key's whole life: no drift, nothing
//     subtracted); otherwise it releases on every node, and throws
//     LockAcquireException when errored nodes leave no majority, else
//     returns false and the loop tries again.
//   - SpinlockMutex::unlock: if microtime(true) - $acquired > timeout, it
//     throws ExecutionOutsideLockException and deletes nothing; else
//     RedisMutex::release runs the compare-and-delete script (GET, compare
//     the token, DEL) on every node, a node's RedisException logged and
//     not counted, and throws LockReleaseException('Failed to release the
//     lock.') unless a majority deleted.
//
// Acquire and release are separate requests here, and PHP has one thread.
// The worker holds the mutex the way its users do, inside synchronized():
// a Fiber (PHP 8.1) runs $mutex->synchronized(fn () => Fiber::suspend()),
// so the acquire request returns once the callable starts (the lock is
// held, the Fiber suspended in it), and the release request resumes the
// Fiber: the callable returns and synchronized's own finally unlocks, its
// exceptions coming out of resume(). No protected method is called and
// nothing of the library is patched; its private $token and $acquired are
// read (reflection) only to report the lease: the value in Redis, and the
// deadline the library holds itself to ($acquired + timeout, unlock's
// check).
//
// The timeout is the TTL in whole seconds, rounded up (it is an int; 0 is
// refused), and also the wait: Loop's deadline is the same timeout, and the
// library has no separate wait, so the harness's wait is not used. Each
// node is a connected \Redis as the README makes it (new Redis,
// connect), traced (LtRedis: SET and EVAL are command-boundary events),
// with a connect and read timeout: the harness's RedLock bound on several
// nodes (RedLock asks for a node timeout much smaller than the TTL), 500
// ms on one. The library has no loss signal: no "lost" events.

final class PhpLockWorker extends LtWorker
{
    /** @var \Redis[] */
    private $nodes = [];
    /** @var int the mutex's timeout, seconds */
    private $timeout = 1;
    /** @var object the mutex's logger: what it logged, per token */
    private $log;
    /** @var array token => ['fiber' => Fiber, 'mutex' => mutex] */
    private $held = [];

    public function hello(array $h): array
    {
        try {
            require_once 'Malkusch/Lock/autoload.php';
            if (!class_exists('Redis', false) || !class_exists('LtRedis', false)) {
                return ['err' => 'unknown', 'msg' => 'php-redis (the Redis extension) is not loaded'];
            }
            if (!class_exists('Fiber')) {
                return ['err' => 'unknown', 'msg' => 'this PHP has no Fiber (PHP 8.1+)'];
            }
            $this->log = self::logger();
        } catch (\Throwable $e) {
            return ['err' => 'unknown', 'msg' => 'php-lock: '.lt_describe($e)];
        }
        $ttl = (int) $h['ttl_ns'];
        $this->timeout = (int) max(1, (int) ceil($ttl / 1e9));
        // The harness's RedLock bound where it sends one (five nodes), 500
        // ms on one node.
        $nodeTimeout = (($h['node_timeout_ns'] ?? 0) ?: 500000000) / 1e9;
        $this->nodes = [];
        foreach ($h['nodes'] as $addr) {
            $this->nodes[] = lt_connect_redis($addr, $nodeTimeout);
        }
        $this->connectStore($h);
        return [];
    }

    /** A PSR-3 logger that keeps RedisMutex's warnings by token: which
     * nodes of a try failed to answer its SET or its release. */
    private static function logger(): object
    {
        return new class() extends \Psr\Log\AbstractLogger {
            /** @var array token => list of messages */
            public $byToken = [];

            public function log($level, $message, array $context = [])
            {
                $token = (string) ($context['token'] ?? '');
                $msg = (string) $message;
                if (isset($context['index'])) {
                    $msg .= ' (server #'.$context['index'].')';
                }
                if (isset($context['exception']) && $context['exception'] instanceof \Throwable) {
                    $msg .= ': '.lt_describe($context['exception']);
                }
                $this->byToken[$token][] = $msg;
            }

            /** What went wrong for token, in one line ('' for nothing). */
            public function of(string $token): string
            {
                return implode('; ', $this->byToken[$token] ?? []);
            }
        };
    }

    /** A private property of the library's, read, for the lease. */
    private static function peek(object $mutex, string $class, string $name)
    {
        $p = new \ReflectionProperty($class, $name);
        $p->setAccessible(true);
        return $p->getValue($mutex);
    }

    public function acquire(string $key): array
    {
        $mutex = new \malkusch\lock\mutex\PHPRedisMutex($this->nodes, $key, $this->timeout);
        $mutex->setLogger($this->log);
        $this->log->byToken = [];
        $fiber = new \Fiber(function () use ($mutex) {
            return $mutex->synchronized(function () {
                return \Fiber::suspend('held');
            });
        });
        try {
            $got = $fiber->start();
        } catch (\malkusch\lock\exception\TimeoutException $e) {
            // The last try got no majority and released on every node. A
            // node that did not answer its SET or its release may keep that
            // try's key: then the outcome is not certain (as redsync's
            // adapter sorts a failed try that lost a command).
            $token = (string) self::peek($mutex, \malkusch\lock\mutex\RedisMutex::class, 'token');
            if ('' !== ($why = $this->log->of($token))) {
                return ['err' => 'unknown', 'msg' => 'TimeoutException, and the last try lost a node: '.$why];
            }
            return ['err' => 'not-acquired', 'msg' => lt_describe($e)];
        } catch (\Throwable $e) {
            // LockAcquireException: too many nodes did not answer.
            $token = (string) self::peek($mutex, \malkusch\lock\mutex\RedisMutex::class, 'token');
            return ['err' => 'unknown', 'msg' => 'acquire: '.lt_describe($e).' ['.$this->log->of($token).']'];
        }
        if ('held' !== $got || !$fiber->isSuspended()) {
            return ['err' => 'unknown', 'msg' => 'synchronized() returned without running its callable'];
        }
        $token = (string) self::peek($mutex, \malkusch\lock\mutex\RedisMutex::class, 'token');
        $acquired = (float) self::peek($mutex, \malkusch\lock\mutex\SpinlockMutex::class, 'acquired');
        $this->held[$token] = ['fiber' => $fiber, 'mutex' => $mutex];
        // unlock() holds the library to $acquired + timeout (machine clock,
        // microtime) and throws ExecutionOutsideLockException after it: the
        // deadline it implies, counted from before the try that took the
        // lock, on the client's clock.
        $validUntil = (int) round(($acquired + $this->timeout) * 1e9) + $this->clockNs;
        return ['lease' => ['key' => $key, 'token' => $token, 'valid_until_ns' => $validUntil]];
    }

    public function release(array $lease): array
    {
        $token = (string) ($lease['token'] ?? '');
        $h = $this->held[$token] ?? null;
        unset($this->held[$token]);
        if (null === $h) {
            // The library's token is private to its mutex: nothing but the
            // Fiber that holds it can release it.
            return ['err' => 'unknown', 'msg' => 'a lease this worker does not hold (released before, or never handed out)'];
        }
        unset($this->log->byToken[$token]);
        // php-redis answers an error reply whose code is ERR (and a few
        // others) with false, not a RedisException, keeping it as its last
        // error: evalScript returns that false and release() counts the
        // node as not released, logging nothing.
        foreach ($this->nodes as $node) {
            $node->clearLastError();
        }
        try {
            $h['fiber']->resume(null);
        } catch (\malkusch\lock\exception\ExecutionOutsideLockException $e) {
            // unlock() found the timeout passed and deleted nothing.
            return ['err' => 'not-held', 'msg' => lt_describe($e)];
        } catch (\malkusch\lock\exception\LockReleaseException $e) {
            // No majority deleted. A node that did not answer may have, and
            // one that refused the script may still hold the key.
            $why = $this->log->of($token);
            foreach ($this->nodes as $i => $node) {
                if (null !== ($refused = $node->getLastError())) {
                    $why .= ('' === $why ? '' : '; ').'server #'.$i.' refused the script: '.$refused;
                }
            }
            if ('' !== $why) {
                return ['err' => 'unknown', 'msg' => lt_describe($e).' ['.$why.']'];
            }
            return ['err' => 'not-held', 'msg' => lt_describe($e)];
        } catch (\Throwable $e) {
            return ['err' => 'unknown', 'msg' => 'release: '.lt_describe($e)];
        }
        return [];
    }
}

lt_serve(new PhpLockWorker(), 'php-lock-worker');
