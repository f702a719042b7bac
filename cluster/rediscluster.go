package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ClusterNodeKind is a redis-server in cluster mode, one member of a Redis
// Cluster that AddRedisCluster forms: its cluster bus listens on a port of
// its own (picked free), and it keeps its view of the cluster in its dir.
var ClusterNodeKind = &Kind{
	Name:        "redis-cluster",
	Binary:      "redis-server",
	Install:     RedisKind.Install,
	Persistence: []Persistence{NoPersistence},
	PeerPorts:   1,
	Args: func(spec ServerSpec, at Place) ([]string, error) {
		if len(at.PeerPorts) != 1 {
			return nil, fmt.Errorf("cluster: %s: a cluster node needs a bus port", spec.Name)
		}
		return append(spec.RedisArgs(at.Bind, at.Port, at.Dir),
			"--cluster-enabled", "yes",
			"--cluster-config-file", at.Dir+"/nodes.conf",
			"--cluster-port", strconv.Itoa(at.PeerPorts[0]),
			// A replica stays with its master: the story decides who
			// replicates whom.
			"--cluster-allow-replica-migration", "no"), nil
	},
	Ready: func(_ context.Context, addr string) (int, error) { return Answering(addr) },
	Log:   "redis.log",
	RESP:  true,
}

// RedisClusterOptions shapes a Redis Cluster.
type RedisClusterOptions struct {
	// Masters is how many masters share the 16384 slots (default 3), each
	// with one replica.
	Masters int
	// NodeTimeout is cluster-node-timeout (default 500 ms): how long a
	// silent master is waited for before it is flagged failing, so a
	// failover fits in a story.
	NodeTimeout time.Duration
}

func (o RedisClusterOptions) withDefaults() RedisClusterOptions {
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 500 * time.Millisecond
	}
	return o
}

// RedisCluster is a running Redis Cluster: masters n1..nN, each with a
// replica nI-replica. Every node announces, as its address, its link for
// its replication partner (ReplicationPeer), so replication crosses a link
// a nemesis can cut like the lone master's; clients dial that address and
// are routed to their own link to the node instead, and the cluster bus
// talks node to node directly.
type RedisCluster struct {
	Options  RedisClusterOptions
	Masters  []*Node
	Replicas []*Node
	cluster  *Cluster
	byAddr   map[string]*Node // announced address → node
}

// ReplicaName is what the harness calls master's replica, in a lone
// master's replicated topology and in a Redis Cluster alike.
func ReplicaName(master string) string { return master + "-replica" }

// AddRedisCluster starts the nodes, assigns the slots in equal ranges to
// the masters, joins them, gives each master its replica and waits until
// every node sees the cluster whole and every replica has synced.
func (c *Cluster) AddRedisCluster(ctx context.Context, o RedisClusterOptions) (*RedisCluster, error) {
	o = o.withDefaults()
	if c.opts.backendName() != Local {
		return nil, fmt.Errorf("cluster: a Redis Cluster runs on the local backend only: its nodes announce their links' loopback addresses")
	}
	rc := &RedisCluster{Options: o, cluster: c, byAddr: map[string]*Node{}}
	nodes, err := c.AddNodes(ctx, clusterSpecs(o.Masters))
	if err != nil {
		return nil, err
	}
	rc.Masters, rc.Replicas = nodes[:o.Masters], nodes[o.Masters:]
	for _, step := range []func(context.Context) error{rc.announce, rc.assignSlots, rc.meet, rc.replicate} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return rc, nil
}

// clusterSpecs are the nodes of a cluster of masters: n1..nN, then their
// replicas.
func clusterSpecs(masters int) []NodeOptions {
	var specs []NodeOptions
	for i := 1; i <= masters; i++ {
		specs = append(specs, NodeOptions{Name: fmt.Sprintf("n%d", i), Kind: ClusterNodeKind.Name})
	}
	for i := 1; i <= masters; i++ {
		specs = append(specs, NodeOptions{Name: ReplicaName(fmt.Sprintf("n%d", i)), Kind: ClusterNodeKind.Name})
	}
	return specs
}

// announce has every node announce its link for its replication partner
// as its address, and sets the cluster's node timeout.
func (rc *RedisCluster) announce(ctx context.Context) error {
	for _, n := range rc.Nodes() {
		l, err := n.Link(ReplicationPeer(rc.Partner(n).Name))
		if err != nil {
			return err
		}
		host, port, _ := net.SplitHostPort(l.Addr())
		rc.byAddr[l.Addr()] = n
		if _, err := n.Do(ctx, "CONFIG", "SET", "cluster-announce-ip", host, "cluster-announce-port", port,
			"cluster-node-timeout", strconv.FormatInt(rc.Options.NodeTimeout.Milliseconds(), 10)); err != nil {
			return fmt.Errorf("cluster: %s: %w", n.Name, err)
		}
	}
	return nil
}

// assignSlots gives the masters the 16384 slots in equal ranges, the last
// taking what is left over.
func (rc *RedisCluster) assignSlots(ctx context.Context) error {
	per := 16384 / len(rc.Masters)
	for i, m := range rc.Masters {
		lo, hi := i*per, (i+1)*per-1
		if i == len(rc.Masters)-1 {
			hi = 16383
		}
		// Distinct epochs from the start spare the cluster settling their
		// collisions, as redis-cli's create does.
		if _, err := m.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return fmt.Errorf("cluster: %s: %w", m.Name, err)
		}
		if _, err := m.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return fmt.Errorf("cluster: %s: %w", m.Name, err)
		}
	}
	return nil
}

// meet introduces every node to the first, at its announced address and
// its bus port, and waits until every node knows every other.
func (rc *RedisCluster) meet(ctx context.Context) error {
	all := rc.Nodes()
	for _, n := range all[1:] {
		host, port, _ := net.SplitHostPort(rc.announced(n))
		r, err := n.Do(ctx, "CONFIG", "GET", "cluster-port")
		bus, _ := r.([]any)
		if err != nil || len(bus) != 2 {
			return fmt.Errorf("cluster: %s: its bus port: %v %v", n.Name, r, err)
		}
		if _, err := all[0].Do(ctx, "CLUSTER", "MEET", host, port, bus[1]); err != nil {
			return fmt.Errorf("cluster: meet %s: %w", n.Name, err)
		}
	}
	return awaitEach(ctx, all, 15*time.Second, "every node to know the others", func(n *Node) bool {
		r, err := n.Do(ctx, "CLUSTER", "NODES")
		return err == nil && strings.Count(fmt.Sprint(r), "\n") >= len(all) && !strings.Contains(fmt.Sprint(r), "handshake")
	})
}

// replicate makes each replica replicate its master, and waits until every
// replica has synced and every node finds the cluster ok.
func (rc *RedisCluster) replicate(ctx context.Context) error {
	for i, r := range rc.Replicas {
		id, err := rc.Masters[i].ID(ctx)
		if err != nil {
			return err
		}
		if _, err := r.Do(ctx, "CLUSTER", "REPLICATE", id); err != nil {
			return fmt.Errorf("cluster: %s replicate %s: %w", r.Name, rc.Masters[i].Name, err)
		}
	}
	return awaitEach(ctx, rc.Nodes(), 15*time.Second, "every replica to sync and the cluster to be ok", func(n *Node) bool {
		info, err := n.clusterInfo(ctx)
		if err != nil || info["cluster_state"] != "ok" {
			return false
		}
		if rc.isReplica(n) {
			repl, err := n.InfoSection(ctx, "replication")
			return err == nil && repl["master_link_status"] == "up"
		}
		return true
	})
}

// Nodes lists the masters, then the replicas.
func (rc *RedisCluster) Nodes() []*Node {
	return append(append([]*Node(nil), rc.Masters...), rc.Replicas...)
}

func (rc *RedisCluster) isReplica(n *Node) bool {
	for _, r := range rc.Replicas {
		if r == n {
			return true
		}
	}
	return false
}

// announced is the address n announces to the cluster.
func (rc *RedisCluster) announced(n *Node) string {
	for a, m := range rc.byAddr {
		if m == n {
			return a
		}
	}
	return ""
}

// awaitEach polls each of nodes, every 20 ms, until ok holds for it, all
// within the time given: how the harness waits for servers to agree on
// something they settle on their own (a sync, a gossip, a discovery).
func awaitEach(ctx context.Context, nodes []*Node, within time.Duration, what string, ok func(*Node) bool) error {
	deadline := time.Now().Add(within)
	for _, n := range nodes {
		for !ok(n) {
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster: waited %s for %s: %s is not there", within, what, n.Name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// ID is a cluster node's id (CLUSTER MYID).
func (n *Node) ID(ctx context.Context) (string, error) {
	r, err := n.Do(ctx, "CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("cluster: %s: %w", n.Name, err)
	}
	return fmt.Sprint(r), nil
}

// clusterInfo is CLUSTER INFO field by field.
func (n *Node) clusterInfo(ctx context.Context) (map[string]string, error) {
	r, err := n.Do(ctx, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(fmt.Sprint(r), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}
