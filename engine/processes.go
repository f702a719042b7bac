package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/worker"
	"github.com/locktorture/locktorture/workloads"
)

// processes opens the clients' processes. Every process gets its own
// connections, to the lock nodes and the store, each with the gate's hook:
// faults reach the lock through them without its help, and a process that
// dies takes its connections with it.
type processes struct {
	env       *scenario.Env
	cl        *cluster.Cluster
	store     *cluster.Node
	info      locks.Info
	lock      locks.Config // what every process's lock shares: TTL, waiter timeout
	storeOpts cluster.ClientOptions
	// workers: every process is a worker started by worker (nil: Self),
	// writing to workerLog.
	workers   bool
	worker    func(lock string) *exec.Cmd
	workerLog io.Writer
	// forks: the workers are forks of one Forker, started with the first.
	forks bool

	forkOnce sync.Once
	forker   *worker.Forker
	forkErr  error

	mu sync.Mutex
	// conns are the clients opened and not yet closed, for close: a
	// process retired after an unknown outcome closes its own, and a long
	// run retires thousands.
	conns       map[redis.UniversalClient]bool
	workerProcs []*worker.Proc // every worker started, for close
	// followers are each client's address that follows the master, for
	// workers in a replicated topology.
	followers map[string]*cluster.Follower
	// misbehaved is the first worker's breach of the protocol
	// (worker.ErrMisbehaved), which fails the run; abort, once the clients
	// run, ends their work at once when it happens.
	misbehaved error
	abort      func(error)
	// patience is worker.Options.Patience (0: its default).
	patience time.Duration
}

// misbehave records a worker's breach of the protocol, the first one, and
// aborts the clients' work: what follows a worker that broke the
// protocol judges no lock.
func (p *processes) misbehave(err error) {
	p.mu.Lock()
	if p.misbehaved == nil {
		p.misbehaved = err
	}
	abort := p.abort
	p.mu.Unlock()
	if abort != nil {
		abort(err)
	}
}

// aborting has a worker's breach of the protocol call abort, and returns
// the breach already recorded, if any.
func (p *processes) aborting(abort func(error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.abort = abort
	return p.misbehaved
}

// breach is the first worker's breach of the protocol, or nil.
func (p *processes) breach() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.misbehaved
}

// opener opens the processes of client, whose wall clock is clock.
func (p *processes) opener(client int, clock *nemesis.ClientClock) func(process int) (workloads.Process, error) {
	if p.workers {
		return func(process int) (workloads.Process, error) { return p.startWorker(client, process, clock) }
	}
	return func(process int) (workloads.Process, error) { return p.open(client, process, clock) }
}

// open opens process of client inside the harness: its lock on hooked
// connections of its own, and its store. A process that fails to open
// closes what it opened; one that opens hands its connections to close too.
func (p *processes) open(client, process int, clock *nemesis.ClientClock) (workloads.Process, error) {
	d := &dialer{p: p, client: client, process: process, peer: p.env.Clients[client]}
	lockClients, addrs, err := d.dialLock()
	if err != nil {
		d.close()
		return workloads.Process{}, err
	}
	store, err := d.dial(p.store.Name, p.storeOpts, false)
	if err != nil {
		d.close()
		return workloads.Process{}, err
	}
	cfg := p.lock
	cfg.Clients, cfg.Addrs, cfg.Clock, cfg.Owner = lockClients, addrs, clock, fmt.Sprintf("%s:%d", d.peer, process)
	cfg.Point = func(ctx context.Context, name string) error { return p.env.Gate.LockPoint(ctx, client, process, name) }
	lock, err := locks.Build(p.info, cfg)
	if err != nil {
		d.close()
		return workloads.Process{}, err
	}
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[redis.UniversalClient]bool{}
	}
	for _, c := range d.mine {
		p.conns[c] = true
	}
	p.mu.Unlock()
	st := workloads.NewStore(store)
	st.Warm()
	return workloads.Process{Lock: lock, Store: st, Close: d.close}, nil
}

// dialer opens one in-harness process's connections, each through its
// client's own links and with the gate's hook, and keeps them: the
// process's Close closes them all.
type dialer struct {
	p               *processes
	client, process int
	peer            string
	mine            []redis.UniversalClient
}

// dialLock opens what the process's lock works through. A Redis lock gets
// hooked clients of the lock nodes, and in a Redis Cluster one client that
// routes by slot; a lock of a server kind of its own gets the nodes' link
// addresses too, to dial itself.
func (d *dialer) dialLock() (lockClients []redis.UniversalClient, addrs []string, err error) {
	env := d.p.env
	if env.Cluster != nil {
		c := env.Cluster.Client(d.peer, cluster.ClientOptions{})
		env.Gate.HookCluster(c, d.client, d.process, true)
		d.mine = append(d.mine, c)
		return []redis.UniversalClient{c}, nil, nil
	}
	for _, name := range env.Nodes {
		if d.p.info.ServerKind() != locks.ServerRedis {
			l, err := d.p.cl.Node(name).Link(d.peer)
			if err != nil {
				return nil, nil, err
			}
			addrs = append(addrs, l.Addr())
		}
		c, err := d.dial(name, cluster.ClientOptions{}, true)
		if err != nil {
			return nil, nil, err
		}
		lockClients = append(lockClients, c)
	}
	return lockClients, addrs, nil
}

// dial opens a hooked client of the named node (traps: with the gate's
// command traps). The first lock node of a replicated topology is reached
// as its master of the moment: through Sentinel, or the Primary moved by
// hand.
func (d *dialer) dial(name string, co cluster.ClientOptions, traps bool) (*redis.Client, error) {
	env := d.p.env
	var c *redis.Client
	switch {
	case name == env.Nodes[0] && env.Sentinels != nil:
		c = env.Sentinels.Client(d.peer, co)
	case name == env.Nodes[0] && env.Primary != nil:
		c = env.Primary.Client(d.peer, co)
	default:
		l, err := d.p.cl.Node(name).Link(d.peer)
		if err != nil {
			return nil, err
		}
		c = cluster.NewClient(l.Addr(), co)
	}
	c.AddHook(env.Gate.Hook(d.client, d.process, traps))
	d.mine = append(d.mine, c)
	return c, nil
}

// close closes the process's connections and forgets them: a process
// retired after an unknown outcome closes its own.
func (d *dialer) close() {
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	for _, c := range d.mine {
		c.Close()
		delete(d.p.conns, c)
	}
}

// startWorker starts process of client as a worker that reaches the lock
// nodes and the store through the client's own links.
func (p *processes) startWorker(client, process int, clock *nemesis.ClientClock) (workloads.Process, error) {
	peer := p.env.Clients[client]
	h := worker.Hello{Lock: p.info.Name, TTLNS: int64(p.lock.TTL), WaitNS: int64(p.lock.Wait), WaiterTimeoutNS: int64(p.lock.WaiterTimeout),
		StoreTimeoutNS: int64(p.storeOpts.Timeout), Owner: fmt.Sprintf("%s:%d", peer, process)}
	if p.info.NodeTimeout {
		h.NodeTimeoutNS = int64(cmp.Or(p.lock.NodeTimeout, locks.DefaultNodeTimeout(p.lock.TTL)))
	}
	for _, name := range append(slices.Clone(p.env.Nodes), p.store.Name) {
		if name == p.env.Nodes[0] && (p.env.Primary != nil || p.env.Sentinels != nil) {
			f, err := p.follower(peer)
			if err != nil {
				return workloads.Process{}, err
			}
			h.Nodes = append(h.Nodes, f.Addr())
			continue
		}
		l, err := p.cl.Node(name).Link(peer)
		if err != nil {
			return workloads.Process{}, err
		}
		h.Nodes = append(h.Nodes, l.Addr())
	}
	h.Nodes, h.Store = h.Nodes[:len(h.Nodes)-1], h.Nodes[len(h.Nodes)-1]
	forker, err := p.theForker()
	if err != nil {
		return workloads.Process{}, err
	}
	w, err := worker.Start(context.Background(), worker.Options{Command: p.worker, Forker: forker, Hello: h, Gate: p.env.Gate,
		Client: client, Process: process, Clock: clock, Stderr: p.workerLog, Patience: p.patience, Misbehaved: p.misbehave})
	if err != nil {
		return workloads.Process{}, err
	}
	p.mu.Lock()
	p.workerProcs = append(p.workerProcs, w)
	p.mu.Unlock()
	return workloads.Process{Lock: w, Store: w, Close: w.Close}, nil
}

// theForker is the run's Forker, started on first use, or nil where each
// worker is a process of its own.
func (p *processes) theForker() (*worker.Forker, error) {
	if !p.forks {
		return nil, nil
	}
	p.forkOnce.Do(func() { p.forker, p.forkErr = worker.StartForker(p.worker(p.info.Name), p.workerLog) })
	return p.forker, p.forkErr
}

// follower is peer's address that follows the master, made on first use: a
// worker dials one address, and each connection it opens reaches the
// master of that moment, by hand (Primary) or as Sentinel names it.
func (p *processes) follower(peer string) (*cluster.Follower, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.followers[peer]; f != nil {
		return f, nil
	}
	target := func(context.Context) (*cluster.Node, error) { return p.env.Primary.Node(), nil }
	if s := p.env.Sentinels; s != nil {
		target = s.VerifiedMaster
	}
	f, err := p.cl.Follow(peer, target)
	if err != nil {
		return nil, err
	}
	if p.followers == nil {
		p.followers = map[string]*cluster.Follower{}
	}
	p.followers[peer] = f
	return f, nil
}

// final opens the final reads' own connection to the store, as process
// of the first client, through its links: a worker's register is the
// store's key all the same, and starting a worker (an interpreter, a JVM)
// to read it held the run's seats for seconds.
func (p *processes) final(process int) (workloads.Resource, func(), error) {
	d := &dialer{p: p, client: 0, process: process, peer: p.env.Clients[0]}
	c, err := d.dial(p.store.Name, p.storeOpts, false)
	if err != nil {
		d.close()
		return nil, nil, err
	}
	return workloads.NewStore(c), d.close, nil
}

// close closes every connection any process opened, and every worker,
// outside the lock: a worker that breaches the protocol as it is closed
// reports to misbehave, which takes it.
func (p *processes) close() {
	p.mu.Lock()
	conns, workers := p.conns, p.workerProcs
	p.conns, p.workerProcs = nil, nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	for _, w := range workers {
		w.Close()
	}
	// Once every worker is gone; a worker asked for after this fails.
	p.forkOnce.Do(func() { p.forkErr = errors.New("worker forker: the run's processes are closed") })
	if p.forker != nil {
		p.forker.Close()
	}
}
