package scenario

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/locktorture/locktorture/cluster"
)

// NodeRoles are the names a plan may give a node by its role, resolved in
// each run, and what each names.
var NodeRoles = map[string]string{
	"primary":      "the lock's first node, the master of a replicated pair",
	"replica":      "the replica of a replicated pair",
	"slot-master":  "in a Redis Cluster, the master of the lock key's slot (slot-master+1: the master after it)",
	"slot-replica": "in a Redis Cluster, the replica of the lock key's master",
	"middle":       "of an odd number of lock nodes, the one in the middle (n3 of five): the node two majorities share",
	"below-middle": "in a cut, every lock node before the middle one (n1, n2 of five)",
	"above-middle": "in a cut, every lock node after the middle one (n4, n5 of five)",
	"all":          "in a cut, every lock node",
}

// peers resolves a cut's from: "client REF", "every client" or
// "replication of NODE".
func (c *compiler) peers(path, ref string) (func(caught int) ([]string, error), error) {
	if ref == "every client" {
		return func(int) ([]string, error) { return c.e.Clients, nil }, nil
	}
	if r, ok := strings.CutPrefix(ref, "client "); ok {
		who, err := c.client(path, r, false)
		if err != nil {
			return nil, err
		}
		return func(caught int) ([]string, error) {
			i, err := who(caught)
			if err != nil {
				return nil, err
			}
			return []string{c.e.Clients[i]}, nil
		}, nil
	}
	if r, ok := strings.CutPrefix(ref, "replication of "); ok {
		node, err := c.node(path, r)
		if err != nil {
			return nil, err
		}
		peer := cluster.ReplicationPeer(node)
		return func(int) ([]string, error) { return []string{peer}, nil }, nil
	}
	return nil, fmt.Errorf(`%s: %q is no peer ("client N", "client caught", "every client", "replication of NODE")`, path, ref)
}

// nodes resolves a cut's node reference, which may name several: all, or
// the lock nodes either side of the middle one.
func (c *compiler) nodes(path, ref string) ([]string, error) {
	n := c.e.Nodes
	switch ref {
	case "all":
		return n, nil
	case "below-middle", "above-middle":
		if len(n)%2 == 0 {
			return nil, fmt.Errorf("%s: %s, but the lock has %d nodes, no middle one", path, ref, len(n))
		}
		if ref == "below-middle" {
			return n[:len(n)/2], nil
		}
		return n[len(n)/2+1:], nil
	}
	one, err := c.node(path, ref)
	return []string{one}, err
}

// node resolves a node reference: a node's name, or its role.
func (c *compiler) node(path, ref string) (string, error) {
	e := c.e
	switch {
	case ref == "primary":
		if len(e.Nodes) == 0 {
			return "", fmt.Errorf("%s: primary, but the lock has no node", path)
		}
		return e.Nodes[0], nil
	case ref == "middle":
		if len(e.Nodes)%2 == 0 {
			return "", fmt.Errorf("%s: middle, but the lock has %d nodes, no middle one", path, len(e.Nodes))
		}
		return e.Nodes[len(e.Nodes)/2], nil
	case ref == "replica":
		if e.Replica == "" {
			return "", fmt.Errorf("%s: replica, but the topology has no replica", path)
		}
		return e.Replica, nil
	case strings.HasPrefix(ref, "slot-"):
		if e.Cluster == nil {
			return "", fmt.Errorf("%s: %s, but the topology has no Redis Cluster", path, ref)
		}
		master, replica, err := e.Cluster.Owner(context.Background(), e.Key)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if ref == "slot-replica" {
			return replica.Name, nil
		}
		rest, ok := strings.CutPrefix(ref, "slot-master")
		step := 0
		if ok && rest != "" {
			step, err = strconv.Atoi(strings.TrimPrefix(rest, "+"))
			ok = err == nil && strings.HasPrefix(rest, "+") && step > 0
		}
		i := slices.Index(e.Cluster.Masters, master)
		if !ok || i < 0 {
			return "", fmt.Errorf("%s: %q is no role (slot-master, slot-master+N, slot-replica)", path, ref)
		}
		return e.Cluster.Masters[(i+step)%len(e.Cluster.Masters)].Name, nil
	case e.Nemesis.Node(ref) != nil:
		return ref, nil
	}
	return "", fmt.Errorf("%s: no node %q in this run (its nodes: %s; or a role: primary, replica, middle, slot-master, slot-replica)", path, ref, strings.Join(e.Nodes, ", "))
}
