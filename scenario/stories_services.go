package scenario

import (
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// What to use instead: a server of the lock's own that dies, a leader that
// is lost, a holder cut off from its service, and a server's clock.
func serviceStories(add func(Scenario)) {
	add(serverCrashStory())
	add(leaderFailoverStory())
	add(isolatedHolderStory())
	add(serverClockJumpStory())
}

func serverCrashStory() Scenario {
	return Scenario{
		Name: "server-crash",
		Story: "While a client holds the lock, its server (for an ensemble, member n1) loses power (kill -9, and what its disk " +
			"had not synced is gone) and restarts at once; the holder, briefly paused inside its lease, then writes.",
		// A deadlock shows only once the checkers' allowance (2 TTLs +
		// 250 ms) has passed after the pause, which begins when the
		// restart is done: at 500 ms, the holder caught at 0.5 s, a
		// MariaDB restart late within the meter's limit (its 1 s
		// Recovery + 250 ms) and the 0.3 s pause need 3.3 s and a refused
		// attempt after. Eight TTLs leave that 0.7 s; a run whose lock is
		// handed on ends once the story is over, so only a deadlock pays.
		TimeLimitTTLs: 8, MinTimeLimitTTLs: 3,
		RestartShare: holderRestartShare,
		Rules: []Rule{
			leaveOut(and(zooKeeperLibrary, clientEndsSession), "Curator ends its session by its own clock a session timeout after it lost its member (ClientEndsSession), and the ZooKeeper client sleeps a random 0 to 1 s before it tries the next member (ClientCnxn.SendThread.startConnect): at the story's 1 s session, whether it is back in time is a draw (1 of 5 idle runs of curator here, and curator-listener in a make run, lost the session, and another client took the lock); ensemble-restart tells Curator's own expiry (curator#1121)"),
			expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the ensemble keeps the lock node on a quorum; a client whose member died is SUSPENDED and reconnects to another within its session (the ZooKeeper client's own round of members, under Curator's retry policy or kazoo's connection retry), so the session and its node live on, and the holder's release deletes its own node"}),
			leaveOut(and(quorum, oneMember, session), "its clients reach the ensemble through member n1 alone, so while n1 is down nothing renews the holder's session, which runs out on the leader: "+
				"whether it ends before the holder's client reaches n1 again rests on when the holder last renewed, the client's reconnect backoff and whether n1 led (a new leader renews every lease), "+
				"a draw (tooz-etcd idle: 6 of 6 safe, one holder's release finding its lease gone 45 ms after its write; beside busy loops a waiter got in before the write: unsafe); its claims leave a member's crash out"),
			expect(quorum, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the lock lives on a quorum, which one member's death does not break; the member rejoins from its fsynced log"}),
			leaveOut(and(worker, not(quorum)), "the power loss closes every client's connection mid-command, the harness replaces each worker whose op ended unknown, "+
				"and a worker process takes up to a second to start (a Python library's imports) beside make test's other work, so the others lock only after the holder's lease or session has ended: "+
				"whether the lock is seen broken is a race (failover leaves the workers out for the same reason)"),
			expect(and(connection, fenced), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the restarted server has no transaction and no row lock, and a waiter is granted the lock while the holder works; but the waiter's token, bumped and committed after its grant, is newer than the holder's, and the store refuses the holder's write"}),
			expect(connection, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "a session lock lives in the server's memory: the restarted server has no session and no lock, and the holder, who does not ask, writes beside the next holder"}),
			expect(never, verdict.Expectation{Outcome: verdict.Deadlock,
				Why: "the lock table's row was committed when its INSERT answered, and InnoDB's redo log, written at every commit, brings it back, so the restarted server refuses every other INSERT; but the holder's DELETE goes out on the connection the restart closed, its outcome is unknown, and a row with no expiry outlives its owner's giving up: nobody takes the lock again (the article's drawback; a caller that sent its DELETE again on a new connection would free it, and the article's lock has no such step)"}),
			leaveOut(kind(postgres), "pg-advisory tells PostgreSQL's restart; a lease row's fate rests on the server's fsync settings, which no story here varies"),
			leaveOut(not(oneNode), "told on the one server of a single-node lock; redlock-crash-restart tells a majority's node"),
			standsFor([]string{"set-nx-px"}, "every Redis lock here keeps its key in the one server's memory, which the restart forgets; failover and redlock-crash-restart tell the loss in detail",
				"fair", "getset", "reentrant", "reentrant-async", "reentrant-lost", "set-nx-px-del", "set-nx-px-fenced", "set-nx-px-wait", "setnx-expire"),
			expect(and(expires, oneNode, unfenced), verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "the key lived only in the server's memory: it restarts without it and hands the lock out while the holder is within its lease (K5 on one node)"}),
			expect(and(renewed, oneNode), verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the key lived only in the server's memory: the restarted server hands the lock to a waiter while the holder works, and the watchdog finds nothing to renew; a watchdog promises no deadline, so there is no promise to see broken"}),
			leaveOut(local, "the control keeps nothing on a server: a server's death cannot touch it"),
		},
		Requires: []fault.Evidence{{Op: fault.PowerLoss, Node: "n1"}, {Op: fault.Restart, Node: "n1"}},
		Plan:     Plan{holderInLease(1, Action{Do: "power-loss", Node: "n1"}, Action{Do: "restart", Node: "n1"})},
	}
}

func leaderFailoverStory() Scenario {
	return Scenario{
		Name: "leader-failover",
		NotFor: joined(notFor("a Redis node is no ensemble: failover tells a Redis replica promoted by hand", redis),
			notFor("a single PostgreSQL server has no leader to lose: server-crash tells its death", postgres),
			notFor("a memcached server has no leader to lose: server-crash tells its death", memcached),
			notFor("a single MariaDB server has no leader to lose: server-crash tells its death", mariadb)),
		Story: "While a client holds the lock, the leader of the ensemble is killed (kill -9) and stays down; once the other two " +
			"members have elected a new leader, the holder, briefly paused, writes and releases, and the others go on locking.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Rules: []Rule{
			leaveOut(oneMember, "its clients talk to the first member only, and the election decides whether the leader killed is that member: when it is, every client stops for the rest of the run (deadlock), when not, nothing happens to them; a story cannot expect either; server-crash tells that member's death where the lease is nobody's to renew"),
			leaveOut(clientEndsSession, "Curator counts a SUSPENDED session lost by its own clock, a session (1 s here) after the disconnect, and its ZooKeeper client reconnects only after the election and a random pause of up to a second: a client that misses that mark is told LOST and opens a new session, while the new leader keeps its old one and its lock node alive with a fresh timeout, and curator#1121 then lets it hold the lock beside the next holder (leader-failover / curator-listener lock-unsafe in 1 of 518 pairs of a make run); whether any client misses the mark is a draw, and ensemble-restart tells curator#1121 on purpose"),
			expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the new leader has every committed lock node and gives every session a fresh timeout; a client of the dead leader is SUSPENDED and reconnects to a member of the new quorum with the same session, which only the ensemble can end"}),
			expect(quorum, verdict.Expectation{Outcome: verdict.Safe,
				Why: "a consensus system keeps the lock on a quorum: the new leader has every committed write, the holder's node or key among them"}),
		},
		Requires: []fault.Evidence{{Op: fault.Kill}},
		// The holder goes on only once a new leader is there: a release
		// sent into the election finds no leader, its outcome is unknown,
		// and the key then blocks the others until its session lapses, a
		// stall that measures the election's length on a busy machine
		// rather than the lock. Until then the holder waits at its point,
		// its session kept alive.
		Plan: Plan{holderInLease(1, Action{Do: "kill-leader"})},
	}
}

func isolatedHolderStory() Scenario {
	return Scenario{
		Name: "isolated-holder",
		Story: "A holder's critical section is slow (2.5 TTLs), and while it works it is cut off from every node of the lock's " +
			"service (not from the store); the cut heals once it has written, as it goes to release.",
		TimeLimitTTLs: 8, MinTimeLimitTTLs: 6,
		Rules: []Rule{
			expect(and(zooKeeperLibrary, tellsLoss), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.WriteWithheld},
				Why: "the cut starves the client's pings, and its connection is SUSPENDED two thirds of a session in, long before the slow holder writes; the listener Curator's and kazoo's docs ask for (\"if SUSPENDED is reported you cannot be certain that you still hold the lock\") tells the holder, who does not write"}),
			expect(and(zooKeeperLibrary, fenced), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the session lapses under the cut (curator#727) and a waiter takes the lock, but the cut-off holder's czxid is stale and the store refuses it"}),
			expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "curator#727 (CURATOR-206), by design in Curator 5.4 and kazoo 2.8: the lock recipe watches no connection state, so a holder whose session expires under a cut is not told, a waiter takes the lock, and the holder writes; its release then deletes nothing and says nothing"}),
			expect(and(tellsLoss, renewed), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.WriteWithheld},
				Why: "the watchdog's renewals fail under the cut and it tells the holder (Lease.Lost): the lock is still held twice (the holder learns it only when it looks), but the holder looks before it writes and does not write (redisson#3636, #4698)"}),
			expect(and(fenced, session), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the session lapses just the same, but the store rejects the cut-off holder's stale token (Kleppmann's fencing)"}),
			standsFor([]string{"reentrant"}, "every watchdog here renews only while its holder reaches Redis, as reentrant's does",
				"fair", "multilock", "reentrant-async"),
			expect(or(session, renewed), verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the session (or watchdog) is renewed only while the holder reaches its service: it lapses under a holder that goes on working, and the next holder writes beside it"}),
			// A healed link closes the connections the server kept through
			// the cut, which ends PostgreSQL's session then.
			expect(never, verdict.Expectation{Outcome: verdict.Deadlock,
				Why: "the holder keeps its row through the cut, so nobody else gets in; but the healed link closes the connection it held, the holder's DELETE goes out on it and its outcome is unknown, and a lock table with no expiry keeps a row whose owner has given up: every INSERT after it is refused for good (the article's drawback, by a network's hiccup)"}),
			leaveOut(connection, "the server keeps the session while the cut lasts, but a healed link closes the connections it held, so the session ends then, and whether the holder had released by that moment decides between safe and lock-unsafe"),
			standsFor([]string{"set-nx-px"}, "a lease promises nothing past its deadline, cut off or not, and paused-holder judges each one's",
				"getset", "redlock", "redlock-novalidity", "set-nx-px-del", "set-nx-px-fenced", "set-nx-px-wait", "setnx-expire"),
			expect(and(fenced, expires), verdict.Expectation{Outcome: verdict.LockUnsafe, Show: []string{verdict.StaleWriteRejected},
				Why: "the lease lapses under the slow holder, cut off or not, and the store rejects its stale token (Kleppmann's fencing)"}),
			serverEndsEarlyUnsafe,
			expect(and(expires, unfenced), verdict.Expectation{Outcome: verdict.Unsafe, Hide: []string{"promise-broken"},
				Why: "the work outlives the lease, cut off or not: a lease promises nothing past its deadline"}),
			leaveOut(local, "the control keeps nothing on a server to be cut off from"),
		},
		Requires: []fault.Evidence{{Op: fault.Stall, Point: workloads.BeforeWrite}, {Op: fault.PartitionStart}, {Op: fault.PartitionEnd}},
		// The cut heals when the holder has written and goes to release:
		// healing it as the work ends would race the write, and a link
		// that heals may end a session the cut kept open (PostgreSQL's),
		// freeing the lock under a holder still at work. The trap arms at
		// two TTLs: a slow lock (redsync's Redlock over five nodes) may
		// have answered fewer than the three attempts a story needs by
		// one on a loaded machine.
		Plan: Plan{arm(2, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(2.5), Stall: true,
			Then: []Action{{Do: "partition", Cuts: []Cut{{From: "client caught", Nodes: []string{"all"}}}}},
			Wake: []Action{armed(Trap{Point: workloads.BeforeRelease, Client: "caught", Then: []Action{{Do: "heal"}}})}})},
	}
}

func serverClockJumpStory() Scenario {
	return Scenario{
		Name: "server-clock-jump",
		NotFor: joined(notFor("ZooKeeper's JVM is not run under libfaketime here; its session expiry reads a monotonic clock, which a jump of the wall clock does not move", zookeeper),
			notFor("etcd is a Go program: it reads the clock through the vDSO, which libfaketime cannot move", etcd)),
		Story: "While a client holds the lock, the wall clock of its server (n1) jumps 10 TTLs forward; the holder, " +
			"briefly paused inside its lease, then writes.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Topology: Topology{Clock: true},
		Rules: []Rule{
			leaveOut(racyAcquire, "its acquire races its own commands and lets two in with no fault now and then (wolph/portalocker#139): portalocker came out unsafe here 0.4 s before the jump, in 1 of 521 pairs of a make run, so a run may come out either way; docs/scenarios/subscribe-race.json tells it"),
			expect(or(connection, never), verdict.Expectation{Outcome: verdict.Safe,
				Why: "a session lock, or a lock table's row, has no expiry: no clock is read"}),
			leaveOut(and(serverEndsEarly, clock(locks.ServerMonotonic)), "memcached's item clock does not move with the jump, so what is left to judge is its one-second tick, which may end a 1 s lease before the deadline the library reports (docs/stories.md, Findings): a holder paused inside its lease then loses its key with no help from the jump, now and then (symfony-memcached: two holders for 14 ms, 1 of 522 pairs of a make run); paused-holder tells it"),
			expect(clock(locks.ServerMonotonic), verdict.Expectation{Outcome: verdict.Safe,
				Why: "memcached ticks its item clock from a monotonic clock, which a jump of the wall clock does not move"}),
			leaveOut(not(oneNode), "told on the one server of a single-node lock; redlock-clock-jump tells a majority's node"),
			standsFor([]string{"set-nx-px"}, "every Redis lock's keys expire by the one server's wall clock; redlock-clock-jump tells the multi-node ones",
				"fair", "getset", "reentrant", "reentrant-async", "reentrant-lost", "set-nx-px-del", "set-nx-px-fenced", "set-nx-px-wait", "setnx-expire"),
			expect(and(expires, clock(locks.ServerWall), oneNode, unfenced), verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
				Why: "expiry follows the server's wall clock: the jump expires a live lease and the next holder takes it within the holder's deadline"}),
			expect(and(renewed, oneNode), verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "the key's time to live runs on the server's wall clock: the jump expires it at once, a waiter takes the lock while the holder works, and the watchdog finds nothing to renew; a watchdog promises no deadline, so there is no promise to see broken"}),
			leaveOut(local, "the control keeps nothing on a server whose clock could move"),
		},
		Requires: []fault.Evidence{{Op: fault.ClockBump, Node: "n1"}},
		// Another client must reach for the lock between the jump and the
		// holder's write: where none does (a loaded machine's waiters
		// answered only after the write), the key's early end let nobody
		// in, and a pass says nothing of it. Asked only of a run that showed
		// no violation where one was expected: a lock that holds keeps its
		// waiters in one acquire, and a successor's grant answered after
		// the write is a violation still.
		Traffic: verdict.Traffic{Before: 3, During: 1, After: 3, Contended: 1, ContendedIfShort: true},
		// Armed at two TTLs: a lock whose waiters retry on their own clock
		// (redsync's 50 to 250 ms) had answered a single attempt by one
		// TTL on a machine setting itself up.
		Plan: Plan{holderInLease(2, Action{Do: "clock-bump", Node: "n1", By: TTLs(10)})},
	}
}

// holderInLease is the step of a fault done to a holder's service
// (then) as K5 tells it: the next holder to reach its write waits there
// while the fault happens, then pauses briefly, ending inside its lease,
// so a lock that forgot the holder has handed the key on before the
// holder writes. It arms at the at-th TTL.
func holderInLease(at float64, then ...Action) Step {
	return arm(at, Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.6), InLease: TTLs(holderWakesIn), MinPause: TTLs(holderPausesAtLeast), Then: then})
}

// A holder caught by holderInLease pauses at least holderPausesAtLeast
// and wakes holderWakesIn before its lease ends (in TTLs): what is left
// of a lease is the share Then (a node's restart) may take.
const (
	holderWakesIn       = 0.1
	holderPausesAtLeast = 0.3
	holderRestartShare  = 1 - holderWakesIn - holderPausesAtLeast
)
