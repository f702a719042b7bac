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

// RestartMember starts a killed member of an ensemble again at once. Its
// op completes when the member listens on its port (its own start), not
// when it serves: a member serves only once a quorum has formed, which
// may wait for members started after it. So the op is judged against the
// kind's Recovery, a start and a sync, loosely. The channel says how the
// start ended: nil once the member leads or follows; a start that fails
// after the member listened (not cut short by ctx) is recorded as a
// failed restart then.
func (n *Nemesis) RestartMember(ctx context.Context, node string) (<-chan error, error) {
	nd, err := n.node(node)
	if err != nil {
		return nil, err
	}
	started, served := make(chan error, 1), make(chan error, 1)
	v := &history.Value{Target: node, Usual: int64(nd.Kind().Recovery), Site: &history.Site{Node: node}}
	go func() { started <- nd.Start(ctx) }()
	err = record(n.rec, fault.Restart, v, func() error {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !nd.Listens(ctx) {
			select {
			case err := <-started:
				started <- err
				return err
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	go func() {
		err := <-started
		if CutShort(ctx, err) != nil {
			_ = record(n.rec, fault.Restart, &history.Value{Target: node, Site: v.Site}, func() error { return err })
		}
		served <- err
	}()
	return served, nil
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
	// The node's memory is read once, before the op: its maxmemory sizes
	// the op's usual, which the invoke records, and its use the fill.
	used, limit, merr := memory(ctx, nd)
	v := &history.Value{Target: node, Usual: int64(evictUsual(limit)), Site: &history.Site{Node: node}}
	return record(n.rec, fault.Evict, v, func() error {
		before, err := evicted(ctx, nd)
		if err != nil {
			return err
		}
		if merr != nil {
			return fmt.Errorf("nemesis: fill %s: %w", node, merr)
		}
		filled, err := fill(ctx, nd, used, limit)
		if len(filled) > 0 {
			if _, derr := nd.Do(ctx, append([]any{"DEL"}, filled...)...); derr != nil && err == nil {
				err = fmt.Errorf("free: %w", derr)
			}
		}
		if err != nil {
			return fmt.Errorf("nemesis: fill %s: %w", node, err)
		}
		after, err := evicted(ctx, nd)
		if err != nil {
			return err
		}
		v.Target = fmt.Sprintf("%s (%d keys of 64 KiB written, %d evicted)", node, len(filled), after-before)
		return nil
	})
}

// fillKey is the size of a filler key's value; fillBatch how many such
// keys under the node's maxmemory go out in one round trip (4 MiB).
const (
	fillKey   = 64 << 10
	fillBatch = 64
)

// evictUsual is how long an eviction usually takes on a node of
// maxmemory limit, its fill and its deletes, so that the lateness meter
// reads a slower one as the machine's: a story tells its eviction inside
// a holder's pause, and a fill stretched past most of the pause leaves
// the waiters no time to take the key. 100 ms for each 4 MiB of the
// node's maxmemory (a 4 MiB node's took 16 to 53 ms here idle, 564 ms
// beside make test's unit tests); a node whose maxmemory cannot be read
// (limit 0) gets 100 ms, and its fill says why.
func evictUsual(limit int) time.Duration {
	const per4MiB = 100 * time.Millisecond
	return max(per4MiB, time.Duration(limit)*per4MiB/(4<<20))
}

// fill writes 64 KiB keys of no expiry to nd, which used before of its
// maxmemory limit, until the node refuses one (OOM: its policy has
// evicted all it may), and returns the keys it took, those of a fill
// that failed midway too. The writes that fit under the node's
// maxmemory, which evict nothing, go out fillBatch at a time, counted
// by what the first key cost the node (its allocator rounds a value up);
// the rest one at a time, stopping at the first refusal, since a write
// past it would evict the key a new holder has just set, a second
// eviction the story does not tell.
func fill(ctx context.Context, nd *cluster.Node, before, limit int) ([]any, error) {
	payload := strings.Repeat("x", fillKey)
	set := func(i int) []any { return []any{"SET", fmt.Sprintf("locktorture:filler:%d", i), payload} }
	var filled []any
	// took writes cmds and keeps the keys written; full says one was refused.
	took := func(cmds ...[]any) (full bool, err error) {
		errs, err := nd.Pipeline(ctx, cmds...)
		for i, cerr := range errs {
			switch {
			case cerr == nil:
				filled = append(filled, cmds[i][1])
			case strings.HasPrefix(cerr.Error(), "OOM"):
				full = true
			case err == nil:
				err = cerr
			}
		}
		return full, err
	}
	if full, err := took(set(0)); full || err != nil {
		return filled, err
	}
	after, _, err := memory(ctx, nd)
	if err != nil {
		return filled, err
	}
	// Three quarters of the way to the limit: one key's cost read beside
	// the clients' own writes is rough, and the pipeline's buffer takes
	// the node's memory too while it is read.
	n := 1
	if cost := max(after-before, fillKey); limit > after {
		n += min((limit-after)/cost*3/4, 4096)
	}
	// In round trips of fillBatch keys: a write of most of a node's
	// maxmemory at once can outlast the client's write timeout on a
	// loaded machine, and the fill would fail rather than run late.
	for i := 1; i < n; i += fillBatch {
		var under [][]any
		for j := i; j < min(i+fillBatch, n); j++ {
			under = append(under, set(j))
		}
		if full, err := took(under...); full || err != nil {
			return filled, err
		}
	}
	for i := n; i < n+4096; i++ {
		if full, err := took(set(i)); full || err != nil {
			return filled, err
		}
	}
	return filled, fmt.Errorf("4096 keys of 64 KiB written and none refused")
}

// memory is the node's used_memory and its maxmemory, which it must have:
// a node without one never evicts.
func memory(ctx context.Context, nd *cluster.Node) (used, limit int, err error) {
	mem, err := nd.InfoSection(ctx, "memory")
	if err != nil {
		return 0, 0, err
	}
	used, err1 := strconv.Atoi(mem["used_memory"])
	limit, err2 := strconv.Atoi(mem["maxmemory"])
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("INFO memory: used_memory %q, maxmemory %q", mem["used_memory"], mem["maxmemory"])
	case limit == 0:
		return 0, 0, fmt.Errorf("the node runs with no maxmemory, so it evicts nothing")
	}
	return used, limit, nil
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
