package scenario

import (
	"slices"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// The locks a lone master's failover judges (failover, sentinel-failover):
// the leases that promise a deadline, and the locks that promise none (a
// watchdog renews them). redis-py runs as worker processes, which follow
// a failover through an address that reaches the master of the moment.
var (
	failoverLeases    = []string{"set-nx-px", "set-nx-px-del", "setnx-expire", "getset", "redsync", "redislock", "redis-py"}
	failoverWatchdogs = []string{"reentrant", "fair", "redislock-refresh"}
)

// withoutWorkers is locks less redis-py, whose clients are worker
// processes: the kill under failover's 500 ms lease breaks every waiter's
// connection mid-command, the harness replaces a process whose op ended
// unknown, and a Python worker takes 0.6 s to start under load, so the
// others lock only after the holder's lease has ended, or not at all
// before it wakes: whether the lock is seen broken is a race. It is
// judged in sentinel-failover, whose 3 s lease leaves a new worker time.
func withoutWorkers(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(l string) bool { return l == "redis-py" })
}

// cutReplication is a failover story's opening: the replica stops hearing
// from the master (its link blackholed, not closed), so a lock taken next
// lives on the master alone.
func cutReplication(master, replica string) Step {
	return step(0, Action{Do: "partition", Cuts: []Cut{{From: "replication of " + replica, Nodes: []string{master}}}})
}

// failedOver is the trap of a failover the servers make on their own
// (Sentinel, the cluster): the holder waits at its write while master is
// killed and the replica is seen promoted (it is not paused: its
// watchdog goes on), then stalls, whole, so the others lock on the new
// master and write first and its write lands on theirs. A lease's holder
// stalls until just inside its lease, so the others lock within it; a
// failover that left less than that did not happen as told, and the run
// is recorded as starved and run again, not judged. A watchdog lock's
// holder has no deadline and stalls 1.1 TTLs: a hash lock's waiter sleeps
// until an unlock message, which no dead master sends, or until the TTL
// its last try read runs out (at most one), and must wake inside the
// stall. A promotion more than a TTL after the kill (a split vote of the
// sentinels, retried after twice their failover timeout: 5.9 s where 1.5
// to 1.8 s is usual) leaves the others no traffic inside the run, so it
// too is recorded as starved, for every lock.
func failedOver(master, replica string) Step {
	return arm(0.1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.1), InLease: TTLs(0.05), MinPause: TTLs(0.05),
		Then: []Action{{Do: "kill", Node: master}, {Do: "await-promotion", Node: replica, For: TTLs(1)}}})
}

// Replication: a lock written to a master that dies before it replicates
// (F1).
func failoverStories(add func(Scenario)) {
	add(Scenario{
		Name:   "failover",
		NotFor: notFor(serviceKinds, "a Redis master and its replica, promoted by hand: leader-failover tells the ensembles' own failover, server-crash a single server's death"),
		Story: "F1: replication to the replica is cut; a client locks on the master; while it works in its critical section " +
			"the master is killed and the replica promoted by hand; the others lock on the new master.",
		TimeLimitTTLs: 4.5, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Expect: expect(
			withoutWorkers(failoverLeases), verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "asynchronous replication loses the lock with the master: a second client gets it while the first is within its validity"},
			failoverWatchdogs, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the lock hash dies with the master; the promoted replica never had it"},
			"set-nx-px-fenced", verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the fencing counter is lost with the master too: the new master's tokens start again below the old ones, so the store rejects every new holder's write, and only the store's own check keeps it safe"},
			"mutex", verdict.Expectation{Outcome: verdict.Safe, Why: "the control: a mutex between goroutines keeps nothing in Redis, so a failover cannot lose it"},
		),
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Promote}, {Op: fault.PartitionStart}},
		Plan: Plan{
			cutReplication("primary", "replica"),
			// The holder stalls 1.2 TTLs: a queued waiter of a hash lock
			// (reentrant, fair) sleeps until the holder's TTL runs out, as
			// no unlock message comes from a dead master, and must wake
			// inside the stall. At 0.6 TTL it did only when its last try
			// happened to be early enough.
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.2),
				Then: []Action{{Do: "kill", Node: "primary"}, {Do: "promote", Node: "replica"}}}),
		},
	})

	// The master dies 0.25 TTL after the holder locked, and the replica
	// is promoted just after: a lock that reached the replica by then
	// survives, one still in the delayed stream is lost. The holder stalls
	// until 0.2 TTL before its lease ends, so it writes while it holds the
	// lock either way, and the others lock before that only where the lock
	// was lost; a holder caught with less than 0.3 TTL of stall left could
	// not see the kill, and the run is starved.
	add(Scenario{
		Name:   "failover-lag",
		NotFor: notFor(serviceKinds, "a Redis master and its replica, promoted by hand: leader-failover tells the ensembles' own failover"),
		Story: "F1 with a replica that lags instead of one cut off: replication runs 1 TTL late (by default; -sweep lag varies it); " +
			"a client locks, the master is killed 0.25 TTL later and the replica promoted by hand; the others lock on the new master if the lock had not reached it.",
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Expect: expect(
			"set-nx-px", verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "the lock was still in the replication stream when the master died: the promoted replica never had it, and a second client gets it while the first is within its validity"},
			"set-nx-px-fenced", verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the fencing counter's increment was in the lagging stream too: the new master's tokens start again below the holder's, and only the store's own check keeps it safe"},
		),
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Promote}},
		Params: []Param{{Name: "lag", Unit: "TTLs", Default: 1, Min: 0, Max: 2, Threshold: 0.25,
			Help: "how late the master's writes reach its replica"}},
		Plan: Plan{
			step(0, Action{Do: "lag", Node: "primary", For: ParamNum("lag")}),
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.1), InLease: TTLs(0.2), MinPause: TTLs(0.3),
				Then: []Action{{Do: "kill", Node: "primary", Delay: TTLs(0.25)}, {Do: "promote", Node: "replica", Delay: TTLs(0.27)}}}),
		},
	})
}
