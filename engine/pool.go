package engine

import (
	"context"
	"fmt"
	"time"
)

// PoolKey is the topology a run of p starts, as its key in Options.Pool,
// or "" where its servers are never reused. Everything that shapes the
// servers started is in it: the backend and its Redis binary, the lock
// nodes' kind, count, clock, persistence and arguments (the store is the
// same in every run).
//
// Reused are only a lock's servers of a kind with a reset
// (cluster.Kind.Reset) in a topology of plain nodes: not a Redis lock's,
// whose nodes start in a tenth of a second and whose clients may change
// what no reset undoes (CONFIG SET, scripts' and clients' state), nor a
// Redis Cluster, a replica or Sentinel, which a story starts to fault.
func (p Resolved) PoolKey() string {
	t, k := p.Scenario.Topology, p.kind()
	if t.Cluster || t.Replicated || t.Sentinel || k.RESP || k.Reset == nil {
		return ""
	}
	return fmt.Sprintf("%s %q %s×%d clock=%t persistence=%q args=%q", p.Options.Backend, p.Options.Server, k.Name, p.Lock.Nodes, t.Clock,
		t.Persistence, t.Args)
}

// reuseTopology starts the run on servers the pool keeps for its
// topology, if it keeps any that still answer, and says whether it did.
func (r *runner) reuseTopology(ctx context.Context) (bool, error) {
	if r.o.Pool == nil || r.poolKey == "" {
		return false, nil
	}
	cl, from := r.o.Pool.Take(ctx, r.poolKey)
	if cl == nil {
		return false, nil
	}
	r.cl, r.res.Reused = cl, from
	r.markLogs()
	r.newEnv()
	r.env.Nodes = lockNodeNames(r.info.Nodes)
	r.store = cl.Node("store")
	r.logf("on the servers %s left, reset", from)
	return true, r.connectMeter(ctx)
}

// settleWithin bounds the wait for the schedule's actions put off
// (scenario.Env.Settle) before the servers are stopped or handed on.
const settleWithin = 10 * time.Second

// release hands the run's servers to the pool for the next run of their
// topology, reset, or stops them: those of a run cut short or failed
// (failed: its clients' or its schedule's error; the gate's, read once
// the actions put off are done, since one of them may fail meanwhile),
// whose schedule still acts, or whose nodes a fault touched
// (cluster.Cluster.Reset says why), are stopped. Either way it first waits for the actions the schedule
// put off, unless the run was interrupted: one under way as the run
// ended (a fill's last batch of writes) then ends on its servers, cut
// short by the run's end, rather than on their close, which it would
// report as its own failure.
func (r *runner) release(ctx context.Context, failed error) {
	calm := ctx.Err() == nil && r.settled()
	r.copyLogs(nil)
	if r.o.Pool == nil || r.poolKey == "" || !calm || failed != nil || r.env.Gate.Err() != nil {
		r.cl.Close()
		return
	}
	if err := r.o.Pool.Put(ctx, r.poolKey, r.s.Name+"/"+r.o.Lock, r.cl); err != nil {
		r.logf("servers stopped, not kept: %v", err)
		return
	}
	r.parked = true
	r.copyLogs(r.cl.LogEnds())
}

// settled waits for the actions the schedule put off to end, for at most
// settleWithin: an action whose delay was up as the run ended may still
// act on a node, which must then be marked faulted before the pool looks,
// and must not meet its servers' close.
func (r *runner) settled() bool {
	done := make(chan struct{})
	go func() {
		r.env.Settle()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(settleWithin):
		r.logf("servers stopped under an action the schedule put off, still under way %s after the run ended", settleWithin)
		return false
	}
}

// closeCluster stops the run's servers on exit, unless the pool keeps
// them.
func (r *runner) closeCluster() {
	if r.cl != nil && !r.parked {
		if !r.logsCopied {
			r.copyLogs(nil)
		}
		r.cl.Close()
	}
}

// lockNodeNames are the names of a lock's n nodes: n1, n2, ...
func lockNodeNames(n int) []string {
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	return names
}
