package worker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locktorture/locktorture/cluster"
)

// ForkEnv names, in a worker program's environment, the descriptor of its
// end of a Forker's socket. A program that finds it set loads its library
// once, then forks one worker for each request on the socket, instead of
// serving the protocol itself (locks/library/protocol.py's serve does).
const ForkEnv = "LOCKTORTURE_FORKS"

// ForkPatience is how long a Forker's program may take to answer: its
// first answer waits on the library's import, which took up to 6 s with
// five interpreters at once on a loaded machine.
const ForkPatience = 60 * time.Second

// Forker starts workers as forks of one process that has imported its
// library already, so a run pays an interpreter's start and its imports
// once rather than once per worker (five interpreters importing tooz on
// one core took 4.2 to 4.7 s; one import and five forks, 0.6 to 0.9 s).
// A fork is a worker as any other: a process of its own group, which the
// gate pauses and kills with signals, and which dies with the Forker.
//
// The socket carries one request and its answer at a time, each one
// packet: "fork" with the worker's stdin, stdout and stderr attached
// (SCM_RIGHTS), answered "pid N"; "reap N", sent once N has exited and
// its group is killed, answered "exit CODE"; either may be answered
// "err WHY" instead. The Forker's program is the
// forks' parent and reaps nothing until asked, so a pid the harness
// watches is never another process's.
type Forker struct {
	cmd    *exec.Cmd
	conn   *net.UnixConn
	mu     sync.Mutex    // one request and its answer at a time
	broken error         // why no request can be asked any more
	exited chan struct{} // closed once the program has exited
}

// StartForker starts cmd as a Forker's program, its stderr to stderr
// (nil: discarded). The program answers its first request only once it
// has loaded its library.
func StartForker(cmd *exec.Cmd, stderr io.Writer) (*Forker, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("worker forker: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "forker"), os.NewFile(uintptr(fds[1]), "forker-child")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("worker forker: %w", err)
	}
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Env = append(cmd.Environ(), ForkEnv+"=3")
	if stderr != nil {
		cmd.Stderr = stderr
	}
	if err := cluster.StartProcess(cmd); err != nil {
		c.Close()
		return nil, fmt.Errorf("worker forker: %w", err)
	}
	f := &Forker{cmd: cmd, conn: c.(*net.UnixConn), exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(f.exited)
	}()
	return f, nil
}

// PID is the process id of the Forker's program, every fork's parent.
func (f *Forker) PID() int { return f.cmd.Process.Pid }

// fork starts a worker whose stdin, stdout and stderr are files, and says
// its pid.
func (f *Forker) fork(files ...*os.File) (int, error) {
	fds := make([]int, len(files))
	for i, file := range files {
		fds[i] = int(file.Fd())
	}
	answer, err := f.ask("fork", unix.UnixRights(fds...))
	if err != nil {
		return 0, err
	}
	pid, ok := strings.CutPrefix(answer, "pid ")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil || n <= 0 {
		return 0, fmt.Errorf("worker forker: answered %q to a fork", answer)
	}
	return n, nil
}

// reap reaps pid, a fork that has exited, and says how it exited.
func (f *Forker) reap(pid int) error {
	answer, err := f.ask("reap "+strconv.Itoa(pid), nil)
	if err != nil {
		return err
	}
	code, ok := strings.CutPrefix(answer, "exit ")
	switch {
	case !ok:
		return fmt.Errorf("worker forker: answered %q to a reap", answer)
	case code == "0":
		return nil
	case strings.HasPrefix(code, "-"):
		return fmt.Errorf("signal: %s", strings.TrimPrefix(code, "-"))
	}
	return fmt.Errorf("exit status %s", code)
}

// ask sends one request, with oob's descriptors, and reads its answer.
// An answer that does not come, or a socket that fails, breaks the
// Forker for good: a late answer would be read as the next request's.
// An answer "err ..." is the program's refusal of this request alone.
func (f *Forker) ask(req string, oob []byte) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken != nil {
		return "", f.broken
	}
	answer, err := f.exchange(req, oob)
	if err != nil {
		f.broken = err
		f.conn.Close()
		_ = f.cmd.Process.Kill()
		return "", err
	}
	if msg, ok := strings.CutPrefix(answer, "err "); ok {
		return "", fmt.Errorf("worker forker: %s: %s", req, msg)
	}
	return answer, nil
}

// exchange writes req and reads one answer, within ForkPatience.
func (f *Forker) exchange(req string, oob []byte) (string, error) {
	if _, _, err := f.conn.WriteMsgUnix([]byte(req), oob, nil); err != nil {
		return "", fmt.Errorf("worker forker: %s: %w", req, err)
	}
	_ = f.conn.SetReadDeadline(time.Now().Add(ForkPatience))
	buf := make([]byte, 512)
	n, err := f.conn.Read(buf)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "", fmt.Errorf("worker forker: no answer to %s within %v", req, ForkPatience)
	case err != nil || n == 0:
		return "", fmt.Errorf("worker forker: it exited before it answered %s (its errors are in the workers' log)", req)
	}
	return string(buf[:n]), nil
}

// Close ends the Forker's program and waits until it has exited: a fork
// still running dies with it (its parent-death signal).
func (f *Forker) Close() {
	f.conn.Close()
	_ = f.cmd.Process.Kill()
	<-f.exited
}
