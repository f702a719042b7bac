package engine

import (
	"context"
	"testing"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// A story's run ends once its story is over: its one crash is over, the
// checkers' allowance and a TTL have passed since, and the traffic after
// it is in; told with FullTime it runs to its time limit. Both come out
// the same.
func TestARunEndsOnceItsStoryIsOver(t *testing.T) {
	const ttl = 200 * time.Millisecond
	story := &scenario.Scenario{Name: "test-over", Story: "a crash, then a long fault-free tail", TTL: ttl, TimeLimitTTLs: 20,
		Expect:   map[string]verdict.Expectation{"set-nx-px": {Outcome: verdict.Safe, Why: "test"}},
		Requires: []fault.Evidence{{Op: fault.Crash}},
		Schedule: func(e *scenario.Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(2*e.TTL, nemesis.Trap{Point: "before-write", Client: nemesis.AnyClient, Crash: true})}, nil
		}}
	run := func(full bool) *Result {
		res, err := RunUnstarved(context.Background(), Options{Told: story, Lock: "set-nx-px", FullTime: full, Out: t.TempDir()}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Matched {
			t.Fatalf("full time %v: outcome %s, vacuous %q; want safe", full, res.Outcome, res.Vacuous)
		}
		return res
	}
	early := run(false)
	crash := fault.Evidence{Op: fault.Crash}.First(early.Ops)
	info, _ := locks.Lookup("set-nx-px")
	tail := Allowance(*story, info, ttl) + ttl
	if !early.EndedEarly || early.Played >= 20*ttl || crash == nil || early.Ready+int64(early.Played) < crash.Time+int64(tail) {
		t.Fatalf("ended early %v after %s of %s (crash at %v): want it ended, no sooner than %s after the crash", early.EndedEarly, early.Played, 20*ttl, crash, tail)
	}
	if full := run(true); full.EndedEarly || full.Played < 20*ttl {
		t.Fatalf("-full-time: ended early %v after %s; want the whole %s", full.EndedEarly, full.Played, 20*ttl)
	}
}

// A lock that stops handing its key on is not over, whatever its faults:
// setnx-expire's key outlives the client that crashed between SETNX and
// EXPIRE, and the run plays its whole time limit to read deadlock.
func TestADeadlockedRunPlaysItsWholeTimeLimit(t *testing.T) {
	const ttl = 200 * time.Millisecond
	story := &scenario.Scenario{Name: "test-stuck", Story: "a crash between SETNX and EXPIRE", TTL: ttl, TimeLimitTTLs: 12,
		Expect:   map[string]verdict.Expectation{"setnx-expire": {Outcome: verdict.Deadlock, Why: "test"}},
		Requires: []fault.Evidence{{Op: fault.Crash}},
		Schedule: func(e *scenario.Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(2*e.TTL, nemesis.Trap{Client: nemesis.AnyClient, Crash: true,
				Command: &nemesis.Command{In: history.Acquire, Match: "SETNX|SET NX", Reply: true, Succeeded: true}})}, nil
		}}
	res, err := RunUnstarved(context.Background(), Options{Told: story, Lock: "setnx-expire", Out: t.TempDir()}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched || res.EndedEarly || res.Played < 12*ttl {
		t.Fatalf("outcome %s (matched %v, %s), ended early %v after %s: want deadlock after the whole %s", res.Outcome, res.Matched, res.Vacuous, res.EndedEarly, res.Played, 12*ttl)
	}
}
