package locktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locktest"
	"github.com/locktorture/locktorture/scenario"
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

func setNXPX() locktest.Lock {
	info, _ := locks.Lookup("set-nx-px")
	return locktest.Lock{Name: "users-set-nx-px", New: info.New}
}

func TestExpectPassesWhenTheLockBehavesAsSaid(t *testing.T) {
	locktest.Expect(t, setNXPX(), map[string]string{"baseline": "safe"})
}

func TestExpectFailsTheTestOnAMismatch(t *testing.T) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		locktest.Expect(r, setNXPX(), map[string]string{"paused-holder": "safe"})
	}()
	<-done
	if !r.failed || len(r.errors) != 1 {
		t.Fatalf("a lock claimed safe under paused-holder must fail the test: failed=%v errors=%q", r.failed, r.errors)
	}
}

// A user's lock runs as real processes with nothing more than the option:
// the test binary starts again as the worker (the same test, whose call
// serves the lock), and the paused holder is caught as in the harness.
func TestExpectWithClientProcesses(t *testing.T) {
	locktest.ExpectWith(t, setNXPX(), map[string]string{"paused-holder": "unsafe", "setnx-crash": "safe"},
		scenario.Options{ClientProcs: true})
}

// The runs really went through workers: each started one per client
// process and logged to the run's workers.log (empty when all went well).
func TestRunWithClientProcessesStartsWorkers(t *testing.T) {
	res, err := locktest.Run(context.Background(), setNXPX(), "paused-holder", scenario.Expectation{Outcome: scenario.Unsafe},
		scenario.Options{ClientProcs: true, Worker: locktest.Worker(t), Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Matched {
		t.Fatalf("outcome %s (vacuous %q)", res.Outcome, res.Vacuous)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "workers.log")); err != nil {
		t.Fatalf("no workers.log: the clients did not run as workers: %v", err)
	}
}
