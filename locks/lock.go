// Package locks holds the lock algorithms under test, one file each, behind
// one small interface. Broken variants are here on purpose: they are the
// counter-examples the failure stories reproduce, and their docs say so.
// Nothing in this package records histories or injects faults: a lock
// names the fault kinds it claims to survive (package fault), no more.
package locks

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/fault"
)

// Lease is what a successful Acquire hands the caller.
type Lease struct {
	// Key is the lock's name.
	Key string
	// Token identifies this acquisition; only its holder may release it.
	Token string
	// Fence is a fencing token that strictly increases per key (0: the
	// algorithm has none).
	Fence int64
	// ValidUntil is when the lock stops promising exclusivity, on the
	// client's own clock (zero: the algorithm computes no such deadline).
	// Measure it from before the command that took the lock was sent: the
	// key cannot have been set earlier, so the promise judged is never
	// longer than the one the lock made. A reentrant lock that gives a
	// deadline must make a re-entry extend the key's life in Redis as far
	// (PEXPIRE on entry): the checkers hold a holder to the latest
	// deadline any of its entries was given.
	ValidUntil time.Time
	// Handle is the lock's own object for this acquisition (a library's
	// lock value, a refresher to stop), handed back unchanged to Release.
	// The harness never reads it, and it does not cross a process
	// boundary: a worker keeps it beside the lease it sent.
	Handle any
	// Lost, when the lock can tell, is closed once it knows the lease is
	// gone before its release: a watchdog's renewal refused or unanswered
	// (what redisson#3636 and #4698 ask for, as etcd's Session.Done and
	// ZooKeeper's connection events give). A holder that checks it before
	// acting on the resource stops instead of acting unprotected; it
	// cannot help a holder that is paused between its check and its act.
	// Nil: the lock cannot tell (a receive from it blocks forever).
	Lost <-chan struct{}
}

// Lock is one client's handle on a lock algorithm. Each harness client gets
// its own Lock (own connections, own clock) so faults can single it out.
type Lock interface {
	// Acquire tries until it holds key or its configured wait runs out.
	// Errors: ErrNotAcquired (definitely not held), or one wrapping
	// ErrUnknown (a command's outcome is unknown: it may hold the lock).
	Acquire(ctx context.Context, key string) (Lease, error)
	// Release gives the lease up. Errors: ErrNotHeld (the lock had already
	// lapsed or belongs to someone else: nothing was deleted), or one
	// wrapping ErrUnknown.
	Release(ctx context.Context, lease Lease) error
}

// Preparer is a Lock with one-off work to do before its first acquire: a
// session to open, a table to create. The harness calls Prepare once for
// each client's first handle, before anything times the story, so that
// this work, slow on a loaded machine (a table is files the server
// creates and syncs), takes nothing from a story's time or its liveness
// allowance. A Lock must not rely on it: a handle nobody prepared (a
// client's process after a crash) does the same work in its first
// acquire. Prepare tries again until ctx ends, and returns the last error
// then.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// Errors a Lock returns; test them with errors.Is.
var (
	ErrNotAcquired = errors.New("lock taken: not acquired within the wait")
	ErrNotHeld     = errors.New("lock not held by this lease")
	ErrUnknown     = errors.New("outcome unknown")
)

// unknown wraps a transport error as an unknown outcome.
func unknown(step string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrUnknown, step, err)
}

// Clock is the client's wall clock. Locks that read a wall clock (GETSET
// expiry, RedLock elapsed time) read this one so a nemesis can skew it per
// client.
type Clock interface{ Now() time.Time }

// SystemClock is the machine's clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Config is what every algorithm is built from.
type Config struct {
	// Clients holds one connection per Redis node, in node order.
	// Single-node algorithms use Clients[0]. They carry the harness's
	// hooks, which is how a nemesis reaches a Redis lock's command
	// boundaries; a lock on another server (Info.Server) dials Addrs and
	// leaves these alone.
	Clients []redis.UniversalClient
	// Addrs holds the address of this client's own link to each lock
	// node, in node order, for a lock whose server is not Redis: it dials
	// them with its own kind of client, and every byte still crosses the
	// link a nemesis cuts or slows. A Redis lock may ignore it.
	Addrs []string
	// TTL is the lease time.
	TTL time.Duration
	// Wait bounds how long Acquire keeps trying while the lock is taken.
	Wait time.Duration
	// RetryDelay is the mean pause between attempts (jittered ±50%).
	RetryDelay time.Duration
	// Clock is the client's clock (nil: SystemClock).
	Clock Clock
	// Owner names the client, for algorithms that store an owner id
	// (Redisson's "client UUID:thread id"). Empty: a random one.
	Owner string
	// NodeTimeout bounds one command on one node where the algorithm asks
	// for a bound much smaller than the TTL (RedLock). Default: TTL/10,
	// between 5 ms and 50 ms: a tenth leaves a busy machine's replies room
	// to arrive in time, and is still far inside the lease.
	NodeTimeout time.Duration
	// WaiterTimeout is how long a fair-lock waiter may be silent before the
	// queue drops it (Redisson's threadWaitTime). Default: 5 s.
	WaiterTimeout time.Duration
	// Point, when a lock calls it, lets a nemesis pause or crash the
	// client at a named place in the lock's own code that no Redis command
	// marks (a computation between two commands). The harness reaches every
	// command boundary without it, through hooks on Clients; no built-in lock
	// or story needs it. A non-nil error means the client died there: stop
	// as a dead process would and report ErrUnknown. Nil: no points.
	Point func(ctx context.Context, point string) error
}

// DefaultNodeTimeout is Config.NodeTimeout's default at ttl: TTL/10,
// between 5 ms and 50 ms.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 5*time.Millisecond), 50*time.Millisecond)
}

func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	if c.Wait == 0 {
		c.Wait = c.TTL
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 10 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Owner == "" {
		c.Owner = newToken() + ":1"
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = DefaultNodeTimeout(c.TTL)
	}
	if c.WaiterTimeout == 0 {
		c.WaiterTimeout = 5 * time.Second
	}
	return c
}

// Info describes a registered algorithm.
type Info struct {
	// Name is the -lock name.
	Name string
	// Summary is one line for -list.
	Summary string
	// Traits are what the lock is, as the stories judge it: their
	// expectations are rules over traits (package scenario).
	Traits Traits
	// Broken marks an algorithm kept as a counter-example; Summary says why.
	Broken bool
	// Nodes is how many nodes of its Server a scenario gives it (the
	// algorithm itself works on any number it is handed).
	Nodes int
	// Server names the kind of server its nodes run, as package cluster
	// names kinds (cluster.Kinds: "redis", "memcached", ...). Empty is
	// Redis: the lock is handed Config.Clients. Any other kind is handed
	// Config.Addrs and dials its own clients.
	Server string
	// Library names the installed library the lock is, by its module path
	// (or its distribution's package), so a comparison can set the locks
	// people install beside the ones written here; empty for this
	// repository's own.
	Library string
	// Language is the language the library is written in and its
	// clients run in ("Go", "Python", "PHP", "Java"), so a comparison can
	// group the libraries people pick by it; empty for this repository's
	// own.
	Language string
	// Fenced is true when leases carry fencing tokens.
	Fenced bool
	// Reentrant is true when the holder may acquire again (owner + count).
	Reentrant bool
	// NodeTimeout is true when the algorithm bounds each node's reply by
	// Config.NodeTimeout (RedLock): replies later than that fail its
	// attempts by design, so its verdicts rest on the machine answering
	// within that bound, not only within a share of the TTL.
	NodeTimeout bool
	// Queued is true when waiters hold places in a queue, so a waiter that
	// dies can hold up the others for up to Config.WaiterTimeout.
	Queued bool
	// MinTTL is the shortest lease its server grants (etcd counts a
	// lease's TTL in whole seconds): a story whose TTL is shorter runs the
	// lock at this one, and a -ttl below it is refused.
	MinTTL time.Duration
	// FailoverTTL, when set, is the shortest lease the lock's client keeps
	// through the death of the member it talks to, as measured: a story
	// that kills a node (fault.NodeCrash) tells the lock with at least
	// this lease, for a shorter one tells the client's own reconnect, not
	// the ensemble's. A -ttl below it is allowed: that is how the lapse
	// is shown.
	FailoverTTL time.Duration
	// SplitTTL, when set, is the shortest lease at which the lock's
	// client, cut from the nodes on one side of its majority, takes the
	// lock within a holder's pause, as measured: a story that splits a
	// RedLock's nodes (scenario.Scenario.Split) tells the lock with at
	// least this lease. A client that asks its nodes one after another
	// waits out each cut node's timeout twice an attempt (take, then
	// lease), so at a shorter lease whether its attempt lands inside the
	// pause is a draw.
	SplitTTL time.Duration
	// Claims is the lock's fault model: the faults under which it claims
	// to keep its promise (its validity deadline where it gives one, else
	// that no two clients hold it at once). Random exploration holds it to
	// these and to nothing more.
	Claims []fault.Kind
	// New builds one client's handle.
	New func(Config) Lock
	// NodeKey, for a library that keeps a lock under a key of its own
	// making (a prefix, a namespace), is the Redis key it keeps for lock
	// key k, so the node observer reads the key the lock really holds;
	// nil: k itself.
	NodeKey func(k string) string
	// Program, for a lock that lives outside this Go program (another
	// language's library), starts one client of it as a worker process
	// speaking the worker protocol (package worker). Such a lock has no
	// New: every run starts its clients as processes through Program.
	Program func() *exec.Cmd
	// Forks says Program's process can start a run's workers as its own
	// forks (worker.Forker): given worker.ForkEnv, it imports its library
	// once, then forks a worker for each the harness asks for. A run then
	// pays an interpreter's start once, not once per worker.
	Forks bool
}

// KeyOnNode is the Redis key the lock keeps on its nodes for lock key k.
func (i Info) KeyOnNode(k string) string {
	if i.NodeKey == nil {
		return k
	}
	return i.NodeKey(k)
}

var registry = map[string]Info{}

// Register adds an algorithm; a second one under the same name is a bug.
func Register(info Info) {
	if _, dup := registry[info.Name]; dup {
		panic("locks: duplicate " + info.Name)
	}
	if info.Nodes == 0 {
		info.Nodes = 1
	}
	info.Server = info.ServerKind()
	registry[info.Name] = info
}

// Lookup finds an algorithm by name; the error lists the valid names.
func Lookup(name string) (Info, error) {
	info, ok := registry[name]
	if !ok {
		return Info{}, fmt.Errorf("unknown lock %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	return info, nil
}

// Names lists every registered algorithm, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry))
}

// New builds one client's handle on the named algorithm.
func New(name string, cfg Config) (Lock, error) {
	info, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return Build(info, cfg)
}

// ServerRedis is the server kind of a lock whose Info names none.
const ServerRedis = "redis"

// ServerKind is the kind of server the lock's nodes run: Server, or
// ServerRedis when it names none.
func (i Info) ServerKind() string {
	if i.Server == "" {
		return ServerRedis
	}
	return i.Server
}

// Build builds one client's handle on the algorithm info describes, which
// need not be registered (a user's own lock), with defaults filled in. A
// Redis lock needs Config.Clients, a lock on any other server
// Config.Addrs.
func Build(info Info, cfg Config) (Lock, error) {
	if kind := info.ServerKind(); kind != ServerRedis && len(cfg.Addrs) == 0 {
		return nil, fmt.Errorf("lock %s: no %s node addresses in its config (Config.Addrs)", info.Name, kind)
	} else if kind == ServerRedis && len(cfg.Clients) == 0 {
		return nil, fmt.Errorf("lock %s: no Redis clients in its config", info.Name)
	}
	if info.New == nil {
		return nil, fmt.Errorf("lock %s runs only as a worker process (its Info has a Program, no New)", info.Name)
	}
	return info.New(cfg.withDefaults()), nil
}

// newToken is a random per-acquisition token, so a lease can be told apart
// from every other one, including the same client's earlier ones.
func newToken() string { return rand.Text() }

// Retry calls try until it returns held, an error, or cfg.Wait has
// passed since the first attempt, cfg.RetryDelay jittered ±50% apart: how
// every lock here waits, and a lock written elsewhere may too. A
// cancelled ctx between attempts ends the wait as ErrNotAcquired: no
// command is in flight then, so nothing is unknown.
func Retry(ctx context.Context, cfg Config, try func() (Lease, bool, error)) (Lease, error) {
	deadline := time.Now().Add(cfg.Wait)
	for {
		lease, held, err := try()
		if err != nil || held {
			return lease, err
		}
		if !time.Now().Before(deadline) {
			return Lease{}, ErrNotAcquired
		}
		d := cfg.RetryDelay/2 + time.Duration(mrand.Int64N(int64(cfg.RetryDelay)+1))
		if rest := time.Until(deadline); d > rest {
			d = rest
		}
		select {
		case <-ctx.Done():
			return Lease{}, ErrNotAcquired
		case <-time.After(d):
		}
	}
}
