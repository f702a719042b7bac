package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions configures automatic failover by real redis-sentinel
// processes.
type SentinelOptions struct {
	// MasterName is the monitored master's name (default "locktorture").
	MasterName string
	// Master is the node to monitor.
	Master *Node
	// Count is how many sentinels (default 3); Quorum how many must agree
	// the master is down (default 2).
	Count, Quorum int
	// DownAfter is down-after-milliseconds (default 250 ms), and
	// FailoverTimeout failover-timeout (default 2 s): small, so a failover
	// fits in a test.
	DownAfter, FailoverTimeout time.Duration
}

func (o SentinelOptions) withDefaults() SentinelOptions {
	if o.MasterName == "" {
		o.MasterName = "locktorture"
	}
	if o.Count == 0 {
		o.Count = 3
	}
	if o.Quorum == 0 {
		o.Quorum = o.Count/2 + 1
	}
	if o.DownAfter == 0 {
		o.DownAfter = 250 * time.Millisecond
	}
	if o.FailoverTimeout == 0 {
		o.FailoverTimeout = 2 * time.Second
	}
	return o
}

// Sentinels is a running group of sentinels watching one master.
type Sentinels struct {
	Options SentinelOptions
	Nodes   []*Node
	cluster *Cluster
}

// AddSentinels starts the sentinels and waits until each knows the others,
// up and answering, and the master's connected replicas, so a failover
// right after can reach its quorum. On a backend that starts ensembles
// (the local one) the sentinels start together, each told the others' ids
// and places in its config (SentinelConf.Peers: the known-sentinel lines
// Sentinel writes itself once a peer's hello reached it), so no topology
// waits for the first hello, 2 s after a start. A backend that starts
// ensembles must therefore start sentinels that way too. On one that
// starts none (docker) they start one by one and find each other by
// their hellos.
func (c *Cluster) AddSentinels(ctx context.Context, o SentinelOptions) (*Sentinels, error) {
	o = o.withDefaults()
	s := &Sentinels{Options: o, cluster: c}
	conf := &SentinelConf{MasterName: o.MasterName, MasterAddr: o.Master.srv.PeerAddr(), Quorum: o.Quorum,
		DownAfter: o.DownAfter, FailoverTimeout: o.FailoverTimeout}
	specs := make([]ServerSpec, o.Count)
	for i := range specs {
		specs[i] = ServerSpec{Name: fmt.Sprintf("sentinel%d", i+1), Kind: SentinelKind, Sentinel: conf}
	}
	var err error
	if _, ok := c.backend.(EnsembleBackend); ok {
		s.Nodes, err = c.addEnsemble(ctx, specs)
	} else {
		s.Nodes, err = c.addEach(ctx, specs)
	}
	if err != nil {
		return nil, err
	}
	return s, s.waitDiscovery(ctx)
}

// waitDiscovery waits until every sentinel names every other one, up and
// answering, and knows as many replicas as the master has connected now
// (a replica that connects later is learnt from the master's INFO, every
// 10 s).
func (s *Sentinels) waitDiscovery(ctx context.Context) error {
	replicas, err := s.Options.Master.connectedReplicas(ctx)
	if err != nil {
		return err
	}
	return awaitEach(ctx, s.Nodes, 15*time.Second, "every sentinel to reach the others and know the replicas", func(n *Node) bool {
		peers, err := n.Do(ctx, "SENTINEL", "SENTINELS", s.Options.MasterName)
		l, ok := peers.([]any)
		if err != nil || !ok || len(l) < len(s.Nodes)-1 {
			return false
		}
		for _, p := range l {
			// Only "sentinel": a peer "disconnected", or "s_down" (no ping
			// answered yet: it started after this one tried it), is not
			// one a vote can be asked of yet.
			if field(p, "flags") != "sentinel" {
				return false
			}
		}
		known, err := n.Do(ctx, "SENTINEL", "REPLICAS", s.Options.MasterName)
		r, ok := known.([]any)
		return err == nil && ok && len(r) >= replicas
	})
}

// field is one field of a sentinel's reply about an instance: a flat list
// of names and values, as RESP2 (which the harness's clients speak) has it.
func field(instance any, name string) string {
	v, _ := instance.([]any)
	for i := 0; i+1 < len(v); i += 2 {
		if fmt.Sprint(v[i]) == name {
			return fmt.Sprint(v[i+1])
		}
	}
	return ""
}

// connectedReplicas is how many replicas the master says are connected.
func (n *Node) connectedReplicas(ctx context.Context) (int, error) {
	repl, err := n.InfoSection(ctx, "replication")
	if err != nil {
		return 0, fmt.Errorf("cluster: %s: %w", n.Name, err)
	}
	count, err := strconv.Atoi(repl["connected_slaves"])
	if err != nil {
		return 0, fmt.Errorf("cluster: %s: connected_slaves: %w", n.Name, err)
	}
	return count, nil
}

// Master asks the first sentinel that answers which node is master now.
func (s *Sentinels) Master(ctx context.Context) (*Node, error) {
	for _, n := range s.Nodes {
		if d, err := s.MasterBy(ctx, n); err == nil {
			return d, nil
		}
	}
	return nil, fmt.Errorf("cluster: no sentinel names a known master")
}

// VerifiedMaster is the first node a sentinel names master that says it is
// one (ROLE), as Sentinel's client guidelines ask a client to check what
// it was told: right after a failover a sentinel that has not heard of it
// yet still names the dead master.
func (s *Sentinels) VerifiedMaster(ctx context.Context) (*Node, error) {
	for _, sn := range s.Nodes {
		if m, err := s.MasterBy(ctx, sn); err == nil {
			if role, err := m.Role(ctx); err == nil && role == "master" {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("cluster: no sentinel names a node that says it is master")
}

// MasterBy is the node one sentinel names master now. Right after a
// failover the sentinels disagree: the leader names the promoted replica
// at once, the others once its hello message (every 2 s) reaches them,
// and a client asks whichever sentinel it reached first.
func (s *Sentinels) MasterBy(ctx context.Context, sentinel *Node) (*Node, error) {
	r, err := sentinel.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Options.MasterName)
	if err != nil {
		return nil, err
	}
	a, ok := r.([]any)
	if !ok || len(a) != 2 {
		return nil, fmt.Errorf("cluster: %s: odd GET-MASTER-ADDR-BY-NAME reply %v", sentinel.Name, r)
	}
	addr := net.JoinHostPort(fmt.Sprint(a[0]), fmt.Sprint(a[1]))
	for _, d := range s.cluster.Nodes() {
		if d.spec.Kind == RedisKind && d.srv.PeerAddr() == addr {
			return d, nil
		}
	}
	return nil, fmt.Errorf("cluster: %s names %s master, which is no node of the cluster", sentinel.Name, addr)
}

// Addrs are the sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// Client is go-redis's failover client for peer: it asks the sentinels
// for the master, as applications do, and reaches data nodes through
// peer's own links (sentinels are dialled directly). Sentinels name nodes
// by the address other servers know them by.
func (s *Sentinels) Client(peer string, o ClientOptions) *redis.Client {
	byAddr := map[string]*Node{}
	for _, n := range s.cluster.Nodes() {
		if n.spec.Kind == RedisKind {
			byAddr[n.srv.PeerAddr()] = n
		}
	}
	u := harnessOptions(o, linkDialer(peer, byAddr))
	u.MasterName, u.Addrs = s.Options.MasterName, s.Addrs()
	return redis.NewFailoverClient(u.Failover())
}
