/*
 * A locktorture worker that serves Apache Curator's InterProcessMutex
 * (Debian's libcurator-recipes-java 5.4, on ZooKeeper 3.8's client).
 *
 * It speaks the worker protocol (package worker of locktorture): one JSON
 * object per line, requests on stdin, replies and events on stdout, its own
 * diagnostics on stderr. The shape is redispy_worker.py's: the main thread
 * reads stdin, one executor thread runs the requests in arrival order (an
 * InterProcessMutex is reentrant per thread and must be released by the
 * thread that acquired it), and replies and events share one writer.
 *
 * The lock is used as Curator's users use it: CuratorFrameworkFactory's
 * builder with an ExponentialBackoffRetry, every other option at Curator's
 * default; one InterProcessMutex per lock path; acquire(time, unit) and
 * release(). Three locks are served (hello.lock):
 *
 *   curator           the mutex alone;
 *   curator-fenced    the lease carries the lock node's czxid as its fence;
 *   curator-listener  a ConnectionStateListener tells the holder when the
 *                     connection is SUSPENDED or LOST, as Curator's docs
 *                     ask a lock's user to watch for; a lease is held
 *                     from its grant on a live connection, even if the
 *                     listener has not yet heard the RECONNECTED.
 *
 * The protected store is a plain Redis, reached through the tiny RESP
 * client below (Debian has no Redis client for Java).
 *
 * Run with the single argument "train", it exercises its own code without
 * any server and exits: the build runs it so to make a class-data-sharing
 * archive, which makes later starts fast.
 *
 * Classpath: curator-recipes.jar, curator-framework.jar, curator-client.jar
 * (their manifests pull in zookeeper, zookeeper-jute, guava and slf4j-api)
 * and slf4j-nop.jar, so that Curator and ZooKeeper log nothing.
 */

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.state.ConnectionStateListener;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public final class CuratorWorker {

    // ---------------------------------------------------------------- output

    /** Guards the protocol's stdout and, in curator-listener, the held leases. */
    static final Object OUT = new Object();

    /** The real stdout: protocol lines only (System.out is sent to stderr). */
    static OutputStream out;

    static String owner = "";

    /** Writes one protocol line. Callers that must order lines hold OUT. */
    static void emit(Map<String, Object> obj) {
        StringBuilder sb = new StringBuilder(128);
        Json.write(sb, obj);
        sb.append('\n');
        byte[] b = sb.toString().getBytes(StandardCharsets.UTF_8);
        synchronized (OUT) {
            try {
                out.write(b);
                out.flush();
            } catch (IOException e) {
                // The harness is gone: nobody is left to answer.
                log("stdout: " + e + "; exiting");
                System.exit(0);
            }
        }
    }

    /** Set by train: its expected failures stay off stderr. */
    static boolean quiet;

    static void log(String msg) {
        if (quiet) {
            return;
        }
        System.err.println("curator-worker " + owner + ": " + msg);
    }

    static Map<String, Object> obj() {
        return new LinkedHashMap<>();
    }

    static Map<String, Object> err(String kind, String msg) {
        Map<String, Object> r = obj();
        r.put("err", kind);
        r.put("msg", msg);
        return r;
    }

    static final String UNKNOWN = "unknown";
    static final String NOT_ACQUIRED = "not-acquired";
    static final String NOT_HELD = "not-held";
    static final String STALE = "stale";

    /** An exception as a reply's msg: its class and message. */
    static String describe(Throwable e) {
        String m = e.getMessage();
        return m == null ? e.getClass().getName() : e.getClass().getName() + ": " + m;
    }

    // ------------------------------------------------------------------ lock

    /**
     * An InterProcessMutex that tells the path of the lock node it holds.
     * Curator 5.4 keeps that path (the protected, ephemeral sequential node
     * its acquire created) per thread and exposes it only as the protected
     * getLockPath(), for subclasses; a subclass that calls it changes
     * nothing of the lock's behaviour. (The alternative, getParticipantNodes()
     * filtered by the node's ephemeralOwner being our session, costs more
     * reads and cannot tell this mutex's node from another's in our session.)
     */
    static final class LockNodeMutex extends InterProcessMutex {
        LockNodeMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        /** The lock node this thread holds, or null. */
        String lockNodePath() {
            return getLockPath();
        }
    }

    /** Builds (does not start) a client as Curator's docs show. */
    static CuratorFramework buildClient(String connect, long ttlMs) {
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder().connectString(connect);
        int base;
        if (ttlMs > 0) {
            int ttl = (int) Math.min(Integer.MAX_VALUE, ttlMs);
            // The docs' example sleeps 1000 ms beside a 60 s default session;
            // a retry sleep as long as the session would outlast it.
            base = Math.max(10, ttl / 10);
            b.sessionTimeoutMs(ttl).connectionTimeoutMs(ttl);
        } else {
            base = 1000; // the lock's default: Curator's defaults, the docs' retry
        }
        return b.retryPolicy(new ExponentialBackoffRetry(base, 3)).build();
    }

    static final class Worker {
        String lock;
        boolean fenced, listener;
        CuratorFramework client;
        long waitNs;
        Resp store;
        /** How long hello waits for the first connection. */
        long connectWaitMs = 20_000;

        /** One mutex per key, at /locks/<key>. */
        final Map<String, LockNodeMutex> mutexes = new HashMap<>();
        /** key -> token of the lease this worker holds on it. */
        final Map<String, String> holding = new HashMap<>();
        /** Every token this worker handed out. */
        final Set<String> handedOut = new HashSet<>();

        // curator-listener: guarded by OUT.
        /** token -> key of held leases not yet told lost. */
        final Map<String, String> untold = new LinkedHashMap<>();
        ConnectionState lastState;

        /** Runs one request; the reply gets the request's id. */
        void serve(Map<String, Object> req) {
            long id = Json.longOf(req.get("id"));
            Map<String, Object> reply;
            Runnable after = null;
            try {
                Reply r = run(req);
                reply = r.body;
                after = r.after;
            } catch (Throwable e) {
                reply = err(UNKNOWN, describe(e));
            }
            Map<String, Object> line = obj();
            if (id != 0) {
                line.put("id", id);
            }
            line.putAll(reply);
            // The lease's reply goes out before any lost event of its own:
            // both are written under OUT, the event by `after` or, later,
            // by the listener.
            synchronized (OUT) {
                emit(line);
                if (after != null) {
                    after.run();
                }
            }
        }

        Reply run(Map<String, Object> req) throws Exception {
            String op = Json.stringOf(req.get("op"));
            if (op == null) {
                return new Reply(err(UNKNOWN, "request has no op"));
            }
            if (op.equals("hello")) {
                return new Reply(hello(Json.mapOf(req.get("hello"))));
            }
            if (client == null) {
                return new Reply(err(UNKNOWN, op + " before a successful hello"));
            }
            switch (op) {
                case "acquire":
                    return acquire(Json.stringOf(req.get("key")));
                case "release":
                    return new Reply(release(Json.mapOf(req.get("lease"))));
                case "read":
                    return new Reply(read(Json.stringOf(req.get("key"))));
                case "write":
                    return new Reply(write(Json.stringOf(req.get("key")), Json.longOf(req.get("value")),
                            Json.longOf(req.get("fence"))));
                default:
                    return new Reply(err(UNKNOWN, "unknown op " + op));
            }
        }

        Map<String, Object> hello(Map<String, Object> h) throws InterruptedException {
            if (client != null) {
                return err(UNKNOWN, "hello again");
            }
            if (h == null) {
                return err(UNKNOWN, "hello without hello");
            }
            String name = Json.stringOf(h.get("lock"));
            if (!"curator".equals(name) && !"curator-fenced".equals(name) && !"curator-listener".equals(name)) {
                return err(UNKNOWN, "this worker serves curator, curator-fenced and curator-listener, not " + name);
            }
            String o = Json.stringOf(h.get("owner"));
            if (o != null) {
                owner = o;
            }
            List<String> nodes = new ArrayList<>();
            if (h.get("nodes") instanceof List) {
                for (Object n : (List<?>) h.get("nodes")) {
                    if (n instanceof String) {
                        nodes.add((String) n);
                    }
                }
            }
            if (nodes.isEmpty()) {
                return err(UNKNOWN, "hello names no ZooKeeper nodes");
            }
            String storeAddr = Json.stringOf(h.get("store"));
            if (storeAddr == null || storeAddr.isEmpty()) {
                return err(UNKNOWN, "hello names no store");
            }
            long storeTimeoutNs = Json.longOf(h.get("store_timeout_ns"));
            if (storeTimeoutNs <= 0) {
                storeTimeoutNs = 500_000_000L;
            }
            long ttlNs = Json.longOf(h.get("ttl_ns"));
            long ttlMs = ttlNs > 0 ? Math.max(1, ttlNs / 1_000_000) : 0;
            waitNs = Json.longOf(h.get("wait_ns"));
            if (waitNs <= 0) {
                // Curator's default session when the ttl is zero.
                waitNs = ttlNs > 0 ? ttlNs : 60_000_000_000L;
            }
            try {
                store = new Resp(storeAddr, (int) Math.max(1, Math.min(Integer.MAX_VALUE, storeTimeoutNs / 1_000_000)));
            } catch (IllegalArgumentException e) {
                return err(UNKNOWN, "store: " + e.getMessage());
            }
            // Connected now, before the story's clock, not by the first
            // read; a store that does not answer fails the first op instead.
            try {
                store.call("PING");
            } catch (IOException e) {
                // the first op dials again and reports it
            }
            lock = name;
            fenced = name.equals("curator-fenced");
            listener = name.equals("curator-listener");

            CuratorFramework c;
            try {
                c = buildClient(String.join(",", nodes), ttlMs);
            } catch (RuntimeException e) {
                return err(UNKNOWN, "build: " + describe(e));
            }
            // Registered before start, so it sees every state from CONNECTED on.
            c.getConnectionStateListenable().addListener(new ConnectionStateListener() {
                @Override
                public void stateChanged(CuratorFramework cf, ConnectionState s) {
                    stateNow(s);
                }
            });
            long t0 = System.nanoTime();
            c.start();
            if (!c.blockUntilConnected((int) connectWaitMs, TimeUnit.MILLISECONDS)) {
                c.close();
                return err(UNKNOWN, "not connected to " + String.join(",", nodes) + " within " + connectWaitMs + " ms");
            }
            client = c;
            try {
                log("serving " + lock + ", session 0x" + Long.toHexString(c.getZookeeperClient().getZooKeeper().getSessionId())
                        + ", connected in " + (System.nanoTime() - t0) / 1_000_000 + " ms, "
                        + (System.nanoTime() - mainStartNs) / 1_000_000 + " ms after main began");
            } catch (Exception e) {
                log("serving " + lock);
            }
            return obj();
        }

        /** The connection state listener (Curator's event thread). */
        void stateNow(ConnectionState s) {
            log("connection " + s);
            if (!listener) {
                return;
            }
            synchronized (OUT) {
                lastState = s;
                if (s == ConnectionState.SUSPENDED || s == ConnectionState.LOST) {
                    // Curator's docs on locks: after SUSPENDED the holder cannot
                    // be certain it still holds the lock unless RECONNECTED
                    // follows; after LOST it certainly does not.
                    for (Map.Entry<String, String> e : untold.entrySet()) {
                        tellLost(e.getValue(), e.getKey());
                    }
                    untold.clear();
                }
            }
        }

        /** Sends a lease's lost event; the caller holds OUT. */
        static void tellLost(String key, String token) {
            Map<String, Object> lease = obj();
            lease.put("key", key);
            lease.put("token", token);
            Map<String, Object> ev = obj();
            ev.put("event", "lost");
            ev.put("lease", lease);
            emit(ev);
        }

        Reply acquire(String key) {
            if (key == null || key.isEmpty()) {
                return new Reply(err(UNKNOWN, "acquire without a key"));
            }
            LockNodeMutex m = mutexes.get(key);
            if (m == null) {
                try {
                    m = new LockNodeMutex(client, "/locks/" + key);
                } catch (IllegalArgumentException e) { // an invalid ZooKeeper path
                    return new Reply(err(UNKNOWN, describe(e)));
                }
                mutexes.put(key, m);
            }
            boolean got;
            try {
                got = m.acquire(waitNs, TimeUnit.NANOSECONDS);
            } catch (Exception e) {
                // Connection loss or session expiry past the retry policy,
                // an interrupted wait: Curator deleted (or, with guaranteed
                // delete, keeps deleting) the node it made, but the outcome
                // is the harness's unknown all the same.
                return new Reply(err(UNKNOWN, "acquire: " + describe(e)));
            }
            if (!got) {
                // The wait ran out; Curator deleted its node before returning.
                return new Reply(err(NOT_ACQUIRED, "acquire: not acquired within " + waitNs / 1_000_000 + " ms"));
            }
            String token = m.lockNodePath();
            if (token == null) { // cannot be, after a true acquire
                releaseQuietly(m);
                return new Reply(err(UNKNOWN, "acquire: Curator holds no lock node"));
            }
            Map<String, Object> lease = obj();
            lease.put("key", key);
            lease.put("token", token);
            if (fenced) {
                // The node's czxid, the zxid of its create: zxids are totally
                // ordered across the ensemble and grow with every committed
                // write, so a later lock node always has a larger one. (Its
                // sequence number would not do: Curator's lock parent is a
                // container node, which ZooKeeper deletes once empty, and a
                // new parent's sequence starts again at 0.) Our session made
                // the node, and a session reads its own writes.
                Stat st;
                try {
                    st = client.checkExists().forPath(token);
                } catch (Exception e) {
                    releaseQuietly(m);
                    return new Reply(err(UNKNOWN, "acquire: reading the lock node's stat: " + describe(e)));
                }
                if (st == null) {
                    releaseQuietly(m);
                    return new Reply(err(UNKNOWN, "acquire: lock node " + token + " is gone"));
                }
                lease.put("fence", st.getCzxid());
                // Said for people reading workers.log: Curator checks its
                // node's name in the listing, never the session that owns
                // it (curator#1121), so a node an earlier session left is
                // taken for the lock and dies with that session.
                try {
                    long session = client.getZookeeperClient().getZooKeeper().getSessionId();
                    if (st.getEphemeralOwner() != session) {
                        log("acquired " + token + ", a node of session 0x" + Long.toHexString(st.getEphemeralOwner())
                                + ", while connected as session 0x" + Long.toHexString(session));
                    }
                } catch (Exception e) {
                    log("acquired " + token + "; our session unknown: " + describe(e));
                }
            }
            holding.put(key, token);
            handedOut.add(token);
            Map<String, Object> body = obj();
            body.put("lease", lease);
            if (!listener) {
                return new Reply(body);
            }
            lease.put("tells_loss", true);
            // Run under OUT right after the reply is written. (No lambdas on
            // the paths a real run takes: each call site's bootstrap costs
            // startup time.)
            return new Reply(body, new Runnable() {
                @Override
                public void run() {
                    // A SUSPENDED or LOST the listener heard before the
                    // reply counts against the lease only if the connection
                    // is down now: Curator posts states on its own thread, and
                    // a grant whose round trips ended an outage can return
                    // before the RECONNECTED they imply is posted.
                    boolean uncertain = lastState == ConnectionState.SUSPENDED || lastState == ConnectionState.LOST;
                    if (uncertain && !client.getZookeeperClient().isConnected()) {
                        tellLost(key, token);
                    } else {
                        if (uncertain) {
                            log("granted " + token + " on a live connection while the listener last heard " + lastState);
                        }
                        untold.put(token, key);
                    }
                }
            });
        }

        void releaseQuietly(LockNodeMutex m) {
            try {
                m.release();
            } catch (Exception e) {
                log("release after a failed acquire: " + describe(e));
            }
        }

        Map<String, Object> release(Map<String, Object> lease) {
            if (lease == null) {
                return err(UNKNOWN, "release without a lease");
            }
            String key = Json.stringOf(lease.get("key"));
            String token = Json.stringOf(lease.get("token"));
            LockNodeMutex m = key == null ? null : mutexes.get(key);
            if (m == null || token == null || !handedOut.contains(token)) {
                return err(UNKNOWN, "a lease this worker never handed out");
            }
            String held = holding.get(key);
            if (held != null && !held.equals(token)) {
                // Curator releases by thread, not by lease: release() would
                // give up the later lease this worker holds on the key.
                return err(NOT_HELD, "lease already released (this worker holds " + held + ")");
            }
            holding.remove(key);
            if (listener) {
                synchronized (OUT) {
                    untold.remove(token);
                }
            }
            try {
                // A lock node that is already gone (its session expired, the
                // node deleted) is no error to Curator: it deletes with
                // guaranteed() and swallows NoNodeException, so release()
                // returns normally. We report what Curator reports. (A
                // reentrant hold would only count down; the harness never
                // acquires a key it holds.)
                m.release();
            } catch (IllegalMonitorStateException e) {
                // "You do not own the lock": this thread holds nothing there.
                return err(NOT_HELD, describe(e));
            } catch (Exception e) {
                // The delete failed (connection loss past the retries);
                // guaranteed() keeps deleting in the background, and Curator
                // forgets the hold all the same.
                return err(UNKNOWN, "release: " + describe(e));
            }
            return obj();
        }

        Map<String, Object> read(String key) {
            if (key == null) {
                return err(UNKNOWN, "read without a key");
            }
            Object v;
            try {
                v = store.call("GET", key);
            } catch (IOException e) {
                return err(UNKNOWN, "store GET: " + describe(e));
            }
            long n = 0;
            if (v instanceof Resp.ErrorReply) {
                return err(UNKNOWN, "store GET: " + v);
            } else if (v instanceof String) {
                try {
                    n = Long.parseLong((String) v);
                } catch (NumberFormatException e) {
                    return err(UNKNOWN, "store GET: not an integer: " + v);
                }
            } else if (v != null) {
                return err(UNKNOWN, "store GET: unexpected reply " + v);
            }
            Map<String, Object> r = obj();
            r.put("value", n);
            return r;
        }

        Map<String, Object> write(String key, long value, long fence) {
            if (key == null) {
                return err(UNKNOWN, "write without a key");
            }
            Object v;
            try {
                if (fence == 0) {
                    v = store.call("SET", key, Long.toString(value));
                } else {
                    v = store.call("EVAL", FENCED_WRITE, "2", key, key + ":fence", Long.toString(value),
                            Long.toString(fence));
                }
            } catch (IOException e) {
                return err(UNKNOWN, "store write: " + describe(e));
            }
            if (v instanceof Resp.ErrorReply) {
                return err(UNKNOWN, "store write: " + v);
            }
            if (fence != 0) {
                if (Long.valueOf(0).equals(v)) {
                    return err(STALE, "stale fencing token");
                }
                if (!Long.valueOf(1).equals(v)) {
                    return err(UNKNOWN, "store write: unexpected reply " + v);
                }
            } else if (!"OK".equals(v)) {
                return err(UNKNOWN, "store write: unexpected reply " + v);
            }
            return obj();
        }
    }

    /** A reply and what to do, under OUT, right after it is written. */
    static final class Reply {
        final Map<String, Object> body;
        final Runnable after;

        Reply(Map<String, Object> body) {
            this(body, null);
        }

        Reply(Map<String, Object> body, Runnable after) {
            this.body = body;
            this.after = after;
        }
    }

    /**
     * The store's check of a fencing token, as the harness's own store does
     * it (workloads.Store): a write whose token is not greater than the last
     * accepted one is refused.
     */
    static final String FENCED_WRITE = "\n"
            + "local last = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
            + "if tonumber(ARGV[2]) <= last then return 0 end\n"
            + "redis.call('SET', KEYS[2], ARGV[2])\n"
            + "redis.call('SET', KEYS[1], ARGV[1])\n"
            + "return 1";

    // ------------------------------------------------------------------ RESP

    /**
     * A minimal Redis client: one socket, one command at a time, a deadline
     * of timeoutMs for the connect and for each command's reply. Any I/O
     * error or timeout closes the socket (it may be mid-reply) and is thrown;
     * the next call reconnects.
     */
    static final class Resp {
        /** An error reply ("-ERR ..."); the connection stays usable. */
        static final class ErrorReply {
            final String msg;

            ErrorReply(String msg) {
                this.msg = msg;
            }

            @Override
            public String toString() {
                return msg;
            }
        }

        final String host;
        final int port;
        final int timeoutMs;
        Socket sock;
        InputStream in;
        OutputStream os;
        final byte[] buf = new byte[8192];
        int pos, lim;
        long deadline;

        Resp(String addr, int timeoutMs) {
            int i = addr.lastIndexOf(':');
            if (i <= 0 || i == addr.length() - 1) {
                throw new IllegalArgumentException("bad address " + addr);
            }
            String h = addr.substring(0, i);
            if (h.startsWith("[") && h.endsWith("]")) {
                h = h.substring(1, h.length() - 1);
            }
            try {
                port = Integer.parseInt(addr.substring(i + 1));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad port in " + addr);
            }
            host = h;
            this.timeoutMs = timeoutMs;
        }

        /** Sends one command and reads its reply: String, Long, null, List or ErrorReply. */
        Object call(String... args) throws IOException {
            deadline = System.nanoTime() + timeoutMs * 1_000_000L;
            try {
                if (sock == null) {
                    connect();
                }
                os.write(encode(args));
                os.flush();
                return readReply();
            } catch (IOException | RuntimeException e) {
                close();
                throw e instanceof IOException ? (IOException) e : new IOException(e);
            }
        }

        void connect() throws IOException {
            Socket s = new Socket();
            try {
                s.setTcpNoDelay(true);
                s.connect(new InetSocketAddress(host, port), remainingMs());
            } catch (IOException e) {
                s.close();
                throw e;
            }
            sock = s;
            in = s.getInputStream();
            os = s.getOutputStream();
            pos = lim = 0;
        }

        void close() {
            if (sock != null) {
                try {
                    sock.close();
                } catch (IOException ignored) {
                    // closing anyway
                }
            }
            sock = null;
            in = null;
            os = null;
            pos = lim = 0;
        }

        int remainingMs() throws SocketTimeoutException {
            long ms = (deadline - System.nanoTime()) / 1_000_000;
            if (ms <= 0) {
                throw new SocketTimeoutException("store command timed out after " + timeoutMs + " ms");
            }
            return (int) Math.min(Integer.MAX_VALUE, ms);
        }

        static byte[] encode(String... args) {
            ByteArrayOutputStream b = new ByteArrayOutputStream(64);
            byte[] head = ("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII);
            b.write(head, 0, head.length);
            for (String a : args) {
                byte[] v = a.getBytes(StandardCharsets.UTF_8);
                byte[] len = ("$" + v.length + "\r\n").getBytes(StandardCharsets.US_ASCII);
                b.write(len, 0, len.length);
                b.write(v, 0, v.length);
                b.write('\r');
                b.write('\n');
            }
            return b.toByteArray();
        }

        int readByte() throws IOException {
            if (pos == lim) {
                sock.setSoTimeout(remainingMs());
                int n = in.read(buf, 0, buf.length);
                if (n < 0) {
                    throw new EOFException("store closed the connection");
                }
                pos = 0;
                lim = n;
            }
            return buf[pos++] & 0xff;
        }

        String readLine() throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream(32);
            for (;;) {
                int c = readByte();
                if (c == '\r') {
                    if (readByte() != '\n') {
                        throw new IOException("store: bad line ending");
                    }
                    return b.toString(StandardCharsets.UTF_8);
                }
                b.write(c);
            }
        }

        static long parseLen(String s) throws IOException {
            try {
                return Long.parseLong(s);
            } catch (NumberFormatException e) {
                throw new IOException("store: bad number " + s);
            }
        }

        Object readReply() throws IOException {
            int t = readByte();
            String line = readLine();
            switch (t) {
                case '+':
                    return line;
                case '-':
                    return new ErrorReply(line);
                case ':':
                    return parseLen(line);
                case '$': {
                    long n = parseLen(line);
                    if (n < 0) {
                        return null;
                    }
                    if (n > 512L << 20) {
                        throw new IOException("store: bulk reply too long");
                    }
                    byte[] v = new byte[(int) n];
                    for (int i = 0; i < n; i++) {
                        v[i] = (byte) readByte();
                    }
                    if (readByte() != '\r' || readByte() != '\n') {
                        throw new IOException("store: bad bulk ending");
                    }
                    return new String(v, StandardCharsets.UTF_8);
                }
                case '*': {
                    long n = parseLen(line);
                    if (n < 0) {
                        return null;
                    }
                    List<Object> l = new ArrayList<>();
                    for (long i = 0; i < n; i++) {
                        l.add(readReply());
                    }
                    return l;
                }
                default:
                    throw new IOException("store: unexpected reply type " + (char) t);
            }
        }
    }

    // ------------------------------------------------------------------ JSON

    /**
     * JSON for the protocol: a parser into Map (LinkedHashMap), List,
     * String, Long (integers within int64), Double (other numbers), Boolean
     * and null; a writer for the same.
     */
    static final class Json {
        final String s;
        int i;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String s) {
            Json p = new Json(s);
            p.ws();
            Object v = p.value(0);
            p.ws();
            if (p.i != s.length()) {
                throw p.fail("trailing characters");
            }
            return v;
        }

        IllegalArgumentException fail(String why) {
            return new IllegalArgumentException("JSON: " + why + " at offset " + i);
        }

        void ws() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                i++;
            }
        }

        Object value(int depth) {
            if (depth > 64) {
                throw fail("nested too deep");
            }
            if (i >= s.length()) {
                throw fail("unexpected end");
            }
            char c = s.charAt(i);
            switch (c) {
                case '{': {
                    i++;
                    Map<String, Object> m = new LinkedHashMap<>();
                    ws();
                    if (peek() == '}') {
                        i++;
                        return m;
                    }
                    for (;;) {
                        ws();
                        if (peek() != '"') {
                            throw fail("expected a key");
                        }
                        String k = string();
                        ws();
                        expect(':');
                        ws();
                        m.put(k, value(depth + 1));
                        ws();
                        char d = next();
                        if (d == '}') {
                            return m;
                        }
                        if (d != ',') {
                            throw fail("expected , or }");
                        }
                    }
                }
                case '[': {
                    i++;
                    List<Object> l = new ArrayList<>();
                    ws();
                    if (peek() == ']') {
                        i++;
                        return l;
                    }
                    for (;;) {
                        ws();
                        l.add(value(depth + 1));
                        ws();
                        char d = next();
                        if (d == ']') {
                            return l;
                        }
                        if (d != ',') {
                            throw fail("expected , or ]");
                        }
                    }
                }
                case '"':
                    return string();
                case 't':
                    word("true");
                    return Boolean.TRUE;
                case 'f':
                    word("false");
                    return Boolean.FALSE;
                case 'n':
                    word("null");
                    return null;
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        return number();
                    }
                    throw fail("unexpected character");
            }
        }

        char peek() {
            if (i >= s.length()) {
                throw fail("unexpected end");
            }
            return s.charAt(i);
        }

        char next() {
            char c = peek();
            i++;
            return c;
        }

        void expect(char c) {
            if (next() != c) {
                i--;
                throw fail("expected " + c);
            }
        }

        void word(String w) {
            if (!s.startsWith(w, i)) {
                throw fail("bad literal");
            }
            i += w.length();
        }

        Object number() {
            int start = i;
            if (peek() == '-') {
                i++;
            }
            if (peek() == '0') {
                i++;
            } else if (peek() >= '1' && peek() <= '9') {
                while (i < s.length() && Character.isDigit(s.charAt(i)) && s.charAt(i) < 128) {
                    i++;
                }
            } else {
                throw fail("bad number");
            }
            boolean integer = true;
            if (i < s.length() && s.charAt(i) == '.') {
                integer = false;
                i++;
                digits();
            }
            if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                integer = false;
                i++;
                if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                    i++;
                }
                digits();
            }
            String t = s.substring(start, i);
            if (integer) {
                try {
                    return Long.parseLong(t);
                } catch (NumberFormatException e) {
                    // beyond int64: keep it as a double
                }
            }
            return Double.parseDouble(t);
        }

        void digits() {
            int start = i;
            while (i < s.length() && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
                i++;
            }
            if (i == start) {
                throw fail("bad number");
            }
        }

        String string() {
            expect('"');
            StringBuilder b = null;
            int run = i;
            for (;;) {
                if (i >= s.length()) {
                    throw fail("unterminated string");
                }
                char c = s.charAt(i);
                if (c == '"') {
                    String r = b == null ? s.substring(run, i) : b.append(s, run, i).toString();
                    i++;
                    return r;
                }
                if (c < 0x20) {
                    throw fail("control character in string");
                }
                if (c != '\\') {
                    i++;
                    continue;
                }
                if (b == null) {
                    b = new StringBuilder();
                }
                b.append(s, run, i);
                i++;
                char e = next();
                switch (e) {
                    case '"':
                    case '\\':
                    case '/':
                        b.append(e);
                        break;
                    case 'b':
                        b.append('\b');
                        break;
                    case 'f':
                        b.append('\f');
                        break;
                    case 'n':
                        b.append('\n');
                        break;
                    case 'r':
                        b.append('\r');
                        break;
                    case 't':
                        b.append('\t');
                        break;
                    case 'u': {
                        if (i + 4 > s.length()) {
                            throw fail("short \\u escape");
                        }
                        int u = 0;
                        for (int k = 0; k < 4; k++) {
                            int d = Character.digit(s.charAt(i + k), 16);
                            if (d < 0 || s.charAt(i + k) >= 128) {
                                throw fail("bad \\u escape");
                            }
                            u = u * 16 + d;
                        }
                        i += 4;
                        b.append((char) u); // surrogate pairs arrive as two escapes
                        break;
                    }
                    default:
                        i--;
                        throw fail("bad escape");
                }
                run = i;
            }
        }

        static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String) {
                quote(b, (String) v);
            } else if (v instanceof Boolean || v instanceof Long || v instanceof Integer) {
                b.append(v);
            } else if (v instanceof Double) {
                double d = (Double) v;
                b.append(Double.isFinite(d) ? Double.toString(d) : "null");
            } else if (v instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    quote(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List) {
                b.append('[');
                boolean first = true;
                for (Object e : (List<?>) v) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, e);
                }
                b.append(']');
            } else {
                quote(b, v.toString());
            }
        }

        static final char[] HEX = "0123456789abcdef".toCharArray();

        static void quote(StringBuilder b, String s) {
            b.append('"');
            for (int k = 0; k < s.length(); k++) {
                char c = s.charAt(k);
                switch (c) {
                    case '"':
                        b.append("\\\"");
                        break;
                    case '\\':
                        b.append("\\\\");
                        break;
                    case '\n':
                        b.append("\\n");
                        break;
                    case '\r':
                        b.append("\\r");
                        break;
                    case '\t':
                        b.append("\\t");
                        break;
                    default:
                        if (c < 0x20 || c == 0x7f || c == '\u2028' || c == '\u2029'
                                || (Character.isSurrogate(c) && !pairedAt(s, k))) {
                            b.append("\\u").append(HEX[c >> 12 & 15]).append(HEX[c >> 8 & 15])
                                    .append(HEX[c >> 4 & 15]).append(HEX[c & 15]);
                        } else {
                            b.append(c);
                        }
                }
            }
            b.append('"');
        }

        /** Whether the surrogate at k is half of a well-formed pair. */
        static boolean pairedAt(String s, int k) {
            char c = s.charAt(k);
            if (Character.isHighSurrogate(c)) {
                return k + 1 < s.length() && Character.isLowSurrogate(s.charAt(k + 1));
            }
            return k > 0 && Character.isHighSurrogate(s.charAt(k - 1));
        }

        static String stringOf(Object v) {
            return v instanceof String ? (String) v : null;
        }

        static long longOf(Object v) {
            if (v instanceof Long) {
                return (Long) v;
            }
            if (v instanceof Double) {
                return (long) (double) (Double) v;
            }
            return 0;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> mapOf(Object v) {
            return v instanceof Map ? (Map<String, Object>) v : null;
        }
    }

    // ------------------------------------------------------------------ main

    /** When main began, for the hello's log line. */
    static long mainStartNs = System.nanoTime();

    public static void main(String[] args) throws Exception {
        mainStartNs = System.nanoTime();
        if (args.length == 1 && args[0].equals("train")) {
            train();
            System.exit(0);
        }
        out = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 14);
        // Only protocol lines may reach stdout: a stray print goes to the log.
        System.setOut(System.err);

        Worker w = new Worker();
        ExecutorService ops = Executors.newSingleThreadExecutor(new ThreadFactory() {
            @Override
            public Thread newThread(Runnable r) {
                Thread t = new Thread(r, "worker-ops");
                t.setDaemon(true);
                return t;
            }
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 14);
        for (String line; (line = in.readLine()) != null;) {
            Map<String, Object> req = request(line);
            if (req != null) {
                ops.execute(new Runnable() {
                    @Override
                    public void run() {
                        w.serve(req);
                    }
                });
            }
        }
        // The harness is done with us: exit at once, holds and all.
        System.exit(0);
    }

    /** A request line parsed, or null for a blank, bad or "go" line. */
    static Map<String, Object> request(String line) {
        if (line.isBlank()) {
            return null;
        }
        Map<String, Object> req;
        try {
            req = Json.mapOf(Json.parse(line));
        } catch (RuntimeException e) {
            log("ignoring a line that does not parse (" + e.getMessage() + "): " + abbrev(line));
            return null;
        }
        if (req == null) {
            log("ignoring a line that is not an object: " + abbrev(line));
            return null;
        }
        // This worker sends no send/reply/point events, so no go is awaited.
        return "go".equals(req.get("op")) ? null : req;
    }

    static String abbrev(String s) {
        return s.length() <= 200 ? s : s.substring(0, 200) + "...";
    }

    // ----------------------------------------------------------------- train

    /**
     * Exercises the worker without any server of its own, so that a run
     * with -XX:ArchiveClassesAtExit archives the classes a real run loads:
     * the JSON parser and writer, the RESP client (against a fake store on
     * a loopback socket), and Curator (a client against a loopback port that
     * accepts and never answers, a mutex, a failing acquire and release).
     * Takes about two seconds, and leaves Curator's threads running.
     */
    static void train() throws Exception {
        out = OutputStream.nullOutputStream();
        owner = "train";
        String[] lines = {
            "{\"id\":1,\"op\":\"hello\",\"hello\":{\"lock\":\"nope\",\"nodes\":[\"127.0.0.1:1\"],\"store\":\"127.0.0.1:1\",\"ttl_ns\":500000000,\"owner\":\"c0:0\"}}",
            "{\"id\":2,\"op\":\"acquire\",\"key\":\"lock\",\"clock_ns\":-12}",
            "{\"op\":\"go\",\"seq\":1}",
            " {\"id\":3 , \"op\":\"release\",\"lease\":{\"key\":\"lock\",\"token\":\"/locks/lock/_c_x-lock-0000000001\",\"fence\":9223372036854775807,\"tells_loss\":true,\"valid_until_ns\":0},\"x\":[1.5e3,-0.25,null,false,{}],\"y\":\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\"} ",
            "not json",
            "{\"id\":4,\"op\":\"read\",\"key\":\"register\"}",
            "[1,2]",
            "{\"id\":5,\"op\":\"write\",\"key\":\"register\",\"value\":42,\"fence\":3,\"big\":123456789012345678901234567890}",
            "",
        };
        quiet = true;
        Worker w = new Worker();
        for (String l : lines) {
            Map<String, Object> req = request(l);
            if (req != null) {
                w.serve(req);
                StringBuilder sb = new StringBuilder();
                Json.write(sb, req);
                Json.parse(sb.toString());
            }
        }
        Json.quote(new StringBuilder(), "\u0001\u2028\ud800x\"\\");

        // The store, against a fake Redis that answers canned replies.
        try (ServerSocket fake = new ServerSocket(0, 8, java.net.InetAddress.getLoopbackAddress())) {
            Thread t = new Thread(() -> fakeRedis(fake), "fake-redis");
            t.setDaemon(true);
            t.start();
            Worker sw = new Worker();
            sw.store = new Resp("127.0.0.1:" + fake.getLocalPort(), 500);
            sw.read("register");        // $2 41
            sw.read("register");        // $-1
            sw.write("register", 7, 0); // +OK
            sw.write("register", 7, 5); // :0 stale
            sw.write("register", 7, 6); // :1
            sw.read("register");        // -ERR
            sw.store.call("PING");      // *1 ...
            sw.read("register");        // the fake hangs up: EOF, reconnect next time
            sw.store.close();
        }
        // A timeout, and a refused connection.
        try (ServerSocket silent = new ServerSocket(0, 8, java.net.InetAddress.getLoopbackAddress())) {
            Resp r = new Resp("[127.0.0.1]:" + silent.getLocalPort(), 50);
            try {
                r.call("GET", "x");
            } catch (IOException expected) {
                // timed out
            }
        }
        try {
            new Resp("127.0.0.1:1", 50).call("GET", "x");
        } catch (IOException expected) {
            // refused
        }

        // Curator, against a port that accepts and never answers.
        try (ServerSocket silent = new ServerSocket(0, 8, java.net.InetAddress.getLoopbackAddress())) {
            Thread t = new Thread(() -> acceptForever(silent), "silent-zk");
            t.setDaemon(true);
            t.start();
            String addr = "127.0.0.1:" + silent.getLocalPort();
            Worker cw = new Worker();
            cw.connectWaitMs = 150;
            cw.serve(Json.mapOf(Json.parse("{\"id\":1,\"op\":\"hello\",\"hello\":{\"lock\":\"curator-listener\",\"nodes\":[\""
                    + addr + "\",\"" + addr + "\"],\"store\":\"127.0.0.1:1\",\"ttl_ns\":150000000,\"wait_ns\":50000000,\"owner\":\"train\"}}")));
            // Not connected, so hello closed its client: build one to keep.
            CuratorFramework c = buildClient(addr, 150);
            cw.client = c;
            c.getConnectionStateListenable().addListener((cf, s) -> cw.stateNow(s));
            c.start();
            c.blockUntilConnected(50, TimeUnit.MILLISECONDS);
            cw.fenced = true;
            cw.listener = true;
            cw.serve(Json.mapOf(Json.parse("{\"id\":3,\"op\":\"release\",\"lease\":{\"key\":\"lock\",\"token\":\"/locks/lock/x\"}}")));
            LockNodeMutex m = new LockNodeMutex(c, "/locks/lock");
            cw.mutexes.put("lock", m);
            m.lockNodePath();
            m.isOwnedByCurrentThread();
            cw.releaseQuietly(m);
            cw.handedOut.add("/locks/lock/x");
            cw.serve(Json.mapOf(Json.parse("{\"id\":4,\"op\":\"release\",\"lease\":{\"key\":\"lock\",\"token\":\"/locks/lock/x\"}}")));
            synchronized (OUT) {
                cw.untold.put("/locks/lock/x", "lock");
            }
            cw.stateNow(ConnectionState.SUSPENDED);
            c.getZookeeperClient().isConnected();
            cw.stateNow(ConnectionState.RECONNECTED);
            new Reply(obj(), () -> Worker.tellLost("lock", "t")).after.run();
            // Against no server, an acquire and a read of a Stat go through
            // Curator's retries (and ZooKeeper's reconnect sleeps) for many
            // seconds: let them load what they load for about a second, then
            // exit with them still running.
            Thread acq = new Thread(() -> cw.serve(Json.mapOf(Json.parse("{\"id\":5,\"op\":\"acquire\",\"key\":\"lock2\"}"))), "train-acquire");
            Thread stat = new Thread(() -> {
                try {
                    c.checkExists().forPath("/locks/lock/x");
                } catch (Exception expected) {
                    // no server
                }
            }, "train-stat");
            acq.setDaemon(true);
            stat.setDaemon(true);
            acq.start();
            stat.start();
            acq.join(1000);
        }
    }

    static void acceptForever(ServerSocket ss) {
        List<Socket> keep = new ArrayList<>();
        try {
            for (;;) {
                keep.add(ss.accept());
            }
        } catch (IOException e) {
            for (Socket s : keep) {
                try {
                    s.close();
                } catch (IOException ignored) {
                    // closing
                }
            }
        }
    }

    static void fakeRedis(ServerSocket ss) {
        String[] replies = {
            "$2\r\n41\r\n", "$-1\r\n", "+OK\r\n", ":0\r\n", ":1\r\n", "-ERR train\r\n",
            "*2\r\n$4\r\nPONG\r\n:3\r\n",
        };
        try (Socket s = ss.accept()) {
            InputStream in = s.getInputStream();
            OutputStream o = s.getOutputStream();
            byte[] b = new byte[4096];
            for (String r : replies) {
                if (in.read(b) < 0) {
                    return;
                }
                o.write(r.getBytes(StandardCharsets.US_ASCII));
                o.flush();
            }
            in.read(b);
        } catch (IOException e) {
            // training only
        }
    }
}
