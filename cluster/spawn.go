package cluster

import (
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// Processes are started from one goroutine locked to its OS thread for the
// life of the program. Pdeathsig fires when the thread that forked the child
// exits, and a Go thread can exit under a locked goroutine; a thread that
// never exits makes "the harness died" the only trigger. That is what stops
// every redis-server when the harness is killed or panics in a goroutine
// that never reaches a deferred Close.
var (
	spawnOnce sync.Once
	spawnReq  chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// StartProcess starts cmd the way every child of the harness is started
// (Redis nodes, and client workers): it dies with the harness, however the
// harness dies, and a Ctrl-C on the terminal does not reach it.
func StartProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReq = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread()
			for req := range spawnReq {
				req.done <- req.cmd.Start()
			}
		}()
	})
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	// Own process group: a Ctrl-C on the terminal reaches the harness only,
	// which then stops the nodes in order instead of racing them.
	cmd.SysProcAttr.Setpgid = true
	done := make(chan error, 1)
	spawnReq <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// claimPort claims port machine-wide for one of locktorture's own listeners
// (what: "link" or "node"): a name in Linux's abstract unix-socket
// namespace, "locktorture-WHAT.PORT", held as the machine-wide room holds
// its seats. Every locktorture process takes the claim before it takes the
// port and keeps it while the port is in use; an error means another has.
func claimPort(what string, port int) (net.Listener, error) {
	return net.Listen("unix", "@locktorture-"+what+"."+strconv.Itoa(port))
}

// FreePort asks the kernel for a free loopback TCP port. Another process can
// take it before it is bound again, so callers retry on "address in use".
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("cluster: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
