package scenario

import (
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Stories from the trackers of ZooKeeper's lock recipe (Apache Curator's
// InterProcessMutex, kazoo's Lock), and the death of a holder's process,
// which every lock that ends on a session must survive. Curator's Tech
// Note 10 (a pause longer than the session) is paused-holder, and
// curator#727 (a holder not told its node went with its session) is
// isolated-holder: their rules cite them.
func zooKeeperStories(add func(Scenario)) {
	add(killedHolderStory())
	add(releaseCutStory())
	add(ensembleRestartStory())
}

func killedHolderStory() Scenario {
	return Scenario{
		Name:   "killed-holder",
		NotFor: notFor("setnx-crash kills a Redis lock's holder inside its critical section (its second trap) and judges each lock there", redis),
		Story: "A holder's process is killed inside its critical section (SIGKILL for a worker; in the harness, every connection of it closed " +
			"and none opened again) and never releases; its session, connection or lease must end without it, and the others carry on.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		Rules: []Rule{
			expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the killed process never closes its session, so the ensemble expires it after its timeout and deletes its ephemeral node (Curator's InterProcessMutex docs, kazoo's Lock: a node lives with its session), and the next waiter's watch fires"}),
			leaveOut(serverEndsEarly, "its server may end any lease before the deadline the library reports (docs/stories.md, Findings), so whether a waiter gets in within a holder's deadline, the dead one's or a live one's, is timing: two of two runs here came out lock-unsafe with promise-broken and the register intact; paused-holder and the library's own test tell it"),
			expect(or(session, connection, expires, renewed), verdict.Expectation{Outcome: verdict.Safe,
				Why: "a dead holder's session, connection or lease ends without it (its timeout, its closed socket, its TTL) and the others carry on"}),
			expect(never, verdict.Expectation{Outcome: verdict.Deadlock,
				Why: "the article's own drawback of the lock table: no expiry, so the dead holder's row stays and every INSERT after it is refused by the unique key; nobody takes the lock again"}),
		},
		Requires: []fault.Evidence{{Op: fault.Crash, Point: workloads.BeforeWrite}},
		// Armed after 2 TTLs, not 1: five JVM workers' first acquires,
		// beside a busy machine, completed only two lock attempts in the
		// first second, short of the three the story needs before its
		// fault.
		Plan: Plan{arm(2, Trap{Point: workloads.BeforeWrite, Client: "any", Crash: true})},
	}
}

func releaseCutStory() Scenario {
	return Scenario{
		Name:   "release-cut",
		NotFor: joined(notFor("curator#1193 is a release during a connection loss of ZooKeeper's lock recipe; isolated-holder cuts every lock's holder from its service", redis, etcd, postgres, memcached, mariadb)),
		Story: "Field (curator#1193, CURATOR-678): as the holder goes to release, it is cut off from every member of the ensemble for two sessions; " +
			"its delete cannot reach the ensemble, its session expires there, and the cut heals. Does the lock stay stuck, or let two in? " +
			"(The cut outlasts the session, so this is the release's expiry path; the report's own state, a node kept by a live session " +
			"after a release that gave up, needs a worker that outlives a failed release, and the harness retires it.)",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 5,
		Rules: []Rule{
			expect(zooKeeperLibrary, verdict.Expectation{Outcome: verdict.Safe,
				Why: "the release deletes only its own sequential node, so no one else's hold is touched (kezhuw on curator#1193); the ensemble expires the cut-off session and its node with it, and a waiter takes the lock, while Curator's guaranteed delete and kazoo's retried one wait for the link or give up"}),
			expect(kind(zookeeper), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the release deletes only the client's own node; the cut-off session expires at the ensemble, its node with it, and a waiter takes the lock"}),
		},
		Requires: []fault.Evidence{{Op: fault.PartitionStart}, {Op: fault.PartitionEnd}},
		Plan: Plan{arm(1, Trap{Point: workloads.BeforeRelease, Client: "any",
			Then: []Action{{Do: "partition", Cuts: []Cut{{From: "client caught", Nodes: []string{"all"}}}}, {Do: "heal", Delay: TTLs(2)}}})},
	}
}

func ensembleRestartStory() Scenario {
	return Scenario{
		Name:   "ensemble-restart",
		NotFor: notFor("curator#1121 is a session expired on the client and kept on the ensemble, which a ZooKeeper lock recipe meets; a server of one's restart is server-crash", redis, etcd, postgres, memcached, mariadb),
		Story: "Field (curator#1121, CURATOR-604): while one client holds the lock and the others wait, every member of the ensemble is killed; " +
			"one is started again at once and the others so that the ensemble serves about 1.2 sessions after the kill, and the clients' links to it " +
			"stay cut until it has elected a leader and at least 1.1 sessions after the kill, so it serves them nothing for more than a session. The restarted ensemble restores every session with a fresh timeout, but a client that declared " +
			"its session lost meanwhile has opened a new one, while its old lock node lives on: the holder releases, a waiter finds its old node " +
			"first and takes the lock, works on (1.5 sessions), and the old session's expiry deletes that node under it.",
		// Three-second sessions. A client gets back when the cut heals,
		// plus the ZooKeeper client's reconnect pause (up to 1 s), and
		// that must come after Curator counts its session out (a session
		// after the kill), before the restored sessions' fresh timeout
		// ends the waiters' old nodes (a session after the ensemble
		// serves), and before a waiter's retries give up (about 6.3 s
		// after the kill: a connection timeout after the LOST, and a
		// retry's sleep). So the cut heals once a member leads, and no
		// sooner than 1.1 sessions (LOST, with 0.3 s to spare), and the
		// ensemble is to serve at 1.2 sessions (3.6 s): its old sessions
		// then last until about 6.6 s, and the clients are back by about
		// 4.6 s. Its members' start and election take under a second on
		// a fast machine and up to 5 s beside two busy loops, so no fixed
		// restart delay serves at 3.6 s on both (one that lets a slow
		// start serve in time has a fast one serve so early that the old
		// sessions expire before a waiter reads the children);
		// restart-ensemble times the others' start by the first's.
		// Waiters wait 8 sessions, longer than any of that.
		TTL: 3 * time.Second, WaitTTLs: 8,
		TimeLimitTTLs: 8, MinTimeLimitTTLs: 7,
		Rules: []Rule{
			expect(and(clientEndsSession, fenced), verdict.Expectation{Outcome: verdict.LockUnsafe,
				Why: "curator#1121 just the same, but the waiter's lock node is its old session's, created before its successors', so its czxid is the older and the store refuses its write once a successor has written"}),
			expect(clientEndsSession, verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "curator#1121 (CURATOR-604, open): Curator declares the sessions LOST while the ensemble is down and opens new ones; the restarted ensemble restores the old sessions and their nodes; a waiter on its new session finds its old node first (LockInternals checks the node's name, never its owner) and holds the lock until the old session expires under it, and the next waiter takes it. A listener hears RECONNECTED and nothing after it"}),
			expect(kind(zookeeper), verdict.Expectation{Outcome: verdict.Safe,
				Why: "the client never gives its session up by its own clock (kazoo's LOST comes only from the ensemble; go-zookeeper's likewise): it reconnects with the same session, which the restarted ensemble restored, and its node is its own; or, reconnecting too late, it hears LOST from the ensemble, whose expiry took its node first"}),
		},
		Requires: []fault.Evidence{{Op: fault.Kill}, {Op: fault.PartitionStart}, {Op: fault.Restart}, {Op: fault.Stall, Point: workloads.BeforeWrite}},
		Plan: Plan{arm(1, Trap{Point: workloads.BeforeRelease, Client: "any", Pause: TTLs(0.1), Stall: true,
			Then: []Action{{Do: "kill", Node: "n1"}, {Do: "kill", Node: "n2"}, {Do: "kill", Node: "n3"},
				{Do: "partition", Cuts: []Cut{{From: "every client", Nodes: []string{"all"}}}},
				{Do: "restart-ensemble", For: TTLs(1.2)},
				{Do: "heal-once-led", Delay: TTLs(1.1)}},
			Wake: []Action{armed(Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(1.5), Stall: true})}})},
	}
}
