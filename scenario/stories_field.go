package scenario

import (
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Stories from the field: failures the users of Redis locks report in
// their libraries' trackers, each citing where. Their faults stand on the
// network and the nodes, as the reports tell them, never in a lock's code.
func fieldStories(add func(Scenario)) {
	add(lostReplyStory())
	add(evictionStory())
	add(waitReplicaRestartStory())
	add(misconfStory())
	add(interruptedAcquireStory())
}

var ghostSeen = func(why string) verdict.Expectation {
	return verdict.Expectation{Outcome: verdict.Safe, Show: []string{verdict.GhostKey}, Why: why}
}

// taking matches the commands that take a free key.
const taking = "SET NX|SETNX|GETSET|EVAL|EVALSHA"

func lostReplyStory() Scenario {
	return Scenario{
		Name:   "lost-reply",
		NotFor: notFor("loses the reply of a Redis SET on one client's link: the services' clients keep a session whose requests are retried or failed by the client library itself", serviceKinds...),
		Story: "Field (redlock-rb#76, redis-py#818): a lock is released, the waiting client's SET takes the key, and its reply is lost on the way back; " +
			"the client sees a timeout and reports not-acquired or unknown while the key blocks everyone until it expires, and for good when it has no expiry.",
		TTL: time.Second, ExactClients: 2,
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 3.5,
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			lossAsReentrant,
			waitsAsSetNXPX,
			leaveOut(local, "the control sends nothing whose reply could be lost"),
			leaveOut(not(oneNode), "the story loses one reply on the link to the one node: a lock on several takes its key on the others too"),
			timestampRace("once the ghost's timestamp has passed", "a ghost that blocks the others until its lease ends",
				"make test from nothing at 631cea8: lock-unsafe once in 229 pairs, the loser's timestamp 12 ms after the winner's grant"),
			leaveOut(connection, "no lock command's reply to lose: portalocker's release writes its UNSUBSCRIBE and never reads the reply, and its acquire takes the lock with a SUBSCRIBE whose confirmation its reading thread takes later"),
			expect(expirySeparate, verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{verdict.GhostKey, "ghost-hold"},
				Why: "the SETNX's reply was lost, so its EXPIRE was never sent: the key has no TTL and blocks every client for good (redis-py#818's lock without a timeout)"}),
			expect(retracts, verdict.Expectation{Outcome: verdict.Safe,
				Why: "redsync deletes its own key after a try that failed: the ghost lasts until that delete lands, usually once the link heals, once in ten runs under load at once, so only safety is asserted"}),
			expect(anyLock, ghostSeen(
				"the key outlives the client's belief by its lease: nobody holds the lock, nobody can take it, until the TTL (or the timestamp) runs out; then the others carry on")),
		},
		Requires: []fault.Evidence{{Op: fault.PartitionStart}, {Op: fault.Pause}},
		// The holder hears its release succeed and stops for 0.6 TTL (so it
		// cannot take the key back first); the next lock command the waiter
		// sends finds its link no longer carrying replies, so it takes the
		// key and its reply never comes: the waiter gives up after its read
		// timeout (0.5 s). The link heals when the holder wakes, and both
		// then meet the key the waiter took and never heard of. A command
		// like the acquire's first (LikeFirst): a waiter retrying can take
		// the key between the release landing and the trap arming, and a
		// lost reply to the step after (Symfony's second script, which sets
		// the lease) leaves a key that expires; the waiter then holds,
		// releases, and its next acquire's try is the one caught.
		Plan: Plan{arm(0.5, Trap{Command: &nemesis.Command{In: history.Release, Reply: true, Succeeded: true}, Client: "any", Pause: TTLs(0.6),
			Then: []Action{armed(Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SET NX|SETNX|EVAL|EVALSHA", LikeFirst: true}, Client: "other",
				Then: []Action{{Do: "cut", Client: "caught", Node: "n1", Direction: "downstream"}}})},
			Wake: []Action{{Do: "disarm"}, {Do: "heal"}}})},
	}
}

func evictionStory() Scenario {
	return Scenario{
		Name:   "eviction",
		NotFor: notFor("fills a Redis node's memory under its eviction policy; the services keep locks in a store that does not evict them (memcached's lock is told with its own server-crash)", serviceKinds...),
		Story: "Field (RedLock.net#101): the lock's Redis node also serves a cache, runs with maxmemory and volatile-lru, and fills up while a holder works: " +
			"the node evicts the only key it may, the lock's (it has a TTL), and another client takes the lock from under the holder.",
		// At a 2 s lease the waiters of a lock that retries on its own
		// clock (redis-py's 0.1 s sleep, redsync's 50 to 250 ms) get their
		// tries in before the holder stops and after the key is gone.
		TTL: 2 * time.Second, TimeLimitTTLs: 3, MinTimeLimitTTLs: 2.5,
		Topology: Topology{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"}},
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			lossRace,
			waitsAsSetNXPX,
			expect(local, verdict.Expectation{Outcome: verdict.Safe, Why: "the control: nothing of the lock lives in Redis"}),
			leaveOut(not(oneNode), "the story fills one node's memory: a lock on several keeps its key on the others"),
			expect(connection, verdict.Expectation{Outcome: verdict.Safe,
				Why: "no key to evict: portalocker's hold is the holder's subscription to the lock's channel, which maxmemory does not touch"}),
			expect(and(renewed, notified), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the key is evicted, but their waiters sleep until an unlock message or the TTL their last try read, so none tries again within the holder's 0.4 TTL: the holder finishes first (a longer hold would lose the lock)"}),
			expect(fenced, verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "two holders at once, but the fencing counter has no TTL, so it is not evicted: the new holder's token is higher and the store refuses the old holder's write"}),
			expect(clock(locks.ClientWall), verdict.Expectation{Outcome: verdict.Safe,
				Why: "its key has no TTL (the expiry is a timestamp in the value), so volatile-lru may not evict it: the node refuses writes instead"}),
			expect(anyLock, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the key is evicted within its lease, so the next client's SET NX succeeds while the holder still works; a watchdog cannot renew a key that is gone"}),
		},
		Requires: []fault.Evidence{{Op: fault.Evict}, {Op: fault.Pause}},
		// The holder stops 0.4 TTL before its write, well inside its lease;
		// the node fills and evicts a tenth of a TTL into the stop, once
		// the waiters that lost the key to the holder have read its TTL
		// (an eviction as the holder stops can meet a retry in flight,
		// which takes the key whatever the lock's waiters do).
		Plan: Plan{arm(0.5, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.4), Then: []Action{{Do: "evict", Node: "n1", Delay: TTLs(0.1)}}})},
	}
}

func waitReplicaRestartStory() Scenario {
	return Scenario{
		Name:   "wait-replica-restart",
		NotFor: notFor("a Redis master and its replica acknowledging a WAIT: the ensembles replicate by consensus (leader-failover), PostgreSQL and memcached run one server", serviceKinds...),
		Story: "Field (redisson#2669, #5965): Redisson's answer to a lock lost in a failover is WAIT for a replica's acknowledgement. Here the replica acknowledges the lock, " +
			"then, while the holder works, the master dies and the replica restarts (no persistence: its copy is gone) before it is promoted; the others lock on it.",
		TimeLimitTTLs: 4.5, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Rules: []Rule{
			controlOut,
			expect(waits, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "WAIT narrows the window to the replica's own memory and does not close it: an acknowledged write dies with a replica that restarts before it is promoted"}),
			expect(local, verdict.Expectation{Outcome: verdict.Safe, Why: "the control: nothing of the lock lives in Redis"}),
			leaveOut(worker, workersMissFailover),
			leaveOut(not(oneNode), "a lone master and its replica: a lock on several nodes has no one master to lose"),
			standsFor([]string{"set-nx-px"}, "the story is about WAIT's acknowledgement, beside a lease that does not ask for one; failover tells every lock's loss with its master",
				"fair", "getset", "reentrant", "reentrant-async", "reentrant-lost", "set-nx-px-del", "set-nx-px-fenced", "setnx-expire"),
			expect(expires, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "without WAIT the lock may not even have reached the replica; here it did, and is lost all the same"}),
			leaveOut(renewed, "a watchdog's lock promises no deadline to see broken; failover and sentinel-failover tell its loss with its master"),
		},
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.Restart}, {Op: fault.Promote}},
		Plan: Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.2),
			Then: []Action{{Do: "kill", Node: "primary"}, {Do: "kill", Node: "replica"}, {Do: "restart", Node: "replica"}, {Do: "promote", Node: "replica"}}})},
	}
}

func misconfStory() Scenario {
	return Scenario{
		Name:   "misconf",
		NotFor: notFor("a Redis node whose failed background save makes it refuse writes (MISCONF); the services' servers do not stop taking writes over a failed snapshot", serviceKinds...),
		Story: "Field (node-redlock#11): the lock's node fails a background save (a full or broken disk) just as a holder releases; with stop-writes-on-bgsave-error on, " +
			"it refuses every write, the release among them, for 1.5 TTLs until a save succeeds. Is the lock left held?",
		// Five TTLs: a worker process (redis-py's) whose op ended unknown
		// under MISCONF is replaced, and a Python worker takes 0.6 s to
		// start under load; at four the ones started after the save was
		// mended had too little time left to lock.
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 3.5,
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			lossAsReentrant,
			leaveOut(local, "the control keeps nothing on a node whose saves could fail"),
			leaveOut(not(oneNode), "the story fails one node's saves: a lock on several keeps its key on the others"),
			leaveOut(and(expirySeparate, installed), "its take and its expiry are two commands with PHP between them (Symfony's save() writes the key for its 300 s initialTtl, then refresh() sets the lease), so a take that lands just before the refusals begin keeps its 300 s key and blocks every client to the run's end, and one that does not leaves a ghost for a lease: a draw (misconf / symfony-predis deadlocked once in 515 pairs of a make run at 9fdc1b6, symfony-redis once in 518 at 50ddb1c; docs/stories.md, Findings, tells the 300 s key)"),
			timestampRace("once saves work again, past the ghost's lease", "a release refused", "make test at a2adf23: lock-unsafe once in 230 pairs"),
			expect(connection, verdict.Expectation{Outcome: verdict.Safe,
				Why: "MISCONF refuses writes, and portalocker writes nothing: SUBSCRIBE, PUBSUB NUMSUB and closing a connection all go through, so the lock works on and no key is left behind"}),
			expect(anyLock, ghostSeen(
				"the release is refused and says so (unknown); the key stays for the rest of its lease with nobody holding it, no one can lock meanwhile, and once saves work again the others carry on: held, but no longer than the lease")),
		},
		Requires: []fault.Evidence{{Op: fault.SaveFail}, {Op: fault.SaveMend}},
		// The save fails as the next release is about to leave; 1.5 TTLs
		// later, past the holder's lease, a save succeeds.
		Plan: Plan{arm(1, Trap{Command: &nemesis.Command{In: history.Release}, Client: "any",
			Then: []Action{{Do: "save-fail", Node: "n1"}, {Do: "save-mend", Node: "n1", Delay: TTLs(1.5)}}})},
	}
}

func interruptedAcquireStory() Scenario {
	return Scenario{
		Name:      "interrupted-acquire",
		NotFor:    notFor("gives up on a Redis lock command's caller as its reply arrives; the services' locks run as processes of their own, whose ops the harness does not host", serviceKinds...),
		InProcess: "its caller gives up inside the harness's own process, where the op's context lives; a worker process's op is its own",
		Story: "Field (redisson#7272, #2714, #4368): two clients; as one releases it freezes for 1.5 TTLs, so the other's next lock command meets a free key and takes it; " +
			"just as Redis answers, that caller gives up (its context is cancelled: a request's deadline, a shutdown, an interrupt) and hears only the cancellation, " +
			"while its process lives on. A lock whose commands run under the caller's context leaves the key for the rest of its lease; one that starts its " +
			"watchdog when Redis answers, whoever still listens, renews a key nobody holds for good.",
		ExactClients:  2,
		TimeLimitTTLs: 5.5, MinTimeLimitTTLs: 5.5,
		Rules: []Rule{
			controlOut,
			leaveOut(worker, "its caller gives up inside the harness's own process, where the op's context lives; a worker process's op is its own"),
			waitsAsSetNXPX,
			leaveOut(local, "the control sends no command whose caller could give up as it is answered"),
			leaveOut(not(oneNode), "the story cancels the caller as the command that took the free key is answered: a lock on several nodes takes its key in several commands"),
			expect(expirySeparate, verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{verdict.GhostKey, "ghost-hold"},
				Why: "the SETNX took the key and its caller gave up before the EXPIRE was sent: a key without a TTL blocks everyone for good"}),
			expect(detached, verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{verdict.GhostKey, "ghost-hold"},
				Why: "its script ran apart from the caller, and the answer started the watchdog after the caller had gone: the watchdog renews a key nobody holds every TTL/3 for as long as the process lives (redisson#7272)"}),
			expect(retracts, verdict.Expectation{Outcome: verdict.Safe,
				Why: "redsync deletes its own key after a try that failed, under a context of its own: the ghost lasts until that delete lands, so only safety is asserted"}),
			expect(anyLock, ghostSeen(
				"the command that took the key ran, and its caller heard only the cancellation: the lock reports the acquire unknown and starts nothing, so the key outlives every belief for the rest of its lease (getset: until its timestamp passes); then the others carry on")),
		},
		Requires: []fault.Evidence{{Op: fault.Cancel}, {Op: fault.Pause, In: history.Release}},
		// Acquire commands go out one after another, so the reply of the
		// next one sent after the release is the one that took the free
		// key: the cancel is armed as that command leaves, for its reply.
		// Armed at two TTLs: on a loaded machine a lock's cycle can take
		// a third of a TTL or more, and the story needs three attempts
		// answered before its fault.
		// The releaser sleeps past the ghost's lease (a TTL from the
		// cancel) by half a TTL, by which the other client, trying all
		// along, has taken the key: woken as the ghost lapses, it would
		// race the other for it, which getset loses by overwriting the
		// winner's timestamp (its summary's flaw) in some runs and not in
		// others.
		Plan: Plan{arm(2, Trap{Command: &nemesis.Command{In: history.Release, Reply: true, Succeeded: true}, Client: "any", Pause: TTLs(1.5),
			Then: []Action{armed(Trap{Command: &nemesis.Command{In: history.Acquire, Match: taking}, Client: "other",
				Then: []Action{armed(Trap{Command: &nemesis.Command{In: history.Acquire, Match: taking, Reply: true}, Client: "caught", Cancel: true})}})}})},
	}
}
