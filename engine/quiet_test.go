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

// What await says: that the machine quietened, after a busy window; that
// it runs anyway, once its limit has passed; nothing, on a quiet machine.
func TestQuietSaysWhatItWaitedFor(t *testing.T) {
	for _, c := range []struct {
		name   string
		limit  time.Duration
		shares []float64
		want   []string // in the one line it says; nil: no line
	}{
		{"busy, then quiet", time.Hour, []float64{0.9, 0.5, 0.5, 0.1}, []string{"quietened", "10% of its cores"}},
		{"busy past its limit", 20 * time.Millisecond, []float64{1}, []string{"stayed busy", "running anyway"}},
		{"quiet from the start", time.Hour, []float64{0.05}, nil},
	} {
		var said []string
		logf := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }
		q := quietness{window: time.Millisecond, limit: c.limit, busy: 0.2, read: fakeCPU(c.shares...)}
		if _, err := q.await(context.Background(), logf); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.want == nil {
			if len(said) != 0 {
				t.Errorf("%s: said %q, want nothing", c.name, said)
			}
			continue
		}
		if len(said) != 1 {
			t.Errorf("%s: said %q, want one line", c.name, said)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(said[0], w) {
				t.Errorf("%s: said %q, want %q in it", c.name, said[0], w)
			}
		}
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
