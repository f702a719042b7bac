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
// called to (cluster.RedisCluster.MigrateStart).
func (n *Nemesis) MigrateStart(ctx context.Context, rc *cluster.RedisCluster, key, to string) error {
	from, dst, slot, err := n.migration(ctx, rc, key, to)
	if err != nil {
		return err
	}
	v := &history.Value{Target: fmt.Sprintf("slot %d %s→%s", slot, from.Name, to), Site: &history.Site{Node: from.Name}}
	return record(n.rec, fault.MigrateStart, v, func() error { return rc.MigrateStart(ctx, slot, from, dst) })
}

// MigrateEnd moves what is left of key's slot on its master to the master
// called to and hands the slot over (cluster.RedisCluster.MigrateFinish).
func (n *Nemesis) MigrateEnd(ctx context.Context, rc *cluster.RedisCluster, key, to string) error {
	from, dst, slot, err := n.migration(ctx, rc, key, to)
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

// migration is what a move of key's slot to the node called to acts on.
func (n *Nemesis) migration(ctx context.Context, rc *cluster.RedisCluster, key, to string) (from, dst *cluster.Node, slot int, err error) {
	if dst, err = n.node(to); err != nil {
		return nil, nil, 0, err
	}
	if slot, err = rc.Slot(ctx, key); err != nil {
		return nil, nil, 0, err
	}
	from, err = rc.SlotOwner(ctx, slot)
	return from, dst, slot, err
}
