package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
)

// failoverActions are the faults of who serves the key: a replica
// promoted, by hand or by Sentinel or the cluster, and a Redis Cluster
// slot moved. promote and the migrate steps are named as their ops;
// await-promotion records the promote it saw (or a starved note), not one
// it made.
var failoverActions = []ActionKind{
	{Name: "promote", Ops: ops(fault.Promote), Needs: []string{"node"},
		Help:    "make a replica the master by hand and point the clients at it (topology replicated)",
		compile: compilePromote,
		undrawn: "needs a replica (topology replicated), which the random story's topology has not"},
	{Name: "await-promotion", Ops: ops(fault.Promote, fault.Starved), Needs: []string{"node"}, Takes: []string{"for"},
		Help:    "wait (up to 10 s) for Sentinel or the cluster to promote a replica on its own; a promotion later than for TTLs, where given, did not happen as told (the run is starved)",
		compile: compileAwaitPromotion,
		undrawn: "needs Sentinel or a Redis Cluster, which the random story's topology has not"},
	{Name: "migrate-start", Ops: ops(fault.MigrateStart), Needs: []string{"node"},
		Help:    "begin moving the lock key's slot to a master (topology cluster)",
		compile: migrate("begin moving the key's slot to %s", (*nemesis.Nemesis).MigrateStart),
		undrawn: "needs a Redis Cluster (topology cluster), which the random story's topology has not"},
	{Name: "migrate-end", Ops: ops(fault.MigrateEnd), Needs: []string{"node"},
		Help:    "hand the lock key's slot over to a master (topology cluster)",
		compile: migrate("hand the key's slot over to %s", (*nemesis.Nemesis).MigrateEnd)},
}

// promotionWait bounds how long await-promotion waits: a failover told
// in seconds (Sentinel's, the cluster's) that has not happened in ten did
// not happen.
const promotionWait = 10 * time.Second

// compilePromote compiles a promotion by hand.
func compilePromote(c *compiler, path string, a Action) (deed, string, error) {
	node, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	if c.e.Primary == nil {
		return nil, "", fmt.Errorf("%s: promote needs a replica promoted by hand (topology replicated, without sentinel)", path)
	}
	return func(ctx context.Context, _ int) error { return c.e.Nemesis.Promote(ctx, c.e.Primary, node) }, "promote " + node, nil
}

// compileAwaitPromotion compiles a wait for Sentinel or the cluster to
// promote node, and the bound it must keep.
func compileAwaitPromotion(c *compiler, path string, a Action) (deed, string, error) {
	node, err := c.node(path+".node", a.Node)
	if err != nil {
		return nil, "", err
	}
	var await func(ctx context.Context) error
	var name string
	switch {
	case c.e.Sentinels != nil:
		await = func(ctx context.Context) error {
			return c.e.Nemesis.AwaitSentinelPromotion(ctx, c.e.Sentinels, node, promotionWait)
		}
		name = "wait for Sentinel to promote " + node
	case c.e.Cluster != nil:
		await = func(ctx context.Context) error {
			return c.e.Nemesis.AwaitClusterPromotion(ctx, c.e.Cluster, node, promotionWait)
		}
		name = "wait for the cluster to promote " + node
	default:
		return nil, "", fmt.Errorf("%s: await-promotion needs Sentinel or a Redis Cluster in the topology", path)
	}
	bound := a.For.in(c.e)
	return func(ctx context.Context, _ int) error {
		start := time.Now()
		if err := await(ctx); err != nil {
			return err
		}
		if took := time.Since(start); bound > 0 && took > bound {
			return c.e.Nemesis.Late(node, took, bound)
		}
		return nil
	}, name, nil
}

// migrate is a step of moving the lock key's slot to a master.
func migrate(format string, do func(*nemesis.Nemesis, context.Context, *cluster.RedisCluster, string, string) error) func(*compiler, string, Action) (deed, string, error) {
	return func(c *compiler, path string, a Action) (deed, string, error) {
		if c.e.Cluster == nil {
			return nil, "", fmt.Errorf("%s: moving a slot needs a Redis Cluster in the topology", path)
		}
		node, err := c.node(path+".node", a.Node)
		if err != nil {
			return nil, "", err
		}
		return func(ctx context.Context, _ int) error { return do(c.e.Nemesis, ctx, c.e.Cluster, c.e.Key, node) }, fmt.Sprintf(format, node), nil
	}
}
