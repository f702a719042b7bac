// Package scenario holds the built-in failure stories and runs one
// (scenario, lock) pair end to end: cluster, workload, nemesis, history,
// checkers, report. cmd/run is only flags around it.
package scenario

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// Outcomes a run can show. Expectations are stated in the same words.
const (
	// Safe: mutual exclusion held and the protected resource is intact.
	Safe = "safe"
	// Unsafe: the resource was corrupted (lost update or stale write).
	Unsafe = "unsafe"
	// LockUnsafe: two processes held the lock at once, yet the resource is
	// intact: what fencing tokens buy (Kleppmann).
	LockUnsafe = "lock-unsafe"
	// Undecided: some checker could not decide. Never matches.
	Undecided = "unknown"
)

// Expectation is what a lock must show under a scenario.
type Expectation struct {
	// Outcome is one of Safe, Unsafe, LockUnsafe.
	Outcome string `json:"outcome"`
	// StaleWriteRejected also requires the store to have refused at least
	// one stale fenced write: proof that the story happened and the fence,
	// not luck, kept the resource safe.
	StaleWriteRejected bool `json:"stale_write_rejected,omitempty"`
	// Why cites the argument behind the expectation.
	Why string `json:"why"`
}

func (e Expectation) String() string {
	if e.StaleWriteRejected {
		return e.Outcome + " (stale write rejected)"
	}
	return e.Outcome
}

// Env is what a scenario's fault schedule may act on.
type Env struct {
	// TTL is the run's lease time.
	TTL time.Duration
	// Gate stands at the clients' named points.
	Gate *nemesis.Gate
}

// Scenario is one failure story.
type Scenario struct {
	Name string
	// Story tells what happens, in a sentence or two.
	Story string
	// TTL, Clients and TimeLimit are defaults the flags may override.
	TTL       time.Duration
	Clients   int
	TimeLimit time.Duration
	// MinTimeLimit is how long the schedule needs, in TTLs, for the story
	// to play out; a shorter -time-limit is refused as bad usage.
	MinTimeLimitTTLs float64
	// Expect says, for every lock the story applies to, what it must show.
	Expect map[string]Expectation
	// Schedule builds the scripted faults.
	Schedule func(Env) nemesis.Schedule
}

// MinTimeLimit is the shortest time limit at which the story can happen.
func (s Scenario) MinTimeLimit(ttl time.Duration) time.Duration {
	return time.Duration(s.MinTimeLimitTTLs * float64(ttl))
}

var catalogue = map[string]Scenario{}

func add(s Scenario) { catalogue[s.Name] = s }

func init() {
	add(Scenario{
		Name:      "baseline",
		Story:     "No faults. Every lock must keep mutual exclusion and make progress; a checker that flags this run is broken.",
		TTL:       time.Second,
		Clients:   5,
		TimeLimit: 3 * time.Second,
		// Every lock, the broken ones included: each breaks only under the
		// fault its story injects.
		Expect:   everyLock(Expectation{Outcome: Safe, Why: "no fault, no violation: a positive here is a harness bug"}),
		Schedule: func(Env) nemesis.Schedule { return nil },
	})
	add(Scenario{
		Name: "paused-holder",
		Story: "K1 (Kleppmann 2016): a client holding the lock pauses inside its critical section (a GC pause) " +
			"longer than the TTL; the lease expires, another client takes the lock and writes; the first wakes and writes too.",
		TTL:              time.Second,
		Clients:          5,
		TimeLimit:        5 * time.Second,
		MinTimeLimitTTLs: 4,
		Expect: map[string]Expectation{
			"set-nx-px": {Outcome: Unsafe,
				Why: "a lease cannot stop a paused holder: double holder and a lost update (Kleppmann, K1)"},
			"set-nx-px-fenced": {Outcome: LockUnsafe, StaleWriteRejected: true,
				Why: "the lease is violated just the same, but the store rejects the woken holder's stale token (Kleppmann's fencing)"},
		},
		Schedule: func(e Env) nemesis.Schedule {
			// Warm up for one TTL, then pause the next client to reach the
			// write for 2.5 TTLs: long enough for its lease to lapse and a
			// successor to take the lock and write.
			return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: 5 * e.TTL / 2})}
		},
	})
}

// everyLock expects the same of every registered lock.
func everyLock(e Expectation) map[string]Expectation {
	out := map[string]Expectation{}
	for _, n := range locks.Names() {
		out[n] = e
	}
	return out
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
	var out []string
	for n := range catalogue {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Locks lists the locks a scenario has expectations for, sorted.
func (s Scenario) Locks() []string {
	var out []string
	for n := range s.Expect {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
