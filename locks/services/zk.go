package services

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

// zkClaims are the faults under which ZooKeeper's lock keeps two clients
// from holding it at once. It gives no deadline: it holds while the
// holder's session lives, and the session is the lease.
//
//   - NodeCrash, Failover: one member of three killed or restarted, the
//     leader too, leaves a quorum, which keeps every committed lock
//     node; a new leader gives every session a fresh timeout rather than
//     expiring it, and a client whose member died sees its connection
//     reset and reconnects to another member within its session
//     (zkHosts: with the library's one-second pause between rounds, a
//     500 ms session was lost to a leader kill in one run of three).
//   - ClientCrash: a dead client's session closes with it (Close), and
//     its ephemeral node goes: a dead holder is no holder.
//   - ClientClock: nothing here reads a wall clock; the server times
//     sessions.
//   - Latency: below the session timeout the holder's pings still keep
//     its session.
//
// Not NodePause, though ZooKeeper means to keep it: a paused leader
// answers nothing for the followers' syncLimit (1 s here) and an
// election, and a paused member still accepts connections, so a client
// trying it waits out a handshake (zkDialer bounds it to the session
// timeout). At sessions of 500 ms and 1 s the holder now and then
// was not back before the new leader's fresh timeout ran out, and lost
// its session while it held the lock (zk_test.go, node-pause).
//
// Not ClientPause nor Partition: a holder that stops or cannot reach the
// ensemble for longer than its session timeout has its session expired
// and its node deleted while it still believes it holds the lock, and
// the next waiter takes it (Kleppmann's point about every lease).
var zkClaims = []fault.Kind{fault.NodeCrash, fault.Failover, fault.ClientCrash, fault.ClientClock, fault.Latency}

// zkMinTTL is the shortest session the lock is run with. The ensemble
// grants down to two of its 100 ms ticks (cluster.ZooKeeperKind), but on
// two cores three JVMs and a worker process per client leave a shorter
// session too few acquisitions before a story's fault, and too little
// room beside the machine's own delays.
const zkMinTTL = time.Second

// zkLocks registers ZooKeeper's lock recipe, as Curator's
// InterProcessMutex runs it, plain and with the lock node's creation zxid
// as a fencing token.
func zkLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "zk",
		Traits:  locks.Traits{Ends: locks.Session, Release: locks.OwnerChecked, Quorum: true},
		Summary: "ZooKeeper lock recipe (Curator's InterProcessMutex): lowest ephemeral sequential node holds while its session lives",
		Nodes:   3,
		Server:  "zookeeper",
		MinTTL:  zkMinTTL,
		Claims:  zkClaims,
		New:     func(cfg locks.Config) locks.Lock { return newZKLock(cfg, false) },
	})
	register(locks.Info{
		Name:    "zk-fenced",
		Traits:  locks.Traits{Ends: locks.Session, Release: locks.OwnerChecked, Quorum: true},
		Summary: "ZooKeeper lock recipe with the lock node's creation zxid as fencing token",
		Nodes:   3,
		Server:  "zookeeper",
		Fenced:  true,
		MinTTL:  zkMinTTL,
		Claims:  zkClaims,
		New:     func(cfg locks.Config) locks.Lock { return newZKLock(cfg, true) },
	})
}

// zkLock is one client of the recipe: one ZooKeeper session, opened at
// its first Acquire, whose timeout is the lease.
type zkLock struct {
	cfg    locks.Config
	fenced bool

	mu   sync.Mutex
	conn *zk.Conn
	// orphans are the GUID prefixes of lock nodes this client may have
	// left in the ensemble without knowing: a create whose outcome stayed
	// unknown, or a node it could not delete when it gave up. Such a node
	// would stand in the queue (and at its head, hold the lock) for
	// nobody until the session ends, so every listing deletes those it
	// finds.
	orphans []string
}

// zkMaxOrphans bounds the orphans remembered: older ones are long gone
// with a session, or swept.
const zkMaxOrphans = 32

func newZKLock(cfg locks.Config, fenced bool) *zkLock {
	return &zkLock{cfg: cfg, fenced: fenced}
}

// zkRoot holds one lock dir per key, whose children are the lock nodes.
const zkRoot = "/locks"

// zkProtected starts a lock node's name, before its attempt's GUID: the
// name Curator's protected mode gives, so a node whose create reply was
// lost can be found by the GUID.
const zkProtected = "_c_"

// zkNodeName ends a lock node's name before the sequence ZooKeeper
// appends, as Curator's "lock-".
const zkNodeName = "lock-"

var zkACL = zk.WorldACL(zk.PermAll)

// errZKTimeout is a call the ensemble did not answer in time: it may have
// been applied.
var errZKTimeout = errors.New("no answer in time")

// zkQuiet drops the client library's log lines (every reconnect).
type zkQuiet struct{}

// Printf drops the line.
func (zkQuiet) Printf(string, ...any) {}

// zkHosts is the session's round of members to connect to. The client
// library's own one pauses a whole second after every member failed to
// take the session, and during a leader election every member refuses
// it: a session shorter than the election plus that second expires at
// the new leader before its client is back, and a holder loses the lock
// it thinks it has. This one pauses a tenth of the session (10 to 250
// ms) instead.
type zkHosts struct {
	pause time.Duration

	mu      sync.Mutex
	servers []string
	next    int
	// last is the member the session was last connected to (-1: none
	// yet), where a round of failed tries ends.
	last int
}

// Init takes the members' addresses, already shuffled by the library.
func (h *zkHosts) Init(servers []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers, h.next, h.last = servers, 0, -1
	return nil
}

// Len is how many members there are.
func (h *zkHosts) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

// Next never reports a round's start, which is what makes the library
// pause for a second; it pauses here, briefly, at the end of a round.
func (h *zkHosts) Next() (string, bool) {
	h.mu.Lock()
	i := h.next
	h.next = (i + 1) % len(h.servers)
	if h.last < 0 {
		h.last = i
	} else if i == h.last {
		h.mu.Unlock()
		time.Sleep(h.pause)
		h.mu.Lock()
	}
	defer h.mu.Unlock()
	return h.servers[i], false
}

// Connected marks the member last returned as the one a round of
// failures will end at.
func (h *zkHosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = (h.next + len(h.servers) - 1) % len(h.servers)
}

// zkDialer dials a member, and holds the session handshake to limit
// (the session timeout): the library waits ten receive timeouts (6.7
// session timeouts) for a member to take the session back, and a member
// that accepts but never answers (a paused one, or a follower of a
// paused leader) would hold the client there until the session has
// expired at the leader, though other members would have taken it. The
// library's own deadlines on a session's traffic are shorter (two thirds
// of the session) and stay as they are.
func zkDialer(limit time.Duration) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, min(timeout, limit))
		if err != nil {
			return nil, err
		}
		return zkLimited{Conn: c, limit: limit}, nil
	}
}

// zkLimited is a connection whose deadlines are never further off than
// limit.
type zkLimited struct {
	net.Conn
	limit time.Duration
}

func (c zkLimited) clamp(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	if limit := time.Now().Add(c.limit); t.After(limit) {
		return limit
	}
	return t
}

// SetDeadline is net.Conn's, no further off than the limit.
func (c zkLimited) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }

// SetReadDeadline is net.Conn's, no further off than the limit.
func (c zkLimited) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }

// SetWriteDeadline is net.Conn's, no further off than the limit.
func (c zkLimited) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

// session is the lock's connection, opened on first use. A Lock the
// harness drops without Close has its session closed when it is
// collected, so its goroutines do not outlive it.
func (l *zkLock) session() (*zk.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		return l.conn, nil
	}
	pause := min(max(l.cfg.TTL/10, 10*time.Millisecond), 250*time.Millisecond)
	c, _, err := zk.Connect(l.cfg.Addrs, l.cfg.TTL, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false),
		zk.WithHostProvider(&zkHosts{pause: pause}), zk.WithDialer(zkDialer(l.cfg.TTL)))
	if err != nil {
		return nil, err
	}
	l.conn = c
	runtime.AddCleanup(l, func(c *zk.Conn) { c.Close() }, c)
	return c, nil
}

// Close ends the client's session, which deletes its lock nodes at once:
// how a crashed client's process ending frees what it held.
func (l *zkLock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
		l.conn = nil
	}
	return nil
}

// call runs op on the session, bounded by ctx and by the session timeout
// or until, whichever is later. The client library waits for a reconnect
// to send a request made while disconnected, and a leader election
// (hundreds of milliseconds) keeps every member from answering, though
// sessions live through it: an acquire may wait out its whole wait for
// an answer, anything else a session timeout. Past that what op did is
// unknown.
func (l *zkLock) call(ctx context.Context, until time.Time, op func() error) error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	t := time.NewTimer(max(l.cfg.TTL, time.Until(until)))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errZKTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// zkTransport says err leaves a request's outcome unknown: it was lost on
// the way or its reply was. Every other error is the ensemble's answer.
func zkTransport(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, errZKTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// sequence is a lock node's sequence number, the 10 digits ZooKeeper
// appended; what sorts the queue (the GUIDs before it are random).
func sequence(name string) string {
	if i := strings.LastIndex(name, zkNodeName); i >= 0 {
		return name[i+len(zkNodeName):]
	}
	return name
}

// Acquire creates its lock node and waits for every node before it to go,
// watching only the one just before its own, until cfg.Wait runs out.
func (l *zkLock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	c, err := l.session()
	if err != nil {
		return locks.Lease{}, fmt.Errorf("zk: %w", err)
	}
	dir := zkRoot + "/" + key
	// Each attempt waits on its node no longer than the wait Retry keeps.
	deadline := time.Now().Add(l.cfg.Wait)
	return locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		return l.attempt(ctx, c, key, dir, deadline)
	})
}

// attempt is one lock node's life: created, then waited on until it is
// the lowest. held false with no error means certainly not held and no
// node of ours left behind (its session expired, or the create turned
// out not to have happened): worth another attempt.
func (l *zkLock) attempt(ctx context.Context, c *zk.Conn, key, dir string, deadline time.Time) (locks.Lease, bool, error) {
	guid := make([]byte, 16)
	_, _ = rand.Read(guid)
	prefix := zkProtected + hex.EncodeToString(guid) + "-"
	node, err := l.create(ctx, c, dir, prefix, deadline)
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		// An expired session's ephemeral nodes are gone, this one too if
		// it was made; the client opens a new session.
		return locks.Lease{}, false, nil
	case err != nil && zkTransport(err):
		// The reply was lost: find the node by its GUID, as Curator's
		// protected mode does. What cannot be read stays unknown.
		var found string
		if found, err = l.find(ctx, c, dir, prefix, deadline); err != nil {
			l.orphan(prefix)
			return locks.Lease{}, false, unknown("create", err)
		}
		if found == "" {
			// A create still on its way could land after the search.
			l.orphan(prefix)
			return locks.Lease{}, false, nil
		}
		node = dir + "/" + found
	case errors.Is(err, locks.ErrNotAcquired):
		return locks.Lease{}, false, err
	case err != nil:
		return locks.Lease{}, false, fmt.Errorf("%w: create: %v", locks.ErrNotAcquired, err)
	}
	name := node[len(dir)+1:]
	for {
		var children []string
		err := l.call(ctx, deadline, func() (err error) { children, _, err = c.Children(dir); return })
		if err != nil {
			return locks.Lease{}, false, l.abandon(c, node, "list", err)
		}
		children = l.sweep(c, dir, children)
		slices.SortFunc(children, func(a, b string) int { return strings.Compare(sequence(a), sequence(b)) })
		i := slices.Index(children, name)
		if i < 0 {
			// Our node went with our session.
			return locks.Lease{}, false, nil
		}
		if i == 0 {
			return l.held(ctx, c, key, node)
		}
		var watch <-chan zk.Event
		err = l.call(ctx, deadline, func() (err error) { _, _, watch, err = c.GetW(dir + "/" + children[i-1]); return })
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone between the list and the watch
		}
		if err != nil {
			return locks.Lease{}, false, l.abandon(c, node, "watch", err)
		}
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-watch:
			t.Stop()
		case <-t.C:
			return locks.Lease{}, false, l.abandon(c, node, "wait", locks.ErrNotAcquired)
		case <-ctx.Done():
			t.Stop()
			return locks.Lease{}, false, l.abandon(c, node, "wait", locks.ErrNotAcquired)
		}
	}
}

// held is the lease on node, the lowest: its creation zxid is the fence,
// read back since a create's reply carries no stat.
func (l *zkLock) held(ctx context.Context, c *zk.Conn, key, node string) (locks.Lease, bool, error) {
	lease := locks.Lease{Key: key, Token: node}
	if !l.fenced {
		return lease, true, nil
	}
	var st *zk.Stat
	err := l.call(ctx, time.Time{}, func() (err error) { _, st, err = c.Get(node); return })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return locks.Lease{}, false, nil
	case err != nil:
		// It holds, but a fenced lease without its fence is no lease.
		return locks.Lease{}, false, l.abandon(c, node, "fence", err)
	}
	lease.Fence = st.Czxid
	return lease, true, nil
}

// create makes the attempt's ephemeral sequential node, and the lock's
// dir first if there is none yet.
func (l *zkLock) create(ctx context.Context, c *zk.Conn, dir, prefix string, deadline time.Time) (string, error) {
	var node string
	op := func() (err error) {
		node, err = c.Create(dir+"/"+prefix+zkNodeName, nil, zk.FlagEphemeral|zk.FlagSequence, zkACL)
		return
	}
	err := l.call(ctx, deadline, op)
	if !errors.Is(err, zk.ErrNoNode) {
		return node, err
	}
	for _, p := range []string{zkRoot, dir} {
		err := l.call(ctx, deadline, func() error { _, err := c.Create(p, nil, 0, zkACL); return err })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			// Only the lock dir was asked for here: the lock node is
			// certainly not made yet.
			if zkTransport(err) {
				return "", fmt.Errorf("%w: create %s: %v", locks.ErrNotAcquired, p, err)
			}
			return "", err
		}
	}
	// The first create was refused (no dir), so this one is no retry of
	// a command whose outcome is unknown.
	err = l.call(ctx, deadline, op)
	return node, err
}

// find looks for the node whose name starts with prefix among dir's
// children, after a sync, so the member we ask has seen every write the
// leader had when it answered: "" when the create did not happen. No dir
// is no node either: a create lost before the dir was made (an
// ensemble's first write) cannot have landed, since a child needs its
// parent, and one still on its way is the caller's orphan.
func (l *zkLock) find(ctx context.Context, c *zk.Conn, dir, prefix string, deadline time.Time) (string, error) {
	// The caller's ctx may be what ended the create; the search still
	// gets its own bound, as long as the create's.
	ctx = context.WithoutCancel(ctx)
	var children []string
	err := l.call(ctx, deadline, func() error {
		if _, err := c.Sync(dir); err != nil {
			return err
		}
		var err error
		children, _, err = c.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, ch := range children {
		if strings.HasPrefix(ch, prefix) {
			return ch, nil
		}
	}
	return "", nil
}

// orphan remembers a node prefix this client may have left behind.
func (l *zkLock) orphan(prefix string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.orphans = append(l.orphans, prefix)
	if len(l.orphans) > zkMaxOrphans {
		l.orphans = l.orphans[len(l.orphans)-zkMaxOrphans:]
	}
}

// sweep deletes the client's orphans among dir's children and returns
// the children it did not delete. An orphan deleted (or found gone) is
// forgotten: a node seen once cannot be created again.
func (l *zkLock) sweep(c *zk.Conn, dir string, children []string) []string {
	l.mu.Lock()
	orphans := slices.Clone(l.orphans)
	l.mu.Unlock()
	if len(orphans) == 0 {
		return children
	}
	var gone []string
	kept := children[:0:0]
	for _, ch := range children {
		i := slices.IndexFunc(orphans, func(p string) bool { return strings.HasPrefix(ch, p) })
		if i < 0 {
			kept = append(kept, ch)
			continue
		}
		err := l.call(context.Background(), time.Time{}, func() error { return c.Delete(dir+"/"+ch, -1) })
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			gone = append(gone, orphans[i])
			continue
		}
		kept = append(kept, ch)
	}
	l.mu.Lock()
	l.orphans = slices.DeleteFunc(l.orphans, func(p string) bool { return slices.Contains(gone, p) })
	l.mu.Unlock()
	return kept
}

// abandon gives an attempt up as Curator does, deleting its node: once
// the node is surely gone the lock is surely not held (ErrNotAcquired);
// if it cannot be deleted it may still hold (ErrUnknown, why naming the
// step that failed), and the node is an orphan to sweep later.
func (l *zkLock) abandon(c *zk.Conn, node, step string, why error) error {
	err := l.call(context.Background(), time.Time{}, func() error { return c.Delete(node, -1) })
	if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired) {
		if errors.Is(why, locks.ErrNotAcquired) {
			return why
		}
		return fmt.Errorf("%w: %s: %v", locks.ErrNotAcquired, step, why)
	}
	name := node[strings.LastIndex(node, "/")+1:]
	l.orphan(name[:strings.Index(name, "-")+1])
	return unknown(step, why)
}

// Release deletes the lease's node. No node means the session that made
// it expired (or it was released already): nothing of anyone else's was
// touched, since the node's name is this attempt's own.
func (l *zkLock) Release(ctx context.Context, lease locks.Lease) error {
	c, err := l.session()
	if err != nil {
		return unknown("release", err)
	}
	err = l.call(ctx, time.Time{}, func() error { return c.Delete(lease.Token, -1) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		return locks.ErrNotHeld
	case zkTransport(err):
		return unknown("release", err)
	}
	return fmt.Errorf("zk: release: %w", err)
}
