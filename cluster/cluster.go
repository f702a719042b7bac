// Package cluster is the system under test: real server processes
// (redis-server, redis-sentinel, or another Kind), each reached by clients
// only through in-process toxiproxy links, and the operations a nemesis
// performs on them (stop, kill -9, restart, pause, cut off, slow down).
// Where the servers run is a Backend's business: local processes on
// loopback ports here, containers in package docker.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"

	"github.com/locktorture/locktorture/internal/prereq"
)

// Options configures a cluster.
type Options struct {
	// Backend names where the servers run: "local" (the default) or a
	// registered one such as "docker" (docker.Register).
	Backend string
	// Server is the redis-server binary; empty means "redis-server" on PATH.
	Server string
	// Binaries names a kind's binary by the kind's name where PATH's is
	// not the one wanted ("memcached": "/opt/memcached/bin/memcached").
	// Server and Sentinel, when set, win for Redis and Sentinel.
	Binaries map[string]string
	// Dir is where node data dirs are made; empty means the system temp dir.
	// The cluster removes what it made there on Close.
	Dir string
	// ExtraArgs are appended to every Redis data node's command line.
	ExtraArgs []string
	// FaketimeServer is the redis-server run under libfaketime for Redis
	// nodes with a faked clock; empty means $LOCKTORTURE_FAKETIME_REDIS,
	// else the build cmd/setup caches.
	FaketimeServer string
	// Faketime is libfaketime.so.1; empty means Debian's.
	Faketime string
	// Sentinel is the redis-sentinel binary; empty means "redis-sentinel".
	Sentinel string
	// PauseBySignal pauses a node with SIGSTOP where the backend would
	// freeze it otherwise (docker pause). Local nodes are always signalled.
	PauseBySignal bool
	// Logf, when set, hears what a backend did beside the run (such as
	// removing a dead run's containers).
	Logf func(format string, args ...any)
}

// NodeOptions describes one data node.
type NodeOptions struct {
	Name string
	// Kind names the server the node runs (Kinds); empty is Redis.
	Kind string
	// Persistence must be one the kind offers (Kind.Persistence); empty
	// is the kind's default, for Redis none.
	Persistence Persistence
	// Clock runs the node under libfaketime so SetClockOffset moves the
	// wall clock it reads (Redis's key expiry).
	Clock bool
	// Args are appended to this node's command line.
	Args []string
}

// Cluster owns every node and link it made and stops them all on Close.
type Cluster struct {
	opts    Options
	backend Backend
	proxies *toxiproxy.ApiServer

	mu        sync.Mutex
	nodes     []*Node
	followers []*Follower
	isClosed  bool
	// logEnds is where each node's log ended once the last Reset was
	// done (LogEnds).
	logEnds map[string]int64
}

// New prepares an empty cluster on its backend; AddNode starts nodes in
// it. Always Close it.
func New(opts Options) (*Cluster, error) {
	b, err := newBackend(opts)
	if err != nil {
		return nil, err
	}
	log := zerolog.Nop()
	return &Cluster{
		opts:    opts,
		backend: b,
		proxies: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), log),
	}, nil
}

// Backend is the backend the cluster's nodes run on.
func (c *Cluster) Backend() Backend { return c.backend }

// tempPrefix starts the name of every cluster's temp dir.
const tempPrefix = "locktorture-"

// RemoveLeftovers removes the temp dirs (under dir; "" is the system's)
// of clusters whose harness process is gone: a harness killed with
// SIGKILL cannot remove its own. It returns what it removed. A dir whose
// pid is alive, or whose name carries none, is left alone.
func RemoveLeftovers(dir string) ([]string, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	paths, err := filepath.Glob(filepath.Join(dir, tempPrefix+"*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, p := range paths {
		rest := strings.TrimPrefix(filepath.Base(p), tempPrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // alive (or not ours to ask about)
		}
		if err := os.RemoveAll(p); err == nil {
			removed = append(removed, p)
		}
	}
	return removed, nil
}

// Start makes a cluster of n nodes named n1..nN without persistence.
func Start(ctx context.Context, opts Options, n int) (*Cluster, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		if _, err := c.AddNode(ctx, NodeOptions{Name: fmt.Sprintf("n%d", i)}); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// AddNode starts a new data node.
func (c *Cluster) AddNode(ctx context.Context, o NodeOptions) (*Node, error) {
	spec, err := c.spec(o)
	if err != nil {
		return nil, err
	}
	if spec.Kind.Ensemble {
		return nil, fmt.Errorf("cluster: node %s: a %s node is one member of an ensemble: start them together (AddNodes)", o.Name, spec.Kind.Name)
	}
	return c.add(ctx, spec)
}

// AddNodes starts data nodes: the members of an ensemble kind together,
// as one replicated service, and any other kind one by one (addEach).
func (c *Cluster) AddNodes(ctx context.Context, opts []NodeOptions) ([]*Node, error) {
	specs := make([]ServerSpec, len(opts))
	for i, o := range opts {
		spec, err := c.spec(o)
		if err != nil {
			return nil, err
		}
		specs[i] = spec
	}
	if len(specs) == 0 || !specs[0].Kind.Ensemble {
		return c.addEach(ctx, specs)
	}
	return c.addEnsemble(ctx, specs)
}

// addEach starts one server per spec, each once the one before answers.
// Not side by side: a matrix's other pairs are mid-story, and a topology's
// servers starting at once (RedLock's five, the store, a replica) make
// their timers late enough to narrow the matrix, which costs more than the
// start saves (measured in docs/ci-and-benchmarks.md).
func (c *Cluster) addEach(ctx context.Context, specs []ServerSpec) ([]*Node, error) {
	var out []*Node
	for _, spec := range specs {
		n, err := c.add(ctx, spec)
		if err != nil {
			return out, err
		}
		out = append(out, n)
	}
	return out, nil
}

// spec is the server o asks for, its persistence checked against its
// kind.
func (c *Cluster) spec(o NodeOptions) (ServerSpec, error) {
	k, err := LookupKind(o.Kind)
	if err != nil {
		return ServerSpec{}, err
	}
	if o.Persistence == "" && len(k.Persistence) > 0 {
		o.Persistence = k.Persistence[0]
	}
	if !k.Offers(o.Persistence) {
		return ServerSpec{}, fmt.Errorf("cluster: node %s: a %s node has no persistence %q (have: %v)", o.Name, k.Name, o.Persistence, k.Persistence)
	}
	var args []string
	if k == RedisKind {
		args = append(args, c.opts.ExtraArgs...)
	}
	return ServerSpec{Name: o.Name, Kind: k, Persistence: o.Persistence, Clock: o.Clock, Args: append(args, o.Args...)}, nil
}

// addEnsemble starts an ensemble's members on a backend that can.
func (c *Cluster) addEnsemble(ctx context.Context, specs []ServerSpec) ([]*Node, error) {
	k := specs[0].Kind
	for _, s := range specs {
		if s.Kind != k {
			return nil, fmt.Errorf("cluster: an ensemble is of one kind: %s and %s", k.Name, s.Kind.Name)
		}
		if c.Node(s.Name) != nil {
			return nil, fmt.Errorf("cluster: a node called %s exists already", s.Name)
		}
	}
	if c.closed() {
		return nil, fmt.Errorf("cluster: add %s ensemble: cluster is closed", k.Name)
	}
	eb, ok := c.backend.(EnsembleBackend)
	if !ok {
		return nil, fmt.Errorf("cluster: the %s backend cannot start a %s ensemble", c.opts.backendName(), k.Name)
	}
	srvs, err := eb.StartEnsemble(ctx, specs)
	if err != nil {
		return nil, err
	}
	out := make([]*Node, len(srvs))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, srv := range srvs {
		out[i] = &Node{Name: specs[i].Name, cluster: c, srv: srv, spec: specs[i], links: map[string]*Link{}}
		c.nodes = append(c.nodes, out[i])
	}
	return out, nil
}

// backendName is Backend, or the default's name.
func (o Options) backendName() string {
	if o.Backend == "" {
		return Local
	}
	return o.Backend
}

// add starts a server on the backend and makes it a node of the cluster.
func (c *Cluster) add(ctx context.Context, spec ServerSpec) (*Node, error) {
	if c.closed() {
		return nil, fmt.Errorf("cluster: add %s: cluster is closed", spec.Name)
	}
	if c.Node(spec.Name) != nil {
		return nil, fmt.Errorf("cluster: a node called %s exists already", spec.Name)
	}
	spec.Kind = spec.ServerKind()
	srv, err := c.backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	n := &Node{Name: spec.Name, cluster: c, srv: srv, spec: spec, links: map[string]*Link{}}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n, nil
}

// lookBinary finds kind k's binary on PATH: the one Options names for it,
// else the kind's own.
func (o Options) lookBinary(k *Kind) (string, error) {
	bin := o.Binaries[k.Name]
	switch {
	case k.Binary == RedisKind.Binary && o.Server != "":
		bin = o.Server
	case k == SentinelKind && o.Sentinel != "":
		bin = o.Sentinel
	}
	if bin == "" {
		bin = k.Binary
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("cluster: %s not found: %s", bin, k.Install)
	}
	return path, nil
}

// FaketimeServerPath is where the libc-allocator redis-server is looked for:
// where cmd/setup builds it, by the one rule package prereq keeps.
func FaketimeServerPath() string { return prereq.FaketimeServerPath() }

// Nodes returns the nodes in the order they were added.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Info describes every node, for the run directory and for tests that check
// no process outlived its run.
func (c *Cluster) Info() []NodeInfo {
	var out []NodeInfo
	for _, n := range c.Nodes() {
		out = append(out, n.Info())
	}
	return out
}

func (c *Cluster) closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isClosed
}

// Close stops every node and link and has the backend remove what it
// made. It is safe to call more than once and from a deferred call after a
// panic.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		return nil
	}
	c.isClosed = true
	c.mu.Unlock()
	c.closeTraffic()
	return c.backend.Close()
}

// closeTraffic closes every follower and every link to every node, and
// forgets them: what carried the clients' traffic to the servers, which
// Close and Reset both end.
func (c *Cluster) closeTraffic() {
	c.mu.Lock()
	followers := c.followers
	c.followers = nil
	c.mu.Unlock()
	for _, f := range followers {
		f.close()
	}
	for _, n := range c.Nodes() {
		n.closeLinks()
	}
	_ = c.proxies.Collection.Clear()
}

// QuietRedisLog drops go-redis's own log lines (failed dials during a
// partition, pool warnings) for the whole program: every error already
// reaches the caller and the history, and a torrent of them on the
// terminal hides the run's summary. go-redis has one logger per program,
// so the program chooses: a run's main calls this, a test of a lock may.
func QuietRedisLog() { redis.SetLogger(silentLog{}) }

// silentLog is a go-redis logger that writes nothing.
type silentLog struct{}

func (silentLog) Printf(context.Context, string, ...any) {}

// ClientOptions tunes a client connection.
type ClientOptions struct {
	// Timeout bounds each command's dial, write and read (default 500 ms).
	Timeout time.Duration
	// PoolSize is the number of connections (default 4).
	PoolSize int
}

func (o ClientOptions) withDefaults() ClientOptions {
	if o.Timeout == 0 {
		o.Timeout = 500 * time.Millisecond
	}
	if o.PoolSize == 0 {
		o.PoolSize = 4
	}
	return o
}

// NewClient connects go-redis to addr (normally a Link's) in the one way the
// harness allows: no retries (go-redis would otherwise re-send a SET NX after
// a timeout and report the client's own lock as taken by someone else), one
// dial attempt, RESP2, no identity or maintenance handshakes. An error from
// such a client is an unknown outcome, never a silent second try.
func NewClient(addr string, o ClientOptions) *redis.Client {
	return newClient(addr, o, nil)
}

func newClient(addr string, o ClientOptions, dial func(context.Context, string, string) (net.Conn, error)) *redis.Client {
	u := harnessOptions(o, dial)
	u.Addrs = []string{addr}
	return redis.NewClient(u.Simple())
}

// harnessOptions is the single statement of how the harness talks to Redis,
// for plain and Sentinel clients alike: no retries, one dial attempt, RESP2,
// no identity or maintenance handshakes, context deadlines obeyed.
func harnessOptions(o ClientOptions, dial func(context.Context, string, string) (net.Conn, error)) *redis.UniversalOptions {
	o = o.withDefaults()
	return &redis.UniversalOptions{
		Dialer:                   dial,
		Protocol:                 2,
		MaxRetries:               -1,
		DialerRetries:            1,
		DialTimeout:              o.Timeout,
		ReadTimeout:              o.Timeout,
		WriteTimeout:             o.Timeout,
		PoolSize:                 o.PoolSize,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// Locks bound single commands with a context (RedLock's per-node
		// timeout); without this go-redis ignores context deadlines on I/O.
		ContextTimeoutEnabled: true,
	}
}
