package nemesis

import (
	"os"
	"syscall"
	"time"
)

// osProcess is a client process that runs as an OS process of its own.
type osProcess struct {
	p       *os.Process
	stopped bool
}

// Attach tells the gate that process of client runs as OS process p (a
// worker): from then on a pause of the client stops it with SIGSTOP and
// resumes it with SIGCONT, so everything in it stops (timers, its
// watchdog, the Go runtime), and a crash is SIGKILL, so nothing of it
// survives and nothing needs its cooperation.
func (g *Gate) Attach(client, process int, p *os.Process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pr := g.procLocked(client, process)
	pr.os = &osProcess{p: p}
	if g.clientLocked(client).paused() {
		g.stopLocked(pr)
	}
}

// Detach forgets process's OS process: it has exited.
func (g *Gate) Detach(process int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.procs[process]; p != nil {
		p.os = nil
		g.forgetLocked(process)
	}
}

// stopLocked sends SIGSTOP to p's OS process, if it has one, and has
// SIGCONT follow when its client's pause ends (however often it is
// extended meanwhile).
func (g *Gate) stopLocked(p *proc) {
	op, client := p.os, p.client
	if op == nil || op.stopped {
		return
	}
	if err := op.p.Signal(syscall.SIGSTOP); err != nil {
		return // it has exited: there is nothing to stop
	}
	op.stopped = true
	var cont func()
	cont = func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if rest := g.clientLocked(client).restOf(); rest > 0 {
			time.AfterFunc(rest, cont)
			return
		}
		op.stopped = false
		_ = op.p.Signal(syscall.SIGCONT)
	}
	time.AfterFunc(g.clientLocked(client).restOf(), cont)
}

// Workers is the pids of the OS processes attached now (the clients'
// workers), for the lateness meter to read: a stopped one too, whose
// run-queue wait does not grow while it is stopped.
func (g *Gate) Workers() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var pids []int
	for _, p := range g.procs {
		if p.os != nil {
			pids = append(pids, p.os.p.Pid)
		}
	}
	return pids
}
