// Package cluster is the system under test: real redis-server processes on
// free loopback ports, each reached only through in-process toxiproxy links,
// and the operations a nemesis performs on them (stop, kill -9, restart,
// pause, cut off, slow down). Nothing else in the harness starts processes.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/rs/zerolog"
)

// Options configures a cluster.
type Options struct {
	// Server is the redis-server binary; empty means "redis-server" on PATH.
	Server string
	// Dir is where node data dirs are made; empty means the system temp dir.
	// The cluster removes what it made there on Close.
	Dir string
	// ExtraArgs are appended to every node's command line.
	ExtraArgs []string
}

// Cluster owns every node and link it made and stops them all on Close.
type Cluster struct {
	opts    Options
	server  string
	dir     string
	proxies *toxiproxy.ApiServer

	mu       sync.Mutex
	nodes    []*Node
	isClosed bool
}

// New prepares an empty cluster; AddNode starts nodes in it. Always Close it.
func New(opts Options) (*Cluster, error) {
	server := opts.Server
	if server == "" {
		server = "redis-server"
	}
	path, err := exec.LookPath(server)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s not found: install it with `make setup` (apt-get install redis-server) or pass its path", server)
	}
	dir, err := os.MkdirTemp(opts.Dir, "locktorture-")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	log := zerolog.Nop()
	return &Cluster{
		opts:    opts,
		server:  path,
		dir:     dir,
		proxies: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), log),
	}, nil
}

// Start makes a cluster of n nodes named n1..nN without persistence.
func Start(ctx context.Context, opts Options, n int) (*Cluster, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= n; i++ {
		if _, err := c.AddNode(ctx, fmt.Sprintf("n%d", i), NoPersistence); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// AddNode starts a new node on a free port. A port grabbed by someone else
// between picking and binding is retried with another.
func (c *Cluster) AddNode(ctx context.Context, name string, p Persistence) (*Node, error) {
	if p == "" {
		p = NoPersistence
	}
	dir, err := os.MkdirTemp(c.dir, name+"-")
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		n := &Node{Name: name, cluster: c, port: port, dir: dir, persistence: p, links: map[string]*Link{}}
		lastErr = n.Start(ctx)
		if lastErr == nil {
			c.mu.Lock()
			c.nodes = append(c.nodes, n)
			c.mu.Unlock()
			return n, nil
		}
		if !strings.Contains(lastErr.Error(), errAddrInUse.Error()) {
			break
		}
	}
	return nil, lastErr
}

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

// Close stops every node and link and removes the data dirs. It is safe to
// call more than once and from a deferred call after a panic.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.isClosed {
		c.mu.Unlock()
		return nil
	}
	c.isClosed = true
	nodes := c.nodes
	c.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		for _, l := range n.Links() {
			l.close()
		}
		// Kill, not Stop: nothing on disk is needed after the run and a
		// graceful shutdown only makes Ctrl-C slower.
		n.mu.Lock()
		if n.cmd != nil {
			n.killLocked()
		}
		n.mu.Unlock()
	}
	_ = c.proxies.Collection.Clear()
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// silentLog drops go-redis's own log lines (failed dials during a partition,
// pool warnings): every error already reaches the caller and the history,
// and a torrent of them on the terminal hides the run's summary.
type silentLog struct{}

func (silentLog) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(silentLog{}) }

// ClientOptions tunes a client connection.
type ClientOptions struct {
	// Timeout bounds each command's dial, write and read (default 500 ms).
	Timeout time.Duration
	// PoolSize is the number of connections (default 4).
	PoolSize int
}

// NewClient connects go-redis to addr (normally a Link's) in the one way the
// harness allows: no retries (go-redis would otherwise re-send a SET NX after
// a timeout and report the client's own lock as taken by someone else), one
// dial attempt, RESP2, no identity or maintenance handshakes. An error from
// such a client is an unknown outcome, never a silent second try.
func NewClient(addr string, o ClientOptions) *redis.Client {
	if o.Timeout == 0 {
		o.Timeout = 500 * time.Millisecond
	}
	if o.PoolSize == 0 {
		o.PoolSize = 4
	}
	return redis.NewClient(&redis.Options{
		Addr:            addr,
		Protocol:        2,
		MaxRetries:      -1,
		DialerRetries:   1,
		DialTimeout:     o.Timeout,
		ReadTimeout:     o.Timeout,
		WriteTimeout:    o.Timeout,
		PoolSize:        o.PoolSize,
		DisableIdentity: true,
		// Locks bound single commands with a context (RedLock's per-node
		// timeout); without this go-redis ignores context deadlines on I/O.
		ContextTimeoutEnabled:    true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}
