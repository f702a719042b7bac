package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	var specs []NodeOptions
	for i := 1; i <= o.Masters; i++ {
		specs = append(specs, NodeOptions{Name: fmt.Sprintf("n%d", i), Kind: ClusterNodeKind.Name})
	}
	for i := 1; i <= o.Masters; i++ {
		specs = append(specs, NodeOptions{Name: ReplicaName(fmt.Sprintf("n%d", i)), Kind: ClusterNodeKind.Name})
	}
	nodes, err := c.AddNodes(ctx, specs)
	if err != nil {
		return nil, err
	}
	rc.Masters, rc.Replicas = nodes[:o.Masters], nodes[o.Masters:]
	all := rc.Nodes()
	for i, n := range all {
		partner := rc.Replicas[i%o.Masters]
		if i >= o.Masters {
			partner = rc.Masters[i%o.Masters]
		}
		l, err := n.Link(ReplicationPeer(partner.Name))
		if err != nil {
			return nil, err
		}
		host, port, _ := net.SplitHostPort(l.Addr())
		rc.byAddr[l.Addr()] = n
		if _, err := n.Do(ctx, "CONFIG", "SET", "cluster-announce-ip", host, "cluster-announce-port", port,
			"cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10)); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", n.Name, err)
		}
	}
	per := 16384 / o.Masters
	for i, m := range rc.Masters {
		lo, hi := i*per, (i+1)*per-1
		if i == o.Masters-1 {
			hi = 16383
		}
		// Distinct epochs from the start spare the cluster settling their
		// collisions, as redis-cli's create does.
		if _, err := m.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", m.Name, err)
		}
		if _, err := m.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", m.Name, err)
		}
	}
	for _, n := range all[1:] {
		host, port, _ := net.SplitHostPort(rc.announced(n))
		r, err := n.Do(ctx, "CONFIG", "GET", "cluster-port")
		bus, _ := r.([]any)
		if err != nil || len(bus) != 2 {
			return nil, fmt.Errorf("cluster: %s: its bus port: %v %v", n.Name, r, err)
		}
		if _, err := all[0].Do(ctx, "CLUSTER", "MEET", host, port, bus[1]); err != nil {
			return nil, fmt.Errorf("cluster: meet %s: %w", n.Name, err)
		}
	}
	if err := rc.await(ctx, "every node to know the others", func(n *Node) bool {
		r, err := n.Do(ctx, "CLUSTER", "NODES")
		return err == nil && strings.Count(fmt.Sprint(r), "\n") >= len(all) && !strings.Contains(fmt.Sprint(r), "handshake")
	}); err != nil {
		return nil, err
	}
	for i, r := range rc.Replicas {
		id, err := rc.Masters[i].ID(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := r.Do(ctx, "CLUSTER", "REPLICATE", id); err != nil {
			return nil, fmt.Errorf("cluster: %s replicate %s: %w", r.Name, rc.Masters[i].Name, err)
		}
	}
	if err := rc.await(ctx, "every replica to sync and the cluster to be ok", func(n *Node) bool {
		info, err := n.clusterInfo(ctx)
		if err != nil || info["cluster_state"] != "ok" {
			return false
		}
		if rc.isReplica(n) {
			repl, err := n.InfoSection(ctx, "replication")
			return err == nil && repl["master_link_status"] == "up"
		}
		return true
	}); err != nil {
		return nil, err
	}
	return rc, nil
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

// await polls every live node until ok holds for each, within 15 s.
func (rc *RedisCluster) await(ctx context.Context, what string, ok func(*Node) bool) error {
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range rc.Nodes() {
		for !ok(n) {
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster: waited 15s for %s: %s is not there", what, n.Name)
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

// Slot is the hash slot of key, as the cluster computes it.
func (rc *RedisCluster) Slot(ctx context.Context, key string) (int, error) {
	for _, n := range rc.Nodes() {
		if r, err := n.Do(ctx, "CLUSTER", "KEYSLOT", key); err == nil {
			if s, ok := r.(int64); ok {
				return int(s), nil
			}
		}
	}
	return 0, fmt.Errorf("cluster: no node answers CLUSTER KEYSLOT")
}

// Owner is the node that serves key's slot as master now, by the view of
// the first live node that answers, and that master's replica partner
// (the node it was formed with). It is how a story finds whom to kill.
func (rc *RedisCluster) Owner(ctx context.Context, key string) (master, partner *Node, err error) {
	slot, err := rc.Slot(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range rc.Nodes() {
		r, err := n.Do(ctx, "CLUSTER", "SLOTS")
		if err != nil {
			continue
		}
		ranges, _ := r.([]any)
		for _, rg := range ranges {
			f, _ := rg.([]any)
			if len(f) < 3 || f[0].(int64) > int64(slot) || f[1].(int64) < int64(slot) {
				continue
			}
			m, _ := f[2].([]any)
			if len(m) < 2 {
				continue
			}
			owner := rc.byAddr[net.JoinHostPort(fmt.Sprint(m[0]), fmt.Sprint(m[1]))]
			if owner == nil {
				return nil, nil, fmt.Errorf("cluster: %s names %v:%v master of slot %d, no node of the cluster", n.Name, m[0], m[1], slot)
			}
			return owner, rc.Partner(owner), nil
		}
	}
	return nil, nil, fmt.Errorf("cluster: no node names a master of slot %d", slot)
}

// Partner is the node n was formed with: a master's replica, a replica's
// master.
func (rc *RedisCluster) Partner(n *Node) *Node {
	for i, m := range rc.Masters {
		switch n {
		case m:
			return rc.Replicas[i]
		case rc.Replicas[i]:
			return m
		}
	}
	return nil
}

// Promoted says whether replica is a master that serves slots in the view
// of every live node other than the dead: the cluster failed over to it.
func (rc *RedisCluster) Promoted(ctx context.Context, replica *Node) bool {
	if role, err := replica.Role(ctx); err != nil || role != "master" {
		return false
	}
	id, err := replica.ID(ctx)
	if err != nil {
		return false
	}
	for _, n := range rc.Nodes() {
		r, err := n.Do(ctx, "CLUSTER", "NODES")
		if err != nil {
			continue // dead
		}
		if !servesSlots(fmt.Sprint(r), id) {
			return false
		}
		if info, err := n.clusterInfo(ctx); err != nil || info["cluster_state"] != "ok" {
			return false
		}
	}
	return true
}

// servesSlots says whether the CLUSTER NODES text names node id a master
// with slots.
func servesSlots(nodes, id string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[0] == id && strings.Contains(f[2], "master") {
			return true
		}
	}
	return false
}

// MigrateStart begins moving slot from one master to another, as an
// operator's resharding does (redis-cli --cluster reshard): the target
// imports it, the source migrates it. From now on the source answers for
// the slot's keys it still has and sends a client asking for any other to
// the target (ASK), which takes it if the client says ASKING.
func (rc *RedisCluster) MigrateStart(ctx context.Context, slot int, from, to *Node) error {
	fromID, err := from.ID(ctx)
	if err != nil {
		return err
	}
	toID, err := to.ID(ctx)
	if err != nil {
		return err
	}
	if _, err := to.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID); err != nil {
		return fmt.Errorf("cluster: %s import slot %d: %w", to.Name, slot, err)
	}
	if _, err := from.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID); err != nil {
		return fmt.Errorf("cluster: %s migrate slot %d: %w", from.Name, slot, err)
	}
	return nil
}

// MigrateFinish moves the slot's keys still on the source to the target
// (MIGRATE, which keeps each key's remaining time to live) and gives the
// target the slot, first on the target, then the source, then everyone,
// as redis-cli does. It returns how many keys it moved.
func (rc *RedisCluster) MigrateFinish(ctx context.Context, slot int, from, to *Node) (int, error) {
	host, port, _ := net.SplitHostPort(to.Addr())
	moved := 0
	for {
		r, err := from.Do(ctx, "CLUSTER", "GETKEYSINSLOT", slot, 100)
		if err != nil {
			return moved, fmt.Errorf("cluster: %s keys in slot %d: %w", from.Name, slot, err)
		}
		keys, _ := r.([]any)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		args = append(args, keys...)
		if _, err := from.Do(ctx, args...); err != nil && !errors.Is(err, redis.Nil) {
			return moved, fmt.Errorf("cluster: %s MIGRATE to %s: %w", from.Name, to.Name, err)
		}
		moved += len(keys)
	}
	toID, err := to.ID(ctx)
	if err != nil {
		return moved, err
	}
	for _, n := range append([]*Node{to, from}, rc.Masters...) {
		if _, err := n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID); err != nil {
			return moved, fmt.Errorf("cluster: %s give slot %d to %s: %w", n.Name, slot, to.Name, err)
		}
	}
	return moved, nil
}

// Client is a go-redis cluster client for peer: it learns the slots from
// the nodes, as applications do, and reaches each node through peer's own
// link to it. Like every client of the harness it sends a command once:
// go-redis's cluster client would otherwise send again, to the same node
// and then another, a command whose reply timed out or whose connection
// broke, after it may have run; here that is the caller's unknown outcome.
// It still follows MOVED and ASK, and tries again on CLUSTERDOWN and
// TRYAGAIN: those say the command did not run. Its slot map is reloaded
// every ReloadInterval.
func (rc *RedisCluster) Client(peer string, o ClientOptions) *redis.ClusterClient {
	u := harnessOptions(o, linkDialer(peer, rc.byAddr))
	for _, m := range rc.Masters {
		u.Addrs = append(u.Addrs, rc.announced(m))
	}
	co := u.Cluster()
	co.MaxRedirects = 3
	co.ClusterStateReloadInterval = ReloadInterval
	c := redis.NewClusterClient(co)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(sendOnce{}) })
	return c
}

// ReloadInterval is how old the slot map a cluster client routes by may
// grow before its next command reloads it. go-redis's default is 60 s and
// it reloads sooner only on MOVED: a master that died sends none, so its
// clients would dial the dead master for a minute after its replica took
// over. The harness's clients reload it every 250 ms, as clients that
// watch the topology do (Lettuce's adaptive refresh, redis-py's reload on
// a connection error), so a story sees the lock, not go-redis's wait.
const ReloadInterval = 250 * time.Millisecond

// sendOnce turns a transport error on a command that was written into an
// error go-redis's cluster client does not retry: its outcome is unknown,
// and the caller must hear so. A failed dial (nothing was sent) is left
// alone.
type sendOnce struct{}

// errSentOnce is a transport error after a command may have been written.
type errSentOnce struct{ err string }

func (e errSentOnce) Error() string { return e.err }

func (sendOnce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sendOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return once(next(ctx, cmd), cmd)
	}
}

func (sendOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			once(cmd.Err(), cmd)
		}
		return once(err, nil)
	}
}

// once is err, made final when it is a transport error that is no failed
// dial; cmd, when given, carries the final error too.
func once(err error, cmd redis.Cmder) error {
	if err == nil {
		return nil
	}
	var opErr *net.OpError
	var rerr redis.Error
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial", errors.As(err, &rerr),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrClosed):
		return err
	}
	final := errSentOnce{err: err.Error()}
	if cmd != nil {
		cmd.SetErr(final)
	}
	return final
}
