package scenario

import (
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// The seed articles' stories about what clients do wrong or suffer: a crash
// mid-protocol (S1), skewed client clocks (S2), releases that hit someone
// else's lock (S3, and a pause inside a release), watchdogs (S4) and queue
// order (S5). Every fault here stands on the clients' connections or in the
// workload, never in the lock's code.
func clientStories(add func(Scenario)) {
	add(setnxCrashStory())
	add(getsetSkewStory())
	add(unsafeReleaseStory())
	add(pausedReleaseStory())
	add(watchdogStory())
	add(watchdogStallStory())
	add(fairOrderStory())
	add(deadWaiterStory())
}

func setnxCrashStory() Scenario {
	return Scenario{
		Name:          "setnx-crash",
		NotFor:        notFor("a crash between SETNX and EXPIRE, two Redis commands: each service's lock is taken in one request, and a dead client's session or lease ends on its own", serviceKinds...),
		Story:         "S1: a client dies right after its SETNX took the key, before it can send EXPIRE (or, for one-command locks, inside its critical section).",
		TimeLimitTTLs: 9, MinTimeLimitTTLs: 8,
		Rules: []Rule{
			controlOut,
			leaveOut(and(expirySeparate, installed), "Symfony's take and its expiry are two EVALs (save's script with the store's 300 s initialTtl, then refresh's putOffExpiration), which this story's trap, the SETNX that took the key, cannot name; lost-reply loses the first one's reply and shows the 300 s key"),
			expect(expirySeparate, verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{"ghost-hold"},
				Why: "the key was never given a TTL: nobody can ever take the lock again, and the node holds it for nobody"}),
			leaveOut(local, "a crashed holder of the control's in-process mutex never lets go: it has no lease to run out"),
			standsFor([]string{"set-nx-px", "getset", "reentrant", "fair"}, "each of this repository's other locks ends a dead holder's hold by a TTL as one of these does",
				"multilock", "redlock", "redlock-novalidity", "reentrant-async", "reentrant-lost", "set-nx-px-del", "set-nx-px-fenced", "set-nx-px-wait"),
			expect(onRedis, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the dead client's lease runs out (TTL, timestamp, or a watchdog that died with it) and the others carry on"}),
		},
		Requires: []fault.Evidence{{Op: fault.Crash}},
		// The reply that says the key was taken arrives, and the client
		// dies before it sees it: whatever the lock meant to send next
		// never leaves.
		// Armed at 2 TTLs: on a loaded machine a RedLock's first round over
		// five nodes may not end within one TTL, and a crash inside it left
		// no attempt completed before the fault (a vacuous run).
		Plan: Plan{
			arm(2, Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SETNX|SET NX", Reply: true, Succeeded: true}, Client: "any", Crash: true}),
			arm(2, Trap{Point: workloads.BeforeWrite, Client: "any", Crash: true}),
		},
	}
}

func getsetSkewStory() Scenario {
	return Scenario{
		Name:          "getset-skew",
		NotFor:        notFor("moves a client's clock, which only the GETSET lock trusts: no service's lock decides anything by the client's clock", serviceKinds...),
		Story:         "S2: a client's clock jumps 3 TTLs ahead while another holds the lock; the GETSET lock trusts client clocks, so the fast client sees live locks as expired and takes them.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		// Holders work 0.1 TTL between read and write, so a stolen lock is
		// stolen from someone mid-update: the theft corrupts the register on
		// every run, not only when two 100 µs critical sections happen to
		// interleave.
		HoldTTLs: 0.1,
		Rules: []Rule{
			controlOut,
			expect(clock(locks.ClientWall), verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"stolen-key"},
				Why: "expiry is judged by each client's clock: a fast clock steals a live lock, and the node sees its key overwritten under a live owner"}),
			standsFor([]string{"set-nx-px", "redlock", "fair"}, "each of this repository's other locks reads the client's clock as one of these does, or not at all",
				"multilock", "redlock-novalidity", "reentrant", "reentrant-async", "reentrant-lost", "set-nx-px-del", "set-nx-px-fenced", "set-nx-px-wait", "setnx-expire"),
			leaveOut(installed, "the client-clock nemesis moves the clock the harness hands a lock (Config.Clock), and a library reads the machine's own clock inside it, so the story cannot touch it"),
			expect(or(onRedis, local), verdict.Expectation{Outcome: verdict.Safe,
				Why: "expiry is Redis's (set-nx-px), a constant skew does not change elapsed time (RedLock), the client clock only orders the waiter queue (fair), or no clock is read at all (mutex)"}),
		},
		Requires: []fault.Evidence{{Op: fault.ClockSkew}, {Op: fault.Stall, Point: workloads.BeforeWrite}},
		// Two TTLs of traffic first: five clients' first RedLock round can
		// split the votes and end empty-handed after a whole wait, and with
		// one TTL a loaded machine left no lock attempt completed before
		// the skew (a vacuous run). The skew comes while a client holds the
		// lock, which it keeps for half a TTL more, and moves another's
		// clock: the fast client is not the holder (its own key would be
		// the first it takes), and the first theft is of a key nobody
		// releases while the observer still reads it. Once two clients
		// believe they hold, each one's plain DEL may delete the other's
		// key, and a change of owner after that is no longer evidence of an
		// overwrite. Any holder springs the trap: waiting for one named
		// client left a RedLock run of five with too little traffic after
		// the skew, when that client's first grant came late.
		Plan: Plan{arm(2, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.5), Stall: true,
			Then: []Action{{Do: "clock-skew", Client: "other", By: TTLs(3)}}})},
	}
}

func unsafeReleaseStory() Scenario {
	return Scenario{
		Name:   "unsafe-release",
		NotFor: notFor("S3 is a release by a plain DEL with no owner check: every service's release is owner-checked (its own node, key, session, row or CAS id)", serviceKinds...),
		Story: "S3: client 1's lease expires during a pause, client 2 takes the lock, client 1 wakes, writes and releases — " +
			"with a plain DEL, client 2's lock — and client 3 takes it while client 2 still works.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 6,
		Rules: []Rule{
			controlOut,
			expect(ownerBlind, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"foreign-release"},
				Why: "an owner-blind DEL deletes whoever holds the lock now"}),
			leaveOut(local, "the control has no lease to lapse, so no release can land on a successor"),
			standsFor([]string{"set-nx-px", "getset"}, "each of this repository's other locks checks in its release that the lock is still its own, as these do (set-nx-px by its token, getset by its own clock)",
				"fair", "multilock", "redlock", "redlock-novalidity", "reentrant", "reentrant-async", "reentrant-lost", "set-nx-px-fenced", "set-nx-px-wait"),
			expect(connection, verdict.Expectation{Outcome: verdict.Safe,
				Why: "nothing lapses during the pause: the paused holder keeps its connection (portalocker's subscription), and with it the lock, so there is no successor for its release to land on"}),
			expect(and(onRedis, expires, oneNode, quietRelease), verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"foreign-release"},
				Why: "K1 still happens; the woken client's release deletes only its own token (RedisStore::delete's script), which is gone, and Symfony's Lock::release then checks only that its token is absent and returns: a release that succeeded while the successor held, whose key it left alone"}),
			expect(and(onRedis, expires, oneNode), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"foreign-release"},
				Why: "K1 still happens, but the woken client's release is refused (compare-and-delete, or its own timestamp has expired)"}),
			leaveOut(and(installed, or(renewed, not(oneNode))), "a watchdog, or a lease on several nodes, releases with an owner check as the single-node leases do, which this story judges"),
		},
		Requires: []fault.Evidence{{Op: fault.Pause, Point: workloads.BeforeWrite}, {Op: fault.Stall, Point: workloads.BeforeRelease}},
		// When the sleeper wakes, hold it back from its release a moment,
		// and make the successor's critical section long, so the release
		// lands while the successor holds the lock.
		Plan: Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Wake: []Action{
			armed(Trap{Point: workloads.BeforeRelease, Client: "caught", Pause: TTLs(0.2), Stall: true}),
			armed(Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.6), Stall: true}),
		}})},
	}
}

func pausedReleaseStory() Scenario {
	return Scenario{
		Name:   "paused-release",
		NotFor: notFor("pauses a client between the commands of a Redis release; each service's release is one request", serviceKinds...),
		Story: "A client is paused whole for 1.5 TTLs right after the first reply of its release; its lease lapses, a successor " +
			"takes the lock and works; then whatever else the release sends goes out. A release written as two commands " +
			"(GET, compare, DEL) deletes the successor's lock, and a third client gets in while the successor works.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			lossAsReentrant,
			waitsAsSetNXPX,
			leaveOut(local, "the control's release sends no command to pause after"),
			leaveOut(ownerBlind, "its release is one DEL, with nothing after it to pause, but a DEL that checks no owner: the stalled successor's DEL goes out once its write is back, "+
				"and the stall ends 0.1 TTL inside its lease, so a write whose reply is late within its limit (0.2 TTL) sends that DEL past the lease, onto the next holder's key, and a third client gets in; "+
				"whether it does is a draw (setnx-expire unsafe in 1 of 228 pairs of a make test from nothing here, its successor's write back 103 ms after it was sent); unsafe-release tells that DEL on purpose"),
			expect(onRedis, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the release is one atomic command (or a script that checks the owner): once its first reply is back there is nothing left to go wrong"}),
		},
		Requires: []fault.Evidence{{Op: fault.Pause, In: history.Release}, {Op: fault.Stall, Point: workloads.BeforeWrite}},
		// The successor gets in once the paused client's lease lapses (+1
		// TTL) and works up to 0.8 TTL, so it still holds the lock when the
		// rest of the release lands (+1.5 TTL). For a lock that records its
		// deadline, the work ends at least 0.1 TTL inside that lease, so at
		// least 0.8 TTL after its acquire was sent: slow replies before the
		// stall (a loaded machine's, each under its limit) ate the 0.2 TTL
		// a fixed stall left, and a fenced successor then wrote past its
		// lease. A stall cut below 0.6 TTL (an acquire and read that took
		// over 0.3 TTL) starves the run. A renewed lock keeps the fixed
		// stall, its watchdog running through it.
		Plan: Plan{arm(1, Trap{Command: &nemesis.Command{In: history.Release, Nth: 1, Reply: true}, Client: "any", Pause: TTLs(1.5),
			Then: []Action{armed(Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.8), InLease: TTLs(0.1), MinPause: TTLs(0.6), Stall: true})}})},
	}
}

func watchdogStory() Scenario {
	return Scenario{
		Name:   "watchdog",
		NotFor: notFor("Redisson's watchdog under a pause and a cut: paused-holder and isolated-holder tell the services' sessions under the same two faults", serviceKinds...),
		Story: "S4: a watchdog lock's holder is paused whole for 2.5 TTLs (its watchdog stops with it); later another holder " +
			"is cut off from the lock nodes while it works, so its renewals fail, and it keeps working.",
		TimeLimitTTLs: 10, MinTimeLimitTTLs: 9,
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			lossRace,
			leaveOut(and(not(renewed), not(lock("set-nx-px"))), "it has no watchdog, and the story is about watchdogs, with set-nx-px as the control lease that has none; paused-holder and isolated-holder tell every lock under the same two faults"),
			expect(anyLock, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "a watchdog renews only while its process runs and reaches Redis: a lapsed holder that keeps working is a double holder"}),
		},
		Requires: []fault.Evidence{{Op: fault.Pause, Point: workloads.BeforeWrite}, {Op: fault.PartitionStart}, {Op: fault.PartitionEnd}},
		Plan: Plan{
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5)}),
			arm(5, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Stall: true,
				Then: []Action{{Do: "partition", Cuts: []Cut{{From: "client caught", Nodes: []string{"all"}}}}},
				Wake: []Action{{Do: "heal"}}}),
		},
	}
}

func watchdogStallStory() Scenario {
	return Scenario{
		Name:   "watchdog-stall",
		NotFor: notFor("a slow holder that still reaches Redis: for the services, delayed-write tells a live holder that reaches its service, isolated-holder a slow one cut off", serviceKinds...),
		Story:  "S4 control: a holder's critical section is slow (2.5 TTLs) but its process lives and reaches Redis.",
		AloneWorkers: "the watchdog must renew every TTL/3 on time, and a lease lapses under a renewal two thirds of a TTL late; " +
			"the meter starves a run whose harness ran a fifth of a TTL late, but a worker's renewal thread it does not judge",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			expect(local, verdict.Expectation{Outcome: verdict.Safe, Why: "the control: a mutex has no lease, so slow work only makes the others wait"}),
			expect(connection, verdict.Expectation{Outcome: verdict.Safe, Why: "a slow holder's connection lives, and the lock with it: nobody else gets it"}),
			expect(renewed, verdict.Expectation{Outcome: verdict.Safe, Why: "the watchdog renews the lease while the holder works: what it is for (and reentrant-lost, whose renewals all succeed, never says the lease is lost)"}),
			standsFor([]string{"set-nx-px"}, "a lease without a watchdog outlives nothing but its TTL, as set-nx-px's does",
				"getset", "redlock", "redlock-novalidity", "set-nx-px-del", "set-nx-px-fenced", "set-nx-px-wait", "setnx-expire"),
			expect(and(expires, oneNode), verdict.Expectation{Outcome: verdict.Unsafe, Why: "without a watchdog a slow critical section outlives its lease"}),
			leaveOut(expires, "a lease on several nodes outlives a slow critical section as a lease on one does, which this story judges"),
		},
		Requires: []fault.Evidence{{Op: fault.Stall, Point: workloads.BeforeWrite}},
		Plan:     Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Stall: true})},
	}
}

func fairOrderStory() Scenario {
	return Scenario{
		Name:   "fair-order",
		NotFor: notFor("judges Redisson's fair queue against two Redis locks for order; no service's lock is judged for order here", serviceKinds...),
		Story: "S5: clients hold the lock 0.1 TTL each, so four wait behind every holder; waiters must be granted in " +
			"arrival order.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Fairness: true,
		Alone:    "grants are judged in arrival order to 20 ms; a busy core delays a waiter's wake-up past that",
		// 50 ms inside at a 500 ms TTL: four clients queue behind each holder.
		HoldTTLs: 0.1,
		// A waiter timeout far beyond the run: the FairLock's waiter
		// deadlines drift toward now by one hold per grant, and one that
		// reached now would drop a live waiter (see docs/stories.md, Findings);
		// this story is about order, dead-waiter about the timeout.
		WaiterTimeoutTTLs: 40,
		Rules: []Rule{
			expect(queued, verdict.Expectation{Outcome: verdict.Safe, Why: "Redisson's FairLock queue grants in arrival order"}),
			expect(or(lock("reentrant"), lock("set-nx-px")), verdict.Expectation{Outcome: verdict.Unfair, Show: []string{"overtaken"},
				Why: "whoever retries (or wakes) first wins: arrival order means nothing"}),
			leaveOut(not(queued), "it keeps no queue, so it promises no order: reentrant and set-nx-px show once what that means"),
		},
		Plan: Plan{},
	}
}

func deadWaiterStory() Scenario {
	return Scenario{
		Name:   "dead-waiter",
		NotFor: notFor("a dead waiter in Redisson's fair queue; no service's lock keeps a queue that a dead waiter could hold up past its session", serviceKinds...),
		Story: "S5: clients queue as in fair-order; a client that has waited in acquire for 0.1 TTL dies; the queue must " +
			"not stall longer than the dead waiter's timeout.",
		TimeLimitTTLs: 9, MinTimeLimitTTLs: 7,
		HoldTTLs: 0.1,
		Rules: []Rule{
			expect(queued, verdict.Expectation{Outcome: verdict.Safe, Why: "Redisson's FairLock drops a waiter silent past its timeout, so the queue moves again"}),
			expect(or(lock("reentrant"), lock("set-nx-px")), verdict.Expectation{Outcome: verdict.Safe, Why: "nothing queues: a dead waiter holds nothing up"}),
			leaveOut(not(queued), "it keeps no queue for a dead waiter to hold up: reentrant and set-nx-px show that once"),
		},
		Requires: []fault.Evidence{{Op: fault.Crash, In: history.Acquire, Waiting: true}},
		Plan:     Plan{step(3, Action{Do: "crash-waiter", For: TTLs(0.1)})},
	}
}
