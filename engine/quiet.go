package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// A run told to be alone (Options.Alone: a starved run's second try) holds
// every seat of the room, but the room counts locktorture's runs only:
// what else the machine runs (make test's other lane between its stories,
// a matrix's reports being written, a user's build) still takes the cores
// the story's timing needs, and a second run beside it starves as the
// first did. So, once it has the room, it waits until the cores have
// been quiet for a window: busy less than one seat's worth (a third of a
// core). It waits at most a limit, then runs anyway (two busy loops never
// end), and says which.
type quietness struct {
	window, limit time.Duration
	// busy is the most of the machine's cores that may be busy in a
	// quiet window.
	busy float64
	read func() (cpuTimes, error)
}

// machineQuiet is the quietness a run alone waits for: under one seat's
// worth of one core busy for half a second, waited for up to 20 s. Where
// this process may use fewer CPUs than /proc/stat counts (a container
// pinned to some of a host's), the cores' busy share says nothing of
// the ones it runs on, and it reads nothing: no wait.
func machineQuiet() quietness {
	q := quietness{window: 500 * time.Millisecond, limit: 20 * time.Second,
		busy: 1 / float64(SeatsPerCore*runtime.NumCPU()), read: readCPU}
	if n, err := statCPUs(); err != nil || n != runtime.NumCPU() {
		q.read = func() (cpuTimes, error) { return cpuTimes{}, errors.New("the machine's CPUs are not this process's") }
	}
	return q
}

// await waits for a quiet window, at most q.limit, and says through logf
// what it found when a window before it was busy. It returns how long it
// waited, and ctx's error when ctx ends first; a machine whose CPU time
// cannot be read is taken as quiet (there is nothing to wait for).
func (q quietness) await(ctx context.Context, logf func(string, ...any)) (time.Duration, error) {
	start := time.Now()
	prev, err := q.read()
	if err != nil {
		return 0, nil
	}
	for windows := 1; ; windows++ {
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(q.window):
		}
		cur, err := q.read()
		if err != nil {
			return time.Since(start), nil
		}
		busy := cur.busySince(prev)
		prev = cur
		waited := time.Since(start)
		if busy <= q.busy {
			if windows > 1 {
				logf("the machine quietened after %.1f s (%.0f%% of its cores busy)", waited.Seconds(), 100*busy)
			}
			return waited, nil
		}
		if waited >= q.limit {
			logf("the machine stayed busy for %.0f s (%.0f%% of its cores busy): running anyway", waited.Seconds(), 100*busy)
			return waited, nil
		}
	}
}

// cpuTimes is the machine's CPU time so far, from /proc/stat's first line
// (in clock ticks): busy, and all of it.
type cpuTimes struct{ busy, total uint64 }

// busySince is the share of the machine's cores busy between then and c,
// within [0, 1]: the kernel's counters may step back (iowait does).
func (c cpuTimes) busySince(then cpuTimes) float64 {
	busy, total := float64(c.busy)-float64(then.busy), float64(c.total)-float64(then.total)
	if total <= 0 {
		return 0
	}
	return min(max(busy/total, 0), 1)
}

// statCPUs counts the CPUs /proc/stat gives a line of their own.
func statCPUs() (int, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n, nil
}

// readCPU reads the machine's CPU time: user, nice, system, irq, softirq
// and steal are busy; idle and iowait are not (guest time is counted in
// user already).
func readCPU() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return cpuTimes{}, err
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}, errors.New("/proc/stat: no cpu line")
	}
	var t cpuTimes
	for i, f := range fields[1:9] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
		}
	}
	return t, nil
}
