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
	// The libraries people install are subjects beside the reference locks.
	_ "github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/nemesis"
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
	// Starved: the harness itself ran late (its timers, a node's replies,
	// a pause's overrun, a restart) by more than the story's timing
	// allows, so the checkers' verdict is not evidence either way. Never
	// matches.
	Starved = "starved"
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
	ExactClients int
	// Nodes, when set, is the only lock-node count the story is told with
	// (its schedule names n1..n5); a lock on another count is refused.
	Nodes            int
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
	// WaiterTimeoutTTLs is a queued lock's waiter timeout, in TTLs (0: 2).
	WaiterTimeoutTTLs float64
	// Random marks the exploration scenario: not part of "all".
	Random bool
	// Alone, when set, says why the story's verdict hangs on timing that a
	// busy machine would disturb: a matrix run in parallel gives it the
	// machine to itself.
	Alone string
	// Requires lists the nemesis actions the story needs to have happened;
	// the first is its fault, around which Traffic is counted. A run
	// without them is vacuous.
	Requires []Evidence
	// Traffic is the least traffic around the fault (zero: defaultTraffic).
	Traffic Traffic
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

func add(s Scenario) { s = s.withDefaults(); catalogue[s.Name] = s }

// withDefaults fills in what a story leaves out.
func (s Scenario) withDefaults() Scenario {
	if s.TTL == 0 {
		s.TTL = 500 * time.Millisecond
	}
	if s.ExactClients > 0 {
		s.Clients = s.ExactClients
	}
	if s.Clients == 0 {
		s.Clients = 5
	}
	if s.TimeLimitTTLs == 0 {
		s.TimeLimitTTLs = 6
	}
	if s.MinTimeLimitTTLs == 0 {
		s.MinTimeLimitTTLs = s.TimeLimitTTLs
	}
	return s
}

// Lock groups the expectations are written for.
var (
	// ownerBlind locks release with a plain DEL: a client whose lease lapsed
	// deletes whoever holds the lock when its release lands, which breaks
	// the lock's own promise whenever someone does hold it then (S3).
	ownerBlind    = []string{"set-nx-px-del", "setnx-expire"}
	ownerChecked  = all([]string{"set-nx-px", "getset", "redlock", "redlock-novalidity"}, libraryLeases, []string{"redsync-redlock"})
	watchdogLocks = []string{"reentrant", "fair", "multilock", "redislock-refresh"}
	// libraryLeases are the installed libraries' single-node leases with an
	// owner-checked release (package locks/library): they stand beside
	// set-nx-px wherever a story names it alone.
	libraryLeases = []string{"redsync", "redislock", "redis-py"}
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

// TTLs is n TTLs: schedules are told in TTLs so a story keeps its shape at
// any -ttl.
func (e *Env) TTLs(n float64) time.Duration { return time.Duration(n * float64(e.TTL)) }

// act is a schedule step doing f at offset at.
func act(at time.Duration, name string, f func(context.Context) error) nemesis.Step {
	return nemesis.Step{At: at, Name: name, Do: f}
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
