// Package scenario holds the built-in failure stories and runs one
// (scenario, lock) pair end to end: cluster, workload, nemesis, history,
// checkers, report. cmd/run is only flags around it.
package scenario

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// Outcomes a run can show, most serious first. Expectations are stated in
// the same words.
const (
	// Unsafe: the protected resource was corrupted (lost update or stale
	// write).
	Unsafe = "unsafe"
	// LockUnsafe: two processes held the lock at once, yet the resource is
	// intact: what fencing tokens buy (Kleppmann).
	LockUnsafe = "lock-unsafe"
	// Deadlock: a key nobody held stayed unobtainable past the allowance.
	Deadlock = "deadlock"
	// Unfair: a later waiter was granted the lock before an earlier one.
	Unfair = "unfair"
	// Safe: every checker valid.
	Safe = "safe"
	// Undecided: some checker could not decide. Never matches.
	Undecided = "unknown"
)

// Observations an expectation can require or forbid, besides anomaly kinds
// (double-holder, promise-broken, lost-update, foreign-release, ...).
const (
	// StaleWriteRejected: the fenced store refused at least one write.
	StaleWriteRejected = "stale-write-rejected"
)

// Expectation is what a lock must show under a scenario.
type Expectation struct {
	// Outcome is one of the outcome words.
	Outcome string `json:"outcome"`
	// Show lists observations that must be seen: proof the story happened
	// the way it is told, not some other way.
	Show []string `json:"show,omitempty"`
	// Hide lists observations that must not be seen.
	Hide []string `json:"hide,omitempty"`
	// Why cites the argument behind the expectation.
	Why string `json:"why"`
}

func (e Expectation) String() string {
	s := e.Outcome
	for _, o := range e.Show {
		s += " +" + o
	}
	for _, o := range e.Hide {
		s += " −" + o
	}
	return s
}

// Topology is how a scenario's lock nodes are set up.
type Topology struct {
	// Clock runs every lock node under libfaketime (node clock faults).
	Clock bool
	// Persistence is every lock node's.
	Persistence cluster.Persistence
	// Replicated gives the (single) lock node a replica that replicates
	// through its own link; clients dial whichever is primary.
	Replicated bool
}

// Env is what a scenario's schedule acts on.
type Env struct {
	TTL       time.Duration
	TimeLimit time.Duration
	Lock      string
	Seed      int64
	// Nodes are the lock nodes' names, in order; Clients the clients' peer
	// names (client i is Clients[i]).
	Nodes, Clients []string
	Gate           *nemesis.Gate
	Nemesis        *nemesis.Nemesis
	// Primary is set in a replicated topology; Replica names the replica.
	Primary *cluster.Primary
	Replica string
	// Clocks are the clients' own clocks.
	Clocks []*nemesis.ClientClock
}

// Scenario is one failure story.
type Scenario struct {
	Name string
	// Story tells what happens, in a sentence or two.
	Story string
	// TTL and Clients are defaults the flags may override; TimeLimitTTLs
	// is the default time limit in TTLs, MinTimeLimitTTLs the shortest at
	// which the story can play out.
	TTL     time.Duration
	Clients int
	// ExactClients, when set, is the only client count the story works
	// with (one client on each side of a partition).
	ExactClients     int
	TimeLimitTTLs    float64
	MinTimeLimitTTLs float64
	Topology         Topology
	// Expect says, for every lock the story applies to, what it must show.
	Expect map[string]Expectation
	// Fairness adds the fairness checker (the story is about order).
	Fairness bool
	// HoldTTLs is how long, in TTLs, each client works in its critical
	// section (0: no time at all).
	HoldTTLs float64
	// Random marks the exploration scenario: not part of "all".
	Random bool
	// Schedule builds the faults.
	Schedule func(*Env) (nemesis.Schedule, error)
}

// TimeLimit is the default time limit at ttl.
func (s Scenario) TimeLimit(ttl time.Duration) time.Duration {
	return time.Duration(s.TimeLimitTTLs * float64(ttl))
}

// MinTimeLimit is the shortest time limit at which the story can happen.
func (s Scenario) MinTimeLimit(ttl time.Duration) time.Duration {
	return time.Duration(s.MinTimeLimitTTLs * float64(ttl))
}

var catalogue = map[string]Scenario{}

func add(s Scenario) {
	if s.TTL == 0 {
		s.TTL = 500 * time.Millisecond
	}
	if s.ExactClients > 0 {
		s.Clients = s.ExactClients
	}
	if s.Clients == 0 {
		s.Clients = 5
	}
	if s.MinTimeLimitTTLs == 0 {
		s.MinTimeLimitTTLs = s.TimeLimitTTLs
	}
	catalogue[s.Name] = s
}

// Lock groups the expectations are written for.
var (
	// ownerBlind locks release with a plain DEL: a client whose lease lapsed
	// deletes whoever holds the lock when its release lands, which breaks
	// the lock's own promise whenever someone does hold it then (S3).
	ownerBlind    = []string{"set-nx-px-del", "setnx-expire"}
	ownerChecked  = []string{"set-nx-px", "getset", "redlock", "redlock-novalidity"}
	watchdogLocks = []string{"reentrant", "fair", "multilock"}
	singleMaster  = []string{"set-nx-px", "set-nx-px-fenced", "set-nx-px-del", "setnx-expire", "getset", "reentrant", "fair"}
)

// expect builds an expectation table: the same expectation for each lock
// named, merged over earlier entries.
func expect(groups ...any) map[string]Expectation {
	out := map[string]Expectation{}
	for i := 0; i+1 < len(groups); i += 2 {
		e := groups[i+1].(Expectation)
		switch names := groups[i].(type) {
		case string:
			out[names] = e
		case []string:
			for _, n := range names {
				out[n] = e
			}
		}
	}
	return out
}

func all(names ...[]string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n...)
	}
	return out
}

// ttls is n TTLs.
func (e *Env) ttls(n float64) time.Duration { return time.Duration(n * float64(e.TTL)) }

// act is a schedule step doing f at offset at.
func act(at time.Duration, name string, f func(context.Context) error) nemesis.Step {
	return nemesis.Step{At: at, Name: name, Do: f}
}

// redlockSplit is K4/K5's partition: client 0 reaches n1..n3, client 1
// reaches n3..n5; n3 (C) is the one node they share.
func redlockSplit(e *Env) nemesis.Grudge {
	return nemesis.Grudge{e.Clients[0]: {"n4", "n5"}, e.Clients[1]: {"n1", "n2"}}
}

func init() {
	add(Scenario{
		Name:          "baseline",
		Story:         "No faults. Every lock must keep mutual exclusion and make progress; a checker that flags this run is broken.",
		TimeLimitTTLs: 4, MinTimeLimitTTLs: 1, // no story to play out
		// Every lock, the broken ones too: each breaks only under its fault.
		Expect:   expect(locks.Names(), Expectation{Outcome: Safe, Why: "no fault, no violation: a positive here is a harness bug"}),
		Schedule: func(*Env) (nemesis.Schedule, error) { return nil, nil },
	})

	pausedHolder := func(e *Env) (nemesis.Schedule, error) {
		// Warm up one TTL, then stop the next client to reach the write
		// for 2.5 TTLs, whole (watchdog included), as a GC pause would.
		return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(2.5)})}, nil
	}
	k1 := expect(
		all(ownerChecked, watchdogLocks), Expectation{Outcome: Unsafe, Hide: []string{"promise-broken"},
			Why: "no lease stops a paused holder: its lease lapses, a successor writes, the holder wakes and writes too (Kleppmann); the lock kept its own promise, the client did not"},
		ownerBlind, Expectation{Outcome: Unsafe,
			Why: "as for every lease (Kleppmann); and when the woken holder's plain DEL lands while someone holds the lock, it deletes that lock and the lock breaks its own promise too (S3): timing decides, so that is neither required nor forbidden here"},
		"set-nx-px-fenced", Expectation{Outcome: LockUnsafe, Show: []string{StaleWriteRejected}, Hide: []string{"promise-broken"},
			Why: "the lease is outlived just the same, but the store rejects the woken holder's stale token (Kleppmann's fencing)"},
	)
	add(Scenario{
		Name: "paused-holder",
		Story: "K1 (Kleppmann 2016): a client holding the lock pauses inside its critical section (a GC pause) " +
			"longer than the TTL; the lease expires, another client takes the lock and writes; the first wakes and writes too.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Expect:   k1,
		Schedule: pausedHolder,
	})

	add(Scenario{
		Name: "delayed-write",
		Story: "K2 (Kleppmann 2016): client 0's requests to the protected store are delayed in the network (0.75 TTL each way out) " +
			"so its write lands after its lease expired and a successor wrote.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Expect: expect(
			ownerChecked, Expectation{Outcome: Unsafe, Hide: []string{"promise-broken"},
				Why: "the write outlives the lease in the network, where no client-side check can see it (Kleppmann)"},
			ownerBlind, Expectation{Outcome: Unsafe,
				Why: "the write outlives the lease (Kleppmann); the late client's plain DEL may also delete a successor's lock, breaking the lock's own promise (S3), as timing decides"},
			"set-nx-px-fenced", Expectation{Outcome: LockUnsafe, Show: []string{StaleWriteRejected},
				Why: "the late write carries a stale token and the store rejects it"},
			watchdogLocks, Expectation{Outcome: Safe,
				Why: "the holder's process is alive and reaches Redis, so its watchdog keeps renewing while the write is delayed: nobody else gets the lock (only a pause of the whole process, K1, defeats it)"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			peer := e.Clients[0]
			return nemesis.Schedule{
				act(e.TTL, "delay client 0's requests to the store", func(context.Context) error {
					return e.Nemesis.LatencyDirection(peer, "store", "upstream", e.ttls(0.75), 0)
				}),
				act(e.ttls(5), "end the delay", func(context.Context) error { return e.Nemesis.Latency(peer, "store", 0, 0) }),
			}, nil
		},
	})

	add(Scenario{
		Name:          "fencing",
		Story:         "K3 (Kleppmann 2016): K1 with a store that rejects tokens not greater than the last it accepted.",
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 5,
		Expect: expect("set-nx-px-fenced", Expectation{Outcome: LockUnsafe, Show: []string{StaleWriteRejected}, Hide: []string{"stale-write"},
			Why: "two clients believe they hold the lock, but tokens strictly increase and the store keeps itself consistent"}),
		Schedule: pausedHolder,
	})

	brokenPromise := Expectation{Outcome: Unsafe, Show: []string{"promise-broken"},
		Why: "the lock hands the key out twice while each client is within its validity: the algorithm itself is violated"}
	add(Scenario{
		Name: "redlock-clock-jump",
		Story: "K4 (Kleppmann 2016): nodes A–E; client 0 reaches A,B,C, client 1 reaches C,D,E. While client 0 holds A,B,C, " +
			"C's clock jumps 10 TTLs forward and C drops the key; client 1 locks C,D,E.",
		ExactClients: 2, TimeLimitTTLs: 6, MinTimeLimitTTLs: 3,
		Topology: Topology{Clock: true},
		Expect:   expect([]string{"redlock", "redlock-novalidity"}, brokenPromise),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{
				act(0, "split clients across A..E", func(context.Context) error { return e.Nemesis.Partition(redlockSplit(e)) }),
				e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(0.6),
					Then: func(context.Context, int, int) error { return e.Nemesis.BumpClock("n3", e.ttls(10)) }}),
			}, nil
		},
	})

	crashRestart := func(delayTTLs float64) func(*Env) (nemesis.Schedule, error) {
		return func(e *Env) (nemesis.Schedule, error) {
			delay := e.ttls(delayTTLs)
			return nemesis.Schedule{
				act(0, "split clients across A..E", func(context.Context) error { return e.Nemesis.Partition(redlockSplit(e)) }),
				e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(0.6),
					Then: func(ctx context.Context, _, _ int) error {
						if err := e.Nemesis.KillNode("n3"); err != nil {
							return err
						}
						if delay == 0 {
							return e.Nemesis.RestartNode(ctx, "n3", 0)
						}
						go func() { _ = e.Nemesis.RestartNode(context.WithoutCancel(ctx), "n3", delay) }()
						return nil
					}}),
			}, nil
		}
	}
	add(Scenario{
		Name: "redlock-crash-restart",
		Story: "K5 (Kleppmann 2016): client 0 holds A,B,C; C is killed and restarts at once without the key (no persistence); " +
			"client 1 locks C,D,E.",
		ExactClients: 2, TimeLimitTTLs: 6, MinTimeLimitTTLs: 3,
		Expect:   expect([]string{"redlock", "redlock-novalidity"}, brokenPromise),
		Schedule: crashRestart(0),
	})
	add(Scenario{
		Name:          "redlock-crash-restart-delayed",
		Story:         "K5 mitigated (antirez 2016): as redlock-crash-restart, but C restarts only after 2 TTLs, when every lease it held has expired.",
		ExactClients:  2,
		TimeLimitTTLs: 7, MinTimeLimitTTLs: 4,
		Expect: expect([]string{"redlock", "redlock-novalidity"}, Expectation{Outcome: Safe,
			Why: "a node that stays down longer than the TTL cannot grant a key some client still holds (antirez's delayed restart)"}),
		Schedule: crashRestart(2),
	})
	add(Scenario{
		Name:          "redlock-crash-restart-fsync",
		Story:         "K5 mitigated (antirez 2016): as redlock-crash-restart, but every node runs appendfsync always, so C restarts with the key.",
		ExactClients:  2,
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 3,
		Topology: Topology{Persistence: cluster.AOFAlways},
		Expect: expect([]string{"redlock", "redlock-novalidity"}, Expectation{Outcome: Safe,
			Why: "with fsync always the restarted node still holds the key (antirez's mitigation)"}),
		Schedule: crashRestart(0),
	})

	add(Scenario{
		Name: "redlock-paused-replies",
		Story: "K6 (antirez 2016): client 1 sends SET to every node, all say OK, and it pauses for 1.5 TTLs before reading the replies; " +
			"its keys expire, client 2 locks every node and works; client 1 reads its OKs while client 2 still holds the lock.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Expect: expect(
			"redlock", Expectation{Outcome: Safe, Why: "the elapsed-time check after acquisition sees the TTL has passed and gives the lock up (antirez)"},
			"redlock-novalidity", Expectation{Outcome: Unsafe, Why: "without the validity check the client believes a lock that expired while it slept"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: locks.PointBeforeReplies, Client: nemesis.AnyClient, Pause: e.ttls(1.5),
				// Nobody can lock until client 1's keys expire (+1 TTL); the
				// first who does then works for 0.8 TTL, inside its own lease
				// (+2 TTL), so it is still in its critical section when
				// client 1 wakes (+1.5 TTL).
				Then: func(context.Context, int, int) error {
					e.Gate.Arm(nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(0.8), Stall: true})
					return nil
				}})}, nil
		},
	})

	add(Scenario{
		Name: "failover",
		Story: "F1: replication to the replica is cut; a client locks on the master; while it works in its critical section " +
			"the master is killed and the replica promoted by hand; the others lock on the new master.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 3,
		Topology: Topology{Replicated: true},
		Expect: expect(
			[]string{"set-nx-px", "set-nx-px-del", "setnx-expire", "getset"}, Expectation{Outcome: Unsafe, Show: []string{"promise-broken"},
				Why: "asynchronous replication loses the lock with the master: a second client gets it while the first is within its validity"},
			[]string{"reentrant", "fair"}, Expectation{Outcome: Unsafe,
				Why: "the lock hash dies with the master; the promoted replica never had it"},
			"set-nx-px-fenced", Expectation{Outcome: LockUnsafe, Show: []string{StaleWriteRejected},
				Why: "the fencing counter is lost with the master too: the new master's tokens start again below the old ones, so the store rejects every new holder's write, and only the store's own check keeps it safe"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			repl := cluster.ReplicationPeer(e.Replica)
			return nemesis.Schedule{
				act(0, "cut replication", func(context.Context) error {
					return e.Nemesis.Partition(nemesis.Grudge{repl: {e.Nodes[0]}})
				}),
				e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(0.6),
					Then: func(ctx context.Context, _, _ int) error {
						if err := e.Nemesis.KillNode(e.Nodes[0]); err != nil {
							return err
						}
						return e.Nemesis.Promote(ctx, e.Primary, e.Replica)
					}}),
			}, nil
		},
	})

	add(Scenario{
		Name:          "setnx-crash",
		Story:         "S1: a client dies between SETNX and EXPIRE (or, for one-command locks, inside its critical section).",
		TimeLimitTTLs: 9, MinTimeLimitTTLs: 8,
		Expect: expect(
			"setnx-expire", Expectation{Outcome: Deadlock, Why: "the key was never given a TTL: nobody can ever take the lock again"},
			[]string{"set-nx-px", "getset", "reentrant", "fair"}, Expectation{Outcome: Safe,
				Why: "the dead client's lease runs out (TTL, timestamp, or a watchdog that died with it) and the others carry on"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{
				e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: locks.PointAfterSetNX, Client: nemesis.AnyClient, Crash: true}),
				e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Crash: true}),
			}, nil
		},
	})

	add(Scenario{
		Name:          "getset-skew",
		Story:         "S2: client 0's clock runs 3 TTLs ahead; the GETSET lock trusts client clocks, so client 0 sees live locks as expired and takes them.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 3,
		// Holders work 0.1 TTL between read and write, so a stolen lock is
		// stolen from someone mid-update: the theft corrupts the register on
		// every run, not only when two 100 µs critical sections happen to
		// interleave.
		HoldTTLs: 0.1,
		Expect: expect(
			"getset", Expectation{Outcome: Unsafe, Why: "expiry is judged by each client's clock: a fast clock steals a live lock"},
			[]string{"set-nx-px", "redlock", "fair"}, Expectation{Outcome: Safe,
				Why: "expiry is Redis's (set-nx-px), a constant skew does not change elapsed time (RedLock), or the client clock only orders the waiter queue (fair)"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{act(e.TTL, "skew client 0's clock +3 TTL", func(context.Context) error {
				return e.Nemesis.SkewClient(e.Clocks[0], e.ttls(3))
			})}, nil
		},
	})

	add(Scenario{
		Name: "unsafe-release",
		Story: "S3: client 1's lease expires during a pause, client 2 takes the lock, client 1 wakes, writes and releases — " +
			"with a plain DEL, client 2's lock — and client 3 takes it while client 2 still works.",
		TimeLimitTTLs: 8, MinTimeLimitTTLs: 6,
		Expect: expect(
			[]string{"set-nx-px-del", "setnx-expire"}, Expectation{Outcome: Unsafe, Show: []string{"foreign-release"},
				Why: "an owner-blind DEL deletes whoever holds the lock now"},
			[]string{"set-nx-px", "getset"}, Expectation{Outcome: Unsafe, Hide: []string{"foreign-release"},
				Why: "K1 still happens, but the woken client's release is refused (compare-and-delete, or its own timestamp has expired)"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(2.5),
				// When the sleeper wakes, hold it back from its release a
				// moment, and make the successor's critical section long, so
				// the release lands while the successor holds the lock.
				After: func(_ context.Context, client, _ int) error {
					e.Gate.Arm(nemesis.Trap{Point: workloads.BeforeRelease, Client: client, Pause: e.ttls(0.2), Stall: true})
					e.Gate.Arm(nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(0.6), Stall: true})
					return nil
				}})}, nil
		},
	})

	add(Scenario{
		Name: "watchdog",
		Story: "S4: a watchdog lock's holder is paused whole for 2.5 TTLs (its watchdog stops with it); later another holder " +
			"is cut off from the lock nodes while it works, so its renewals fail, and it keeps working.",
		TimeLimitTTLs: 11, MinTimeLimitTTLs: 9,
		Expect: expect(
			all(watchdogLocks, []string{"set-nx-px"}), Expectation{Outcome: Unsafe,
				Why: "a watchdog renews only while its process runs and reaches Redis: a lapsed holder that keeps working is a double holder"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{
				e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(2.5)}),
				e.Gate.ArmStep(e.ttls(5), nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(2.5), Stall: true,
					Then: func(_ context.Context, client, _ int) error {
						return e.Nemesis.Partition(nemesis.Grudge{e.Clients[client]: e.Nodes})
					},
					After: func(context.Context, int, int) error { return e.Nemesis.Heal() }}),
			}, nil
		},
	})
	add(Scenario{
		Name:          "watchdog-stall",
		Story:         "S4 control: a holder's critical section is slow (2.5 TTLs) but its process lives and reaches Redis.",
		TimeLimitTTLs: 6, MinTimeLimitTTLs: 4,
		Expect: expect(
			watchdogLocks, Expectation{Outcome: Safe, Why: "the watchdog renews the lease while the holder works: what it is for"},
			"set-nx-px", Expectation{Outcome: Unsafe, Why: "without a watchdog a slow critical section outlives its lease"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.ttls(2.5), Stall: true})}, nil
		},
	})

	add(Scenario{
		Name: "fair-order",
		Story: "S5: waiters must be granted in arrival order; then a queued waiter dies, and must not block the queue " +
			"longer than its waiter timeout.",
		TimeLimitTTLs: 9, MinTimeLimitTTLs: 7,
		Fairness: true,
		// 50 ms inside at a 500 ms TTL: four clients queue behind each holder.
		HoldTTLs: 0.1,
		Expect: expect(
			"fair", Expectation{Outcome: Safe, Why: "Redisson's FairLock queue grants in arrival order and drops a silent waiter after its timeout"},
			[]string{"reentrant", "set-nx-px"}, Expectation{Outcome: Unfair,
				Why: "whoever retries (or wakes) first wins: arrival order means nothing"},
		),
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(e.ttls(3), nemesis.Trap{Point: locks.PointWaiting, Client: nemesis.AnyClient, Crash: true})}, nil
		},
	})

	add(Scenario{
		Name: "random",
		Story: "Exploration: a seeded random schedule of the faults the topology allows (partitions, node pauses, kills, " +
			"client pauses, latency), then a final heal; the same seed replays the same schedule.",
		TimeLimitTTLs: 30, MinTimeLimitTTLs: 8,
		Random: true,
		Expect: expect(locks.Names(), Expectation{Outcome: Safe,
			Why: "exploration: anything but safe is a finding worth a look (the seed replays it)"}),
		Schedule: randomSchedule,
	})
}

// Lookup finds a scenario; the error lists the valid names.
func Lookup(name string) (Scenario, error) {
	s, ok := catalogue[name]
	if !ok {
		return Scenario{}, fmt.Errorf("unknown scenario %q (valid: %s, all)", name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// Names lists the scenarios, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(catalogue))
}

// Locks lists the locks a scenario has expectations for, sorted.
func (s Scenario) Locks() []string {
	return slices.Sorted(maps.Keys(s.Expect))
}
