package explore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// users is a lock outside the registry, as locktest hands one over.
func users() engine.Options {
	info, _ := locks.Lookup("set-nx-px")
	return engine.Options{Lock: "users-lock", Custom: &locks.Info{Claims: locks.LeaseClaims, New: info.New}}
}

// A lock of the user's own is in no story's expectations, which list the
// registered locks: the exploration stories' rule gives it PromiseKept,
// an Expect of the caller's own stands, and a registered lock keeps its
// story's table.
func TestACustomLockIsJudgedByTheStorysRule(t *testing.T) {
	for _, story := range []string{"warm-up", "boundary", "random"} {
		o := users()
		o.Scenario = story
		if story == "boundary" {
			o.Probe = &scenario.Probe{At: nemesis.Boundary{In: history.Acquire, Command: "SET", Nth: 1}}
		}
		p, err := engine.Resolve(o)
		if err != nil || p.Expected.Outcome != verdict.PromiseKept {
			t.Errorf("%s: %v, expect %v; want PromiseKept", story, err, p.Expected)
		}
	}
	own := users()
	own.Scenario, own.Expect = "warm-up", &verdict.Expectation{Outcome: verdict.Safe}
	if p, err := engine.Resolve(own); err != nil || p.Expected.Outcome != verdict.Safe {
		t.Errorf("the caller's own Expect was replaced: %v %v", p.Expected, err)
	}
	if p, err := engine.Resolve(engine.Options{Scenario: "paused-holder", Lock: "set-nx-px"}); err != nil || p.Expected.Outcome != verdict.Unsafe {
		t.Errorf("a registered lock lost its story's table: %v %v", p.Expected, err)
	}
}

// Bad options are refused in one line before the warm-up runs.
func TestBoundariesRefuseBadOptionsBeforeTheWarmUp(t *testing.T) {
	etcd := users()
	etcd.Custom.Server = "etcd"
	for _, c := range []struct {
		o    Options
		says string
	}{
		{Options{}, "no lock to explore"},
		{Options{Run: users(), Ops: []string{"aquire"}}, `op kind "aquire": want one of acquire, release, renewal`},
		{Options{Run: users(), Faults: []string{"kill"}}, `fault "kill": want one of pause, crash`},
		{Options{Run: users(), Share: 1}, "share 1: want a fraction"},
		{Options{Run: func() engine.Options { o := users(); o.Clients = 1; return o }()}, "-clients 1"},
		{Options{Run: etcd}, "through a client of its own"},
	} {
		start := time.Now()
		_, err := Boundaries(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: got %v, want one line saying %q", c.o, err, c.says)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%+v: took %v: the warm-up ran", c.o, d)
		}
	}
}
