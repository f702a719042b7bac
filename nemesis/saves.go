package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// FailSaves makes node's next background save fail, as a full or broken
// disk does: the node is given a save point (writes are refused only on a
// node that has one), its working directory is moved for one BGSAVE to
// /proc, where no file can be made, and back. From then on the node
// answers every write, a lock's release and renewal included, with a
// MISCONF error (stop-writes-on-bgsave-error, on by default) until a save
// succeeds (MendSaves). The save point is an hour, so the node never
// retries the save by itself within a run. The node must run with
// protected configs enabled (cluster.ServerSpec.RedisArgs does).
func (n *Nemesis) FailSaves(ctx context.Context, node string) error {
	nd, err := n.node(node)
	if err != nil {
		return err
	}
	v := &history.Value{Target: node, Site: &history.Site{Node: node}}
	return record(n.rec, fault.SaveFail, v, func() error {
		dir, err := configGet(ctx, nd, "dir")
		if err != nil {
			return err
		}
		if _, err := nd.Do(ctx, "CONFIG", "SET", "save", "3600 1"); err != nil {
			return fmt.Errorf("nemesis: %s: give it a save point: %w", node, err)
		}
		if _, err := nd.Do(ctx, "CONFIG", "SET", "dir", "/proc"); err != nil {
			return fmt.Errorf("nemesis: %s: move its dir: %w", node, err)
		}
		saved := save(ctx, nd, "err")
		if _, err := nd.Do(ctx, "CONFIG", "SET", "dir", dir); err != nil {
			return fmt.Errorf("nemesis: %s: move its dir back to %s: %w", node, dir, err)
		}
		return saved
	})
}

// MendSaves runs a background save on node that succeeds: it takes writes
// again.
func (n *Nemesis) MendSaves(ctx context.Context, node string) error {
	nd, err := n.node(node)
	if err != nil {
		return err
	}
	v := &history.Value{Target: node, Site: &history.Site{Node: node}}
	return record(n.rec, fault.SaveMend, v, func() error { return save(ctx, nd, "ok") })
}

// save runs BGSAVE on nd and waits until it is over with the status want
// ("ok" or "err").
func save(ctx context.Context, nd *cluster.Node, want string) error {
	if _, err := nd.Do(ctx, "BGSAVE"); err != nil {
		return fmt.Errorf("nemesis: %s: BGSAVE: %w", nd.Name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := nd.InfoSection(ctx, "persistence")
		if err != nil {
			return fmt.Errorf("nemesis: %s: %w", nd.Name, err)
		}
		if info["rdb_bgsave_in_progress"] == "0" {
			if status := info["rdb_last_bgsave_status"]; status != want {
				return fmt.Errorf("nemesis: %s: BGSAVE ended %s, want %s", nd.Name, status, want)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nemesis: %s: BGSAVE still running after 10s", nd.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// configGet is one parameter of nd's CONFIG, as RESP2 (a list) or RESP3
// (a map) carries it.
func configGet(ctx context.Context, nd *cluster.Node, param string) (string, error) {
	r, err := nd.Do(ctx, "CONFIG", "GET", param)
	if err != nil {
		return "", fmt.Errorf("nemesis: %s: CONFIG GET %s: %w", nd.Name, param, err)
	}
	switch r := r.(type) {
	case map[any]any:
		if v, ok := r[param].(string); ok {
			return v, nil
		}
	case []any:
		if len(r) == 2 {
			if v, ok := r[1].(string); ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("nemesis: %s: CONFIG GET %s: no value in %v", nd.Name, param, r)
}
