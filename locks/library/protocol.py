"""The worker protocol's Python half, shared by every Python worker here.

The harness runs a Python worker as `python3 -c <this file><the worker's
file>` (library.pythonWorker), so a worker file uses these names without
importing them and ends with serve(TheWorker(), "its-name").

The protocol (package worker of locktorture): one JSON object per line,
requests on stdin, replies and events on stdout; stderr is kept in the
run's workers.log. One thread serves every request, in order, because
some libraries keep state per thread (redis-py's Lock keeps its token
thread-local by default). A line that does not parse, or a request the
worker cannot answer, is the harness's bug: the worker exits at once
rather than leave the harness waiting.
"""

import itertools
import json
import os
import queue
import sys
import threading
import time

import redis

_out_mu = threading.Lock()


def send(obj):
    line = json.dumps(obj, separators=(",", ":"))
    with _out_mu:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


# Events wait here for the harness's "go", by sequence number.
_waits = {}
_waits_mu = threading.Lock()
_seqs = itertools.count(1)


def event(obj):
    """Sends a command-boundary event and waits for the harness's go."""
    ready = threading.Event()
    with _waits_mu:
        _waits[obj["seq"]] = ready
    send(obj)
    ready.wait()


# The threads serving the current request: the request thread, and any a
# worker runs a library call on for it (serving()). A command another
# thread sends (a library's heartbeat) is reported apart: not the op's.
_serving = set()


class serving:
    """Marks the current thread as serving the request while in the block:
    `with serving(): fn()` on a thread a worker runs a library call on."""

    def __enter__(self):
        _serving.add(threading.get_ident())

    def __exit__(self, *exc):
        _serving.discard(threading.get_ident())


def _go(seq):
    with _waits_mu:
        ready = _waits.pop(seq, None)
    if ready is not None:
        ready.set()


def tell_lost(key, token):
    """Tells the harness a lease it handed out is lost (the lock's own
    signal: a failed heartbeat, a connection listener)."""
    send({"event": "lost", "lease": {"key": key, "token": token}})


def release_apart(lock, what):
    """Releases, on a thread of its own, what a failed acquire may hold: a
    library's release may retry until its server answers again, and the
    acquire's unknown is answered meanwhile. A failure is only logged."""
    def release():
        try:
            lock.release()
        except Exception as e:
            sys.stderr.write("releasing %s after a failed acquire: %r\n" % (what, e))

    threading.Thread(target=release, daemon=True).start()


def word(arg):
    if isinstance(arg, bytes):
        return arg.decode("utf-8", "replace")
    return str(arg)


def did_what_it_asked(reply):
    """A reply that is not an error, nil, zero or false (the protocol's "ok")."""
    if isinstance(reply, Exception) or reply is None or reply is False:
        return False
    return not (isinstance(reply, int) and reply == 0)


# When this thread last wrote each command, by its name in upper case, on
# the machine's clock: a lock that retries its SET until one takes the key
# leases from the SET that took it, not from the call.
_sent = threading.local()


def forget_sent():
    """Forgets what this thread has sent: called as a request starts."""
    _sent.at = {}


def sent_ns(command):
    """When this thread last wrote command (a name in upper case) to a
    ReportingConnection, on the machine's clock, or 0 if it has not since
    forget_sent."""
    return getattr(_sent, "at", {}).get(command, 0)


class ReportingConnection(redis.Connection):
    """A redis-py connection whose every command boundary is an event the
    harness answers: before a command leaves and after its reply arrives,
    the worker tells the harness and waits for its go, as the Go harness's
    hooks do on a go-redis client. Command traps spring here."""

    def send_command(self, *args, **kwargs):
        self._seq = next(_seqs)
        cmd = [word(a) for a in args]
        e = {"event": "send", "seq": self._seq, "cmds": [cmd]}
        if threading.get_ident() not in _serving:
            e["apart"] = True
        event(e)
        if cmd:
            # After the harness's go: a trap's pause is not the lease's.
            if not hasattr(_sent, "at"):
                forget_sent()
            _sent.at[cmd[0].upper()] = time.time_ns()
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
_FENCED_WRITE = """
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) <= last then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1"""


def host_port(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class Worker:
    """What every worker shares: the store, the client's clock, the
    dispatch of requests. A worker subclasses it with hello(h),
    acquire(key) and release(lease); hello calls connect_store(h)."""

    def __init__(self):
        self.store = None
        self.clock_ns = 0
        # Run by the request thread once the reply to the current request
        # is written (a lease's loss must not overtake its lease).
        self.after = None

    def now_ns(self):
        """The client's wall clock: the machine's plus the harness's skew."""
        return time.time_ns() + self.clock_ns

    def connect_store(self, h):
        host, port = host_port(h["store"])
        timeout = (h.get("store_timeout_ns") or 500_000_000) / 1e9
        self.store = redis.Redis(host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._fenced_write = self.store.register_script(_FENCED_WRITE)
        # Connected now, before the story's clock, not by the first read:
        # redis-py dials on a command's demand, and a dial through the link
        # costs several reads, which a successor's window cannot spare. A
        # store that does not answer here fails the first op instead.
        try:
            self.store.ping()
        except Exception:
            pass

    def read(self, key):
        v = self.store.get(key)
        return {"value": int(v)} if v is not None else {}

    def write(self, key, value, fence):
        if not fence:
            self.store.set(key, value)
            return {}
        if self._fenced_write(keys=[key, key + ":fence"], args=[value, fence]) == 0:
            return {"err": "stale", "msg": "stale fencing token"}
        return {}

    def do(self, req):
        op = req["op"]
        self.clock_ns = req.get("clock_ns", 0)
        try:
            if op == "hello":
                return self.hello(req["hello"])
            if self.store is None:
                return {"err": "unknown", "msg": op + " before a successful hello"}
            if op == "acquire":
                return self.acquire(req["key"])
            if op == "release":
                return self.release(req["lease"])
            if op == "read":
                return self.read(req["key"])
            if op == "write":
                return self.write(req["key"], req.get("value", 0), req.get("fence", 0))
            return {"err": "unknown", "msg": "unknown op " + op}
        except Exception as e:  # the library's or the store's: the outcome is unknown
            return {"err": "unknown", "msg": "%s: %r" % (op, e)}


def _fork_server(fd, name):
    """Forks a worker for each request on the socket fd (package worker's
    Forker) and returns only in a fork, whose stdin, stdout and stderr are
    then the files that came with its request. The library is imported
    once, here; a fork starts from the state of a worker that has imported
    it and not yet said hello, as a new interpreter would be. This process
    reaps a fork only when asked, once the harness has seen it exit, and
    exits when the socket closes (its forks die with it). A request that
    fails is answered "err ..." and the others go on."""
    import ctypes
    import signal
    import socket

    if threading.active_count() > 1:
        # A fork carries only the thread that forked: a library that
        # started a thread at import cannot be forked.
        sys.stderr.write("%s: cannot fork workers: %d threads run after the imports\n" % (name, threading.active_count()))
        os._exit(2)
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    ctl = socket.socket(fileno=fd)
    me = os.getpid()
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 128, 3)
        except OSError:
            os._exit(0)
        if not msg:  # the harness closed its end
            os._exit(0)
        try:
            words = msg.decode().split()
            if len(words) == 2 and words[0] == "reap" and not fds:
                _, status = os.waitpid(int(words[1]), 0)
                ctl.send(b"exit %d" % os.waitstatus_to_exitcode(status))
                continue
            if words != ["fork"] or len(fds) != 3:
                raise ValueError("a request that does not parse: %r with %d files" % (msg, len(fds)))
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except Exception as e:
            # This request fails, not the forks already serving.
            for f in fds:
                os.close(f)
            ctl.send(("err %r" % (e,)).encode()[:400])
            continue
        if pid == 0:
            ctl.close()
            os.setpgid(0, 0)
            prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with this process
            if os.getppid() != me:
                os._exit(1)
            for i, f in enumerate(fds):
                os.dup2(f, i)
                os.close(f)
            return
        for f in fds:
            os.close(f)
        ctl.send(b"pid %d" % pid)


def serve(worker, name):
    """Serves the protocol until stdin ends, then exits at once, whatever
    the library's own threads are doing. Run as a Forker's program
    (LOCKTORTURE_FORKS set), each fork serves it."""
    fd = os.environ.pop("LOCKTORTURE_FORKS", None)
    if fd is not None:
        _fork_server(int(fd), name)
    requests = queue.Queue()

    def run():
        _serving.add(threading.get_ident())
        try:
            while True:
                req = requests.get()
                reply = worker.do(req)
                reply["id"] = req["id"]
                send(reply)
                after, worker.after = worker.after, None
                if after is not None:
                    after()
        except Exception as e:
            sys.stderr.write("%s: serving a request failed: %r\n" % (name, e))
            os._exit(2)

    threading.Thread(target=run, daemon=True).start()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            op = req["op"]
        except (ValueError, KeyError, TypeError) as e:
            sys.stderr.write("%s: a request that does not parse (%r): %.80r\n" % (name, e, line))
            os._exit(2)
        if op == "go":
            _go(req.get("seq"))
        else:
            requests.put(req)
    os._exit(0)
