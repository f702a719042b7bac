"""A locktorture worker that serves kazoo's Lock (Debian's python3-kazoo 2.8).

It speaks the worker protocol (package worker of locktorture): one JSON
object per line, requests on stdin, replies and events on stdout. It serves
three locks, all kazoo.recipe.lock.Lock on a ZooKeeper ensemble, used as
kazoo's users use it: KazooClient(hosts, timeout=<session timeout>),
client.Lock(path, identifier), acquire(blocking=True, timeout=...),
release(), with the library's defaults otherwise.

  kazoo           the lease's token is the full path of our lock node;
  kazoo-fenced    the same, and the node's czxid (the zxid of its create,
                  totally ordered across the ensemble) as the fencing token;
  kazoo-listener  the same as kazoo, and a state listener, as kazoo's docs
                  ask of lock users: a SUSPENDED or LOST state while a lease
                  is held is told to the harness as a "lost" event.

Faults reach it without its help. The harness pauses and kills the whole
process with signals (kazoo's connection thread, its pings and its retries
stop and die with it), and cuts or slows the worker's own proxied links to
the ZooKeeper members and the store. It sends no send/reply events, so
command traps cannot spring inside it: kazoo's connection cannot be wrapped
the way redis-py's can. kazoo has no per-command connection object to
subclass; every request is queued by the calling thread and written, with
the session's pings, by the client's one connection thread
(kazoo/protocol/connection.py, ConnectionHandler._send_request and
_connect_attempt) on a socket of its own, and the replies are matched and
handed back on that thread too. A story that needs a command trap comes out
vacuous for these locks, not safe.
"""

import logging
import queue
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, LockTimeout
from kazoo.protocol.states import KazooState

# Only protocol lines on stdout. kazoo logs through logging ("kazoo.client",
# "kazoo.protocol.connection", ...): its warnings (a dropped connection, an
# expired session) go to stderr, which the harness keeps in workers.log.
logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                    format="kazoo-worker %(levelname)s %(name)s: %(message)s")

LOCKS = ("kazoo", "kazoo-fenced", "kazoo-listener")

class KazooWorker(Worker):
    def __init__(self):
        super().__init__()
        self.name = None
        self.client = None
        self.owner = None
        self.wait = None
        self.locks = {}   # key -> kazoo Lock, one per key, kept
        # token -> (key, kazoo Lock) of every lease handed out, kept after
        # its release (a second release is kazoo's to answer: not-held).
        self.leases = {}
        # kazoo-listener's bookkeeping, shared with kazoo's event thread.
        self.mu = threading.Lock()
        self.held = {}        # token -> key: leases not yet told lost
        self.suspensions = 0  # SUSPENDED or LOST transitions seen
        self.losses = queue.Queue()

    # hello

    def hello(self, h):
        if h.get("lock") not in LOCKS:
            return {"err": "unknown", "msg": "this worker serves %s, not %r" % (", ".join(LOCKS), h.get("lock"))}
        self.name = h["lock"]
        self.owner = h.get("owner") or None
        # kazoo's timeout is the session timeout it asks the ensemble for
        # (KazooClient.__init__: "self._session_timeout = int(timeout *
        # 1000)"; ConnectionHandler._connect sends it in the Connect request
        # and derives its ping interval and read timeout from the negotiated
        # one): the lease is the session. Zero: kazoo's default of 10 s.
        ttl = (h.get("ttl_ns") or 0) / 1e9 or 10.0
        self.wait = (h.get("wait_ns") or 0) / 1e9 or ttl
        # connection_retry and command_retry are left at kazoo's defaults:
        # its docs (docs/basic_usage.rst, "Retrying Commands" and "Custom
        # Retries") describe them and tell no one to change them for the
        # Lock recipe, which takes its own retry (Lock.__init__: KazooRetry(
        # max_tries=None), deadline = acquire's timeout). The defaults
        # (client.py, _RETRY_COMPAT_DEFAULTS and KazooClient.__init__) are
        # KazooRetry(max_tries=None, delay=0.1, backoff=2, max_delay=3600,
        # ignore_expire=True) for both: reconnect forever, and retry a
        # command forever across ConnectionLoss and SessionExpiredError.
        # That is what release() runs under (Lock.release: self.client.retry(
        # self._inner_release)), so a release on a cut link waits until some
        # session answers again, and the harness's op waits with it, as a
        # kazoo user's would. randomize_hosts stays True (the default).
        self.client = KazooClient(hosts=",".join(h["nodes"]), timeout=ttl)
        if self.name == "kazoo-listener":
            # kazoo/recipe/lock.py, module docstring (its Sphinx roles left
            # out): "It's highly recommended to add a state listener with
            # add_listener and watch for LOST and SUSPENDED state changes
            # and re-act appropriately. In the event that a LOST state
            # occurs, its certain that the lock and/or the lease has been
            # lost."
            # docs/basic_usage.rst: "When a connection transitions to
            # SUSPENDED, if the client is performing an action that requires
            # agreement with other systems (using the Lock recipe for
            # example), it should pause what it's doing."
            self.client.add_listener(self.on_state)
            threading.Thread(target=self.tell_losses, daemon=True).start()
        try:
            # The harness's story clock starts once every worker has said
            # hello, so the connection is made here, not on the first acquire.
            self.client.start(timeout=20)
        except Exception as e:  # KazooTimeoutError: kazoo has stopped the client
            self.client = None
            return {"err": "unknown", "msg": "connecting to %s: %r" % (",".join(h["nodes"]), e)}
        self.connect_store(h)
        return {}

    # kazoo-listener: losses

    def on_state(self, state):
        """kazoo's state listener. It runs on kazoo's own thread and must not
        block (KazooClient.add_listener's warning), so it only hands the
        leases it ends to tell_losses. It returns None: True would remove it."""
        if state == KazooState.CONNECTED:
            return None
        with self.mu:
            self.suspensions += 1
            told = list(self.held.items())
            self.held.clear()
        for token, key in told:
            self.losses.put((key, token))
        return None

    def tell_losses(self):
        while True:
            key, token = self.losses.get()
            tell_lost(key, token)

    def watch_lease(self, key, token, suspensions, state):
        """Runs after the lease's reply is written: from now on a SUSPENDED
        or LOST ends it; if one came since acquire returned, it is told now."""
        with self.mu:
            if suspensions == self.suspensions and state == KazooState.CONNECTED \
                    and self.client.state == KazooState.CONNECTED:
                self.held[token] = key
                return
        tell_lost(key, token)

    # acquire and release

    def acquire(self, key):
        lock = self.locks.get(key)
        if lock is None:
            # One Lock per key, kept: a Lock that created a node and lost
            # the answer finds it again by its uuid prefix on its next
            # acquire (Lock._inner_acquire, create_tried and _find_node).
            lock = self.client.Lock("/locks/" + key, identifier=self.owner)
            self.locks[key] = lock
        try:
            got = lock.acquire(blocking=True, timeout=self.wait)
        except LockTimeout as e:
            # Raised by Lock._inner_acquire when the predecessor's watch did
            # not fire within the timeout; acquire has deleted our node
            # (_best_effort_cleanup) before re-raising.
            return {"err": "not-acquired", "msg": str(e)}
        except KazooException as e:
            # Anything else kazoo raises (ConnectionClosedError, a
            # ZooKeeper error from create or get_children, ...): the create
            # may have landed, and the cleanup kazoo tried is best-effort.
            return {"err": "unknown", "msg": "acquire: %r" % e}
        except Exception as e:
            return {"err": "unknown", "msg": "acquire: %r" % e}
        if not got:
            # With blocking=True kazoo answers False only when its retry of
            # _inner_acquire ran past the deadline (Lock.acquire swallows the
            # RetryFailedError): ConnectionLoss or SessionExpiredError all
            # along, our node gone (ForceRetryError from _get_predecessor),
            # or this Lock already holding (ForceRetryError: it is not
            # re-entrant). Before answering, kazoo deletes the node it made
            # (_best_effort_cleanup, whose commands wait for a connection and
            # whose failure it swallows; a node it could not delete is found
            # again by this Lock's next acquire). kazoo says "not acquired",
            # and that is what is reported.
            return {"err": "not-acquired", "msg": "kazoo's Lock.acquire returned False (its retry deadline passed)"}
        suspensions, state = self.suspensions, self.client.state
        # Lock.node is our node's name under Lock.path, set by
        # _inner_acquire (and cleared by _inner_release).
        token = lock.path + "/" + lock.node
        lease = {"key": key, "token": token}
        if self.name == "kazoo-fenced":
            try:
                stat = self.client.exists(token)
            except Exception as e:
                self.abandon(key, lock)
                return {"err": "unknown", "msg": "acquired %s, then reading its stat: %r" % (token, e)}
            if stat is None:
                self.abandon(key, lock)
                return {"err": "unknown", "msg": "acquired %s, then found it gone" % token}
            # The zxid of the node's create: zxids grow with every committed
            # write of the ensemble, so a later lock node's is larger, across
            # keys too (sequence numbers are per parent).
            lease["fence"] = stat.czxid
        if self.name == "kazoo-listener":
            lease["tells_loss"] = True
            self.after = lambda: self.watch_lease(key, token, suspensions, state)
        self.leases[token] = (key, lock)
        return {"lease": lease}

    def abandon(self, key, lock):
        """Releases what can be released, off the request thread: a release
        retries until a session answers again (client.retry), and the
        acquire's unknown is answered meanwhile. The Lock is not used again."""
        self.locks.pop(key, None)
        release_apart(lock, "kazoo's Lock on " + key)

    def release(self, lease):
        token = lease.get("token")
        handed = self.leases.get(token)
        if handed is None:
            return {"err": "unknown", "msg": "a lease this worker never handed out"}
        key, lock = handed
        with self.mu:
            self.held.pop(token, None)
        if lock.is_acquired and lock.node is not None and lock.path + "/" + lock.node != token:
            # kazoo's release takes no token: it deletes whatever node the
            # Lock holds now. An old lease of a Lock that holds again under a
            # new node is not released that way; it deletes nothing.
            return {"err": "not-held", "msg": "this Lock holds %s/%s now, not %s" % (lock.path, lock.node, token)}
        try:
            # Lock.release is client.retry(Lock._inner_release): False when
            # this Lock object does not hold (is_acquired False), before any
            # command; otherwise a delete of our node, a NoNodeError from it
            # swallowed ("pragma: nocover"), and True. The retry is kazoo's
            # default command retry (see hello): ConnectionLoss and
            # SessionExpiredError are retried without end, so after the
            # session expired the retry reconnects under a new session, the
            # delete finds the old ephemeral node gone, and release returns
            # True: kazoo reports a release of a lock it had lost as a
            # success, and so does this worker (it reports what kazoo
            # reports). What can still come out is ConnectionClosedError
            # (the client was stopped) or a ZooKeeper error other than those.
            released = lock.release()
        except Exception as e:
            return {"err": "unknown", "msg": "release: %r" % e}
        if not released:
            return {"err": "not-held", "msg": "kazoo's Lock.release returned False: this Lock does not hold"}
        return {}


serve(KazooWorker(), "kazoo-worker")
