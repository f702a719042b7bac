package scenario

import (
	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// redlockNodes is how many lock nodes the RedLock stories are told on:
// A–E, whose split and shared node C the schedules name.
const redlockNodes = 5

// redlockRules judge the locks on a majority of nodes by e, and leave
// every other out: a story of RedLock's split needs a majority to split.
func redlockRules(e verdict.Expectation) []Rule {
	return []Rule{notOnFive, expect(majority, e), notOnAMajority}
}

// notOnFive leaves out a RedLock registered on another count of nodes:
// the stories are told on five, where the same library's five-node lock
// (symfony-redlock5 beside symfony-redlock3) is judged.
var notOnFive = leaveOut(and(majority, not(fiveNodes)), "told on five nodes, and this lock is registered on another count: the same library's five-node lock is judged here")

// redlockNotFor is why the RedLock splits judge no service's lock.
var redlockNotFor = notFor("told on five independent Redis nodes and RedLock's majority of them; each service keeps its own replicas consistent (server-crash, leader-failover)", serviceKinds...)

// notOnAMajority leaves out the locks on one node, or on all of several.
var notOnAMajority = leaveOut(not(majority), "told on independent Redis nodes split around the middle one: a lock on one node, or on all of several, has no majority to split")

// redlockSplit is K4/K5's partition: client 0 reaches the nodes up to the
// middle one, client 1 the middle one and those after it (of five: n1..n3
// and n3..n5); the middle one (C) is the one node their majorities share.
var redlockSplit = step(0, Action{Do: "partition", Cuts: []Cut{{From: "client 0", Nodes: []string{"above-middle"}}, {From: "client 1", Nodes: []string{"below-middle"}}}})

// redlockNodesParam is K4 and K5's count of lock nodes: a sweep of it asks
// whether more nodes help when the one node two majorities share forgets.
var redlockNodesParam = Param{Name: NodesParam, Unit: "nodes", Default: redlockNodes, Min: 3, Max: 9,
	Help: "how many lock nodes (odd): client 0 reaches those up to the middle one, client 1 those from it on"}

// The arguments about RedLock: Kleppmann's clock jump (K4) and crash-restart
// (K5) with antirez's two mitigations, and antirez's late replies (K6).
func redlockStories(add func(Scenario)) {
	add(redlockClockJumpStory())
	add(redlockCrashRestartStory())
	add(redlockCrashRestartDelayedStory())
	add(redlockCrashRestartFsyncStory())
	add(redlockPausedRepliesStory())
}

var brokenPromise = verdict.Expectation{Outcome: verdict.Unsafe, Show: []string{"promise-broken"},
	Why: "the lock hands the key out twice while each client is within its validity: the algorithm itself is violated"}

// crashRestart is K5's schedule, C restarted delay TTLs after its kill.
// The trap arms at crashRestartArms TTLs, not the others' one: a
// RedLock that asks its five nodes one after another, two of them cut
// (Symfony's CombinedStore), takes a fifth of the TTL per acquire and as
// much per release, so by one TTL it has completed two attempts, fewer
// than the traffic floor before the kill that proves the story happened.
var crashRestart = func(delay float64) Plan {
	return Plan{redlockSplit, holderInLease(crashRestartArms, Action{Do: "kill", Node: "middle"}, Action{Do: "restart", Node: "middle", Delay: TTLs(delay)})}
}

const crashRestartArms = 2

var crashRestartRequires = []fault.Evidence{{Op: fault.Kill}, {Op: fault.Restart}, {Op: fault.PartitionStart}}

func redlockClockJumpStory() Scenario {
	return Scenario{
		Name:   "redlock-clock-jump",
		NotFor: redlockNotFor,
		Nodes:  redlockNodes,
		Split:  true,
		Story: "K4 (Kleppmann 2016): nodes A–E; client 0 reaches A,B,C, client 1 reaches C,D,E. While one of them holds its three " +
			"nodes (whichever locks first), C's clock jumps 10 TTLs forward (by default) and C drops the key; the other locks C and its own two.",
		ExactClients: 2, TimeLimitTTLs: 6, MinTimeLimitTTLs: 3,
		Topology: Topology{Clock: true},
		Rules:    redlockRules(brokenPromise),
		Requires: []fault.Evidence{{Op: fault.ClockBump}, {Op: fault.PartitionStart}},
		// The other client must try its three nodes after the jump and
		// before the holder writes: a waiter whose slow attempt asked C
		// before the jump, and whose next came after the write, told
		// nothing.
		Traffic: verdict.Traffic{Before: 3, During: 1, After: 3, Contended: 1},
		// A jump shorter than what is left of the key's PX keeps the key on
		// C; one longer drops it: a sweep of the jump finds the lease's
		// length.
		Params: []Param{{Name: "jump", Unit: "TTLs", Default: 10, Min: 0, Max: 20, Threshold: 1,
			Help: "how far C's clock jumps forward while a client holds its three nodes"}, redlockNodesParam},
		Plan: Plan{redlockSplit, holderInLease(1, Action{Do: "clock-bump", Node: "middle", By: ParamNum("jump")})},
	}
}

func redlockCrashRestartStory() Scenario {
	return Scenario{
		Name:   "redlock-crash-restart",
		NotFor: redlockNotFor,
		Nodes:  redlockNodes,
		Split:  true,
		Story: "K5 (Kleppmann 2016): client 0 holds A,B,C; C is killed and restarts at once without the key (no persistence); " +
			"client 1 locks C,D,E.",
		ExactClients: 2, TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Rules:    redlockRules(brokenPromise),
		Requires: crashRestartRequires,
		Params:   []Param{redlockNodesParam},
		Plan:     crashRestart(0),
	}
}

func redlockCrashRestartDelayedStory() Scenario {
	return Scenario{
		Name:          "redlock-crash-restart-delayed",
		NotFor:        redlockNotFor,
		Nodes:         redlockNodes,
		Split:         true,
		Story:         "K5 mitigated (antirez 2016): as redlock-crash-restart, but C restarts only after 2 TTLs, when every lease it held has expired.",
		ExactClients:  2,
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Rules: redlockRules(verdict.Expectation{Outcome: verdict.Safe,
			Why: "a node that stays down longer than the TTL cannot grant a key some client still holds (antirez's delayed restart)"}),
		Requires: crashRestartRequires,
		Params:   []Param{redlockNodesParam},
		Plan:     crashRestart(2),
	}
}

func redlockCrashRestartFsyncStory() Scenario {
	return Scenario{
		Name:          "redlock-crash-restart-fsync",
		NotFor:        redlockNotFor,
		Nodes:         redlockNodes,
		Split:         true,
		Story:         "K5 mitigated (antirez 2016): as redlock-crash-restart, but every node runs appendfsync always, so C restarts with the key.",
		ExactClients:  2,
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Topology: Topology{Persistence: cluster.AOFAlways},
		Rules: redlockRules(verdict.Expectation{Outcome: verdict.Safe,
			Why: "with fsync always the restarted node still holds the key (antirez's mitigation)"}),
		Requires: crashRestartRequires,
		Params:   []Param{redlockNodesParam},
		Plan:     crashRestart(0),
	}
}

func redlockPausedRepliesStory() Scenario {
	return Scenario{
		Name:   "redlock-paused-replies",
		NotFor: notFor("told on five independent Redis nodes and RedLock's validity check; each service's lock is taken in one request to one service", serviceKinds...),
		Nodes:  redlockNodes,
		Story: "K6 (antirez 2016): client 1 sends SET to every node, all say OK, and it pauses for 1.5 TTLs before reading the replies; " +
			"its keys expire, client 2 locks every node and works; client 1 reads its OKs while client 2 still holds the lock.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Rules: []Rule{
			notOnFive,
			leaveOut(and(majority, expirySeparate), "Symfony's CombinedStore takes each node with an EVAL of its save script (a 300 s initialTtl) and sets the lease only with a second EVAL (refresh): the story's trap waits for every node's SET NX OK, and a pause after save's replies would expire nothing for 300 s"),
			expect(and(majority, validity), verdict.Expectation{Outcome: verdict.Safe, Why: "the elapsed-time check after acquisition sees the TTL has passed and gives the lock up (antirez)"}),
			expect(and(majority, phpLock), verdict.Expectation{Outcome: verdict.Unsafe,
				Why: "php-lock checks the time its acquire took against its key's whole life (timeout + 1 s, RedisMutex::acquire), not against the lease it holds itself to (timeout, SpinlockMutex::unlock): a 1.5-TTL pause at the story's 1 s TTL passes the check, and the holder runs its code on keys that are gone (docs/stories.md, Findings)"}),
			expect(majority, verdict.Expectation{Outcome: verdict.Unsafe, Why: "without the validity check the client believes a lock that expired while it slept"}),
			notOnAMajority,
		},
		Requires: []fault.Evidence{{Op: fault.Pause, Reply: true}, {Op: fault.Stall, Point: workloads.BeforeWrite}},
		// The trap stands on the client's connections, not in the lock:
		// when the last of the OKs from every node arrives, the whole
		// client freezes before the lock sees it. A try that lost a node
		// to another client does not count: its client holds nothing to
		// believe in late. Nobody can lock until client 1's keys expire
		// (+1 TTL); the first who does then works for 0.8 TTL, inside its
		// own lease (+2 TTL), so it is still in its critical section when
		// client 1 wakes (+1.5 TTL).
		Plan: Plan{arm(1, Trap{Command: &nemesis.Command{In: history.Acquire, Match: "SET NX|SETNX", Every: redlockNodes, Reply: true},
			Client: "any", Pause: TTLs(1.5),
			Then: []Action{armed(Trap{Point: workloads.BeforeWrite, Client: "any", Pause: TTLs(0.8), Stall: true})}})},
	}
}
