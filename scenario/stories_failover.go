package scenario

import (
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// workersMissFailover is why a lone master's failover under a 500 ms
// lease leaves out the locks whose clients are worker processes.
const workersMissFailover = "the kill under a 500 ms lease breaks every waiter's connection mid-command, the harness replaces a process whose op ended unknown, " +
	"and a new worker must start and connect first (a spawned Python worker took 0.6 s under load), so the others lock only after the holder's lease has ended, or not at all before it wakes: " +
	"whether the lock is seen broken is a race; sentinel-failover's 3 s lease leaves a new worker time"

// failoverRules judge a failover of the lock's lone master: leases that
// promise a deadline and see it broken, watchdogs that promise none, the
// fenced lock whose counter is lost too, and the control. The locks it
// leaves out are left out by the rules before them (without).
func failoverRules(why failoverWhys, without ...Rule) []Rule {
	rules := append([]Rule{controlOut, detachedAsReentrant, lossRace}, without...)
	return append(rules,
		expect(local, verdict.Expectation{Outcome: verdict.Safe, Why: why.control}),
		leaveOut(not(oneNode), "a lone master's failover: a lock on several nodes has no one master to lose"),
		leaveOut(connection, "its hold is a connection to the master (portalocker's subscription), which the master's death closes, with no key for replication to lose; the holder's library tells it at once, and whether it looks before the others lock on the promoted replica is a race between its thread and the harness"),
		expect(fenced, verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected}, Why: why.fenced}),
		expect(expires, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"}, Why: why.lease}),
		expect(renewed, verdict.Expectation{Outcome: verdict.Unsafe, Why: why.watchdog}),
	)
}

// failoverWhys are a failover story's arguments for what each kind of
// lock shows in it.
type failoverWhys struct{ lease, watchdog, fenced, control string }

// byHand are failover's arguments, a replica promoted by hand.
var byHand = failoverWhys{
	lease:    "asynchronous replication loses the lock with the master: a second client gets it while the first is within its validity",
	watchdog: "the lock hash dies with the master; the promoted replica never had it",
	fenced:   "the fencing counter is lost with the master too: the new master's tokens start again below the old ones, so the store rejects every new holder's write, and only the store's own check keeps it safe",
	control:  "the control: a mutex between goroutines keeps nothing in Redis, so a failover cannot lose it",
}

// waitsCutOff is why a failover whose replication is cut leaves WAIT out.
var waitsCutOff = leaveOut(waits, "with replication cut no replica acknowledges its WAIT, so it gives every lock up; wait-replica-restart tells its failover")

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
//
// It arms at the at-th TTL: late enough for the three attempts a story
// needs answered before its fault. With outlast, the pause goes on, up to
// that many TTLs more, until another client has written: where the others
// come back as new worker processes (retired with unknown acquires at the
// kill), a library's worker on a loaded machine took up to the whole pause
// after the promotion to start (tooz's import alone 2.5 s), and its first
// write then came after the woken holder's.
func failedOver(at, outlast float64, master, replica string) Step {
	return arm(at, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.1), InLease: TTLs(0.05), MinPause: TTLs(0.05), Outlast: TTLs(outlast),
		Then: []Action{{Do: "kill", Node: master}, {Do: "await-promotion", Node: replica, For: TTLs(1)}}})
}

// Replication: a lock written to a master that dies before it replicates
// (F1).
func failoverStories(add func(Scenario)) {
	add(failoverStory())
	add(failoverLagStory())
}

func failoverStory() Scenario {
	return Scenario{
		Name:   "failover",
		NotFor: notFor("a Redis master and its replica, promoted by hand: leader-failover tells the ensembles' own failover, server-crash a single server's death", serviceKinds...),
		Story: "F1: replication to the replica is cut; a client locks on the master; while it works in its critical section " +
			"the master is killed and the replica promoted by hand; the others lock on the new master.",
		TimeLimitTTLs: 4.5, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Rules:    failoverRules(byHand, waitsCutOff, leaveOut(worker, workersMissFailover)),
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
	}
}

// The master dies 0.25 TTL after the holder locked, and the replica
// is promoted just after: a lock that reached the replica by then
// survives, one still in the delayed stream is lost. The holder stalls
// until 0.2 TTL before its lease ends, so it writes while it holds the
// lock either way, and the others lock and write before that only where
// the lock was lost. They need the stall to outlast the promotion by
// more than the lateness meter lets a timer run late (0.2 TTL of the
// default 500 ms lease) and their own few round trips: a holder caught
// with less than 0.6 TTL of stall left (its acquire and read slow) would
// wake before they wrote, its write first, and the lost lock would read
// lock-unsafe with the register intact; the run is starved instead.
func failoverLagStory() Scenario {
	return Scenario{
		Name:   "failover-lag",
		NotFor: notFor("a Redis master and its replica, promoted by hand: leader-failover tells the ensembles' own failover", serviceKinds...),
		Story: "F1 with a replica that lags instead of one cut off: replication runs 1 TTL late (by default; -sweep lag varies it); " +
			"a client locks, the master is killed 0.25 TTL later and the replica promoted by hand; the others lock on the new master if the lock had not reached it.",
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Rules: []Rule{
			expect(lock("set-nx-px"), verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "the lock was still in the replication stream when the master died: the promoted replica never had it, and a second client gets it while the first is within its validity"}),
			expect(lock("set-nx-px-fenced"), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the fencing counter's increment was in the lagging stream too: the new master's tokens start again below the holder's, and only the store's own check keeps it safe"}),
			leaveOut(anyLock, "the story measures where replication lag starts to lose a lock, on the reference lock with and without fencing; failover and sentinel-failover judge every lock's loss with its master"),
		},
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Promote}},
		Params: []Param{{Name: "lag", Unit: "TTLs", Default: 1, Min: 0, Max: 2, Threshold: 0.25,
			Help: "how late the master's writes reach its replica"}},
		Plan: Plan{
			step(0, Action{Do: "lag", Node: "primary", For: ParamNum("lag")}),
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.1), InLease: TTLs(0.2), MinPause: TTLs(0.6),
				Then: []Action{{Do: "kill", Node: "primary", Delay: TTLs(0.25)}, {Do: "promote", Node: "replica", Delay: TTLs(0.27)}}}),
		},
	}
}
