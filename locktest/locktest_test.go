package locktest_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locktest"
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
