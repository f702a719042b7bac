package scenario

import (
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
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
	add(Scenario{
		Name:          "setnx-crash",
		NotFor:        notFor(serviceKinds, "a crash between SETNX and EXPIRE, two Redis commands: each service's lock is taken in one request, and a dead client's session or lease ends on its own"),
		Story:         "S1: a client dies right after its SETNX took the key, before it can send EXPIRE (or, for one-command locks, inside its critical section).",
		TimeLimitTTLs: 9, MinTimeLimitTTLs: 8,
		Expect: expect(
			"setnx-expire", verdict.Expectation{Outcome: verdict.Deadlock, Show: []string{"ghost-hold"},
				Why: "the key was never given a TTL: nobody can ever take the lock again, and the node holds it for nobody"},
			all([]string{"set-nx-px", "getset", "reentrant", "fair", "redislock-refresh"}, libraryLeases), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the dead client's lease runs out (TTL, timestamp, or a watchdog that died with it) and the others carry on"},
		),
		Requires: []fault.Evidence{{Op: fault.Crash}},
		// The reply that says the key was taken arrives, and the client
		// dies before it sees it: whatever the lock meant to send next
		// never leaves.
		Plan: Plan{
			arm(1, Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SETNX|SET NX", Reply: true, Succeeded: true}, Client: "any", Crash: true}),
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Crash: true}),
		},
	})

	add(Scenario{
		Name:          "getset-skew",
		NotFor:        notFor(serviceKinds, "moves a client's clock, which only the GETSET lock trusts: no service's lock decides anything by the client's clock"),
		Story:         "S2: a client's clock jumps 3 TTLs ahead while another holds the lock; the GETSET lock trusts client clocks, so the fast client sees live locks as expired and takes them.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		// Holders work 0.1 TTL between read and write, so a stolen lock is
		// stolen from someone mid-update: the theft corrupts the register on
		// every run, not only when two 100 µs critical sections happen to
		// interleave.
		HoldTTLs: 0.1,
		Expect: expect(
			"getset", verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"stolen-key"},
				Why: "expiry is judged by each client's clock: a fast clock steals a live lock, and the node sees its key overwritten under a live owner"},
			[]string{"set-nx-px", "redlock", "fair", "mutex"}, verdict.Expectation{Outcome: verdict.Safe,
				Why: "expiry is Redis's (set-nx-px), a constant skew does not change elapsed time (RedLock), the client clock only orders the waiter queue (fair), or no clock is read at all (mutex)"},
		),
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
			Then: []Action{{Do: "skew-client", Client: "other", By: TTLs(3)}}})},
	})

	add(Scenario{
		Name:   "unsafe-release",
		NotFor: notFor(serviceKinds, "S3 is a release by a plain DEL with no owner check: every service's release is owner-checked (its own node, key, session, row or CAS id)"),
		Story: "S3: client 1's lease expires during a pause, client 2 takes the lock, client 1 wakes, writes and releases — " +
			"with a plain DEL, client 2's lock — and client 3 takes it while client 2 still works.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 6,
		Expect: expect(
			ownerBlind, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"foreign-release"},
				Why: "an owner-blind DEL deletes whoever holds the lock now"},
			all([]string{"set-nx-px", "getset"}, libraryLeases), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"foreign-release"},
				Why: "K1 still happens, but the woken client's release is refused (compare-and-delete, or its own timestamp has expired)"},
		),
		Requires: []fault.Evidence{{Op: fault.Pause, Point: workloads.BeforeWrite}, {Op: fault.Stall, Point: workloads.BeforeRelease}},
		// When the sleeper wakes, hold it back from its release a moment,
		// and make the successor's critical section long, so the release
		// lands while the successor holds the lock.
		Plan: Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Wake: []Action{
			armed(Trap{Point: workloads.BeforeRelease, Client: "caught", Pause: TTLs(0.2), Stall: true}),
			armed(Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.6), Stall: true}),
		}})},
	})

	add(Scenario{
		Name:   "paused-release",
		NotFor: notFor(serviceKinds, "pauses a client between the commands of a Redis release; each service's release is one request"),
		Story: "A client is paused whole for 1.5 TTLs right after the first reply of its release; its lease lapses, a successor " +
			"takes the lock and works; then whatever else the release sends goes out. A release written as two commands " +
			"(GET, compare, DEL) deletes the successor's lock, and a third client gets in while the successor works.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		Expect: expect(
			all(ownerChecked, ownerBlind, watchdogLocks, []string{"set-nx-px-fenced"}), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the release is one atomic command (or a script that checks the owner): once its first reply is back there is nothing left to go wrong"},
		),
		Requires: []fault.Evidence{{Op: fault.Pause, In: history.Release}, {Op: fault.Stall, Point: workloads.BeforeWrite}},
		// The successor gets in once the paused client's lease lapses (+1
		// TTL) and works 0.8 TTL, inside its own lease, so it still holds
		// the lock when the rest of the release lands (+1.5 TTL).
		Plan: Plan{arm(1, Trap{Command: &nemesis.Command{In: history.Release, Nth: 1, Reply: true}, Client: "any", Pause: TTLs(1.5),
			Then: []Action{armed(Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.8), Stall: true})}})},
	})

	add(Scenario{
		Name:   "watchdog",
		NotFor: notFor(serviceKinds, "Redisson's watchdog under a pause and a cut: paused-holder and isolated-holder tell the services' sessions under the same two faults"),
		Story: "S4: a watchdog lock's holder is paused whole for 2.5 TTLs (its watchdog stops with it); later another holder " +
			"is cut off from the lock nodes while it works, so its renewals fail, and it keeps working.",
		TimeLimitTTLs: 10, MinTimeLimitTTLs: 9,
		Expect: expect(
			all(watchdogLocks, []string{"set-nx-px"}), verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "a watchdog renews only while its process runs and reaches Redis: a lapsed holder that keeps working is a double holder"},
		),
		Requires: []fault.Evidence{{Op: fault.Pause, Point: workloads.BeforeWrite}, {Op: fault.PartitionStart}, {Op: fault.PartitionEnd}},
		Plan: Plan{
			arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5)}),
			arm(5, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Stall: true,
				Then: []Action{{Do: "partition", Cuts: []Cut{{From: "client caught", Nodes: []string{"all"}}}}},
				Wake: []Action{{Do: "heal"}}}),
		},
	})
	add(Scenario{
		Name:          "watchdog-stall",
		NotFor:        notFor(serviceKinds, "a slow holder that still reaches Redis: for the services, delayed-write tells a live holder that reaches its service, isolated-holder a slow one cut off"),
		Story:         "S4 control: a holder's critical section is slow (2.5 TTLs) but its process lives and reaches Redis.",
		Alone:         "the watchdog must renew every TTL/3 on time; a starved core lets a live holder's lease lapse",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		Expect: expect(
			all(watchdogLocks, []string{"reentrant-lost"}), verdict.Expectation{Outcome: verdict.Safe, Why: "the watchdog renews the lease while the holder works: what it is for (and reentrant-lost, whose renewals all succeed, never says the lease is lost)"},
			all([]string{"set-nx-px"}, libraryLeases), verdict.Expectation{Outcome: verdict.Unsafe, Why: "without a watchdog a slow critical section outlives its lease"},
			"mutex", verdict.Expectation{Outcome: verdict.Safe, Why: "the control: a mutex has no lease, so slow work only makes the others wait"},
		),
		Requires: []fault.Evidence{{Op: fault.Stall, Point: workloads.BeforeWrite}},
		Plan:     Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Stall: true})},
	})

	add(Scenario{
		Name:   "fair-order",
		NotFor: notFor(serviceKinds, "judges Redisson's fair queue against two Redis locks for order; no service's lock is judged for order here"),
		Story: "S5: clients hold the lock 0.1 TTL each, so four wait behind every holder; waiters must be granted in " +
			"arrival order.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Fairness: true,
		Alone:    "grants are judged in arrival order to 20 ms; a busy core delays a waiter's wake-up past that",
		// 50 ms inside at a 500 ms TTL: four clients queue behind each holder.
		HoldTTLs: 0.1,
		// A waiter timeout far beyond the run: the FairLock's waiter
		// deadlines drift toward now by one hold per grant, and one that
		// reached now would drop a live waiter (see the README's Findings);
		// this story is about order, dead-waiter about the timeout.
		WaiterTimeoutTTLs: 40,
		Expect: expect(
			"fair", verdict.Expectation{Outcome: verdict.Safe, Why: "Redisson's FairLock queue grants in arrival order"},
			[]string{"reentrant", "set-nx-px"}, verdict.Expectation{Outcome: verdict.Unfair, Show: []string{"overtaken"},
				Why: "whoever retries (or wakes) first wins: arrival order means nothing"},
		),
		Plan: Plan{},
	})

	add(Scenario{
		Name:   "dead-waiter",
		NotFor: notFor(serviceKinds, "a dead waiter in Redisson's fair queue; no service's lock keeps a queue that a dead waiter could hold up past its session"),
		Story: "S5: clients queue as in fair-order; a client that has waited in acquire for 0.1 TTL dies; the queue must " +
			"not stall longer than the dead waiter's timeout.",
		TimeLimitTTLs: 9, MinTimeLimitTTLs: 7,
		HoldTTLs: 0.1,
		Expect: expect(
			"fair", verdict.Expectation{Outcome: verdict.Safe, Why: "Redisson's FairLock drops a waiter silent past its timeout, so the queue moves again"},
			[]string{"reentrant", "set-nx-px"}, verdict.Expectation{Outcome: verdict.Safe, Why: "nothing queues: a dead waiter holds nothing up"},
		),
		Requires: []fault.Evidence{{Op: fault.Crash, In: history.Acquire, Waiting: true}},
		Plan:     Plan{step(3, Action{Do: "crash-waiter", For: TTLs(0.1)})},
	})
}
