"""A locktorture worker that serves portalocker's RedisLock (Debian's
python3-portalocker 2.2, on Debian's python3-redis 4.3).

It speaks the worker protocol (package worker of locktorture): one JSON
object per line, requests on stdin, replies and events on stdout.

What the lock is (portalocker/redis.py, RedisLock): no key at all. A holder
is a client SUBSCRIBEd to the lock's channel; a contender asks PUBSUB NUMSUB
and takes the lock only when it counts no subscriber:

  acquire   (RedisLock.acquire) NUMSUB channel; if it counts none: CLIENT
            SETNAME <channel>-lock, SUBSCRIBE channel on a PubSub of the
            same redis.Redis (a connection of its own from the pool), start
            a PubSubWorkerThread that reads that connection every
            thread_sleep_time (0.1 s) and answers pings, then NUMSUB again:
            exactly 1 holds, anything else releases and tries again. While
            someone else is subscribed it runs check_or_kill_lock (see
            below) and tries again every check_interval (0.25 s) until its
            timeout, then raises AlreadyLocked.
  hold      as long as the PubSub connection lives: the server drops the
            subscription when that connection closes, and nothing expires
            (a connection's lock: Traits Ends Connection).
  release   (RedisLock.release) stop the thread (whose run loop closes the
            PubSub: the connection's close is what lets the lock go), then
            write UNSUBSCRIBE on a pooled connection, never read its reply,
            and close. It takes no token, answers nothing (it returns None,
            before the server has seen anything), and acts only on this
            RedisLock's own subscription: it cannot let another client's
            hold go.
  loss      when the PubSub connection fails, the reading thread's
            get_message raises (redis-py's PubSub._execute: no retry by
            default) and portalocker's PubSubWorkerThread.run calls
            _thread.interrupt_main() before dying: the library's signal to
            the program that holds the lock.

The SUBSCRIBE is written and not waited for (redis-py's PubSub.subscribe
only sends; the confirmation is read later by the thread), and the NUMSUB
that follows goes on another connection of the pool: nothing orders the two
at the server. Two contenders that both counted none, whose SUBSCRIBEs are
each delayed past the other's second NUMSUB on the way (a retransmit, a
slow link), both count 1 and both hold (upstream wolph/portalocker#139,
"subscribe versus count ordering", for later versions).

check_or_kill_lock is meant to kill a holder that does not answer a ping
within unavailable_timeout (1 s) by CLIENT KILL of the client named
<channel>-lock. It never does: it SUBSCRIBEs a fresh PubSub to a response
channel, PUBLISHes the ping, and takes the first get_message() as the
holder's answer, but that first message is the confirmation of its own
SUBSCRIBE (redis-py's PubSub has ignore_subscribe_messages False by
default), so it returns True at once, however dead the holder is. A paused
or cut-off holder therefore keeps the lock for as long as its connection
stays open on the server; the waiters wait.

The lock is used as portalocker's docs show it: RedisLock(channel,
connection=<a redis.Redis>, timeout=<the wait>), acquire(), release(), with
the library's defaults otherwise (check_interval, fail_when_locked,
thread_sleep_time, unavailable_timeout). The redis.Redis passed in has
health_check_interval=10, as RedisLock's docstring recommends of a
connection passed in (and as DEFAULT_REDIS_KWARGS gives its own), and, like
redis-py's worker, 500 ms per command: redis-py's default is no timeout,
which waits forever on a stopped node.

Faults reach it without its help (the harness pauses and kills the whole
process with signals, and cuts or slows its links). For command traps,
every connection of that redis.Redis is a PubSubReportingConnection: the
protocol's ReportingConnection, except that a message published to a
channel it listens to (a waiter's ping) is no reply to a command and is
not reported as one. The PubSub's reading thread reports the reply to
SUBSCRIBE, not the request thread, since redis-py's subscribe does not
wait for it.

The library's signal of a lost hold is turned into the protocol's: this
worker's main thread is the protocol's stdin loop (serve), blocked in a
read, where the interrupt would wait for the next line; so SIGINT gets a
handler, and signal.set_wakeup_fd wakes a thread of this worker the moment
interrupt_main trips it. That thread tells the harness every held lease
whose PubSub thread has died ("lost"), as a user's program would learn by
the KeyboardInterrupt in its main thread. Leases say tells_loss.
"""

import os
import secrets
import signal

import portalocker
from portalocker.exceptions import AlreadyLocked


class PubSubReportingConnection(ReportingConnection):
    """ReportingConnection, whose replies a PubSub's published messages are
    not: a ["message", channel, data] read on a subscribed connection
    answers no command, so it is returned without an event."""

    def read_response(self, *args, **kwargs):
        try:
            reply = redis.Connection.read_response(self, *args, **kwargs)
        except Exception:
            event({"event": "reply", "seq": self._seq, "ok": [False]})
            raise
        if isinstance(reply, list) and reply and word(reply[0]) in ("message", "pmessage"):
            return reply
        event({"event": "reply", "seq": self._seq, "ok": [did_what_it_asked(reply)]})
        return reply


# portalocker's loss signal is _thread.interrupt_main() (redis.py,
# PubSubWorkerThread.run). Python runs a SIGINT handler only between
# bytecodes of the main thread, which serve() keeps blocked reading stdin;
# the wakeup fd is written at once (CPython's trip_signal), and a thread of
# ours reads it. The handler must be Python's: interrupt_main does nothing
# for a signal set to SIG_DFL or SIG_IGN. Both are set here, at import, on
# the main thread, as signal.signal requires.
_interrupts_r, _interrupts_w = os.pipe()
os.set_blocking(_interrupts_w, False)
signal.signal(signal.SIGINT, lambda signum, frame: None)
signal.set_wakeup_fd(_interrupts_w, warn_on_full_buffer=False)


class PortalockerWorker(Worker):
    def __init__(self):
        super().__init__()
        self.node = None
        self.wait = None
        # token -> (key, RedisLock) of every lease handed out, kept after
        # its release (a second release is the library's to answer), and so
        # that no RedisLock is collected: RedisLock.__del__ releases.
        self.leases = {}
        self.mu = threading.Lock()
        self.held = {}  # token -> key: leases not released and not told lost
        threading.Thread(target=self.tell_losses, daemon=True).start()

    def hello(self, h):
        host, port = host_port(h["nodes"][0])
        pool = redis.ConnectionPool(connection_class=PubSubReportingConnection, host=host, port=port,
                                    socket_timeout=0.5, socket_connect_timeout=0.5, health_check_interval=10)
        self.node = redis.Redis(connection_pool=pool)
        # The lock has no time to live: the TTL is only the wait's default.
        self.wait = (h.get("wait_ns") or h.get("ttl_ns") or 0) / 1e9 or portalocker.utils.DEFAULT_TIMEOUT
        self.connect_store(h)
        return {}

    # losses

    def tell_losses(self):
        """Wakes at each interrupt_main of a dying PubSub thread and tells
        the harness of the held leases whose thread has ended (the thread
        interrupts from its except clause, just before it ends)."""
        while True:
            os.read(_interrupts_r, 64)
            deadline = time.monotonic() + 1.0
            while True:
                lost = self.take_dead()
                if lost or time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            if not lost:
                sys.stderr.write("portalocker-worker: an interrupt, and no held lease's thread has ended\n")
            for token, key in lost:
                tell_lost(key, token)

    def take_dead(self):
        with self.mu:
            dead = [(token, key) for token, key in self.held.items() if not self.alive(token)]
            for token, _ in dead:
                del self.held[token]
        return dead

    def alive(self, token):
        lock = self.leases[token][1]
        thread = lock.thread
        return thread is not None and thread.is_alive()

    def watch(self, key, token):
        """Runs once the lease's reply is written: from now on the thread's
        death is told; if it died already, it is told now."""
        with self.mu:
            self.held[token] = key
        for t, k in self.take_dead():
            tell_lost(k, t)

    # acquire and release

    def acquire(self, key):
        # A RedisLock per acquisition, as a `with RedisLock(...)` makes one:
        # acquire asserts its PubSub is not active ("This lock is already
        # active").
        lock = portalocker.RedisLock(key, connection=self.node, timeout=self.wait)
        try:
            lock.acquire()
        except AlreadyLocked:
            # Raised once the timeout generator (utils.LockBase.
            # _timeout_generator) ends with a subscriber still counted, or
            # after a race's own release: this RedisLock holds nothing.
            return {"err": "not-acquired", "msg": "AlreadyLocked: the wait ran out with the channel's subscriber still counted"}
        except Exception as e:
            # A command failed (redis-py's ConnectionError, TimeoutError):
            # a SUBSCRIBE may have landed and its thread may be running.
            self.abandon(lock)
            return {"err": "unknown", "msg": "acquire: %r" % e}
        token = secrets.token_hex(8)
        self.leases[token] = (key, lock)
        self.after = lambda: self.watch(key, token)
        # No deadline: the hold lasts as long as the connection.
        return {"lease": {"key": key, "token": token, "tells_loss": True}}

    def abandon(self, lock):
        """Lets go, off the request thread, of what a failed acquire may
        hold, as RedisLock.__del__ would once the user's code dropped it."""
        release_apart(lock, "portalocker's RedisLock")

    def release(self, lease):
        token = lease.get("token")
        handed = self.leases.get(token)
        if handed is None:
            return {"err": "unknown", "msg": "a lease this worker never handed out"}
        _, lock = handed
        with self.mu:
            self.held.pop(token, None)
        try:
            # Returns None whatever it finds, and waits for no reply: the
            # thread's stop closes the subscribed connection (the close is
            # the release), then an UNSUBSCRIBE is written on a pooled
            # connection and never read. A hold whose connection died (its
            # thread gone) is "released" by the SUBSCRIBE that the PubSub's
            # reconnect replays (PubSub.on_connect) and the UNSUBSCRIBE
            # after it; a second release does nothing. None of these says
            # the release let nothing go, so this worker does not either.
            lock.release()
        except Exception as e:
            # The UNSUBSCRIBE's write failed, or the health-check PING
            # redis-py sends first when one is due (every 10 s) went
            # unanswered: the thread has stopped and closed the subscribed
            # connection, but whether the server has seen that close is
            # not known.
            return {"err": "unknown", "msg": "release: %r" % e}
        return {}


serve(PortalockerWorker(), "portalocker-worker")
