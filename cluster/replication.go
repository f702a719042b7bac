package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// admin is a short-lived direct connection for the harness's own commands.
func (n *Node) admin() *redis.Client {
	return NewClient(n.Addr(), ClientOptions{Timeout: time.Second, PoolSize: 1})
}

// Do runs one admin command on the node, straight to its port (no link):
// the harness's own view, unaffected by the faults it injects. The node
// must speak Redis's protocol (Kind.RESP).
func (n *Node) Do(ctx context.Context, args ...any) (any, error) {
	if !n.spec.Kind.RESP {
		return nil, fmt.Errorf("cluster: %s is a %s node: Do speaks Redis's protocol", n.Name, n.spec.Kind.Name)
	}
	n.fault("admin command")
	c := n.admin()
	defer c.Close()
	return c.Do(ctx, args...).Result()
}

// Pipeline runs cmds, admin commands as Do's, on one connection to the
// node's port in one round trip, and returns each one's error (nil where
// it succeeded): a nemesis's burst of writes takes the time of the writes,
// not of a dial and a round trip each. err is the connection's failure
// (a command left with no reply); errs then still says which commands
// the node answered, and how.
func (n *Node) Pipeline(ctx context.Context, cmds ...[]any) (errs []error, err error) {
	if !n.spec.Kind.RESP {
		return nil, fmt.Errorf("cluster: %s is a %s node: Pipeline speaks Redis's protocol", n.Name, n.spec.Kind.Name)
	}
	n.fault("admin pipeline")
	c := n.admin()
	defer c.Close()
	p := c.Pipeline()
	replies := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		replies[i] = p.Do(ctx, args...)
	}
	_, _ = p.Exec(ctx)
	errs = make([]error, len(cmds))
	for i, r := range replies {
		errs[i] = r.Err()
		var fromServer redis.Error
		if errs[i] != nil && !errors.As(errs[i], &fromServer) && err == nil {
			err = errs[i]
		}
	}
	return errs, err
}

// InfoSection is one section of the node's INFO ("replication"), field
// by field, read straight from its port in one round trip: fields read
// together come from one moment (a save's progress and its status).
func (n *Node) InfoSection(ctx context.Context, section string) (map[string]string, error) {
	if !n.spec.Kind.RESP {
		return nil, fmt.Errorf("cluster: %s is a %s node: INFO is Redis's", n.Name, n.spec.Kind.Name)
	}
	c := n.admin()
	defer c.Close()
	info, err := c.InfoMap(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, fields := range info {
		maps.Copy(out, fields)
	}
	return out, nil
}

// ReplicaOf makes n a replica of master, replicating through its own link
// (peer "repl:<n>") so a nemesis can cut replication alone. It returns
// once the first sync is done.
func (n *Node) ReplicaOf(ctx context.Context, master *Node) error {
	l, err := master.Link(ReplicationPeer(n.Name))
	if err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(l.Addr())
	if _, err := n.Do(ctx, "REPLICAOF", host, port); err != nil {
		return fmt.Errorf("cluster: %s REPLICAOF %s: %w", n.Name, master.Name, err)
	}
	return awaitEach(ctx, []*Node{n}, 10*time.Second, n.Name+" to sync from "+master.Name, func(n *Node) bool {
		info, err := n.InfoSection(ctx, "replication")
		return err == nil && info["master_link_status"] == "up"
	})
}

// ReplicationPeer is the peer name of replica's link to its master.
func ReplicationPeer(replica string) string { return replicationPrefix + replica }

const replicationPrefix = "repl:"

// Promote turns a replica into a master (REPLICAOF NO ONE): promotion by
// hand, as an operator or a script would after the master died.
func (n *Node) Promote(ctx context.Context) error {
	if _, err := n.Do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		return fmt.Errorf("cluster: promote %s: %w", n.Name, err)
	}
	return nil
}

// Role is what the node says it is: "master", "slave" or "sentinel" for
// Redis, and what its kind's Role says for another ("leader",
// "follower").
func (n *Node) Role(ctx context.Context) (string, error) {
	if k := n.Kind(); !k.RESP {
		if k.Role == nil {
			return "", fmt.Errorf("cluster: %s: a %s node has no role", n.Name, k.Name)
		}
		return k.Role(ctx, n.Addr())
	}
	r, err := n.Do(ctx, "ROLE")
	if err != nil {
		return "", err
	}
	if a, ok := r.([]any); ok && len(a) > 0 {
		return fmt.Sprint(a[0]), nil
	}
	return "", fmt.Errorf("cluster: %s: odd ROLE reply %v", n.Name, r)
}

// Primary is the node clients treat as the master, switched by a promotion
// by hand. Clients dial through it, each through its own link to whichever
// node is primary now.
type Primary struct {
	mu   sync.Mutex
	node *Node
}

// NewPrimary starts with node as the master.
func NewPrimary(node *Node) *Primary { return &Primary{node: node} }

// Node is the current master.
func (p *Primary) Node() *Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node
}

// Promote makes replica the master and points every client's future
// connections at it. Connections to the old master stay as they are: they
// fail when it is dead, which is how a client learns of a failover.
func (p *Primary) Promote(ctx context.Context, replica *Node) error {
	if err := replica.Promote(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	p.node = replica
	p.mu.Unlock()
	return nil
}

// Client connects peer to whichever node is primary at dial time.
func (p *Primary) Client(peer string, o ClientOptions) *redis.Client {
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		l, err := p.Node().Link(peer)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, network, l.Addr())
	}
	return newClient("primary-of-"+peer, o, dial)
}
