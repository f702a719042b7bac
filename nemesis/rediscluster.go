package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// AwaitClusterPromotion waits, at most within, until every live node of
// the Redis Cluster names replica a master serving slots, and records that
// as the promotion, at the moment the harness saw it. The cluster fails
// over on its own; as with Sentinel, the op is the run's proof that the
// failover the nemesis did not make happened, and one not seen in time is
// recorded as a failed promote and returned.
func (n *Nemesis) AwaitClusterPromotion(ctx context.Context, rc *cluster.RedisCluster, replica string, within time.Duration) error {
	return n.awaitPromotion(ctx, replica, "the cluster", within, func(nd *cluster.Node) bool { return rc.Promoted(ctx, nd) })
}

// MigrateStart begins moving key's slot from its master to the master
// called to (cluster.RedisCluster.MigrateStart). A move of the slot still
// under way (started, its MigrateEnd not returned) is waited for first,
// so the new move starts from the master that one left the slot on: a
// plan's second move, timed for an idle machine, does not begin from
// the old master while a loaded machine still hands the first one over
// (which left the cluster refusing the keys, BUSYKEY, in make test).
func (n *Nemesis) MigrateStart(ctx context.Context, rc *cluster.RedisCluster, key, to string) error {
	dst, slot, err := n.migration(ctx, rc, key, to)
	if err != nil {
		return err
	}
	if err := n.beginMove(ctx, slot); err != nil {
		return err
	}
	from, err := rc.SlotOwner(ctx, slot)
	if err == nil {
		v := &history.Value{Target: fmt.Sprintf("slot %d %s→%s", slot, from.Name, to), Site: &history.Site{Node: from.Name}}
		err = record(n.rec, fault.MigrateStart, v, func() error { return rc.MigrateStart(ctx, slot, from, dst) })
	}
	if err != nil {
		// No move is under way for a MigrateEnd to end.
		n.endMove(slot)
	}
	return err
}

// MigrateEnd moves what is left of key's slot on its master to the master
// called to and hands the slot over (cluster.RedisCluster.MigrateFinish).
// It ends the slot's move under way, whatever its outcome.
func (n *Nemesis) MigrateEnd(ctx context.Context, rc *cluster.RedisCluster, key, to string) error {
	dst, slot, err := n.migration(ctx, rc, key, to)
	if err != nil {
		return err
	}
	defer n.endMove(slot)
	from, err := rc.SlotOwner(ctx, slot)
	if err != nil {
		return err
	}
	v := &history.Value{Site: &history.Site{Node: from.Name}}
	return record(n.rec, fault.MigrateEnd, v, func() error {
		moved, err := rc.MigrateFinish(ctx, slot, from, dst)
		v.Target = fmt.Sprintf("slot %d %s→%s, %d key(s) moved", slot, from.Name, to, moved)
		return err
	})
}

// migration is the node called to and key's slot, which a move acts on.
func (n *Nemesis) migration(ctx context.Context, rc *cluster.RedisCluster, key, to string) (dst *cluster.Node, slot int, err error) {
	if dst, err = n.node(to); err != nil {
		return nil, 0, err
	}
	slot, err = rc.Slot(ctx, key)
	return dst, slot, err
}

// beginMove waits until no move of slot is under way (or ctx ends), and
// marks one under way.
func (n *Nemesis) beginMove(ctx context.Context, slot int) error {
	for {
		n.mu.Lock()
		moving, ok := n.moves[slot]
		if !ok {
			n.moves[slot] = make(chan struct{})
		}
		n.mu.Unlock()
		if !ok {
			return nil
		}
		select {
		case <-moving:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// endMove ends the move of slot under way, if any.
func (n *Nemesis) endMove(slot int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if moving, ok := n.moves[slot]; ok {
		close(moving)
		delete(n.moves, slot)
	}
}
