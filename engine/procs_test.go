package engine

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/locks/services"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/worker"
)

// The test binary is its own client worker for runs with ClientProcs.
func TestMain(m *testing.M) {
	// The libraries' locks are run beside the reference locks here, and
	// a lock service's where a test needs servers the pool keeps.
	library.Register()
	services.Register()
	cluster.QuietRedisLog()
	worker.ServeIfWorker(locks.Lookup)
	os.Exit(m.Run())
}

// K1, S1, S5 and F1 (by hand and by Sentinel) with every client an OS
// process of its own: the pause is SIGSTOP, the crash SIGKILL, command
// traps spring on the boundaries the workers report, and a worker follows
// a failover through one address that reaches the master of the moment;
// each story keeps the expectation it has with clients in the harness, and
// happens (a vacuous run matches nothing). Not the two
// stories that run alone (watchdog, fair-order): each takes both of make
// test's seats, and what they add with processes is tested more directly
// (a SIGSTOPped worker's watchdog stops renewing: worker's tests; a fair
// lock's queue across processes: dead-waiter here).
func TestStoriesWithClientProcesses(t *testing.T) {
	for _, pair := range [][2]string{
		{"paused-holder", "set-nx-px"},
		{"setnx-crash", "setnx-expire"},
		{"setnx-crash", "set-nx-px"},
		{"dead-waiter", "fair"},
		{"failover", "set-nx-px"},
		{"sentinel-failover", "set-nx-px"},
	} {
		t.Run(pair[0]+"/"+pair[1], func(t *testing.T) {
			t.Parallel() // the machine's room seats them, a core each
			res, err := RunUnstarved(context.Background(), Options{Scenario: pair[0], Lock: pair[1], ClientProcs: true, Out: t.TempDir()}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Matched {
				t.Fatalf("with client processes: outcome %s %v (vacuous: %q, starved: %q), want %s +%v −%v",
					res.Outcome, res.Observations, res.Vacuous, res.Starved, res.Expected.Outcome, res.Expected.Show, res.Expected.Hide)
			}
		})
	}
}

// Worker processes cannot route by hash slot, nor be given up on by a
// caller inside the harness: such runs are refused before they start.
func TestClientProcsRefuseWhatTheyCannotDo(t *testing.T) {
	for _, story := range []string{"cluster-failover", "slot-migration", "interrupted-acquire"} {
		_, err := Resolve(Options{Scenario: story, Lock: "set-nx-px", ClientProcs: true})
		if _, ok := err.(*UsageError); !ok {
			t.Fatalf("%s with client processes: %v, want a usage error", story, err)
		}
	}
	// A replicated topology with Sentinel is theirs to follow now.
	sentinel := &scenario.Scenario{Name: "mine", Topology: scenario.Topology{Replicated: true, Sentinel: true}, Schedule: noFaults}
	if _, err := Resolve(Options{Told: sentinel, Lock: "set-nx-px", Expect: &verdict.Expectation{Outcome: verdict.Safe}, ClientProcs: true}); err != nil {
		t.Fatalf("a Sentinel topology with client processes: %v", err)
	}
}

// The final reads, once the clients have stopped, go to the store on a
// connection of the harness's own: where every client is a worker, no
// worker is started only to read a register (an interpreter or a JVM
// that held the run's seats for seconds), and the reads still answer.
func TestTheFinalReadsStartNoWorker(t *testing.T) {
	var started atomic.Int32
	self := func(lock string) *exec.Cmd {
		started.Add(1)
		return worker.Self(lock)
	}
	res, err := Run(context.Background(), Options{Scenario: "baseline", Lock: "set-nx-px", ClientProcs: true, Worker: self,
		Clients: 2, TTL: 500 * time.Millisecond, TimeLimit: 1500 * time.Millisecond, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	locked, final := map[int]bool{}, map[int]bool{}
	for _, op := range res.Ops {
		switch {
		case op.F == history.Acquire || op.F == history.Release:
			locked[op.Process] = true
		case op.F == history.Read && op.Type == history.OK && !locked[op.Process]:
			final[op.Process] = true
		}
	}
	if len(final) != 1 {
		t.Fatalf("%d processes read without taking the lock, want the one final reader", len(final))
	}
	if n := int(started.Load()); n != len(locked) {
		t.Fatalf("%d workers started for %d processes that took the lock: the final reads started one of their own", n, len(locked))
	}
}
