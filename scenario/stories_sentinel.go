package scenario

import (
	"time"

	"github.com/locktorture/locktorture/fault"
)

// sentinelMinTTL is the shortest lease sentinel-failover is told with.
// Sentinel's failover is its own, in seconds, not in TTLs: from the kill
// to the promoted replica it took 1.5 to 1.75 s in 110 of the story's runs
// and up to 3.2 s in a bare test killing the master within a second of
// the sentinels meeting (down-after, the sentinels' vote, and the
// promoted replica's next INFO, which Sentinel polls once a second). The
// story is a lock lost while its lease still runs, so the lease must
// outlast the failover.
const sentinelMinTTL = 3 * time.Second

// Replication failed over by Sentinel itself, the way applications run
// it: F1 without the harness's hand on the promotion.
func sentinelStories(add func(Scenario)) {
	add(sentinelFailoverStory())
}

func sentinelFailoverStory() Scenario {
	return Scenario{
		Name:   "sentinel-failover",
		NotFor: notFor("a Redis master and its replica failed over by redis-sentinel: leader-failover tells the ensembles' own failover, server-crash a single server's death", serviceKinds...),
		Story: "F1 by Sentinel (the issue: \"automatic failover through Sentinel as a story: the master is cut off and killed, Sentinel promotes the replica, " +
			"clients follow the new master through Sentinel\"): replication to the replica is cut; a client locks on the master; while it works in its " +
			"critical section the master is killed, three redis-sentinels agree it is down and promote the replica, and the others, asking Sentinel for " +
			"the master, lock on it within the first client's lease.",
		// The shortest lease it is told with (sentinelMinTTL) outlasts
		// every failover measured but the split votes, which are starved.
		// The others keep starting cycles until the holder's lease ends
		// (the kill at 0.1 TTL, plus one), the last moment a lock taken
		// on the new master can break its promise; not longer, as the
		// story costs its time limit in every matrix run.
		TTL:           sentinelMinTTL,
		MinTTL:        sentinelMinTTL,
		TimeLimitTTLs: 1.1, MinTimeLimitTTLs: 1.1,
		Topology: Topology{Replicated: true, Sentinel: true},
		Rules: failoverRules(failoverWhys{
			lease:    "asynchronous replication loses the lock with the master, and Sentinel promotes the replica that never had it: the others, told the new master by Sentinel, get the lock about 1.6 s after the kill, within the first client's 3 s lease",
			watchdog: "the lock (a hash, or redislock's key) dies with the master and the promoted replica never had it: a waiter's next try, on the master Sentinel names, takes the lock while the holder works, and the holder's watchdog finds nothing there to renew; a watchdog promises no deadline, so there is no promise to see broken",
			fenced:   "the fencing counter is lost with the master too: the promoted replica counts again from where replication was cut, so the store rejects each write whose token is not above the last it took (the new holders' first ones, or the woken holder's), and only the store's own check keeps the register intact",
			control:  "the control: a mutex between goroutines keeps nothing in Redis, so a failover cannot lose it",
		}, waitsCutOff),
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Promote}, {Op: fault.PartitionStart}},
		// The cut is a blackhole: the replica's link to the master looks up
		// until the master dies, and goes down only then (the link closes
		// the replica's connection when the killed master's end closes, a
		// few ms after the kill). So the replica has been cut off from the
		// master, as Sentinel sees it, only since the kill, well inside how
		// long Sentinel lets a replica be disconnected and still be
		// promoted (ten down-after periods plus the time since the master
		// was judged down): Sentinel promotes it, as it would a replica
		// that lags behind without knowing it.
		Plan: Plan{
			cutReplication("primary", "replica"),
			// A split vote makes the sentinels wait two failover timeouts,
			// 4 s, before they vote again (once in 110 runs): such a
			// failover leaves the holder too little of its lease, and the
			// run is starved.
			failedOver(0.1, 1, "primary", "replica"),
		},
	}
}
