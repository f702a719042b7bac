package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// PauseNode stops node's process with SIGSTOP: it keeps its keys and its
// port, answers nothing, and its keys' TTLs keep running on the wall clock.
func (n *Nemesis) PauseNode(node string) error {
	return n.onNode(fault.PauseNode, node, (*cluster.Node).Pause)
}

// ResumeNode continues a paused node with SIGCONT.
func (n *Nemesis) ResumeNode(node string) error {
	return n.onNode(fault.ResumeNode, node, (*cluster.Node).Resume)
}

// KillNode is kill -9 on node's process.
func (n *Nemesis) KillNode(node string) error {
	return n.onNode(fault.Kill, node, (*cluster.Node).Kill)
}

// PowerLossNode is kill -9 plus the loss of what the disk had not synced:
// for appendfsync everysec, the last second of the AOF.
func (n *Nemesis) PowerLossNode(node string) error {
	return n.onNode(fault.PowerLoss, node, (*cluster.Node).PowerLoss)
}

// RestartNode starts a killed node again after delay, on the same port and
// data dir. The op is invoked when asked and completes when the node is
// back, so its span less the delay is the restart's own work.
func (n *Nemesis) RestartNode(ctx context.Context, node string, delay time.Duration) error {
	nd, err := n.node(node)
	if err != nil {
		return err
	}
	v := &history.Value{Target: node, Duration: int64(delay), Usual: int64(nd.Kind().Recovery), Site: &history.Site{Node: node}}
	return record(n.rec, fault.Restart, v, func() error { return nd.Restart(ctx, delay) })
}

// Promote makes replica the master by hand (REPLICAOF NO ONE) and points
// the clients that dial through primary at it.
func (n *Nemesis) Promote(ctx context.Context, primary *cluster.Primary, replica string) error {
	return record(n.rec, fault.Promote, &history.Value{Target: replica, Site: &history.Site{Node: replica}}, func() error {
		nd, err := n.node(replica)
		if err != nil {
			return err
		}
		return primary.Promote(ctx, nd)
	})
}

// Evict fills node's memory with keys of no expiry until it refuses a
// write (out of memory: its policy has evicted all it may), then deletes
// them: the memory pressure a cache sharing the lock's node puts on it
// (RedLock.net#101). The node must run with a maxmemory. The op's target
// says how many keys the node evicted, read from its own counter.
func (n *Nemesis) Evict(ctx context.Context, node string) error {
	nd, err := n.node(node)
	if err != nil {
		return err
	}
	v := &history.Value{Target: node, Site: &history.Site{Node: node}}
	return record(n.rec, fault.Evict, v, func() error {
		before, err := evicted(ctx, nd)
		if err != nil {
			return err
		}
		filled, err := fill(ctx, nd)
		if err != nil {
			return fmt.Errorf("nemesis: fill %s: %w", node, err)
		}
		if len(filled) > 0 {
			if _, err := nd.Do(ctx, append([]any{"DEL"}, filled...)...); err != nil {
				return fmt.Errorf("nemesis: free %s: %w", node, err)
			}
		}
		after, err := evicted(ctx, nd)
		if err != nil {
			return err
		}
		v.Target = fmt.Sprintf("%s (%d keys of 64 KiB written, %d evicted)", node, len(filled), after-before)
		return nil
	})
}

// fillBatch is how many 64 KiB writes go out in one round trip: 2 MiB,
// half of the eviction story's maxmemory, so a fill takes a round trip or
// three, not one a key, and the holder it stops waits on no more.
const fillBatch = 32

// fill writes 64 KiB keys of no expiry to nd, a batch at a time, until the
// node refuses one (OOM: its policy has evicted all it may), and returns
// the keys it took.
func fill(ctx context.Context, nd *cluster.Node) ([]any, error) {
	payload := strings.Repeat("x", 64<<10)
	var filled []any
	for next := 0; next < 4096; next += fillBatch {
		cmds := make([][]any, fillBatch)
		for i := range cmds {
			cmds[i] = []any{"SET", fmt.Sprintf("locktorture:filler:%d", next+i), payload}
		}
		errs, err := nd.Pipeline(ctx, cmds...)
		if err != nil {
			return filled, err
		}
		full := false
		for i, err := range errs {
			switch {
			case err == nil:
				filled = append(filled, cmds[i][1])
			case strings.HasPrefix(err.Error(), "OOM"):
				full = true
			default:
				return filled, err
			}
		}
		if full {
			return filled, nil
		}
	}
	return filled, nil
}

// evicted is the node's count of keys it evicted.
func evicted(ctx context.Context, nd *cluster.Node) (int, error) {
	info, err := nd.InfoSection(ctx, "stats")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(info["evicted_keys"])
}

func (n *Nemesis) onNode(f fault.Op, node string, act func(*cluster.Node) error) error {
	return record(n.rec, f, &history.Value{Target: node, Site: &history.Site{Node: node}}, func() error {
		nd, err := n.node(node)
		if err != nil {
			return err
		}
		return act(nd)
	})
}
