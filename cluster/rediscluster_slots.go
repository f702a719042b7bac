package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

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

// Owner is the node that serves key's slot as master now (SlotOwner), and
// that master's replica partner (the node it was formed with). It is how a
// story finds whom to kill.
func (rc *RedisCluster) Owner(ctx context.Context, key string) (master, partner *Node, err error) {
	slot, err := rc.Slot(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if master, err = rc.SlotOwner(ctx, slot); err != nil {
		return nil, nil, err
	}
	return master, rc.Partner(master), nil
}

// SlotOwner is the node that serves slot as master now, by the view of the
// first live node that answers.
func (rc *RedisCluster) SlotOwner(ctx context.Context, slot int) (*Node, error) {
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
				return nil, fmt.Errorf("cluster: %s names %v:%v master of slot %d, no node of the cluster", n.Name, m[0], m[1], slot)
			}
			return owner, nil
		}
	}
	return nil, fmt.Errorf("cluster: no node names a master of slot %d", slot)
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
