package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// AwaitSentinelPromotion waits, at most within, until the sentinels name
// replica the master and the replica says it is one, and records that as
// the promotion, at the moment the harness saw it. Sentinel fails over on
// its own; the nemesis only asks who the master is, so the op is the run's
// proof that the failover it did not make happened. A promotion not seen
// in time is recorded as a failed promote and returned: the story the run
// tells did not happen.
func (n *Nemesis) AwaitSentinelPromotion(ctx context.Context, s *cluster.Sentinels, replica string, within time.Duration) error {
	nd, err := n.node(replica)
	if err != nil {
		return err
	}
	v := &history.Value{Target: replica + " (by sentinel)", Site: &history.Site{Node: replica}}
	deadline := time.Now().Add(within)
	for {
		if promoted(ctx, s, nd) {
			return record(n.rec, fault.Promote, v, nil)
		}
		if time.Now().After(deadline) {
			return record(n.rec, fault.Promote, v, func() error {
				return fmt.Errorf("nemesis: the sentinels did not promote %s within %s", replica, within)
			})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
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
