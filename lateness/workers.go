package lateness

import (
	"context"
	"os"
	"strconv"
	"strings"
)

// workers samples the run-queue wait of the clients' worker processes
// (Options.Workers) once a window: for each, how long it stood runnable
// but not running over the trailing Options.Span, as Linux's schedstat
// counts it for the process's main thread. A library's worker keeps its
// own timers, which the harness cannot read; whatever kept it from a core
// (a neighbour, or the pair's own workers) shows here instead.
func (m *Meter) workers(ctx context.Context) {
	defer m.wg.Done()
	waits := map[int]*waited{}
	every(ctx, m.o.Window, func() {
		now := m.o.Now()
		worst, seen := int64(0), false
		alive := map[int]bool{}
		for _, pid := range m.o.Workers() {
			total, ok := runQueueWait(pid)
			if !ok {
				continue // it has exited
			}
			alive[pid] = true
			w := waits[pid]
			if w == nil {
				waits[pid] = &waited{last: total}
				continue
			}
			worst, seen = max(worst, w.add(now, total, int64(m.o.Span))), true
		}
		for pid := range waits {
			if !alive[pid] {
				delete(waits, pid)
			}
		}
		if seen {
			m.note(Worker, now, worst)
		}
	})
}

// waited is one worker's run-queue wait, window by window, over the
// trailing span.
type waited struct {
	last  int64
	steps []step
	sum   int64
}

type step struct{ at, wait int64 }

// add takes the worker's total wait read at at and returns its wait over
// the span that ends there.
func (w *waited) add(at, total, span int64) int64 {
	d := max(0, total-w.last)
	w.last = total
	w.steps = append(w.steps, step{at, d})
	w.sum += d
	for len(w.steps) > 0 && w.steps[0].at <= at-span {
		w.sum -= w.steps[0].wait
		w.steps = w.steps[1:]
	}
	return w.sum
}

// runQueueWait is how long pid's main thread has waited on a run queue
// since it started, in ns (the second field of /proc/PID/schedstat); false
// when it cannot be read (the process has gone, or the kernel keeps no
// such count).
func runQueueWait(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	return n, err == nil
}
