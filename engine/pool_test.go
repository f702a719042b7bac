package engine

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
)

// A pair's run does not depend on the pair before it: after a fault-heavy
// pair (a leader killed under a holder), the next pair of its topology
// starts servers of its own; after a pair that faulted no server, it runs
// on that pair's servers, reset; and both runs give the verdict and the
// history's shape of the same pair run alone, with nothing kept.
func TestAPairOnKeptServersRunsAsAlone(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("etcd not installed (scripts/setup.sh installs it)")
	}
	ctx := context.Background()
	pool := cluster.NewPool(2)
	defer pool.Close()
	pair := func(story string, pool *cluster.Pool) *Result {
		t.Helper()
		o := Options{Scenario: story, Lock: "etcd-fenced", Seed: 7, Out: t.TempDir(), Pool: pool}
		// The story's shortest time limit: it still happens, in less of
		// the test's time.
		p, err := Resolve(o)
		if err != nil {
			t.Fatal(err)
		}
		o.TimeLimit = time.Duration(p.Scenario.MinTimeLimitTTLs) * p.Options.TTL
		res, err := RunUnstarved(ctx, o, t.Logf)
		if err != nil {
			t.Fatalf("%s: %v", story, err)
		}
		return res
	}
	faulted := pair("leader-failover", pool)
	if faulted.Reused != "" || !faulted.Matched {
		t.Fatalf("leader-failover: reused %q, outcome %s: want its own servers, matched", faulted.Reused, faulted.Outcome)
	}
	after := pair("paused-holder", pool)
	if after.Reused != "" {
		t.Fatalf("the pair after a leader's kill ran on its servers (%s)", after.Reused)
	}
	kept := pair("paused-holder", pool)
	if kept.Reused != "paused-holder/etcd-fenced" {
		t.Fatalf("the pair after an unfaulted one started its own servers (reused %q)", kept.Reused)
	}
	alone := pair("paused-holder", nil)
	for _, res := range []*Result{after, kept} {
		if res.Outcome != alone.Outcome || !res.Matched || !alone.Matched {
			t.Fatalf("outcome %s (reused %q), alone %s: want the same, matched", res.Outcome, res.Reused, alone.Outcome)
		}
		if got, want := shape(res.Ops), shape(alone.Ops); !slices.Equal(got, want) {
			t.Errorf("history's shape (reused %q):\n%v\nalone:\n%v", res.Reused, got, want)
		}
	}
}

// shape is what a run's history must share with another run of its pair
// whatever the timing: the nemesis's ops in order, then each kind of
// client op and how it ended, once each, sorted. A failed acquire is left
// out: a waiter's try that found the lock taken for its whole wait comes
// or not as the waiters' starts fall against the holder's pause, whatever
// servers the pair ran on (beside make test's matrix, paused-holder on
// etcd-fenced had one alone and none on kept servers).
func shape(ops []history.Op) []string {
	var nemesis, clients []string
	for _, op := range ops {
		switch {
		case op.Process == history.NemesisProcess:
			nemesis = append(nemesis, op.F+" "+string(op.Type))
		case op.F == history.Acquire && op.Type == history.Fail:
		default:
			clients = append(clients, op.F+" "+string(op.Type))
		}
	}
	slices.Sort(clients)
	return append(nemesis, slices.Compact(clients)...)
}
