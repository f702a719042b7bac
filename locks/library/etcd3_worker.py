"""A locktorture worker that serves python-etcd3's Lock (Debian's
python3-etcd3 0.12, on Debian's python3-grpcio, python3-protobuf and
python3-tenacity 8.2).

It speaks the worker protocol (package worker of locktorture): one JSON
object per line, requests on stdin, replies and events on stdout. It serves
two locks, both etcd3.Lock used as its docs show it: etcd3.client(host,
port, timeout=...), client.lock(name, ttl=...), acquire(timeout=...),
release(), with the library's defaults otherwise.

  etcd3         the lease's token is the lock's uuid, the value it puts
                under its key and the one its release compares;
  etcd3-fenced  the same, and the key's create revision, read after the
                acquire, as the fencing token.

What the lock is (etcd3/locks.py, Lock): each try of acquire grants a new
lease of ttl seconds (client.lease) and runs one transaction: if the key
/locks/<name> has never been created (create revision 0), put the lock's
uuid under it on that lease. Nothing renews the lease: Lock.refresh() is
there for the user to call (the class docstring: "The lock will be
released after this time elapses, unless refreshed"), and the harness's
holders do not, so a hold ends when the server's lessor expires the lease
(etcd's lessor measures it on the leader's monotonic clock) or at the
release: a transaction that deletes the key if its value is still our
uuid, and answers whether it did.

As packaged, acquire cannot wait. Its retry is tenacity.retry(retry=
retry_never, stop=stop_after_delay(timeout), wait=wait) with a wait
function of the old tenacity signature, wait(previous_attempt_number,
delay_since_first_attempt); Debian's tenacity 8.2 calls wait(retry_state)
(tenacity/__init__.py, BaseRetrying.iter), so the first try that finds the
key taken raises TypeError ("wait() missing 1 required positional
argument: 'delay_since_first_attempt'") at once, instead of watching the
key and trying again until the timeout (upstream kragniz/python-etcd3
issue 2149). The try that raised it put nothing (its transaction's
compare failed; only its fresh lease, holding no key, is left to expire),
so this worker answers not-acquired, at once.

The client talks to one member: python-etcd3 0.12 takes one host and port
(Etcd3Client.__init__), so the worker dials its link to the first node.
Its timeout, a gRPC deadline on every call, is half the TTL, as this
repository's own etcd lock bounds a request; python-etcd3's default is no
deadline, which waits forever on a stopped member. A call that fails
(etcd3.exceptions.ConnectionFailedError, ConnectionTimeoutError, ...)
leaves the outcome unknown.

etcd counts a lease's TTL in whole seconds (LeaseGrantRequest's TTL is an
int64, and etcd raises a TTL below its minimum, which is 1 s with the
harness's election timeout): the story's TTL is rounded up to whole
seconds (1.5 s is 2 s; the harness runs a story of 500 ms at the lock's
MinTTL, 1 s), and the lease's deadline is the TTL the server granted
(LeaseGrantResponse.TTL, kept as Lock.lease.ttl), counted from before the
acquire began: the granted lease cannot have started earlier.

Faults reach it without its help: the harness pauses and kills the whole
process with signals and cuts or slows its links. It sends no send/reply
events: every request goes through grpc's channel, which python-etcd3
makes itself (Etcd3Client.__init__: grpc.insecure_channel) and gives no
interceptor or connection class to wrap, so command traps cannot spring
inside it (a story that needs one comes out vacuous). Nor does it tell of
a lost lease: the library has no signal (is_acquired() is a read the user
must make).
"""

import math

try:
    import etcd3
    import etcd3.exceptions
    _IMPORT_ERROR = None
except Exception as e:  # a packaging mismatch: told by hello, in one line
    _IMPORT_ERROR = "import etcd3 (Debian's python3-etcd3) failed: %r" % e

LOCKS = ("etcd3", "etcd3-fenced")


def tenacity_wait_mismatch(e):
    """The TypeError python-etcd3 0.12's Lock.acquire raises under tenacity
    8 once a try found the lock taken (see the module's docstring)."""
    return isinstance(e, TypeError) and "delay_since_first_attempt" in str(e)


class Etcd3Worker(Worker):
    def __init__(self):
        super().__init__()
        self.name = None
        self.client = None
        self.ttl = None
        self.wait = None
        # token -> etcd3 Lock of every lease handed out, kept after its
        # release: a second release is the library's to answer (not-held).
        self.leases = {}

    def hello(self, h):
        if _IMPORT_ERROR is not None:
            return {"err": "unknown", "msg": _IMPORT_ERROR}
        if h.get("lock") not in LOCKS:
            return {"err": "unknown", "msg": "this worker serves %s, not %r" % (", ".join(LOCKS), h.get("lock"))}
        self.name = h["lock"]
        ttl_ns = h.get("ttl_ns") or 0
        # Whole seconds, rounded up; python-etcd3's default is 60.
        self.ttl = max(1, math.ceil(ttl_ns / 1e9)) if ttl_ns else 60
        self.wait = (h.get("wait_ns") or ttl_ns) / 1e9 or 10.0
        host, port = host_port(h["nodes"][0])
        self.client = etcd3.client(host=host, port=port, timeout=max(ttl_ns / 2e9, 0.5))
        try:
            # The harness's story clock starts once every worker has said
            # hello: the channel is connected here, not on the first acquire.
            self.client.get("/locktorture/hello")
        except Exception as e:
            # etcd3.client() itself connects nothing: a process started
            # while its member is down (a killed leader, the client
            # replacing a retired one) starts all the same, and its calls
            # fail until the member is back, as a user's program would.
            sys.stderr.write("etcd3-worker: %s did not answer at hello: %r\n" % (h["nodes"][0], e))
        self.connect_store(h)
        return {}

    def acquire(self, key):
        lock = self.client.lock(key, ttl=self.ttl)
        start = self.now_ns()
        try:
            got = lock.acquire(timeout=self.wait)
        except TypeError as e:
            if not tenacity_wait_mismatch(e):
                return {"err": "unknown", "msg": "acquire: %r" % e}
            return {"err": "not-acquired", "msg": "the key is taken, and Lock.acquire raised instead of waiting: %s" % e}
        except Exception as e:
            # A lease grant or the transaction failed or timed out: the put
            # may have landed (its lease then expires within the TTL).
            return {"err": "unknown", "msg": "acquire: %r" % e}
        if not got:
            # Lock.acquire caught tenacity's RetryError: the stop came
            # before a wait was asked for (a timeout shorter than a try).
            return {"err": "not-acquired", "msg": "Lock.acquire returned False"}
        token = lock.uuid.hex()
        lease = {"key": key, "token": token,
                 "valid_until_ns": start + int(lock.lease.ttl) * 1_000_000_000}
        if self.name == "etcd3-fenced":
            try:
                value, meta = self.client.get(lock.key)
            except Exception as e:
                return {"err": "unknown", "msg": "acquired %s, then reading its revision: %r" % (lock.key, e)}
            if value != lock.uuid:
                return {"err": "unknown", "msg": "acquired %s, then found it gone or another's" % lock.key}
            # The revision of the transaction that created the key. etcd's
            # revision counts every committed write of the cluster, and this
            # lock's put only ever creates the key (its compare asks for
            # create revision 0), so a later holder's key, created after
            # this one was deleted or expired, has a greater one, across
            # keys too. It never changes while the key lives (a refresh
            # touches the lease, not the key), where the mod revision
            # would equal it anyway.
            lease["fence"] = meta.create_revision
        self.leases[token] = lock
        return {"lease": lease}

    def release(self, lease):
        lock = self.leases.get(lease.get("token"))
        if lock is None:
            return {"err": "unknown", "msg": "a lease this worker never handed out"}
        try:
            # A transaction: delete the key if its value is our uuid. False
            # when it is not (expired, taken by another, released before):
            # etcd fails a value compare on a missing key.
            released = lock.release()
        except Exception as e:
            return {"err": "unknown", "msg": "release: %r" % e}
        if not released:
            return {"err": "not-held", "msg": "Lock.release: the key does not hold this lock's uuid"}
        return {}


serve(Etcd3Worker(), "etcd3-worker")
