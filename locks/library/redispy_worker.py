"""A locktorture worker that serves redis-py's Lock (Debian's python3-redis).

It speaks the worker protocol (package worker of locktorture): one JSON
object per line, requests on stdin, replies and events on stdout. It is the
worked example of putting a lock written in another language under test.

The lock is used as redis-py's users use it: Redis(...).lock(name,
timeout=..., sleep=..., blocking_timeout=...), acquire(), release(), with
the library's defaults otherwise (thread-local tokens included, which is why
every request runs on one thread).

Faults reach it without its help. The harness pauses and kills the whole
process with signals. For traps at command boundaries, every connection the
lock uses is a ReportingConnection: before a command leaves and after its
reply arrives, the worker tells the harness and waits for its "go", as the
Go harness's hooks do on a go-redis client.
"""

from redis.exceptions import LockError, LockNotOwnedError


class RedisPyWorker(Worker):
    def __init__(self):
        super().__init__()
        self.node = None
        self.ttl = None
        self.wait = None
        self.leases = {}  # token -> redis-py Lock: its handle

    def hello(self, h):
        host, port = h["nodes"][0].rsplit(":", 1)
        # 500 ms per command, as the harness's own clients: a user who sets
        # no timeout waits forever on a cut link.
        pool = redis.ConnectionPool(connection_class=ReportingConnection, host=host, port=int(port),
                                    socket_timeout=0.5, socket_connect_timeout=0.5)
        self.node = redis.Redis(connection_pool=pool)
        self.connect_store(h)
        self.ttl = h["ttl_ns"] / 1e9
        self.wait = (h.get("wait_ns") or h["ttl_ns"]) / 1e9
        return {}

    def acquire(self, key):
        lock = self.node.lock(key, timeout=self.ttl, sleep=0.01, blocking_timeout=self.wait)
        start = self.now_ns()
        forget_sent()
        try:
            got = lock.acquire()
        except redis.RedisError as e:
            return {"err": "unknown", "msg": "acquire: %r" % e}
        if not got:
            return {"err": "not-acquired", "msg": "blocking_timeout ran out"}
        token = word(lock.local.token)
        self.leases[token] = lock
        # redis-py computes no deadline; its users read the timeout they
        # passed as one. acquire() sends SET NX PX every `sleep` until one
        # takes the key, whose life starts there: counted from just before
        # the last SET was written, the promise judged is never longer than
        # the key's life, nor shorter by the time spent waiting.
        sent = sent_ns("SET")
        if sent:
            start = sent + self.clock_ns
        return {"lease": {"key": key, "token": token, "valid_until_ns": start + int(self.ttl * 1e9)}}

    def release(self, lease):
        lock = self.leases.pop(lease["token"], None)
        if lock is None:
            return {"err": "unknown", "msg": "a lease this worker never handed out"}
        try:
            lock.release()
        except LockNotOwnedError as e:
            return {"err": "not-held", "msg": str(e)}
        except LockError as e:
            # Raised before any command when the lock holds no token.
            return {"err": "not-held", "msg": str(e)}
        except redis.RedisError as e:
            return {"err": "unknown", "msg": "release: %r" % e}
        return {}


serve(RedisPyWorker(), "redis-py-worker")
