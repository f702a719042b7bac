<?php
// The worker protocol's PHP half, shared by every PHP worker here (the
// Python half is protocol.py; package worker of locktorture has the types).
//
// The harness runs a PHP worker as `php -r <this file><the worker's file>`
// (library.phpWorker, both files without their opening tags), so a worker
// file uses these names without requiring anything and ends with
//
//     lt_serve(new MyWorker(), "my-worker");
//
// What a worker file gets:
//
//   LtWorker              the base class: subclass it with hello(array $h),
//                         acquire(string $key) and release(array $lease),
//                         each returning the reply's fields (['lease' => ...],
//                         [] or ['err' => 'not-acquired', 'msg' => ...]); an
//                         exception thrown out of them answers `unknown`.
//                         hello calls $this->connectStore($h). It gives
//                         nowNs() (the client's clock: machine + clock_ns),
//                         read/write on the store, watchLoss/unwatchLoss and
//                         $this->after (run once the current reply is out).
//   lt_serve($w, $name)   serves stdin until it ends (exit 0); a request that
//                         does not parse: one stderr line, exit 2.
//   lt_send($obj)         one JSON line on stdout.
//   lt_event($obj)        an event with its "seq": sent, then waits for the
//                         harness's go (requests that come meanwhile run
//                         after); lt_next_seq() numbers one.
//   lt_point($name)       a named point of the lock's own (event "point").
//   lt_tell_lost($key, $token)  the "lost" event for a lease (no go).
//   LtRedis               a php-redis \Redis whose commands are command-
//                         boundary events (send before, reply after): use it
//                         where the library takes a \Redis.
//   LtPredisConnection    a Predis StreamConnection doing the same, for
//                         new Predis\Client($params, lt_predis_options()).
//   lt_connect_redis($addr, $timeoutS)  an LtRedis connected to host:port.
//   lt_host_port($addr), lt_did_what_it_asked($reply), lt_words(...)
//
// PHP is single-threaded: stdin is read in one place (LtIO). While a
// command waits for its go, lines that are not that go are queued and run
// once the current request is answered. While idle, the serve loop waits on
// stdin with stream_select no longer than the earliest loss check any
// worker registered (watchLoss), so a lock's own loss signal (a deadline,
// a probe of the server) reaches the harness between requests, never
// before the reply that handed the lease out.

// Warnings and deprecations go to stderr (the run's workers.log), never to
// stdout, which is the protocol's.
ini_set('display_errors', 'stderr');
ini_set('log_errors', '0');
ini_set('html_errors', '0');
error_reporting(E_ALL);

/** Writes one protocol line (a reply or an event). */
function lt_send(array $obj): void
{
    $line = json_encode($obj, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR);
    fwrite(STDOUT, $line."\n");
    fflush(STDOUT);
}

/** Ends the process at once with code, running no destructors (a library's
 * auto-release) and no shutdown functions, as Python's os._exit does. */
function lt_exit_now(int $code): void
{
    fflush(STDOUT);
    fflush(STDERR);
    if (function_exists('pcntl_exec')) {
        @pcntl_exec('/bin/sh', ['-c', 'exit '.$code]);
    }
    exit($code); // pcntl_exec failed: an ordinary exit
}

/** Everything read from stdin: the one place that reads it. */
final class LtIO
{
    /** @var string bytes read and not yet split into lines */
    private static $buf = '';
    /** @var array requests read while an event waited for its go */
    public static $queue = [];
    /** @var string the worker's name, for stderr lines */
    public static $name = 'php-worker';
    private static $started = false;

    private static function start(): void
    {
        if (!self::$started) {
            stream_set_blocking(STDIN, false);
            self::$started = true;
        }
    }

    /**
     * The next request, parsed: from the buffer, or waiting on stdin for up
     * to $timeout seconds (null: for ever). Null when the timeout passed.
     * Stdin's end exits the worker (0); a line that does not parse, 2.
     */
    public static function next(?float $timeout): ?array
    {
        self::start();
        $deadline = null === $timeout ? null : microtime(true) + max(0.0, $timeout);
        while (true) {
            $nl = strpos(self::$buf, "\n");
            if (false !== $nl) {
                $line = trim(substr(self::$buf, 0, $nl));
                self::$buf = (string) substr(self::$buf, $nl + 1);
                if ('' === $line) {
                    continue;
                }
                return self::parse($line);
            }
            $r = [STDIN];
            $w = $e = null;
            if (null === $deadline) {
                $n = @stream_select($r, $w, $e, null);
            } else {
                $left = $deadline - microtime(true);
                if ($left <= 0) {
                    return null;
                }
                $n = @stream_select($r, $w, $e, (int) floor($left), (int) (($left - floor($left)) * 1e6));
            }
            if (false === $n) {
                continue; // a signal (SIGCONT after a pause) interrupted it
            }
            if (0 === $n) {
                return null;
            }
            $chunk = fread(STDIN, 65536);
            if (false === $chunk || ('' === $chunk && feof(STDIN))) {
                lt_exit_now(0); // stdin ended: the harness is done with us
            }
            self::$buf .= $chunk;
        }
    }

    private static function parse(string $line): array
    {
        $req = json_decode($line, true);
        if (!is_array($req) || !isset($req['op']) || !is_string($req['op'])) {
            fwrite(STDERR, sprintf("%s: a request that does not parse (%s): %.80s\n", self::$name, json_last_error_msg(), $line));
            lt_exit_now(2);
        }
        return $req;
    }

    /** Waits for the harness's go for event seq, queueing other requests. */
    public static function waitGo(int $seq): void
    {
        while (true) {
            $req = self::next(null);
            if ('go' === $req['op']) {
                if ((int) ($req['seq'] ?? 0) === $seq) {
                    return;
                }
                continue; // a go for nothing waiting: ignored, as protocol.py does
            }
            self::$queue[] = $req;
        }
    }
}

/** @var int the last event sequence number handed out */
$GLOBALS['lt_seq'] = 0;

/** A new event sequence number. */
function lt_next_seq(): int
{
    return ++$GLOBALS['lt_seq'];
}

/** Sends a command-boundary or point event and waits for the harness's go. */
function lt_event(array $obj): void
{
    lt_send($obj);
    LtIO::waitGo((int) $obj['seq']);
}

/** A named point in the lock's own code where a nemesis may pause or crash it. */
function lt_point(string $point): void
{
    lt_event(['event' => 'point', 'seq' => lt_next_seq(), 'point' => $point]);
}

/** Tells the harness a lease it handed out is lost (the lock's own signal).
 * Nothing waits for a go. */
function lt_tell_lost(string $key, string $token): void
{
    lt_send(['event' => 'lost', 'lease' => ['key' => $key, 'token' => $token]]);
}

/** A reply that is not an error, nil, zero or false (the protocol's "ok"). */
function lt_did_what_it_asked($reply): bool
{
    if ($reply instanceof \Throwable || null === $reply || false === $reply) {
        return false;
    }
    if (interface_exists('Predis\Response\ErrorInterface', false) && $reply instanceof \Predis\Response\ErrorInterface) {
        return false;
    }
    return !((is_int($reply) || is_float($reply)) && 0 == $reply);
}

/** A command argument as a word of the event's cmds. */
function lt_word($arg): string
{
    if (is_bool($arg)) {
        return $arg ? '1' : '0';
    }
    if (is_scalar($arg) || (is_object($arg) && method_exists($arg, '__toString'))) {
        return (string) $arg;
    }
    return json_encode($arg);
}

/** Flattens a command's arguments into words: arrays (php-redis option
 * arrays such as ['nx', 'px' => 500]) become their keys and values. */
function lt_words(string $name, array $args): array
{
    $out = [strtolower($name)];
    $add = function ($a) use (&$add, &$out) {
        if (is_array($a)) {
            foreach ($a as $k => $v) {
                if (is_string($k)) {
                    $out[] = $k;
                }
                $add($v);
            }
        } elseif (null !== $a) {
            $out[] = lt_word($a);
        }
    };
    foreach ($args as $a) {
        $add($a);
    }
    return $out;
}

/** [host, port] of "host:port". */
function lt_host_port(string $addr): array
{
    $i = strrpos($addr, ':');
    return [substr($addr, 0, $i), (int) substr($addr, $i + 1)];
}

/**
 * Runs one command ($run) between its two events: "send" with its words
 * before, "reply" with whether it did what it asked after (an exception:
 * not ok, rethrown once the harness lets it go on).
 */
function lt_traced(array $words, callable $run, ?callable $ok = null)
{
    $seq = lt_next_seq();
    lt_event(['event' => 'send', 'seq' => $seq, 'cmds' => [$words]]);
    try {
        $reply = $run();
    } catch (\Throwable $e) {
        lt_event(['event' => 'reply', 'seq' => $seq, 'ok' => [false]]);
        throw $e;
    }
    lt_event(['event' => 'reply', 'seq' => $seq, 'ok' => [$ok ? (bool) $ok($reply) : lt_did_what_it_asked($reply)]]);
    return $reply;
}

if (class_exists('Redis', false)) {
    /**
     * A php-redis client whose commands are command-boundary events, for
     * libraries that take a \Redis (Symfony's RedisStore, Laravel's
     * PhpRedisConnection, php-lock's PHPRedisMutex). Every command those
     * libraries send is overridden here; a method not listed runs without
     * events. A script error (php-redis answers false and sets its last
     * error) is a reply that is not ok.
     */
    class LtRedis extends \Redis
    {
        /** Runs parent::$method(...$args) as the command $words[0] with
         * arguments $words[1...] (flattened by lt_words). */
        private function lt(string $method, array $words, array $args)
        {
            return lt_traced(lt_words((string) array_shift($words), $words), function () use ($method, $args) {
                return parent::$method(...$args);
            });
        }

        public function eval($script, $args = [], $num_keys = 0)
        {
            return $this->lt('eval', ['eval', $script, (string) $num_keys, $args], [$script, $args, $num_keys]);
        }

        public function evalSha($sha, $args = [], $num_keys = 0)
        {
            return $this->lt('evalsha', ['evalsha', $sha, (string) $num_keys, $args], [$sha, $args, $num_keys]);
        }

        public function script($cmd, ...$args)
        {
            return $this->lt('script', ['script', $cmd, $args], array_merge([$cmd], $args));
        }

        public function set($key, $value, $opts = null)
        {
            $words = ['set', $key, $value];
            if (is_int($opts) || is_float($opts)) {
                $words[] = ['ex' => $opts]; // php-redis: an int third argument is SETEX's seconds
            } elseif (null !== $opts) {
                $words[] = $opts;
            }
            return $this->lt('set', $words, null === $opts ? [$key, $value] : [$key, $value, $opts]);
        }

        public function setnx($key, $value)
        {
            return $this->lt('setnx', ['setnx', $key, $value], [$key, $value]);
        }

        public function setex($key, $expire, $value)
        {
            return $this->lt('setex', ['setex', $key, $expire, $value], [$key, $expire, $value]);
        }

        public function psetex($key, $expire, $value)
        {
            return $this->lt('psetex', ['psetex', $key, $expire, $value], [$key, $expire, $value]);
        }

        public function get($key)
        {
            return $this->lt('get', ['get', $key], [$key]);
        }

        public function getSet($key, $value)
        {
            return $this->lt('getset', ['getset', $key, $value], [$key, $value]);
        }

        public function del($key, ...$other_keys)
        {
            return $this->lt('del', ['del', $key, $other_keys], array_merge([$key], $other_keys));
        }

        public function unlink($key, ...$other_keys)
        {
            return $this->lt('unlink', ['unlink', $key, $other_keys], array_merge([$key], $other_keys));
        }

        public function exists($key, ...$other_keys)
        {
            return $this->lt('exists', ['exists', $key, $other_keys], array_merge([$key], $other_keys));
        }

        public function expire($key, $timeout)
        {
            return $this->lt('expire', ['expire', $key, $timeout], [$key, $timeout]);
        }

        public function pexpire($key, $timeout)
        {
            return $this->lt('pexpire', ['pexpire', $key, $timeout], [$key, $timeout]);
        }

        public function expireAt($key, $timestamp)
        {
            return $this->lt('expireat', ['expireat', $key, $timestamp], [$key, $timestamp]);
        }

        public function pexpireAt($key, $timestamp)
        {
            return $this->lt('pexpireat', ['pexpireat', $key, $timestamp], [$key, $timestamp]);
        }

        public function ttl($key)
        {
            return $this->lt('ttl', ['ttl', $key], [$key]);
        }

        public function pttl($key)
        {
            return $this->lt('pttl', ['pttl', $key], [$key]);
        }

        public function incr($key)
        {
            return $this->lt('incr', ['incr', $key], [$key]);
        }

        public function incrBy($key, $value)
        {
            return $this->lt('incrby', ['incrby', $key, $value], [$key, $value]);
        }

        public function decr($key)
        {
            return $this->lt('decr', ['decr', $key], [$key]);
        }

        public function time()
        {
            return $this->lt('time', ['time'], []);
        }

        public function rawCommand($cmd, ...$args)
        {
            return $this->lt('rawCommand', array_merge([(string) $cmd], $args), array_merge([$cmd], $args));
        }
    }
}

/**
 * A \Redis (an LtRedis when $traced) connected to addr with a connect and
 * read timeout of $timeoutS seconds: a user who sets none waits for ever on
 * a cut link. The connect itself is not an event (it is not a command).
 */
function lt_connect_redis(string $addr, float $timeoutS, bool $traced = true): \Redis
{
    [$host, $port] = lt_host_port($addr);
    $r = $traced ? new LtRedis() : new \Redis();
    // php-redis connects here; a node that does not answer throws
    // RedisException, which the caller's acquire answers as unknown.
    $r->connect($host, $port, $timeoutS, null, 0, $timeoutS);
    return $r;
}

// Predis, when installed (php-nrk-predis), is loaded here so that its
// connection class can be extended; a worker may require it again.
if (false !== stream_resolve_include_path('Predis/autoload.php')) {
    require_once 'Predis/autoload.php';
}

if (class_exists('Predis\Connection\StreamConnection')) {
    /**
     * A Predis connection whose every command is two events: "send" before
     * writeRequest writes it and "reply" once readResponse has it (an error
     * response or a nil, false or 0: not ok; a connection error: not ok,
     * rethrown). Commands Predis pipelines are written and read one by one,
     * so each is its own pair.
     */
    class LtPredisConnection extends \Predis\Connection\StreamConnection
    {
        private $ltSeqs = [];

        public function writeRequest(\Predis\Command\CommandInterface $command)
        {
            $seq = lt_next_seq();
            lt_event(['event' => 'send', 'seq' => $seq, 'cmds' => [lt_words($command->getId(), $command->getArguments())]]);
            $this->ltSeqs[] = $seq;
            parent::writeRequest($command);
        }

        public function readResponse(\Predis\Command\CommandInterface $command)
        {
            $seq = array_shift($this->ltSeqs) ?? lt_next_seq();
            try {
                $reply = parent::readResponse($command);
            } catch (\Throwable $e) {
                $this->ltSeqs = []; // the connection is reset: nothing else will be read
                lt_event(['event' => 'reply', 'seq' => $seq, 'ok' => [false]]);
                throw $e;
            }
            lt_event(['event' => 'reply', 'seq' => $seq, 'ok' => [lt_did_what_it_asked($reply)]]);
            return $reply;
        }
    }
}

/** Predis client options whose tcp connections are LtPredisConnections. */
function lt_predis_options(array $more = []): array
{
    return array_merge(['connections' => ['tcp' => 'LtPredisConnection']], $more);
}

/** Predis connection parameters for addr with a connect and read timeout. */
function lt_predis_params(string $addr, float $timeoutS): array
{
    [$host, $port] = lt_host_port($addr);
    return ['scheme' => 'tcp', 'host' => $host, 'port' => $port, 'timeout' => $timeoutS, 'read_write_timeout' => $timeoutS];
}

// The store's check of a fencing token, as the harness's own store does it
// (workloads/store.go, protocol.py): a write whose token is not greater
// than the last accepted one is refused.
const LT_FENCED_WRITE = "
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) <= last then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1";

/**
 * What every worker shares: the store, the client's clock, the dispatch
 * of requests, and loss checks. A worker subclasses it with hello(array $h),
 * acquire(string $key) and release(array $lease); hello calls
 * $this->connectStore($h).
 */
abstract class LtWorker
{
    /** @var \Redis|null the store: a plain php-redis client, no events */
    public $store;
    /** @var int the client clock's offset from the machine's, in ns */
    public $clockNs = 0;
    /** @var callable|null run once the reply to the current request is out
     * (a lease's loss must not overtake its lease) */
    public $after;
    /** @var array token => ['key', 'token', 'at' (machine Unix seconds,
     * float), 'every' (seconds or null), 'check' (callable)] */
    private $watches = [];

    abstract public function hello(array $h): array;

    abstract public function acquire(string $key): array;

    abstract public function release(array $lease): array;

    /** The machine's wall clock in Unix ns (microsecond resolution). */
    public static function machineNs(): int
    {
        $t = gettimeofday();
        return $t['sec'] * 1000000000 + $t['usec'] * 1000;
    }

    /** The client's wall clock: the machine's plus the harness's skew. */
    public function nowNs(): int
    {
        return self::machineNs() + $this->clockNs;
    }

    public function connectStore(array $h): void
    {
        $timeout = (($h['store_timeout_ns'] ?? 0) ?: 500000000) / 1e9;
        $this->store = lt_connect_redis($h['store'], $timeout, false);
    }

    public function read(string $key): array
    {
        $v = $this->store->get($key);
        if (false === $v || null === $v) {
            return [];
        }
        return ['value' => (int) $v];
    }

    public function write(string $key, int $value, int $fence): array
    {
        if (0 === $fence) {
            if (true !== $this->store->set($key, (string) $value)) {
                throw new \RuntimeException('store SET failed: '.$this->store->getLastError());
            }
            return [];
        }
        $this->store->clearLastError();
        $ok = $this->store->eval(LT_FENCED_WRITE, [$key, $key.':fence', (string) $value, (string) $fence], 2);
        if (false === $ok && null !== $this->store->getLastError()) {
            throw new \RuntimeException('store fenced write: '.$this->store->getLastError());
        }
        if (0 === $ok) {
            return ['err' => 'stale', 'msg' => 'stale fencing token'];
        }
        return [];
    }

    /**
     * Watches a lease for its loss: from $atNs (the client's clock, Unix ns)
     * on, whenever the worker is idle, $check() is called; true means the
     * lease is lost (the "lost" event is sent and the watch ends), false
     * that it is not (checked again $everyNs later, or never again when
     * $everyNs is null), an int a client-clock Unix ns to check again at.
     * A worker calls it in acquire, and unwatchLoss in release; the checks
     * run only between requests, after the reply that handed the lease out.
     */
    public function watchLoss(string $key, string $token, int $atNs, callable $check, ?int $everyNs = null): void
    {
        $this->watches[$token] = ['key' => $key, 'token' => $token, 'at' => $atNs - $this->clockNs, 'every' => $everyNs, 'check' => $check];
    }

    public function unwatchLoss(string $token): void
    {
        unset($this->watches[$token]);
    }

    /** Seconds until the next loss check is due (null: none is). */
    public function nextCheckIn(): ?float
    {
        if (!$this->watches) {
            return null;
        }
        $at = min(array_column($this->watches, 'at'));
        return max(0.0, ($at - self::machineNs()) / 1e9);
    }

    /** Runs the loss checks that are due. */
    public function runChecks(): void
    {
        $now = self::machineNs();
        foreach ($this->watches as $token => $w) {
            if ($w['at'] > $now || !isset($this->watches[$token])) {
                continue;
            }
            try {
                $got = ($w['check'])();
            } catch (\Throwable $e) {
                fwrite(STDERR, LtIO::$name.': a loss check failed: '.str_replace("\n", ' ', (string) $e->getMessage())."\n");
                $got = false;
            }
            if (!isset($this->watches[$token])) {
                continue; // the check unwatched it
            }
            if (true === $got) {
                unset($this->watches[$token]);
                lt_tell_lost($w['key'], $w['token']);
            } elseif (is_int($got)) {
                $this->watches[$token]['at'] = $got - $this->clockNs;
            } elseif (null !== $w['every']) {
                $this->watches[$token]['at'] = self::machineNs() + $w['every'];
            } else {
                unset($this->watches[$token]);
            }
        }
    }

    public function handle(array $req): array
    {
        $op = $req['op'];
        $this->clockNs = (int) ($req['clock_ns'] ?? 0);
        try {
            if ('hello' === $op) {
                return $this->hello($req['hello'] ?? []);
            }
            if (null === $this->store) {
                return ['err' => 'unknown', 'msg' => $op.' before a successful hello'];
            }
            switch ($op) {
                case 'acquire':
                    return $this->acquire((string) ($req['key'] ?? ''));
                case 'release':
                    return $this->release($req['lease'] ?? []);
                case 'read':
                    return $this->read((string) ($req['key'] ?? ''));
                case 'write':
                    return $this->write((string) ($req['key'] ?? ''), (int) ($req['value'] ?? 0), (int) ($req['fence'] ?? 0));
            }
            return ['err' => 'unknown', 'msg' => 'unknown op '.$op];
        } catch (\Throwable $e) {
            // The library's or the store's: the outcome is unknown.
            return ['err' => 'unknown', 'msg' => $op.': '.lt_describe($e)];
        }
    }
}

/** One line saying what went wrong: the exception and its causes. */
function lt_describe(\Throwable $e): string
{
    $parts = [];
    for ($x = $e; null !== $x && count($parts) < 4; $x = $x->getPrevious()) {
        $parts[] = get_class($x).': '.$x->getMessage();
    }
    return str_replace(["\r", "\n"], ' ', implode(' <- ', $parts));
}

/** Serves the protocol until stdin ends, then exits at once (0). */
function lt_serve(LtWorker $worker, string $name): void
{
    LtIO::$name = $name;
    while (true) {
        if (0.0 === $worker->nextCheckIn()) {
            $worker->runChecks(); // due, however busy the requests keep us
        }
        if (LtIO::$queue) {
            $req = array_shift(LtIO::$queue);
        } else {
            $req = LtIO::next($worker->nextCheckIn());
            if (null === $req) {
                $worker->runChecks();
                continue;
            }
        }
        if ('go' === $req['op']) {
            continue; // a go for no event: ignored
        }
        $reply = $worker->handle($req);
        $reply['id'] = $req['id'] ?? 0;
        lt_send($reply);
        $after = $worker->after;
        $worker->after = null;
        if (null !== $after) {
            $after();
        }
    }
}
