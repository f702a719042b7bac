package locktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locktest"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// recorder is a testing.TB that remembers failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
	failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}
func (r *recorder) Failed() bool { return len(r.errors) > 0 }
func (r *recorder) FailNow()     { r.failed = true; runtime.Goexit() }
func (r *recorder) Fatalf(format string, a ...any) {
	r.Errorf(format, a...)
	r.FailNow()
}

// expect runs Expect against r in a goroutine of its own, as FailNow ends
// it with Goexit.
func (r *recorder) expect(l locktest.Lock, want map[string]string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		locktest.Expect(r, l, want)
	}()
	<-done
}

func setNXPX() locktest.Lock {
	info, _ := locks.Lookup("set-nx-px")
	return locktest.Lock{Name: "users-set-nx-px", New: info.New}
}

func TestExpectPassesWhenTheLockBehavesAsSaid(t *testing.T) {
	locktest.Expect(t, setNXPX(), map[string]string{"baseline": "safe"})
}

// A mismatch fails the test and keeps the run's directory, report and all,
// where $LOCKTORTURE_RUNS says; a passing run leaves nothing there.
func TestExpectFailsTheTestOnAMismatch(t *testing.T) {
	runs := t.TempDir()
	t.Setenv(locktest.Env, runs)
	r := &recorder{TB: t}
	r.expect(setNXPX(), map[string]string{"baseline": "safe", "paused-holder": "safe"})
	if !r.failed || len(r.errors) != 1 {
		t.Fatalf("a lock claimed safe under paused-holder must fail the test: failed=%v errors=%q", r.failed, r.errors)
	}
	kept, _ := filepath.Glob(filepath.Join(runs, "*", "paused-holder", "users-set-nx-px", "*", "index.html"))
	passed, _ := filepath.Glob(filepath.Join(runs, "*", "baseline"))
	if len(kept) != 1 || len(passed) != 0 {
		t.Fatalf("want the failing run's report kept and the passing run gone: kept %v, passed %v", kept, passed)
	}
}

// Bad words stop the test before any story runs, naming the valid ones.
func TestExpectRejectsUnknownWordsBeforeRunning(t *testing.T) {
	for _, want := range []map[string]string{
		{"baseline": "safe", "paused-holdr": "unsafe"},
		{"baseline": "sfe"},
		{"baseline": "unsafe +promise-brokn"},
	} {
		r := &recorder{TB: t}
		start := time.Now()
		r.expect(setNXPX(), want)
		if !r.failed || len(r.errors) != 1 || !strings.Contains(r.errors[0], "valid:") || regexp.MustCompile(`[ ,(]all[,)]`).MatchString(r.errors[0]) {
			t.Errorf("%v: failed=%v errors=%q, want one error listing the valid words (without all)", want, r.failed, r.errors)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%v: took %v: a story ran before the words were checked", want, d)
		}
	}
}

// A user's lock runs as real processes with nothing more than the option:
// the test binary starts again as the worker (the same test, whose call
// serves the lock), and the paused holder is caught as in the harness.
func TestExpectWithClientProcesses(t *testing.T) {
	locktest.ExpectWith(t, setNXPX(), map[string]string{"paused-holder": "unsafe", "setnx-crash": "safe"},
		engine.Options{ClientProcs: true})
}

// The runs really went through workers: each started one per client
// process and logged to the run's workers.log (empty when all went well).
func TestRunWithClientProcessesStartsWorkers(t *testing.T) {
	o := engine.Options{ClientProcs: true, Worker: locktest.Worker(t), Out: t.TempDir()}
	res, err := locktest.Run(context.Background(), setNXPX(), "paused-holder", verdict.Expectation{Outcome: verdict.Unsafe}, o)
	if err == nil && res.Outcome == verdict.Starved {
		t.Logf("starved (%s); running it once more, alone", res.Starved)
		o.Alone = true
		res, err = locktest.Run(context.Background(), setNXPX(), "paused-holder", verdict.Expectation{Outcome: verdict.Unsafe}, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched {
		t.Fatalf("outcome %s (vacuous %q, starved %q)", res.Outcome, res.Vacuous, res.Starved)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "workers.log")); err != nil {
		t.Fatalf("no workers.log: the clients did not run as workers: %v", err)
	}
}

// A story of the user's own, composed from the nemesis pieces: K6 on one
// node. The client that sends SET NX freezes as the OK arrives, for longer
// than the TTL, then believes a lock that expired while it slept. set-nx-px
// kept its word (its deadline had passed) but nothing in it makes the
// client check, so the register loses an update.
func TestExpectStoryRunsTheUsersOwnStory(t *testing.T) {
	lateOK := scenario.Scenario{
		Name:     "late-ok",
		Story:    "a client freezes for 1.5 TTLs as the OK of its SET NX arrives, then works on a lock that expired",
		Requires: []fault.Evidence{{Op: fault.Pause, Reply: true}, {Op: fault.Stall, Point: workloads.BeforeWrite}},
		Schedule: func(e *scenario.Env) (nemesis.Schedule, error) {
			ok := &nemesis.Command{In: history.Acquire, Match: "SET NX", Reply: true, Succeeded: true}
			// The next holder works 0.8 TTL, so it is still at work when
			// the frozen client wakes and writes: without it the late write
			// may land between two critical sections and lose nothing.
			nextHolderWorks := func(context.Context, int, int) error {
				e.Gate.Arm(nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.TTLs(0.8), Stall: true})
				return nil
			}
			return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Command: ok, Client: nemesis.AnyClient, Pause: e.TTLs(1.5),
				Then: nextHolderWorks, ThenName: "arm a stall of the next holder at before-write"})}, nil
		},
	}
	locktest.ExpectStory(t, setNXPX(), lateOK, "unsafe -promise-broken", engine.Options{})

	t.Setenv(locktest.Env, t.TempDir()) // where the failing run is kept
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		locktest.ExpectStory(r, setNXPX(), lateOK, "safe", engine.Options{})
	}()
	<-done
	if !r.failed {
		t.Fatal("the late OK must fail a test that calls set-nx-px safe under it")
	}
}
