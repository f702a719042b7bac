"""A locktorture worker that serves OpenStack tooz's locks (Debian's
python3-tooz 3.1).

It speaks the worker protocol (package worker of locktorture): one JSON
object per line, requests on stdin, replies and events on stdout. It serves
one lock per driver, which hello.lock names, each used as tooz's docs show
(doc/source/user/tutorial/coordinator.rst and lock.rst):
coordination.get_coordinator(url, member_id), start(start_heart=True),
get_lock(name), acquire(blocking=<seconds>), release(), with the driver's
defaults except the timeouts a URL carries.

  tooz-redis      redis://     tooz/drivers/redis.py (redis-py's Lock)
  tooz-memcached  memcached:// tooz/drivers/memcached.py (pymemcache add)
  tooz-postgres   postgresql:// tooz/drivers/pgsql.py (advisory lock)
  tooz-mysql      mysql://      tooz/drivers/mysql.py (GET_LOCK, PyMySQL)
  tooz-zookeeper  zookeeper:// tooz/drivers/zookeeper.py (kazoo's Lock)
  tooz-etcd       etcd3://     tooz/drivers/etcd3.py (python3-etcd3's Lock)

Every coordinator is started with start_heart=True, as the coordinator
tutorial tells users who do not call heartbeat() themselves: tooz's Heart
(coordination.py, Heart._beat_forever_until_stopped) calls the driver's
heartbeat(), which renews every lock the coordinator holds (Redis: PEXPIRE
through redis-py's Lock.reacquire; memcached: touch; etcd: a lease
refresh), then sleeps half the interval heartbeat() returned.

What tooz does not do, and so neither does this worker:
  - tell its user that a lock was lost. A renewal that fails is only
    logged: RedisDriver.heartbeat and the memcached/etcd heartbeats swallow
    or ignore a lock's failed renewal (LOG.warning, or a refresh result
    nobody reads), and Heart retries heartbeat() forever (tenacity, one
    second apart), telling no one. No "lost" event is sent and no lease
    says tells_loss.
  - give a fencing token. No driver hands out a revision or zxid: the
    etcd3gw driver even says so ("TODO(jd): save the created revision"),
    the kazoo Lock and its node are private to ZooKeeperLock. Every lease's
    fence is 0.
  - give a deadline. With the heart running a lock lives as long as its
    holder's process runs and reaches the server (Redis, memcached), or as
    long as its session or connection (etcd, ZooKeeper, PostgreSQL, MySQL):
    every lease's valid_until_ns is 0.

Tokens are this worker's own, one per acquisition, each naming the tooz
Lock object it came from: a fresh get_lock() per acquire, so a stale
lease's release reaches only its own Lock (tooz's release takes no token).

Faults reach it without its help (signals pause and kill the process; the
links to the nodes and the store are cut or slowed). Command traps spring
only inside tooz-redis: see RedisCoordinator below.
"""

import logging
import math
import threading
import uuid

import tenacity
from kazoo.exceptions import LockTimeout
from tooz import coordination

# Only protocol lines on stdout. tooz, kazoo and redis-py log through
# logging; their warnings (a heartbeat that failed, a lock that could not
# be renewed) go to stderr, which the harness keeps in workers.log.
logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                    format="tooz-worker %(levelname)s %(name)s: %(message)s")

LOCKS = ("tooz-redis", "tooz-memcached", "tooz-postgres", "tooz-mysql", "tooz-zookeeper", "tooz-etcd")


def whole_seconds(seconds):
    """The redis, memcached and etcd drivers read their timeouts with int()
    (RedisDriver.__init__: self.lock_timeout = int(lock_timeout);
    MemcachedDriver.__init__ and Etcd3Driver.__init__ alike): "1.5" in a
    URL raises ValueError and 1.5 passed as a keyword is cut to 1. A lease
    is never made shorter than asked: rounded up, at least one second."""
    return max(1, math.ceil(seconds - 1e-9))


class Hung(Exception):
    """tooz did not return within the worker's bound (ToozWorker.guarded)."""


class ToozWorker(Worker):
    def __init__(self):
        super().__init__()
        self.name = None
        self.coord = None
        self.ttl = None
        self.wait = None
        self.bound = None
        # token -> tooz Lock of every lease handed out, kept after its
        # release: a second release is tooz's to answer (not-held).
        self.leases = {}

    # hello

    def hello(self, h):
        name = h.get("lock")
        if name not in LOCKS:
            return {"err": "unknown", "msg": "this worker serves %s, not %r" % (", ".join(LOCKS), name)}
        self.name = name
        self.ttl = (h.get("ttl_ns") or 0) / 1e9 or 1.0
        self.wait = (h.get("wait_ns") or 0) / 1e9 or self.ttl
        # How long any one tooz call may take before the worker calls its
        # outcome unknown. tooz's postgresql driver sets no timeout on its
        # connection (PostgresDriver.get_connection: psycopg2.connect(host,
        # port, database, user, password), no connect_timeout, no
        # keepalives), so an acquire or release on a cut link waits for
        # bytes that never come, past any blocking= timeout; the mysql
        # driver neither (MySQLDriver.get_connection passes PyMySQL no
        # timeout and no URL option reaches one: PyMySQL 1.0's
        # connect_timeout of 10 s bounds the TCP connect alone, and its
        # read_timeout and write_timeout are None); kazoo retries
        # a release without end (KazooClient's default command retry). A
        # caller that hears nothing has an unknown outcome, which this
        # answers inside the harness's patience (30 s, the wait and ten
        # TTLs) and past the pauses stories hold a node or client in (up to
        # four TTLs), which a call that waits them out outlives.
        self.bound = 3.0 + self.wait + 6 * self.ttl
        # tooz's docs: "The second argument passed to the coordinator must
        # be a unique identifier identifying the running program." The
        # memcached driver stores it as the lock's owner
        # (MemcachedLock.acquire: client.add(name, member_id)), and the
        # kazoo driver as the lock node's data.
        member = ("%s-%s" % (h.get("owner") or "tooz", uuid.uuid4().hex[:12])).encode("ascii", "replace")
        self.nodes, self.member = h["nodes"], member
        # The harness starts its story clock once every worker has said
        # hello, so the coordinator starts here. Every driver's start needs
        # its server (RedisDriver._start: INFO; MemcachedDriver._start: a
        # heartbeat; PostgresDriver._start and MySQLDriver._start: a
        # connection; KazooDriver._start: a session; Etcd3Driver._start: a
        # membership lease), and a worker
        # started while its server is down or cut off (a client retired
        # during a fault goes on as a new process) must still say hello: a
        # coordinator that did not start is started again by the next
        # acquire.
        why = self.start_coordinator()
        if why:
            logging.getLogger("tooz-worker").warning("tooz's coordinator did not start (%s); the first acquire tries again", why)
        self.connect_store(h)
        return {}

    def start_coordinator(self):
        """Starts the coordinator unless it runs; says why it did not."""
        if self.coord is not None:
            return None
        try:
            # Bounded, and shorter than a lock call (a start that waits
            # delays a new process's first acquire, and holds nothing): the
            # postgresql and mysql drivers connect with no timeout.
            self.coord = self.guarded(lambda: self.start(self.name, self.nodes, self.member),
                                      2.0 + self.wait + 2 * self.ttl)
        except Exception as e:  # ToozConnectionError, Hung, a driver's own
            return "%s: %s" % (type(e).__name__, e)
        return None

    def start(self, name, nodes, member):
        if name == "tooz-redis":
            # redis://host:port?options, RedisDriver's docstring. Its options
            # are redis-py's CLIENT_ARGS; socket_timeout is read with int()
            # (CLIENT_INT_ARGS), so 1 s is the shortest there is; the default
            # (CLIENT_DEFAULT_SOCKET_TO) is 30 s, which would hold every
            # command on a cut link for 30 s. lock_timeout is the PX of
            # redis-py's Lock (RedisDriver.get_lock -> RedisLock ->
            # client.lock(name, timeout=lock_timeout, thread_local=False)).
            # The heart renews a held lock every lock_timeout/2
            # (RedisDriver.heartbeat returns min(lock_timeout,
            # membership_timeout), and membership_timeout is the 30 s default).
            url = "redis://%s?socket_timeout=1&lock_timeout=%d" % (nodes[0], whole_seconds(self.ttl))
            return RedisCoordinator.start(url, member)
        if name == "tooz-memcached":
            # memcached://host:port?options, MemcachedDriver's docstring and
            # its table (timeout, membership_timeout, lock_timeout,
            # leader_timeout, all 30 s by default, all whole seconds).
            # timeout is pymemcache's socket and connect timeout
            # (MemcachedDriver._start) and the default of the other three;
            # lock_timeout is the item's exptime (MemcachedLock.acquire:
            # client.add(..., expire=lock_timeout)). The heart touches every
            # held lock (MemcachedLock.heartbeat) every half of
            # min(membership, leader, lock timeout): every 0.5 s here.
            url = "memcached://%s?timeout=1&lock_timeout=%d" % (nodes[0], whole_seconds(self.ttl))
        elif name == "tooz-postgres":
            # postgresql://[user[:password]@]host:port?dbname=name,
            # PostgresDriver's docstring; the harness's servers trust user
            # postgres. The driver takes no other option (get_connection).
            url = "postgresql://postgres@%s?dbname=postgres" % nodes[0]
        elif name == "tooz-mysql":
            # mysql://USERNAME:PASSWORD@HOST[:PORT]/DBNAME[?OPTION1=VALUE1...],
            # MySQLDriver's docstring; the harness's MariaDB runs with
            # --skip-grant-tables, so user root needs no password. Its
            # options are ssl_* and unix_socket only (the docstring's table,
            # MySQLDriver.get_connection): none bounds a call.
            url = "mysql://root@%s/locktorture" % nodes[0]
        elif name == "tooz-zookeeper":
            # zookeeper://host:port?hosts=...: KazooDriver's docstring (hosts
            # = "url netloc + 'hosts' option key"). Its timeout is the kazoo
            # session timeout (KazooDriver._make_client: KazooClient(timeout=
            # float(options['timeout']))), passed as a keyword because the
            # driver also reads it with int() (KazooDriver.__init__), which
            # refuses "1.5" in a URL; get_coordinator's docstring: keyword
            # options "take precedence over options of the same name found in
            # the backend_url". connection_retry, command_retry and
            # randomize_hosts stay at the driver's defaults (None, None,
            # True), which are kazoo's: the kazoo worker's client.
            url = "zookeeper://%s" % nodes[0]
            if len(nodes) > 1:
                url += "?" + "&".join("hosts=" + n for n in nodes[1:])
            coord = coordination.get_coordinator(url, member, timeout=self.ttl)
            coord.start(start_heart=True)
            return coord
        else:  # tooz-etcd
            # etcd3://host:port?options, tooz/drivers/etcd3.py's Etcd3Driver
            # (python3-etcd3 over gRPC). The driver takes one host: every
            # client talks to the first member only. timeout is the gRPC
            # call timeout (whole seconds, int()); lock_timeout the TTL of
            # the lease python3-etcd3's Lock takes per acquire, refreshed by
            # the heart every half of min(lock, membership timeout).
            #
            # It does not run as Debian packages it: python3-etcd3 0.12's
            # Lock.acquire hands tenacity a wait function of the old
            # signature (previous_attempt_number, delay_since_first_attempt),
            # which Debian's tenacity 8.2 calls with one retry_state, so any
            # acquire that finds the lock taken raises TypeError ("wait()
            # missing 1 required positional argument:
            # 'delay_since_first_attempt'") through tooz, which translates
            # only etcd3's own exceptions (etcd3.py, _failure_translator).
            # The etcd3+http driver (tooz/drivers/etcd3gw.py) fails sooner:
            # Etcd3Driver.__init__ passes api_path= to etcd3gw.client(),
            # which Debian's python3-etcd3gw 2.0.0 does not take (TypeError
            # at get_coordinator).
            url = "etcd3://%s?timeout=1&lock_timeout=%d" % (nodes[0], whole_seconds(self.ttl))
        coord = coordination.get_coordinator(url, member)
        coord.start(start_heart=True)
        return coord

    # acquire and release

    def guarded(self, fn, bound=None):
        """Runs fn (one tooz call) on a thread of its own and waits up to
        bound (self.bound) for it; past that, Hung: the caller's outcome is
        unknown, and the harness retires this worker, whose thread is left
        to tooz."""
        bound = bound or self.bound
        box = {}
        done = threading.Event()

        def run():
            try:
                with serving():
                    box["ok"] = fn()
            except BaseException as e:
                box["err"] = e
            finally:
                done.set()

        threading.Thread(target=run, daemon=True).start()
        if not done.wait(bound):
            raise Hung("tooz has not returned after %.0f s" % bound)
        if "err" in box:
            raise box["err"]
        return box["ok"]

    def acquire(self, key):
        why = self.start_coordinator()
        if why:
            # A start sends no lock command (see hello): nothing was taken.
            return {"err": "not-acquired", "msg": "tooz's coordinator did not start (%s); no lock command was sent" % why}
        # Lock names are bytes: the memcached, postgresql and etcd3 drivers
        # concatenate, hash or decode them as bytes (MemcachedLock.__init__,
        # PostgresLock.__init__, Etcd3Lock.__init__); the mysql driver hands
        # the name to PyMySQL, which quotes bytes as a string literal
        # (MySQLLock.acquire: GET_LOCK(%s, 0)).
        try:
            lock = self.coord.get_lock(key.encode("utf-8"))
            # acquire(blocking=<seconds>): locking.Lock.acquire's docstring,
            # "Otherwise, the value is used as a timeout value and the call
            # returns maximum after this number of seconds."
            got = self.guarded(lambda: lock.acquire(blocking=self.wait))
        except tenacity.RetryError as e:
            # The memcached, postgresql and mysql drivers wait with tooz's
            # own retry (tooz/_retry.py, retry(stop_max_delay=blocking)):
            # every try found the lock taken (add refused;
            # pg_try_advisory_lock false; GET_LOCK 0, or NULL on the
            # server's error) and raised TryAgain, and when the deadline passes
            # tenacity raises RetryError to tooz's caller, where the docs
            # promise False. Taken all along: not acquired.
            return {"err": "not-acquired", "msg": "tooz's acquire ran out of time (tenacity.RetryError: %s)" % e}
        except TypeError as e:
            if "delay_since_first_attempt" not in str(e):
                return {"err": "unknown", "msg": "acquire: %s: %s" % (type(e).__name__, e)}
            # The etcd3 driver's Etcd3Lock.acquire is python-etcd3's
            # Lock.acquire and nothing else (tooz/drivers/etcd3.py), whose
            # tenacity wait has the old signature (above): it raises this
            # only once a try's transaction found the key taken and put
            # nothing, so nothing was acquired, as etcd3_worker.py answers.
            return {"err": "not-acquired", "msg": "etcd3 found the lock taken (python-etcd3's TypeError through tooz: %s)" % e}
        except LockTimeout as e:
            # The zookeeper driver hands blocking=<seconds> to kazoo's
            # Lock.acquire(blocking=True, timeout=...) (ZooKeeperLock.acquire),
            # which raises LockTimeout when its predecessor's watch did not
            # fire in time, having deleted its own node first: not acquired.
            # tooz lets kazoo's exception through where its docs promise False.
            return {"err": "not-acquired", "msg": "kazoo's LockTimeout through tooz: %s" % e}
        except Exception as e:
            if connect_refused(e):
                return {"err": "not-acquired", "msg": "acquire: %s: %s (the connect failed: GET_LOCK was never sent)" % (type(e).__name__, e)}
            # ToozConnectionError, OperationTimedOut, ToozError, Hung: the
            # try may have taken the lock. The mysql driver's ToozError wraps PyMySQL's
            # error: a reply lost after GET_LOCK was sent (2013, "Lost
            # connection"; 2006, "gone away") may have taken it.
            return {"err": "unknown", "msg": "acquire: %s: %s" % (type(e).__name__, e)}
        if not got:
            # False: redis-py's blocking_timeout ran out with SET NX refused
            # every time (RedisLock.acquire -> redis.lock.Lock.acquire), or
            # python3-etcd3's Lock.acquire gave up (RetryError caught there).
            return {"err": "not-acquired", "msg": "tooz's acquire returned False"}
        token = uuid.uuid4().hex
        self.leases[token] = lock
        return {"lease": {"key": key, "token": token}}

    def release(self, lease):
        lock = self.leases.get(lease.get("token"))
        if lock is None:
            return {"err": "unknown", "msg": "a lease this worker never handed out"}
        try:
            released = self.guarded(lock.release)
        except Exception as e:
            return {"err": "unknown", "msg": "release: %s: %s" % (type(e).__name__, e)}
        if not released:
            # locking.Lock.release: "returns true if released (false if
            # not)". False: a Lock that does not hold (released already, or
            # never acquired); redis-py's compare-and-delete found another
            # token or none (LockNotOwnedError, logged by RedisLock.release);
            # memcached found another member's id or none under the key
            # (MemcachedLock.release); etcd's compare-and-delete failed. The
            # mysql driver says False only for a Lock that does not hold
            # (MySQLLock.release: "if not self.acquired: return False"); it
            # ignores what RELEASE_LOCK answers, and raises ToozError
            # (unknown, above) when the connection fails, self.acquired
            # still True.
            #
            # One False of tooz-redis is wrong, and reported as tooz says
            # it: RedisLock.release runs under _handle_failures, which runs
            # it again after a redis ConnectionError; redis-py's
            # Lock.release clears its token before it sends the script, so
            # the second run raises LockError("Cannot release an unlocked
            # lock"), which RedisLock.release turns into False, though the
            # first run's script may have deleted the key (seen here: a
            # connection closed after Redis's reply). The same retry re-runs
            # an acquire whose SET landed: its new token is refused by its
            # own key, which then blocks everyone until its PX runs out.
            return {"err": "not-held", "msg": "tooz's release returned False"}
        return {}


def connect_refused(e):
    """Whether e is the mysql driver's ToozError for a connect that failed:
    MySQLLock.acquire connects its deferred connection first ("if not
    self._conn.open: self._conn.connect()") and wraps PyMySQL's error in
    ToozError (e.cause). PyMySQL raises OperationalError 2003 ("Can't
    connect to MySQL server") from Connection.connect alone, before any
    query: nothing was sent, nothing taken. A connect that hangs (a stopped
    server accepts, then never greets) is the worker's bound: unknown."""
    cause = getattr(e, "cause", None)
    if cause is None or not type(cause).__module__.startswith("pymysql"):
        return False
    return type(cause).__name__ == "OperationalError" and cause.args[:1] == (2003,)


class RedisCoordinator:
    """tooz's redis coordinator with its connections reporting.

    RedisDriver._make_client builds redis.StrictRedis(**kwargs) from the
    URL's CLIENT_ARGS only: tooz lets no connection_class through, and the
    client is made and used inside start() (RedisDriver._start: INFO, then a
    heartbeat). So the worker starts the coordinator without its heart,
    points the client's connection pool at ReportingConnection (the
    protocol's redis-py connection that reports every command boundary and
    waits for the harness's go), drops the pool's connections so every
    later command goes through a reporting one, and then starts the heart,
    which is what start(start_heart=True) does after _start
    (CoordinationDriver.start: "if self.requires_beating and start_heart:
    self.heart.start()"). Nothing of tooz's or redis-py's code changes; the
    client is reached through the driver's private _client, the only way
    to it. The heart's commands (PSETEX of the member's beat key, the
    lock's PEXPIRE script) report too, from the heart's thread, so apart
    from the op under way: a renewal's trap can take them, not an op's."""

    @staticmethod
    def start(url, member):
        coord = coordination.get_coordinator(url, member)
        coord.start(start_heart=False)
        pool = coord._client.connection_pool
        pool.connection_class = ReportingConnection
        pool.disconnect()
        pool.reset()
        coord.heart.start()
        return coord


serve(ToozWorker(), "tooz-worker")
