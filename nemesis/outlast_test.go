package nemesis_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// A pause under Outlast goes on past Pause until another client's write is
// answered, up to Outlast more and no further into the holder's lease
// than InLease lets it; a write in time leaves it Pause long. The bounds
// are what the trap promises, with room for a slow machine above them.
func TestAPauseOutlastsUntilAnotherClientWrites(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name               string
		writeAt, leaseLeft time.Duration
		trap               nemesis.Trap
		atLeast, lessThan  time.Duration
	}{
		{name: "goes on until the write", writeAt: 300 * ms, trap: nemesis.Trap{Pause: 50 * ms, Outlast: 5 * time.Second},
			atLeast: 300 * ms, lessThan: 2 * time.Second},
		{name: "no write: Outlast more", trap: nemesis.Trap{Pause: 50 * ms, Outlast: 250 * ms},
			atLeast: 300 * ms, lessThan: 2 * time.Second},
		{name: "a write in time: Pause", writeAt: 20 * ms, trap: nemesis.Trap{Pause: 200 * ms, Outlast: 5 * time.Second},
			atLeast: 200 * ms, lessThan: 2 * time.Second},
		{name: "within the lease", leaseLeft: 400 * ms, trap: nemesis.Trap{Pause: 50 * ms, Outlast: 5 * time.Second, InLease: 100 * ms},
			atLeast: 290 * ms, lessThan: 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := history.NewRecorder(nil, 0)
			g := nemesis.NewGate(rec)
			if tc.leaseLeft > 0 {
				rec.Add(history.Op{Process: 1, Type: history.OK, F: history.Acquire, Value: &history.Value{Deadline: rec.Now() + int64(tc.leaseLeft)}})
			}
			tc.trap.Point, tc.trap.Client = "p", nemesis.AnyClient
			g.Arm(tc.trap)
			if tc.writeAt > 0 {
				time.AfterFunc(tc.writeAt, func() { rec.Add(history.Op{Process: 2, Type: history.OK, F: history.Write}) })
			}
			start := time.Now()
			if err := g.At(ctx, 0, 1, "p"); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took < tc.atLeast || took >= tc.lessThan {
				t.Fatalf("the pause took %v, want at least %v (and less than %v)", took, tc.atLeast, tc.lessThan)
			}
			began := time.Now()
			if err := g.At(ctx, 0, 1, "q"); err != nil || time.Since(began) > 100*ms {
				t.Fatalf("the client is still held after its pause: %v after %v", err, time.Since(began))
			}
		})
	}
}

// A worker's OS process stays stopped while its pause outlasts Pause, and
// is let go once the pause ends.
func TestAnOutlastingPauseKeepsTheWorkerStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	g.Attach(0, 1, cmd.Process)
	g.Arm(nemesis.Trap{Point: "p", Client: nemesis.AnyClient, Pause: 50 * time.Millisecond, Outlast: 400 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- g.At(ctx, 0, 1, "p") }()
	time.Sleep(250 * time.Millisecond)
	if s := procState(t, cmd.Process.Pid); s != "T" {
		t.Fatalf("200 ms past its pause, in its Outlast, the worker's state is %q, want stopped (T)", s)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); procState(t, cmd.Process.Pid) == "T"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker is still stopped 2 s after its pause ended")
		}
	}
}

// procState is the state letter of /proc/pid/stat (R, S, T, ...).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: comm may hold spaces, so after its ')'.
	_, rest, _ := strings.Cut(string(b), ") ")
	state, _, _ := strings.Cut(rest, " ")
	return state
}
