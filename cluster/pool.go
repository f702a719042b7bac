package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reset readies the cluster, its run over and its clients gone, for
// another run of the same topology. Every node must be as its start left
// it but for what clients wrote: no fault the harness did to it
// (Node.Faulted), not paused, its own process still answering. Then
// every link and follower is closed and each node is emptied by its
// kind's Reset. A node that is not so, or a kind without Reset, is an
// error, and such a cluster is for closing, not reuse: a fault may leave
// what no reset is proven to undo (a member's log replayed, a clock's
// file, an admin command's config).
func (c *Cluster) Reset(ctx context.Context) error {
	if c.closed() {
		return errors.New("cluster: reset: the cluster is closed")
	}
	if err := c.reusable(ctx); err != nil {
		return err
	}
	c.closeTraffic()
	for _, n := range c.Nodes() {
		if err := n.Kind().Reset(ctx, n.Addr()); err != nil {
			return fmt.Errorf("cluster: reset %s: %w", n.Name, err)
		}
	}
	ends := c.LogSizes()
	c.mu.Lock()
	c.logEnds = ends
	c.mu.Unlock()
	return nil
}

// LogSizes is how long each local node's log (Node.LogFile) is now.
func (c *Cluster) LogSizes() map[string]int64 {
	sizes := map[string]int64{}
	for _, n := range c.Nodes() {
		if fi, err := os.Stat(n.LogFile()); err == nil {
			sizes[n.Name] = fi.Size()
		}
	}
	return sizes
}

// LogEnds is where each local node's log (Node.LogFile) ended once the
// last Reset was done, nil before one: what the run before it left ends
// there, the lines its reset made included (a PostgreSQL session it
// terminated logs its end before the reset goes on).
func (c *Cluster) LogEnds() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logEnds
}

// reusable says why the node cannot serve another run, or nil.
func (n *Node) reusable(ctx context.Context) error {
	k := n.Kind()
	switch {
	case k.Reset == nil:
		return fmt.Errorf("cluster: %s: a %s node has no reset", n.Name, k.Name)
	case n.Faulted() != "":
		return fmt.Errorf("cluster: %s took a fault (%s)", n.Name, n.Faulted())
	case n.Paused():
		return fmt.Errorf("cluster: %s is paused", n.Name)
	}
	return n.answers(ctx)
}

// answers asks the node's kind whether the server serves, within a
// second, and checks that the process answering is the one that started:
// by the pid the server names, or, where it names none, by who listens
// on its port (a local node's).
func (n *Node) answers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	pid, err := n.Kind().Ready(ctx, n.Addr())
	if err != nil {
		return fmt.Errorf("cluster: %s does not answer: %w", n.Name, err)
	}
	info := n.Info()
	if info.Backend != Local {
		return nil
	}
	switch {
	case info.PID == 0:
		return fmt.Errorf("cluster: %s is down", n.Name)
	case pid != 0 && pid != info.PID:
		return fmt.Errorf("cluster: %s answers as process %d, not %d", n.Name, pid, info.PID)
	case pid == 0 && !listensOn(info.PID, info.Port):
		return fmt.Errorf("cluster: %s's port %d is not its process %d's", n.Name, info.Port, info.PID)
	}
	return nil
}

// closeLinks closes every link to the node and forgets them: the next
// run's clients get links of their own, with no toxic of this run's.
func (n *Node) closeLinks() {
	n.mu.Lock()
	links := n.links
	n.links = map[string]*Link{}
	n.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Pool keeps clusters that a run left healthy, reset (Cluster.Reset), for
// the next run of the same topology, named by a key the caller makes: a
// ZooKeeper ensemble's three JVMs start once rather than per run. It
// holds at most max clusters, closing the oldest beyond that, and of a
// key no more than the runs still to come will take (Want); Close closes
// what it holds. Its clusters' servers run idle while kept, and an idle
// ensemble is not free (a ZooKeeper's three JVMs and an etcd's three
// members each take 7 to 8% of a core at their heartbeats), so a caller
// runs the pairs of a topology one after another.
type Pool struct {
	max int

	mu     sync.Mutex
	kept   []kept
	wanted map[string]int
	closed bool
}

// kept is one cluster in the pool, and the run that left it.
type kept struct {
	key, from string
	c         *Cluster
}

// NewPool makes a pool that keeps at most max clusters.
func NewPool(max int) *Pool { return &Pool{max: max} }

// resetWithin bounds a reset: a member that dies after the check would
// otherwise keep a ZooKeeper client waiting for a session, and the run
// its seats.
const resetWithin = 30 * time.Second

// Put resets c and keeps it under key, from naming the run that left it.
// When c cannot be kept (the pool is closed, no run still to come wants
// it, or Reset's error), Put closes it and says why.
func (p *Pool) Put(ctx context.Context, key, from string, c *Cluster) error {
	if err := p.wants(key); err != nil {
		c.Close()
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, resetWithin)
	defer cancel()
	if err := c.Reset(ctx); err != nil {
		c.Close()
		return err
	}
	p.mu.Lock()
	if err := p.wantsLocked(key); err != nil {
		p.mu.Unlock()
		c.Close()
		return err
	}
	p.kept = append(p.kept, kept{key: key, from: from, c: c})
	var over []kept
	if n := len(p.kept) - p.max; n > 0 {
		over = append(over, p.kept[:n]...)
		p.kept = p.kept[n:]
	}
	p.mu.Unlock()
	for _, k := range over {
		k.c.Close()
	}
	return nil
}

// Take hands out a kept cluster of key, the most recently kept first, and
// the run that left it; nil when there is none. A cluster whose node no
// longer answers as it did is closed, and the next one tried.
func (p *Pool) Take(ctx context.Context, key string) (*Cluster, string) {
	p.asked(key)
	for {
		k, ok := p.take(key)
		if !ok {
			return nil, ""
		}
		if k.c.reusable(ctx) == nil {
			return k.c, k.from
		}
		k.c.Close()
	}
}

// Want says n more runs of key will ask for servers: the pool then keeps
// no more clusters of key than those runs will take, and none once the
// last has asked. A key never wanted is kept as the pool's size allows.
func (p *Pool) Want(key string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wanted == nil {
		p.wanted = map[string]int{}
	}
	p.wanted[key] = n
}

// wants says why the pool would not keep a cluster of key now, or nil.
func (p *Pool) wants(key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wantsLocked(key)
}

// wantsLocked is wants with p.mu held.
func (p *Pool) wantsLocked(key string) error {
	if p.closed {
		return errors.New("cluster: the pool is closed")
	}
	if n, ok := p.wanted[key]; ok && p.count(key) >= n {
		return errors.New("cluster: no run still to come wants these servers")
	}
	return nil
}

// count is how many clusters of key the pool keeps; p.mu is held.
func (p *Pool) count(key string) int {
	n := 0
	for _, k := range p.kept {
		if k.key == key {
			n++
		}
	}
	return n
}

// asked counts one run's ask for key against what was wanted of it.
func (p *Pool) asked(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.wanted[key]; ok && n > 0 {
		p.wanted[key] = n - 1
	}
}

// take removes the latest cluster kept under key from the pool.
func (p *Pool) take(key string) (kept, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.kept) - 1; i >= 0; i-- {
		if p.kept[i].key == key {
			k := p.kept[i]
			p.kept = append(p.kept[:i], p.kept[i+1:]...)
			return k, true
		}
	}
	return kept{}, false
}

// Close closes every cluster the pool keeps; a cluster Put after it is
// closed at once.
func (p *Pool) Close() {
	p.mu.Lock()
	all := p.kept
	p.kept, p.closed = nil, true
	p.mu.Unlock()
	for _, k := range all {
		k.c.Close()
	}
}

// reusable checks every node of the cluster is still as a reset left it
// (Node.reusable).
func (c *Cluster) reusable(ctx context.Context) error {
	for _, n := range c.Nodes() {
		if err := n.reusable(ctx); err != nil {
			return err
		}
	}
	return nil
}
