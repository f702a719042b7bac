package scenario

import (
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// The baseline and Kleppmann's stories about leases: a holder that outlives
// its lease (K1), a write that does (K2), and the fencing that survives both
// (K3).
func leaseStories(add func(Scenario)) {
	add(baselineStory())
	add(pausedHolderStory())
	add(delayedWriteStory())
	add(fencingStory())
}

// pausedHolder warms up one TTL, then stops the next client to reach the write for
// the pause (2.5 TTLs), whole (connections, watchdog and all), as a GC
// pause would.
var pausedHolder = Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: ParamNum("pause")})}

// The pause is what a sweep of K1 varies: a lease survives any pause
// shorter than what is left of it, and none longer.
var pausedHolderParams = []Param{{Name: "pause", Unit: "TTLs", Default: 2.5, Min: 0.05, Max: 4, Threshold: 1,
	Help: "how long the holder is paused inside its critical section"}}

var pausedHolderRequires = []fault.Evidence{{Op: fault.Pause, Point: workloads.BeforeWrite}}

// A pause shorter than the lease (a sweep's point below the
// threshold) holds every other client in its acquire: nothing need
// complete during it. One of 1.5 TTLs or more lets a successor in
// during it, as the story tells, and a run in which none got in is
// vacuous.
var pausedHolderTraffic = &TrafficRule{Param: "pause", Below: 1.5, Traffic: verdict.Traffic{Before: 3, After: 3}}

// pausedHolderRules judge K1: every lease is outlived by a paused holder,
// fencing keeps the store safe, and a lock with no lease keeps the others
// waiting.
var pausedHolderRules = []Rule{
	controlOut,
	expect(local, verdict.Expectation{Outcome: verdict.Safe,
		Why: "the control: a mutex between goroutines has no lease to lapse, so a paused holder keeps it and the others wait"}),
	expect(and(fenced, expires), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected}, Hide: []string{"promise-broken"},
		Why: "the lease is outlived just the same, but the store rejects the woken holder's stale token (Kleppmann's fencing)"}),
	expect(and(fenced, session), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
		Why: "the session lapses just the same, but the woken holder's token (a creation zxid, a create revision) is stale and the store rejects it: Kleppmann's answer"}),
	expect(ownerBlind, verdict.Expectation{Outcome: verdict.Unsafe,
		Why: "as for every lease (Kleppmann); and when the woken holder's plain DEL lands while someone holds the lock, it deletes that lock and the lock breaks its own promise too (S3): timing decides, so that is neither required nor forbidden here"}),
	expect(connection, verdict.Expectation{Outcome: verdict.Safe,
		Why: "a session lock has no expiry: a paused process keeps its TCP connection, so the server (PostgreSQL, MariaDB) keeps its lock and the others wait"}),
	expect(never, verdict.Expectation{Outcome: verdict.Safe,
		Why: "the article's lock table has no expiry: the paused holder's row stays until it deletes it, and the others' INSERTs are refused by the unique key until then"}),
	detachedAsReentrant,
	waitsAsSetNXPX,
	leaveOut(and(zooKeeperLibrary, tellsLoss), "Curator's Tech Note 10 says a listener cannot help here, and mostly it does not, but not always: SUSPENDED and LOST come from the client's own threads, which run again with the woken process, and in one run in about thirty beside two busy loops kazoo's LOST reached the holder before its write did, which it withheld; a race, so isolated-holder tells what the listener buys"),
	expect(and(zooKeeperLibrary, fenced), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
		Why: "TN10's pause just the same, but the woken holder's czxid is older than its successor's lock node's and the store refuses it"}),
	expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
		Why: "Curator's Tech Note 10 tells this pause: the ensemble expires the silent session and deletes its node, the next waiter's watch fires and it takes the lock, and the holder un-pauses and goes on; neither InterProcessMutex nor kazoo's Lock looks at its node again before the holder's code runs"}),
	lossRace,
	expect(and(onRedis, or(expires, renewed)), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
		Why: "no lease stops a paused holder: its lease lapses, a successor writes, the holder wakes and writes too (Kleppmann); the lock kept its own promise, the client did not"}),
	serverEndsEarlyUnsafe,
	expect(or(session, expires, renewed), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
		Why: "a paused process renews nothing: its session, lease or heartbeat lapses on the server, a successor writes, the holder wakes and writes too (Kleppmann: a consensus system does not stop a paused client either)"}),
}

// serverEndsEarlyUnsafe judges a lease its server may end before the
// deadline the library reports, in the stories where the lease runs out
// under a holder: unsafe, and a successor may get in within the
// holder's deadline, which the promise checker then shows, as timing
// decides (Symfony's PdoStore counts rounded whole seconds; memcached
// drops an item up to its clock's tick early).
var serverEndsEarlyUnsafe = expect(and(serverEndsEarly, unfenced), verdict.Expectation{Outcome: verdict.Unsafe,
	Why: "the lease runs out under the holder (Kleppmann), and its server may end it before the deadline the library reports (rounded whole seconds, or memcached's early drop): a successor may get in within the holder's own deadline, as timing decides (docs/stories.md, Findings)"})

func baselineStory() Scenario {
	return Scenario{
		Name:          "baseline",
		Story:         "No faults. Every lock must keep mutual exclusion and make progress; a checker that flags this run is broken.",
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 1, // no story to play out
		// Every lock, the broken ones too: each breaks only under its fault.
		Rules: []Rule{
			expect(nothingLocked, verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"double-holder"},
				Why: "the control that locks nothing: if the checkers do not see two holders here, they see nothing"}),
			leaveOut(racyAcquire, "its acquire races its own commands on two connections and lets two in with no fault now and then (wolph/portalocker#139), so a fault-free run may come out either way; docs/scenarios/subscribe-race.json tells it on purpose"),
			leaveOut(serverEndsEarly, "its server may end a lease before the deadline the library reports, by up to its expiry's grain (memcached's one-second tick, PdoStore's whole seconds: docs/stories.md, Findings), so at a 1 s lease a hold that spans the tick loses its key with no fault now and then (symfony-memcached: two holders for 2 ms, 1 of 526 pairs of a make run) and a fault-free run may come out either way; paused-holder tells it"),
			expect(anyLock, verdict.Expectation{Outcome: verdict.Safe, Why: "no fault, no violation: a positive here is a harness bug"}),
		},
		Plan: Plan{},
	}
}

func pausedHolderStory() Scenario {
	return Scenario{
		Name: "paused-holder",
		Story: "K1 (Kleppmann 2016): a client holding the lock pauses inside its critical section (a GC pause) " +
			"longer than the TTL (2.5 TTLs; -sweep varies it); the lease expires, another client takes the lock and writes; the first wakes and writes too.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Rules:     pausedHolderRules,
		Requires:  pausedHolderRequires,
		TrafficAt: pausedHolderTraffic,
		Params:    pausedHolderParams,
		Plan:      pausedHolder,
	}
}

func delayedWriteStory() Scenario {
	return Scenario{
		Name: "delayed-write",
		Story: "K2 (Kleppmann 2016): a holder's requests to the protected store are delayed in the network (0.75 TTL each way out by default) " +
			"so its write lands after its lease expired and a successor wrote.",
		// Eight TTLs: the delay begins on the first holder past 2 TTLs and
		// lasts its read and write (1.5 TTLs), and a lock whose acquires
		// are slow (a PostgreSQL server on a busy machine, a worker process
		// being replaced) still has time for the traffic after it.
		TimeLimitTTLs: 8, MinTimeLimitTTLs: 5,
		// At the default delay the late write lands half a TTL after the
		// lease's end (two delays of 0.75), and a successor must see the
		// lock free and write inside that half: the lag of a server that
		// ends leases late (etcd's lessor, which looks every half second)
		// is given at most a quarter of the lease, leaving the successor
		// the other quarter for the revoke's commit, its try and its write.
		ExpiryShare: 0.25,
		Rules: []Rule{
			controlOut,
			detachedAsReentrant,
			waitsAsSetNXPX,
			expect(local, verdict.Expectation{Outcome: verdict.Safe, Why: "the control: a mutex has no lease, so a slow write only makes the others wait"}),
			expect(and(fenced, expires), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the late write carries a stale token and the store rejects it"}),
			expect(ownerBlind, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the write outlives the lease (Kleppmann); the late client's plain DEL may also delete a successor's lock, breaking the lock's own promise (S3), as timing decides"}),
			expect(renewed, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the holder's process is alive and reaches Redis, so its watchdog keeps renewing while the write is delayed: nobody else gets the lock (only a pause of the whole process, K1, defeats it)"}),
			expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the holder's process runs, and Curator's and kazoo's own client threads keep pinging the ensemble while the store delays the write: the session and its node live on, and nobody else gets the lock"}),
			expect(or(session, connection), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the holder's process is alive and reaches its service, so its session lives on while the write is delayed: nobody else gets the lock"}),
			expect(never, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the lock table's row has no expiry: a slow write only makes the others wait"}),
			expect(phpLock, verdict.Expectation{Outcome: verdict.Safe,
				Why: "php-lock's key lives a second past the lease it holds itself to (SpinlockMutex::lock sets timeout + 1), and at the story's 1 s TTL the write held up 1.5 TTLs lands inside it: nobody else has the lock yet"}),
			serverEndsEarlyUnsafe,
			expect(expires, verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
				Why: "the write outlives the lease in the network, where no client-side check can see it (Kleppmann)"}),
		},
		Requires: []fault.Evidence{{Op: fault.LatencyStart, Node: "store"}, {Op: fault.LatencyEnd, Node: "store"}},
		// The delay must hold up a request of the holder's: one that
		// waits out the whole delay for the lock writes nothing late. And
		// another client must reach for the lock between the holder's
		// lease end and its late write, or no successor could write
		// first: a waiter whose retry fell after the late write leaves
		// the story untold.
		Traffic: verdict.Traffic{Before: 3, During: 1, After: 3, Delayed: 1, Contended: 1, PastLease: true},
		// At most one TTL: the holder's read and write each wait out the
		// delay, and past about a TTL they take most of the story's time.
		Params: []Param{{Name: "delay", Unit: "TTLs", Default: 0.75, Min: 0, Max: 1,
			Help: "how long each of the caught holder's requests to the store is held up on its way out"}},
		// The delay begins after 2 TTLs, not 1 (five clients' first RedLock
		// round can split the votes and fail only after a whole wait), on
		// whoever holds the lock next, as it goes to read: a client named
		// in advance can wait out the whole delay for an unfair lock (a
		// PostgreSQL advisory lock's releaser takes it again, 30 times in
		// a row) or for one whose tries all time out on a loaded machine
		// (redsync's, cut off at 5% of the TTL), and then nothing it sends
		// is delayed. It ends as that holder goes to release, its write
		// answered: a write still held back when the delay went would land
		// at once, ahead of a successor's, and a fenced store accepts both
		// (a lost update the story does not tell).
		Plan: Plan{arm(2, Trap{Point: workloads.BeforeRead, Client: "any",
			Then: []Action{
				{Do: "latency", Client: "caught", Node: "store", Direction: "upstream", For: ParamNum("delay")},
				armed(Trap{Point: workloads.BeforeRelease, Client: "caught", Then: []Action{{Do: "latency", Client: "caught", Node: "store"}}}),
			}})},
	}
}

func fencingStory() Scenario {
	return Scenario{
		Name: "fencing",
		NotFor: joined(notFor("no PostgreSQL lock here carries a fencing token (the articles' locks do not)", postgres),
			notFor("memcached-add carries no fencing token (memcached has no counter a lease could take one from atomically with add)", memcached)),
		Story:         "K3 (Kleppmann 2016): K1 with a store that rejects tokens not greater than the last it accepted.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Rules: []Rule{
			expect(and(fenced, connection), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the paused holder keeps its connection, and with it its transaction's row lock: nobody else is granted the lock, so no token is ever stale"}),
			expect(fenced, verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected}, Hide: []string{"stale-write"},
				Why: "two clients believe they hold the lock, but tokens strictly increase and the store keeps itself consistent"}),
			leaveOut(and(unfenced, or(onRedis, local, quorum, kind(mariadb))), "it carries no fencing token for the store to check; paused-holder tells the same pause to it"),
		},
		Requires:  pausedHolderRequires,
		TrafficAt: pausedHolderTraffic,
		Params:    pausedHolderParams,
		Plan:      pausedHolder,
	}
}
