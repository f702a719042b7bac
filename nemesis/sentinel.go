package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Late notes that the servers' own failover of replica came later than
// the story allows (a split vote of the sentinels, retried after twice
// the failover timeout): the run did not happen as told, so it is judged
// starved and run again, not vacuous for want of traffic after it.
func (n *Nemesis) Late(replica string, took, bound time.Duration) error {
	return record(n.rec, fault.Starved, &history.Value{Target: fmt.Sprintf(
		"the promotion of %s came %s after the wait began, and the story allows %s", replica, took.Round(time.Millisecond), bound),
		Duration: int64(took - bound), Site: &history.Site{Node: replica}}, nil)
}

// AwaitSentinelPromotion waits, at most within, until the sentinels name
// replica the master and the replica says it is one, and records that as
// the promotion, at the moment the harness saw it. Sentinel fails over on
// its own; the nemesis only asks who the master is, so the op is the run's
// proof that the failover it did not make happened. A promotion not seen
// in time is recorded as a failed promote and returned: the story the run
// tells did not happen.
func (n *Nemesis) AwaitSentinelPromotion(ctx context.Context, s *cluster.Sentinels, replica string, within time.Duration) error {
	return n.awaitPromotion(ctx, replica, "sentinel", within, func(nd *cluster.Node) bool { return promoted(ctx, s, nd) })
}

// awaitPromotion polls seen every 20 ms, at most within, for the
// promotion of replica that something other than the nemesis makes (by
// names it), and records it as a promote op when seen, or as a failed one
// when not.
func (n *Nemesis) awaitPromotion(ctx context.Context, replica, by string, within time.Duration, seen func(*cluster.Node) bool) error {
	nd, err := n.node(replica)
	if err != nil {
		return err
	}
	v := &history.Value{Target: replica + " (by " + by + ")", Site: &history.Site{Node: replica}}
	deadline := time.Now().Add(within)
	for !seen(nd) {
		if time.Now().After(deadline) {
			return record(n.rec, fault.Promote, v, func() error {
				return fmt.Errorf("nemesis: %s did not promote %s within %s", by, replica, within)
			})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return record(n.rec, fault.Promote, v, nil)
}

// promoted says whether any sentinel names nd the master and nd says it
// is one. Any, not the first: the leader names the promoted replica before
// the others hear of it, and a client may be asking the leader.
func promoted(ctx context.Context, s *cluster.Sentinels, nd *cluster.Node) bool {
	for _, sn := range s.Nodes {
		if m, err := s.MasterBy(ctx, sn); err == nil && m == nd {
			role, err := nd.Role(ctx)
			return err == nil && role == "master"
		}
	}
	return false
}
