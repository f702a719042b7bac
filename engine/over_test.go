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

// overTTL is the TTL of the stories told here: short, so a test's time
// limit of tens of TTLs takes seconds.
const overTTL = 200 * time.Millisecond

// crashStory is a story told for a test: trap crashes a client at two
// TTLs, the crash is its required evidence, and lock is expected want
// within limitTTLs.
func crashStory(story, lock string, want verdict.Outcome, limitTTLs float64, trap nemesis.Trap) *scenario.Scenario {
	return &scenario.Scenario{Name: "test-crash", Story: story, TTL: overTTL, TimeLimitTTLs: limitTTLs,
		Expect:   map[string]verdict.Expectation{lock: {Outcome: want, Why: "test"}},
		Requires: []fault.Evidence{{Op: fault.Crash}},
		Schedule: func(e *scenario.Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(2*e.TTL, trap)}, nil
		}}
}

// A story's run ends once its story is over: its one crash is over, the
// checkers' allowance and a TTL have passed since, and the traffic after
// it is in; told with FullTime it runs to its time limit. Both come out
// the same.
func TestARunEndsOnceItsStoryIsOver(t *testing.T) {
	story := crashStory("a crash, then a long fault-free tail", "set-nx-px", verdict.Safe, 20,
		nemesis.Trap{Point: "before-write", Client: nemesis.AnyClient, Crash: true})
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
	tail := Allowance(*story, info, overTTL) + overTTL
	if !early.EndedEarly || early.Played >= 20*overTTL || crash == nil || early.Ready+int64(early.Played) < crash.Time+int64(tail) {
		t.Fatalf("ended early %v after %s of %s (crash at %v): want it ended, no sooner than %s after the crash", early.EndedEarly, early.Played, 20*overTTL, crash, tail)
	}
	if full := run(true); full.EndedEarly || full.Played < 20*overTTL {
		t.Fatalf("-full-time: ended early %v after %s; want the whole %s", full.EndedEarly, full.Played, 20*overTTL)
	}
}

// A lock that stops handing its key on is not over, whatever its faults:
// setnx-expire's key outlives the client that crashed between SETNX and
// EXPIRE, and the run plays its whole time limit to read deadlock.
func TestADeadlockedRunPlaysItsWholeTimeLimit(t *testing.T) {
	story := crashStory("a crash between SETNX and EXPIRE", "setnx-expire", verdict.Deadlock, 12,
		nemesis.Trap{Client: nemesis.AnyClient, Crash: true,
			Command: &nemesis.Command{In: history.Acquire, Match: "SETNX|SET NX", Reply: true, Succeeded: true}})
	res, err := RunUnstarved(context.Background(), Options{Told: story, Lock: "setnx-expire", Out: t.TempDir()}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched || res.EndedEarly || res.Played < 12*overTTL {
		t.Fatalf("outcome %s (matched %v, %s), ended early %v after %s: want deadlock after the whole %s", res.Outcome, res.Matched, res.Vacuous, res.EndedEarly, res.Played, 12*overTTL)
	}
}
