package engine

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Nice is the nice value the harness takes, for itself and for every
// server and worker it starts, where the machine lets it. A story's
// schedule is kept by the harness's timers, its servers' replies and its
// workers' turns; beside other work at the default nice (a build, a
// second job, busy loops) those came late enough to starve a run: a
// PostgreSQL that answered a probe 400 ms late, a MariaDB or etcd whose
// restart ran half a second over (docs/ci-and-benchmarks.md). At -5 a
// thread weighs three times one at 0 in the kernel's share of a core, so
// it runs soon after it wakes; the other work still gets what the stories
// leave, which is most of the machine, since the harness and its servers
// sleep through most of a story. Lower would take the machine from what
// it needs to stay up (its daemons run at 0) in a story's busiest moment.
const Nice = -5

// Prioritize moves every thread of this process to Nice where the process
// runs at nice 0, the value nobody chose, and the kernel allows it (root,
// or CAP_SYS_NICE); a process someone started at another nice keeps it.
// On Linux a nice value is a thread's, and a new thread or process takes
// its creator's, so the runtime's later threads and the servers and
// workers started afterwards run at Nice too (not a container's
// processes: the Docker engine starts those). It returns the nice the
// process runs at, and the kernel's refusal, if any, with nothing changed.
func Prioritize() (int, error) {
	now, err := NiceNow()
	if err != nil || now != 0 {
		return now, err
	}
	// Two passes: a thread the runtime started while the first listed the
	// threads, from one not yet moved, is moved by the second.
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return NiceNow()
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			err = syscall.Setpriority(syscall.PRIO_PROCESS, tid, Nice)
			if err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: the thread has ended
				n, _ := NiceNow()
				return n, err
			}
		}
	}
	return NiceNow()
}

// NiceNow is the nice value of the calling thread: the process's, once
// Prioritize has run or where nothing set a thread's own.
func NiceNow() (int, error) {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	// The system call answers 20 - nice, so that no answer is negative.
	return 20 - p, err
}
