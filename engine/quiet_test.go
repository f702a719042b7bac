package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeCPU reads one busy share per window from shares, then the last one
// for ever.
func fakeCPU(shares ...float64) func() (cpuTimes, error) {
	var t cpuTimes
	n := 0
	return func() (cpuTimes, error) {
		if n > 0 {
			share := shares[min(n-1, len(shares)-1)]
			t.busy += uint64(share * 1000)
			t.total += 1000
		}
		n++
		return t, nil
	}
}

func TestQuietWaitsForAQuietWindow(t *testing.T) {
	var said []string
	logf := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }
	q := quietness{window: time.Millisecond, limit: time.Hour, busy: 0.2, read: fakeCPU(0.9, 0.5, 0.5, 0.1)}
	if _, err := q.await(context.Background(), logf); err != nil {
		t.Fatal(err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "quietened") || !strings.Contains(said[0], "10% of its cores") {
		t.Errorf("said %q, want one line that the machine quietened at 10%%", said)
	}
}

func TestQuietRunsAnywayAfterItsLimit(t *testing.T) {
	var said []string
	logf := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }
	q := quietness{window: time.Millisecond, limit: 20 * time.Millisecond, busy: 0.2, read: fakeCPU(1)}
	if _, err := q.await(context.Background(), logf); err != nil {
		t.Fatal(err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "stayed busy") || !strings.Contains(said[0], "running anyway") {
		t.Errorf("said %q, want one line that it runs anyway", said)
	}
}

func TestQuietSaysNothingOnAQuietMachine(t *testing.T) {
	var said []string
	logf := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }
	q := quietness{window: time.Millisecond, limit: time.Hour, busy: 0.2, read: fakeCPU(0.05)}
	if _, err := q.await(context.Background(), logf); err != nil || len(said) != 0 {
		t.Errorf("await: %v, said %q; want nil and nothing", err, said)
	}
}

func TestQuietEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := quietness{window: time.Hour, limit: time.Hour, busy: 0.2, read: fakeCPU(1)}
	if _, err := q.await(ctx, func(string, ...any) {}); err != context.Canceled {
		t.Errorf("await after cancel: %v, want context.Canceled", err)
	}
}

// The machine's own /proc/stat reads, and its busy share is a share.
func TestReadCPU(t *testing.T) {
	a, err := readCPU()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	if a.total == 0 || a.busy > a.total {
		t.Fatalf("readCPU = %+v: want busy within a nonzero total", a)
	}
	time.Sleep(50 * time.Millisecond)
	b, err := readCPU()
	if err != nil {
		t.Fatal(err)
	}
	if s := b.busySince(a); s < 0 || s > 1 {
		t.Errorf("busy share %v, want within [0, 1]", s)
	}
	if n, err := statCPUs(); err != nil || n < 1 {
		t.Errorf("statCPUs = %d, %v: want a CPU or more", n, err)
	}
	// Counters that step back read as idle, not as a wrapped share.
	if s := (cpuTimes{busy: 5, total: 200}).busySince(cpuTimes{busy: 10, total: 100}); s != 0 {
		t.Errorf("busy share of a busy counter that stepped back: %v, want 0", s)
	}
}
