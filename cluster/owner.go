package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// listensOn reports whether a process in pid's process group holds the
// TCP socket listening on port. A kind whose protocol tells no pid is
// known to be ours this way: the kernel says whose socket answered.
func listensOn(pid, port int) bool {
	sockets := listening(port)
	if len(sockets) == 0 {
		return false
	}
	if holds(pid, sockets) {
		return true
	}
	// A server started through a wrapper (a shell script, a JVM launcher)
	// listens from a child, which shares the group StartProcess made.
	for _, other := range members(pid) {
		if other != pid && holds(other, sockets) {
			return true
		}
	}
	return false
}

// members is the processes of the server whose process group is pgid:
// the group's, and every live process descended from one, since a server
// may move its children out of its group (PostgreSQL's backends call
// setsid) and they serve clients all the same. Zombies are left out:
// they hold nothing and answer nothing.
func members(pgid int) []int {
	parent := map[int]int{}
	in := map[int]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		f := statFields(pid)
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		parent[pid] = ppid
		if pgrp == pgid {
			in[pid] = true
		}
	}
	for grown := true; grown; {
		grown = false
		for pid, pp := range parent {
			if !in[pid] && in[pp] {
				in[pid], grown = true, true
			}
		}
	}
	out := make([]int, 0, len(in))
	for pid := range in {
		out = append(out, pid)
	}
	return out
}

// waitStopped waits until every one of pids has stopped (or is gone),
// within the limit. SIGSTOP is only queued when kill returns: a process
// stops when the kernel next schedules it, and until then it may still
// accept and answer. A pause is recorded as begun only once nothing of
// the server can answer.
func waitStopped(pids []int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		running := 0
		for _, pid := range pids {
			if st := procState(pid); st != 0 && st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				running = pid
				break
			}
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d has not stopped %v after SIGSTOP", running, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState is pid's state letter in /proc (R, S, D, T, Z…), or 0 if it
// is gone.
func procState(pid int) byte {
	f := statFields(pid)
	if len(f) == 0 || f[0] == "" {
		return 0
	}
	return f[0][0]
}

// listening is the inodes of the sockets listening on TCP port, IPv4 and
// IPv6, in the harness's network namespace.
func listening(port int) map[string]bool {
	out := map[string]bool{}
	hexPort := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// local_address is ADDR:PORT in hex; state 0A is LISTEN.
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			if _, p, ok := strings.Cut(f[1], ":"); ok && strings.TrimLeft(p, "0") == hexPort {
				out[f[9]] = true
			}
		}
	}
	return out
}

// holds reports whether pid has one of sockets (by inode) open.
func holds(pid int, sockets map[string]bool) bool {
	fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok && sockets[strings.TrimSuffix(inode, "]")] {
			return true
		}
	}
	return false
}

// statFields is pid's /proc stat after its command name, which in its
// parentheses may hold spaces: state, ppid, pgrp, … (nil if it is gone).
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}
