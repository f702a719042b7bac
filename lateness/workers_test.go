package lateness

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A worker's wait is summed over the trailing span only: a stall that left
// the span no longer counts, one inside it counts whole.
func TestWaitedSumsTheTrailingSpan(t *testing.T) {
	ms := int64(time.Millisecond)
	w := &waited{last: 1000 * ms}
	span := 200 * ms
	for _, c := range []struct{ at, total, want int64 }{
		{50 * ms, 1000 * ms, 0},
		{100 * ms, 1040 * ms, 40 * ms},
		{150 * ms, 1090 * ms, 90 * ms},
		{200 * ms, 1090 * ms, 90 * ms},
		{250 * ms, 1090 * ms, 90 * ms}, // the 100 ms step is still inside (250-200 < 100)
		{300 * ms, 1100 * ms, 60 * ms}, // the 100 ms step has left: 50 + 10
		{400 * ms, 1100 * ms, 10 * ms}, // only 300's 10 ms is left
		{450 * ms, 1050 * ms, 10 * ms}, // a count that went back (a pid reused) adds nothing
		{700 * ms, 1050 * ms, 0},
	} {
		if got := w.add(c.at, c.total, span); got != c.want {
			t.Errorf("at %dms: wait over the span %dms, want %dms", c.at/ms, got/ms, c.want/ms)
		}
	}
}

// needSchedstat skips a test on a kernel that keeps no schedstat, where no
// worker is measured.
func needSchedstat(t *testing.T) {
	t.Helper()
	if _, ok := runQueueWait(os.Getpid()); !ok {
		t.Skip("this kernel keeps no schedstat: no worker is measured here")
	}
}

func TestRunQueueWaitReadsALiveProcessOnly(t *testing.T) {
	needSchedstat(t)
	cmd := exec.Command("sleep", "0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, ok := runQueueWait(cmd.Process.Pid); ok {
		t.Errorf("pid %d has exited, yet its wait was read", cmd.Process.Pid)
	}
}

// The meter samples the workers it is given, and only those, and their
// wait starves no run.
func TestMeterSamplesWorkersWhoseWaitStarvesNothing(t *testing.T) {
	needSchedstat(t)
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	m := Start(Options{Workers: func() []int { return []int{cmd.Process.Pid} }, Window: 10 * time.Millisecond})
	time.Sleep(100 * time.Millisecond)
	var workers int
	for _, s := range m.Stop() {
		if s.Kind == Worker {
			workers++
		}
	}
	if workers == 0 {
		t.Errorf("no worker sample in 100 ms of a live worker")
	}
	none := Start(Options{})
	time.Sleep(30 * time.Millisecond)
	for _, s := range none.Stop() {
		if s.Kind == Worker {
			t.Errorf("a worker sample with no workers: %+v", s)
		}
	}
	// A figure, not a limit: a worker kept from its core by its own
	// siblings starves nothing.
	if why := Over([]Sample{{At: int64(time.Second), Kind: Worker, Late: int64(400 * time.Millisecond)}}, LimitsFor(500*time.Millisecond)); why != "" {
		t.Errorf("a worker's wait starved a run: %q", why)
	}
}
