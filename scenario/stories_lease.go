package scenario

import (
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// The baseline and Kleppmann's stories about leases: a holder that outlives
// its lease (K1), a write that does (K2), and the fencing that survives both
// (K3).
func leaseStories(add func(Scenario)) {
	add(Scenario{
		Name:          "baseline",
		Story:         "No faults. Every lock must keep mutual exclusion and make progress; a checker that flags this run is broken.",
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 1, // no story to play out
		// Every lock, the broken ones too: each breaks only under its fault.
		Expect: expect(locks.Names(), verdict.Expectation{Outcome: verdict.Safe, Why: "no fault, no violation: a positive here is a harness bug"},
			"none", verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"double-holder"},
				Why: "the control that locks nothing: if the checkers do not see two holders here, they see nothing"}),
		Plan: Plan{},
	})

	// Warm up one TTL, then stop the next client to reach the write for
	// the pause (2.5 TTLs), whole (connections, watchdog and all), as a GC
	// pause would.
	pausedHolder := Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: ParamNum("pause")})}
	// The pause is what a sweep of K1 varies: a lease survives any pause
	// shorter than what is left of it, and none longer.
	pausedHolderParams := []Param{{Name: "pause", Unit: "TTLs", Default: 2.5, Min: 0.05, Max: 4, Threshold: 1,
		Help: "how long the holder is paused inside its critical section"}}
	pausedHolderRequires := []fault.Evidence{{Op: fault.Pause, Point: workloads.BeforeWrite}}
	// A pause shorter than the lease (a sweep's point below the
	// threshold) holds every other client in its acquire: nothing need
	// complete during it. One of 1.5 TTLs or more lets a successor in
	// during it, as the story tells, and a run in which none got in is
	// vacuous.
	pausedHolderTraffic := &TrafficRule{Param: "pause", Below: 1.5, Traffic: verdict.Traffic{Before: 3, After: 3}}
	k1 := expect(
		all(ownerChecked, watchdogLocks), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
			Why: "no lease stops a paused holder: its lease lapses, a successor writes, the holder wakes and writes too (Kleppmann); the lock kept its own promise, the client did not"},
		ownerBlind, verdict.Expectation{Outcome: verdict.Unsafe,
			Why: "as for every lease (Kleppmann); and when the woken holder's plain DEL lands while someone holds the lock, it deletes that lock and the lock breaks its own promise too (S3): timing decides, so that is neither required nor forbidden here"},
		"set-nx-px-fenced", verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected}, Hide: []string{"promise-broken"},
			Why: "the lease is outlived just the same, but the store rejects the woken holder's stale token (Kleppmann's fencing)"},
		"mutex", verdict.Expectation{Outcome: verdict.Safe,
			Why: "the control: a mutex between goroutines has no lease to lapse, so a paused holder keeps it and the others wait"},
		all(renewedSessions, serviceLeases), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
			Why: "a paused process renews nothing: its session or lease lapses on the server, a successor writes, the holder wakes and writes too (Kleppmann: a consensus system does not stop a paused client either)"},
		fencedSessions, verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
			Why: "the session lapses just the same, but the woken holder's token (a creation zxid, a create revision) is stale and the store rejects it: Kleppmann's answer"},
		"pg-advisory", verdict.Expectation{Outcome: verdict.Safe,
			Why: "a session lock has no expiry: a paused process keeps its TCP connection, so PostgreSQL keeps its lock and the others wait"},
	)
	add(Scenario{
		Name: "paused-holder",
		Story: "K1 (Kleppmann 2016): a client holding the lock pauses inside its critical section (a GC pause) " +
			"longer than the TTL (2.5 TTLs; -sweep varies it); the lease expires, another client takes the lock and writes; the first wakes and writes too.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Expect:    k1,
		Requires:  pausedHolderRequires,
		TrafficAt: pausedHolderTraffic,
		Params:    pausedHolderParams,
		Plan:      pausedHolder,
	})

	add(Scenario{
		Name: "delayed-write",
		Story: "K2 (Kleppmann 2016): client 0's requests to the protected store are delayed in the network (0.75 TTL each way out by default) " +
			"so its write lands after its lease expired and a successor wrote.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Expect: expect(
			ownerChecked, verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
				Why: "the write outlives the lease in the network, where no client-side check can see it (Kleppmann)"},
			ownerBlind, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the write outlives the lease (Kleppmann); the late client's plain DEL may also delete a successor's lock, breaking the lock's own promise (S3), as timing decides"},
			"set-nx-px-fenced", verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the late write carries a stale token and the store rejects it"},
			all(watchdogLocks, []string{"reentrant-lost"}), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the holder's process is alive and reaches Redis, so its watchdog keeps renewing while the write is delayed: nobody else gets the lock (only a pause of the whole process, K1, defeats it)"},
			"mutex", verdict.Expectation{Outcome: verdict.Safe, Why: "the control: a mutex has no lease, so a slow write only makes the others wait"},
			serviceLeases, verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
				Why: "the write outlives the lease in the network, where no client-side check can see it (Kleppmann)"},
			all(sessionLocks, fencedSessions), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the holder's process is alive and reaches its service, so its session lives on while the write is delayed: nobody else gets the lock"},
		),
		Requires: []fault.Evidence{{Op: fault.LatencyStart, Node: "store"}, {Op: fault.LatencyEnd, Node: "store"}},
		// At most one TTL: client 0's read and write each wait out the
		// delay, and past about a TTL its next acquire, which ends the
		// delay, comes after the story's 7 TTLs, so the run never shows
		// the delay's end it requires and comes out vacuous.
		Params: []Param{{Name: "delay", Unit: "TTLs", Default: 0.75, Min: 0, Max: 1,
			Help: "how long each of client 0's requests to the store is held up on its way out"}},
		// The delay begins after 2 TTLs, not 1: five clients' first RedLock
		// round can split the votes and fail only after a whole wait, and
		// under load no attempt had completed before a 1-TTL delay. It ends
		// while client 0 is inside an acquire: a write still held back when
		// the delay goes lands at once, ahead of a successor's, and a fenced
		// store accepts both (a lost update the story does not tell).
		Plan: Plan{
			step(2, Action{Do: "latency", Client: "0", Node: "store", Direction: "upstream", For: ParamNum("delay")}),
			step(5, Action{Do: "when-acquiring", Client: "0", Then: []Action{{Do: "latency", Client: "0", Node: "store"}}}),
		},
	})

	add(Scenario{
		Name:          "fencing",
		NotFor:        notFor(postgres, "no PostgreSQL lock here carries a fencing token (the articles' locks do not)", memcached, "memcached-add carries no fencing token (memcached has no counter a lease could take one from atomically with add)"),
		Story:         "K3 (Kleppmann 2016): K1 with a store that rejects tokens not greater than the last it accepted.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Expect: expect(all([]string{"set-nx-px-fenced"}, fencedSessions), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected}, Hide: []string{"stale-write"},
			Why: "two clients believe they hold the lock, but tokens strictly increase and the store keeps itself consistent"}),
		Requires:  pausedHolderRequires,
		TrafficAt: pausedHolderTraffic,
		Params:    pausedHolderParams,
		Plan:      pausedHolder,
	})
}
