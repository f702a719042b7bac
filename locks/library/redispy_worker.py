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

import itertools
import json
import queue
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

out_mu = threading.Lock()


def send(obj):
    line = json.dumps(obj, separators=(",", ":"))
    with out_mu:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


# Events wait here for the harness's "go", by sequence number.
waits = {}
waits_mu = threading.Lock()
seqs = itertools.count(1)


def event(obj):
    ready = threading.Event()
    with waits_mu:
        waits[obj["seq"]] = ready
    send(obj)
    ready.wait()


def go(seq):
    with waits_mu:
        ready = waits.pop(seq, None)
    if ready is not None:
        ready.set()


def word(arg):
    if isinstance(arg, bytes):
        return arg.decode("utf-8", "replace")
    return str(arg)


def did_what_it_asked(reply):
    """A reply that is not an error, nil, zero or false (the protocol's "ok")."""
    if isinstance(reply, Exception) or reply is None or reply is False:
        return False
    return not (isinstance(reply, int) and reply == 0)


class ReportingConnection(redis.Connection):
    """A connection whose every command boundary is an event the harness answers."""

    def send_command(self, *args, **kwargs):
        self._seq = next(seqs)
        event({"event": "send", "seq": self._seq, "cmds": [[word(a) for a in args]]})
        super().send_command(*args, **kwargs)

    def read_response(self, *args, **kwargs):
        try:
            reply = super().read_response(*args, **kwargs)
        except Exception:
            event({"event": "reply", "seq": self._seq, "ok": [False]})
            raise
        event({"event": "reply", "seq": self._seq, "ok": [did_what_it_asked(reply)]})
        return reply


# The store's check of a fencing token, as the harness's own store does it
# (workloads.Store): a write whose token is not greater than the last
# accepted one is refused.
FENCED_WRITE = """
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) <= last then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1"""


class Worker:
    def __init__(self):
        self.node = None
        self.store = None
        self.ttl = None
        self.wait = None
        self.clock_ns = 0
        self.leases = {}  # token -> redis-py Lock: its handle

    def now_ns(self):
        """The client's wall clock: the machine's plus the harness's skew."""
        return time.time_ns() + self.clock_ns

    def hello(self, h):
        host, port = h["nodes"][0].rsplit(":", 1)
        # 500 ms per command, as the harness's own clients: a user who sets
        # no timeout waits forever on a cut link.
        pool = redis.ConnectionPool(connection_class=ReportingConnection, host=host, port=int(port),
                                    socket_timeout=0.5, socket_connect_timeout=0.5)
        self.node = redis.Redis(connection_pool=pool)
        host, port = h["store"].rsplit(":", 1)
        timeout = h.get("store_timeout_ns", 500_000_000) / 1e9
        self.store = redis.Redis(host=host, port=int(port), socket_timeout=timeout, socket_connect_timeout=timeout)
        self.fenced_write = self.store.register_script(FENCED_WRITE)
        self.ttl = h["ttl_ns"] / 1e9
        self.wait = (h.get("wait_ns") or h["ttl_ns"]) / 1e9
        return {}

    def acquire(self, key):
        lock = self.node.lock(key, timeout=self.ttl, sleep=0.01, blocking_timeout=self.wait)
        start = self.now_ns()
        try:
            got = lock.acquire()
        except redis.RedisError as e:
            return {"err": "unknown", "msg": "acquire: %r" % e}
        if not got:
            return {"err": "not-acquired", "msg": "blocking_timeout ran out"}
        token = word(lock.local.token)
        self.leases[token] = lock
        # redis-py computes no deadline; its users read the timeout they
        # passed as one. Counted from before the SET was sent, the promise
        # judged is never longer than the key's life.
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

    def read(self, key):
        v = self.store.get(key)
        return {"value": int(v)} if v is not None else {}

    def write(self, key, value, fence):
        if not fence:
            self.store.set(key, value)
            return {}
        if self.fenced_write(keys=[key, key + ":fence"], args=[value, fence]) == 0:
            return {"err": "stale", "msg": "stale fencing token"}
        return {}

    def do(self, req):
        op = req["op"]
        self.clock_ns = req.get("clock_ns", 0)
        try:
            if op == "hello":
                return self.hello(req["hello"])
            if op == "acquire":
                return self.acquire(req["key"])
            if op == "release":
                return self.release(req["lease"])
            if op == "read":
                return self.read(req["key"])
            if op == "write":
                return self.write(req["key"], req.get("value", 0), req.get("fence", 0))
            return {"err": "unknown", "msg": "unknown op " + op}
        except redis.RedisError as e:
            return {"err": "unknown", "msg": "%s: %r" % (op, e)}


def main():
    w = Worker()
    requests = queue.Queue()

    def serve():
        # One thread for every request: redis-py's Lock keeps its token
        # thread-local by default, so acquire and release must share one.
        while True:
            req = requests.get()
            if req is None:
                return
            reply = w.do(req)
            reply["id"] = req["id"]
            send(reply)

    threading.Thread(target=serve, daemon=True).start()
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "go":
            go(req["seq"])
        else:
            requests.put(req)
    requests.put(None)


if __name__ == "__main__":
    main()
