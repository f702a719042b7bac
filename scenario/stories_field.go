package scenario

import (
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Stories from the field: failures the users of Redis locks report in
// their libraries' trackers, each citing where. Their faults stand on the
// network and the nodes, as the reports tell them, never in a lock's code.
func fieldStories(add func(Scenario)) {
	ghostSeen := func(why string) verdict.Expectation {
		return verdict.Expectation{Outcome: verdict.Safe, Show: []string{verdict.GhostKey}, Why: why}
	}
	add(Scenario{
		Name:   "lost-reply",
		NotFor: notFor(serviceKinds, "loses the reply of a Redis SET on one client's link: the services' clients keep a session whose requests are retried or failed by the client library itself"),
		Story: "Field (redlock-rb#76, redis-py#818): a lock is released, the waiting client's SET takes the key, and its reply is lost on the way back; " +
			"the client sees a timeout and reports not-acquired or unknown while the key blocks everyone until it expires, and for good when it has no expiry.",
		TTL: time.Second, ExactClients: 2,
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 3.5,
		Expect: expect(
			all([]string{"set-nx-px", "set-nx-px-fenced", "set-nx-px-del", "getset", "reentrant", "fair", "redislock-refresh", "redislock", "redis-py"}), ghostSeen(
				"the key outlives the client's belief by its lease: nobody holds the lock, nobody can take it, until the TTL (or the timestamp) runs out; then the others carry on"),
			"redsync", verdict.Expectation{Outcome: verdict.Safe,
				Why: "redsync deletes its own key after a try that failed: the ghost lasts until that delete lands, usually once the link heals, once in ten runs under load at once, so only safety is asserted"},
			"setnx-expire", verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{verdict.GhostKey, "ghost-hold"},
				Why: "the SETNX's reply was lost, so its EXPIRE was never sent: the key has no TTL and blocks every client for good (redis-py#818's lock without a timeout)"},
		),
		Requires: []fault.Evidence{{Op: fault.PartitionStart}, {Op: fault.Pause}},
		// The holder hears its release succeed and stops for 0.6 TTL (so it
		// cannot take the key back first); the next lock command the waiter
		// sends finds its link no longer carrying replies, so it takes the
		// key and its reply never comes: the waiter gives up after its read
		// timeout (0.5 s). The link heals when the holder wakes, and both
		// then meet the key the waiter took and never heard of.
		Plan: Plan{arm(0.5, Trap{Command: &nemesis.Command{In: history.Release, Reply: true, Succeeded: true}, Client: "any", Pause: TTLs(0.6),
			Then: []Action{armed(Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SET NX|SETNX|EVAL|EVALSHA"}, Client: "other",
				Then: []Action{{Do: "cut", Client: "caught", Node: "n1", Direction: "downstream"}}})},
			Wake: []Action{{Do: "disarm"}, {Do: "heal"}}})},
	})

	add(Scenario{
		Name:   "eviction",
		NotFor: notFor(serviceKinds, "fills a Redis node's memory under its eviction policy; the services keep locks in a store that does not evict them (memcached's lock is told with its own server-crash)"),
		Story: "Field (RedLock.net#101): the lock's Redis node also serves a cache, runs with maxmemory and volatile-lru, and fills up while a holder works: " +
			"the node evicts the only key it may, the lock's (it has a TTL), and another client takes the lock from under the holder.",
		TTL: time.Second, TimeLimitTTLs: 3, MinTimeLimitTTLs: 2.5,
		Topology: Topology{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"}},
		Expect: expect(
			[]string{"reentrant", "fair"}, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the key is evicted, but their waiters sleep until an unlock message or the TTL their last try read, so none tries again within the holder's 0.4 TTL: the holder finishes first (a longer hold would lose the lock)"},
			all([]string{"set-nx-px", "set-nx-px-del", "setnx-expire", "redislock-refresh"}, libraryLeases), verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the key is evicted within its lease, so the next client's SET NX succeeds while the holder still works; a watchdog cannot renew a key that is gone"},
			"set-nx-px-fenced", verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "two holders at once, but the fencing counter has no TTL, so it is not evicted: the new holder's token is higher and the store refuses the old holder's write"},
			"getset", verdict.Expectation{Outcome: verdict.Safe,
				Why: "its key has no TTL (the expiry is a timestamp in the value), so volatile-lru may not evict it: the node refuses writes instead"},
			"mutex", verdict.Expectation{Outcome: verdict.Safe, Why: "the control: nothing of the lock lives in Redis"},
		),
		Requires: []fault.Evidence{{Op: fault.Evict}, {Op: fault.Pause}},
		// The holder stops 0.4 TTL before its write, well inside its lease;
		// the node fills and evicts as it stops.
		Plan: Plan{arm(0.5, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.4), Then: []Action{{Do: "evict", Node: "n1"}}})},
	})

	add(Scenario{
		Name:   "wait-replica-restart",
		NotFor: notFor(serviceKinds, "a Redis master and its replica acknowledging a WAIT: the ensembles replicate by consensus (leader-failover), PostgreSQL and memcached run one server"),
		Story: "Field (redisson#2669, #5965): Redisson's answer to a lock lost in a failover is WAIT for a replica's acknowledgement. Here the replica acknowledges the lock, " +
			"then, while the holder works, the master dies and the replica restarts (no persistence: its copy is gone) before it is promoted; the others lock on it.",
		TimeLimitTTLs: 4.5, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Expect: expect(
			"set-nx-px-wait", verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "WAIT narrows the window to the replica's own memory and does not close it: an acknowledged write dies with a replica that restarts before it is promoted"},
			[]string{"set-nx-px", "redsync", "redislock"}, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "without WAIT the lock may not even have reached the replica; here it did, and is lost all the same"},
			"mutex", verdict.Expectation{Outcome: verdict.Safe, Why: "the control: nothing of the lock lives in Redis"},
		),
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Restart}, {Op: fault.Promote}},
		Plan: Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.2),
			Then: []Action{{Do: "kill", Node: "primary"}, {Do: "kill", Node: "replica"}, {Do: "restart", Node: "replica"}, {Do: "promote", Node: "replica"}}})},
	})

	add(Scenario{
		Name:   "misconf",
		NotFor: notFor(serviceKinds, "a Redis node whose failed background save makes it refuse writes (MISCONF); the services' servers do not stop taking writes over a failed snapshot"),
		Story: "Field (node-redlock#11): the lock's node fails a background save (a full or broken disk) just as a holder releases; with stop-writes-on-bgsave-error on, " +
			"it refuses every write, the release among them, for 1.5 TTLs until a save succeeds. Is the lock left held?",
		// Five TTLs: a worker process (redis-py's) whose op ended unknown
		// under MISCONF is replaced, and a Python worker takes 0.6 s to
		// start under load; at four the ones started after the save was
		// mended had too little time left to lock.
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 3.5,
		Expect: expect(
			all([]string{"set-nx-px", "set-nx-px-fenced", "set-nx-px-del", "set-nx-px-wait", "setnx-expire", "getset", "reentrant", "fair", "redislock-refresh"}, libraryLeases), ghostSeen(
				"the release is refused and says so (unknown); the key stays for the rest of its lease (getset: until the next client reads its timestamp) with nobody holding it, no one can lock meanwhile, and once saves work again the others carry on: held, but no longer than the lease"),
		),
		Requires: []fault.Evidence{{Op: fault.SaveFail}, {Op: fault.SaveMend}},
		// The save fails as the next release is about to leave; 1.5 TTLs
		// later, past the holder's lease, a save succeeds.
		Plan: Plan{arm(1, Trap{Command: &nemesis.Command{In: history.Release}, Client: "any",
			Then: []Action{{Do: "fail-saves", Node: "n1"}, {Do: "mend-saves", Node: "n1", Delay: TTLs(1.5)}}})},
	})
	// taking matches the commands that take a free key.
	const taking = "SET NX|SETNX|GETSET|EVAL|EVALSHA"
	add(Scenario{
		Name:      "interrupted-acquire",
		NotFor:    notFor(serviceKinds, "gives up on a Redis lock command's caller as its reply arrives; the services' locks run as processes of their own, whose ops the harness does not host"),
		InProcess: "its caller gives up inside the harness's own process, where the op's context lives; a worker process's op is its own",
		Story: "Field (redisson#7272, #2714, #4368): two clients; as one releases it freezes for a TTL, so the other's next lock command meets a free key and takes it; " +
			"just as Redis answers, that caller gives up (its context is cancelled: a request's deadline, a shutdown, an interrupt) and hears only the cancellation, " +
			"while its process lives on. A lock whose commands run under the caller's context leaves the key for the rest of its lease; one that starts its " +
			"watchdog when Redis answers, whoever still listens, renews a key nobody holds for good.",
		ExactClients:  2,
		TimeLimitTTLs: 4.5, MinTimeLimitTTLs: 4.5,
		Expect: expect(
			[]string{"set-nx-px", "set-nx-px-fenced", "set-nx-px-del", "getset", "reentrant", "reentrant-lost", "fair", "redislock", "redislock-refresh"}, ghostSeen(
				"the command that took the key ran, and its caller heard only the cancellation: the lock reports the acquire unknown and starts nothing, so the key outlives every belief for the rest of its lease (getset: until its timestamp passes); then the others carry on"),
			"redsync", verdict.Expectation{Outcome: verdict.Safe,
				Why: "redsync deletes its own key after a try that failed, under a context of its own: the ghost lasts until that delete lands, so only safety is asserted"},
			"setnx-expire", verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{verdict.GhostKey, "ghost-hold"},
				Why: "the SETNX took the key and its caller gave up before the EXPIRE was sent: a key without a TTL blocks everyone for good"},
			"reentrant-async", verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{verdict.GhostKey, "ghost-hold"},
				Why: "its script ran apart from the caller, and the answer started the watchdog after the caller had gone: the watchdog renews a key nobody holds every TTL/3 for as long as the process lives (redisson#7272)"},
		),
		Requires: []fault.Evidence{{Op: fault.Cancel}, {Op: fault.Pause, In: history.Release}},
		// Acquire commands go out one after another, so the reply of the
		// next one sent after the release is the one that took the free
		// key: the cancel is armed as that command leaves, for its reply.
		Plan: Plan{arm(1, Trap{Command: &nemesis.Command{In: history.Release, Reply: true, Succeeded: true}, Client: "any", Pause: TTLs(1),
			Then: []Action{armed(Trap{Command: &nemesis.Command{In: history.Acquire, Match: taking}, Client: "other",
				Then: []Action{armed(Trap{Command: &nemesis.Command{In: history.Acquire, Match: taking, Reply: true}, Client: "caught", Cancel: true})}})}})},
	})
}
