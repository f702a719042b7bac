package scenario

import (
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
			expect(or(session, connection, expires), verdict.Expectation{Outcome: verdict.Safe,
				Why: "a dead holder's session, connection or lease ends without it (its timeout, its closed socket, its TTL) and the others carry on"}),
		},
		Requires: []fault.Evidence{{Op: fault.Crash, Point: workloads.BeforeWrite}},
		Plan:     Plan{arm(1, Trap{Point: workloads.BeforeWrite, Client: "any", Crash: true})},
	}
}

func releaseCutStory() Scenario {
	return Scenario{
		Name:   "release-cut",
		NotFor: joined(notFor("curator#1193 is a release during a connection loss of ZooKeeper's lock recipe; isolated-holder cuts every lock's holder from its service", redis, etcd, postgres, memcached)),
		Story: "Field (curator#1193, CURATOR-678): as the holder goes to release, it is cut off from every member of the ensemble for two sessions; " +
			"its delete cannot reach the ensemble, its session expires there, and the cut heals. Does the lock stay stuck, or let two in?",
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
