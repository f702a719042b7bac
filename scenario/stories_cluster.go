package scenario

import (
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// clusterMinTTL is the shortest lease cluster-failover is told with. The
// cluster fails a master over on its own, in seconds: the node timeout
// (500 ms) before the master is flagged failing, the replica's election
// delay (500 ms and up to 500 ms more), its vote, and the clients'
// reload of the slot map (every 250 ms). From the kill to the promotion
// seen by every node it took 1.6 to 1.8 s.
const clusterMinTTL = 3 * time.Second

// inCluster leaves out the locks a Redis Cluster story cannot judge:
// redis-py's workers dial one address each and cannot route by slot, and
// set-nx-px-wait's WAIT has no key, so go-redis's cluster pipeline sends it
// to a node of its choosing, not to the master that took the SET.
var inCluster = []Rule{
	leaveOut(worker, "its workers dial one address each and cannot route by slot"),
	leaveOut(waits, "its WAIT has no key, so go-redis's cluster pipeline sends it to a node of its choosing, not to the master that took the SET"),
}

// Redis Cluster: the lock key lives on the master of its hash slot, and
// every client routes by slot through go-redis's cluster client, each
// through its own links.
func clusterStories(add func(Scenario)) {
	add(clusterFailoverStory())
	add(slotMigrationStory())
}

var clusterOnly = notFor("a Redis Cluster's own failover and resharding: leader-failover tells the ensembles' failover", serviceKinds...)

func clusterFailoverStory() Scenario {
	return Scenario{
		Name:   "cluster-failover",
		NotFor: clusterOnly,
		Story: "F1 in a Redis Cluster (the issue: \"a master fails over, the cluster promotes its replica, while a holder works\"): three masters share the slots, each with a replica; " +
			"replication from the lock key's master to its replica is cut; a client locks; while it works the master is killed, the other masters agree it failed " +
			"and its replica wins their vote, and the other clients, told the new owner of the slot, lock on it within the first client's lease.",
		TTL:           clusterMinTTL,
		MinTTL:        clusterMinTTL,
		TimeLimitTTLs: 1.3, MinTimeLimitTTLs: 1.3,
		Topology: Topology{Cluster: true},
		Rules: failoverRules(failoverWhys{
			lease:    "replication in a cluster is asynchronous as anywhere: the promoted replica never had the key, and the others lock on it about 2 s after the kill, within the first client's 3 s lease",
			watchdog: "the lock dies with its master and the promoted replica never had it: a waiter's next try takes it while the holder works, and the holder's watchdog finds nothing to renew",
			fenced:   "the fencing counter shares the key's slot, and so its master: the promoted replica counts again from where replication was cut, and only the store's own check keeps the register intact",
			control:  "the control: a mutex between goroutines keeps nothing in Redis",
		}, inCluster...),
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Promote}, {Op: fault.PartitionStart}},
		// The replica replicates through the master's announced link;
		// blackholed, the replica still believes its link up, so the
		// cluster promotes it as it would a replica that lags without
		// knowing it.
		// The trap arms at 0.3 TTL (0.9 s): every command of a cycle
		// crosses the cluster client, and replies late by tens of ms, well
		// inside a 3 s lease's lateness limits, stretch a cycle to a tenth
		// of a TTL; the story needs three attempts before the kill.
		Plan: Plan{cutReplication("slot-master", "slot-replica"), failedOver(0.3, 0, "slot-master", "slot-replica")},
	}
}

func slotMigrationStory() Scenario {
	return Scenario{
		Name:   "slot-migration",
		NotFor: clusterOnly,
		Story: "Resharding (redis/redis#7116, redisson#612, redis/redis#9526): the lock key's slot moves between masters twice while clients lock and release: once in one step " +
			"while a client holds the key (the key is MIGRATEd with its time to live, and its release follows MOVED), once slowly, so that for 2 TTLs the old " +
			"master sends every client asking for the absent key to the new one (ASK), where a lock of one key is taken and released before the slot is handed over, " +
			"and a script of several keys, some moved and some not, is refused with TRYAGAIN.",
		// The slow move ends at 4 TTLs; the time limit leaves the hand-over
		// (SETSLOT on every master) most of a TTL and more: cut off by the
		// time limit it is an error, and on a loaded machine one took over
		// 200 ms.
		TimeLimitTTLs: 5.5, MinTimeLimitTTLs: 5,
		Topology: Topology{Cluster: true},
		Rules: append(append([]Rule{controlOut, detachedAsReentrant, lossAsReentrant}, inCluster...),
			leaveOut(not(oneNode), "a single-node lock is put in the cluster, on the master of its key's slot: a lock on several nodes has no place there"),
			expect(local, verdict.Expectation{Outcome: verdict.Safe, Hide: []string{verdict.SlotBusy}, Why: "the control: a mutex between goroutines keeps nothing in Redis"}),
			expect(fenced, verdict.Expectation{Outcome: verdict.Safe, Show: []string{verdict.SlotBusy},
				Why: "the acquire script names the key and its fencing counter: the counter stays on the old master until the slot is handed over, so every acquire of an absent key is refused with TRYAGAIN; safe, and without a lock for the rest of the slow move"}),
			expect(and(otherKeys, queued), verdict.Expectation{Outcome: verdict.Safe, Show: []string{verdict.SlotBusy},
				Why: "its lock and unlock scripts name the queue, the timeouts and the channel beside the key: while the slot moves, the old master has some and not others, and every lock and unlock is refused with TRYAGAIN until the slot is handed over; nobody holds the lock then, so it stays safe"}),
			expect(otherKeys, verdict.Expectation{Outcome: verdict.Safe, Show: []string{verdict.SlotBusy},
				Why: "its lock script names the one key and follows ASK, but its unlock names the pub/sub channel beside the key: while the slot moves the new master takes a request of several keys only with all of them there, so every release is refused with TRYAGAIN (redisson#612) and the key stays until its lease runs out; safe, and slower"}),
			expect(anyLock, verdict.Expectation{Outcome: verdict.Safe, Hide: []string{verdict.SlotBusy},
				Why: "every command of the lock names the one key: the old master serves it while it has it, sends the client to the new one (ASK) once it has not, and the client follows, hundreds of times in the slow move, never refused"}),
		),
		Requires: []fault.Evidence{{Op: fault.MigrateStart}, {Op: fault.MigrateEnd}},
		// The slot goes to the next master, then to the one after. The
		// first move is made while the holder waits at its write, and it
		// must leave the holder inside its lease, as the story tells (a
		// tenth of a TTL to write and release): on a loaded machine the
		// move took 585 ms against a 500 ms lease, the key lapsed under
		// the holder and its owner-blind release took a successor's.
		Plan: Plan{
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", InLease: TTLs(0.1),
				Then: []Action{{Do: "migrate-start", Node: "slot-master+1"}, {Do: "migrate-end", Node: "slot-master+1"}}}),
			step(2, Action{Do: "migrate-start", Node: "slot-master+2"}),
			step(4, Action{Do: "migrate-end", Node: "slot-master+2"}),
		},
	}
}
