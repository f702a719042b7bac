// Package locktest runs the built-in failure stories against your own lock
// from your own `go test`, on real Redis, and fails the test when the lock
// does not behave as you say it should.
//
//	func TestMyLockUnderFaults(t *testing.T) {
//		locktest.Expect(t, locktest.Lock{Name: "mylock", New: mylock.New},
//			map[string]string{"baseline": "safe", "paused-holder": "unsafe"})
//	}
//
// Your lock implements locks.Lock; New builds one client's handle from a
// locks.Config (its Redis clients, TTL, wait, clock and owner id). Talk to
// Redis only through Config.Clients: the scenarios pause and crash your
// client through hooks on those connections, without any call from your
// code.
// The machine needs redis-server (and, for clock scenarios, the build `make
// setup` caches).
package locktest

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
)

// Lock describes your lock to the harness.
type Lock struct {
	// Name labels it in results.
	Name string
	// Nodes is how many independent Redis nodes to give it (default 1).
	Nodes int
	// Fenced: its leases carry fencing tokens (Lease.Fence), which the
	// protected store then checks. Reentrant: the holder may acquire again.
	// Queued: waiters hold places in a queue (a dead one may stall it for
	// up to the waiter timeout).
	Fenced, Reentrant, Queued bool
	// Claims is the lock's fault model: the faults under which it claims
	// to keep its promise; the random scenario holds it to these.
	Claims []locks.Fault
	// New builds one client's handle.
	New func(locks.Config) locks.Lock
}

func (l Lock) info() *locks.Info {
	return &locks.Info{Name: l.Name, Nodes: l.Nodes, Fenced: l.Fenced, Reentrant: l.Reentrant, Queued: l.Queued,
		Claims: l.Claims, New: l.New}
}

// Run runs one scenario against l and returns everything it found; o's
// Scenario, Lock and Custom are set from the arguments, the rest (TTL,
// clients, time limit, out dir) are yours to tune.
func Run(ctx context.Context, l Lock, scenarioName string, want scenario.Expectation, o scenario.Options) (*scenario.Result, error) {
	o.Scenario, o.Lock, o.Custom, o.Expect = scenarioName, l.Name, l.info(), &want
	return scenario.Run(ctx, o)
}

// Expect runs every scenario in want (scenario name → expected outcome:
// safe, unsafe, lock-unsafe, deadlock, unfair) against l and marks t failed,
// naming the anomalies, for each whose outcome differs; it stops the test
// if any did. Results go to a temporary directory of the test.
func Expect(t testing.TB, l Lock, want map[string]string) {
	t.Helper()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		res, err := Run(context.Background(), l, n, scenario.Expectation{Outcome: want[n]}, scenario.Options{Out: t.TempDir()})
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if !res.Matched {
			var b strings.Builder
			report.Summary(&b, res)
			t.Errorf("%s: %s showed %s, want %s\n%s", n, l.Name, res.Outcome, want[n], b.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
