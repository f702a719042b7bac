package worker

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locktorture/locktorture/cluster"
)

// started is a worker's process as Start started it: a command of its
// own, or a Forker's fork.
type started struct {
	pid    int
	os     *os.Process // the gate's handle: signals reach it by pidfd
	stdin  io.WriteCloser
	stdout *os.File
	// reap returns once the worker has exited, the rest of its process
	// group is killed (its children would keep its stdout open) and it is
	// reaped, saying how it exited. The group is killed while its leader
	// is a zombie, not yet reaped, so its id cannot have gone to another
	// process (every server and worker here leads a group of its own).
	reap func() error
}

// startExec starts o.Command's process.
func startExec(o Options) (started, error) {
	cmd := o.Command(o.Hello.Lock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return started{}, err
	}
	// A pipe of its own, not StdoutPipe: Wait then returns when the
	// worker exits, though a child of it may still hold its stdout.
	stdout, w, err := os.Pipe()
	if err != nil {
		return started{}, err
	}
	// Its stderr a pipe too where o.Stderr is not a file, copied until
	// copied is closed: os/exec's own copy would keep Wait waiting for a
	// child of the worker that still holds it.
	cmd.Stdout = w
	copied := make(chan struct{})
	close(copied)
	if o.Stderr != nil {
		errW, c, err := stderrFile(o.Stderr)
		if err != nil {
			stdout.Close()
			w.Close()
			return started{}, err
		}
		cmd.Stderr, copied = errW, c
		if errW != o.Stderr {
			defer errW.Close() // the worker's end, once it has it
		}
	}
	err = cluster.StartProcess(cmd)
	w.Close()
	if err != nil {
		stdout.Close()
		return started{}, err
	}
	reap := func() error {
		pid := cmd.Process.Pid
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				break
			}
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		err := cmd.Wait()
		drained(copied)
		return err
	}
	return started{pid: cmd.Process.Pid, os: cmd.Process, stdin: stdin, stdout: stdout, reap: reap}, nil
}

// startFork has o.Forker fork a worker. The worker is not the harness's
// child: a pidfd says when it has exited, and the Forker reaps it.
func startFork(o Options) (_ started, err error) {
	// theirs are the worker's ends, closed here once it has them; mine,
	// the harness's, are closed here only if the start fails.
	var theirs, mine []*os.File
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
		if err != nil {
			for _, f := range mine {
				f.Close()
			}
		}
	}()
	inR, stdin, err := os.Pipe()
	if err != nil {
		return started{}, err
	}
	theirs, mine = append(theirs, inR), append(mine, stdin)
	stdout, outW, err := os.Pipe()
	if err != nil {
		return started{}, err
	}
	theirs, mine = append(theirs, outW), append(mine, stdout)
	errW, copied, err := stderrFile(o.Stderr)
	if err != nil {
		return started{}, err
	}
	if errW != o.Stderr {
		theirs = append(theirs, errW)
	}
	pid, err := o.Forker.fork(inR, outW, errW)
	if err != nil {
		return started{}, err
	}
	proc, pidfd, err := watch(pid)
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = o.Forker.reap(pid)
		return started{}, err
	}
	reap := func() error {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		unix.Close(pidfd)
		err := o.Forker.reap(pid)
		stdin.Close()
		drained(copied)
		return err
	}
	return started{pid: pid, os: proc, stdin: stdin, stdout: stdout, reap: reap}, nil
}

// watch opens a fork's two handles: a pidfd, readable once it has exited,
// and the gate's os.Process. The Forker reaps nothing until asked, so pid
// is still the fork.
func watch(pid int) (*os.Process, int, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("pidfd_open: %w (forked workers need Linux 5.3 or later; -spawn-workers starts interpreters instead)", err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		unix.Close(pidfd)
		return nil, 0, err
	}
	return proc, pidfd, nil
}

// drained waits for a worker's stderr copy to end (stderrFile's copied),
// for a second at most: a child that left the worker's group keeps it.
func drained(copied <-chan struct{}) {
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
}

// stderrFile is the file a worker writes its stderr to: w itself when it is
// one, else a pipe copied to w (nil: discarded) until copied is closed.
func stderrFile(w io.Writer) (f *os.File, copied chan struct{}, err error) {
	copied = make(chan struct{})
	if file, ok := w.(*os.File); ok && file != nil {
		close(copied)
		return file, copied, nil
	}
	if w == nil {
		w = io.Discard
	}
	r, f, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	go func() {
		_, _ = io.Copy(w, r)
		r.Close()
		close(copied)
	}()
	return f, copied, nil
}
