package library_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/worker"
)

// A Python library's workers are forks of one interpreter that imported
// it (worker.Forker). Each fork is a process of its own group whose parent
// is the forker, not the harness; it serves the protocol on real Redis
// with a state of its own; the harness's kill ends it and it is reaped,
// leaving no zombie; and a fork still running dies with its forker.
func TestPythonWorkersAreForksOfOneInterpreter(t *testing.T) {
	info, err := locks.Lookup("redis-py")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Forks {
		t.Fatal("redis-py's workers do not fork (locks.Info.Forks)")
	}
	node, store := redisAndStore(t)
	log, err := os.Create(filepath.Join(t.TempDir(), "workers.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	f, err := worker.StartForker(info.Program(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	hello := worker.Hello{Lock: "redis-py", Nodes: []string{node.Addr()}, Store: store.Addr(), TTLNS: int64(ttl), WaitNS: int64(ttl / 10)}
	var procs []*worker.Proc
	for _, owner := range []string{"a", "b", "c"} {
		hello.Owner = owner
		procs = append(procs, startWorker(t, hello, worker.Options{Forker: f, Stderr: log}))
	}
	seen := map[int]bool{}
	for _, p := range procs {
		ppid, pgid := parentAndGroup(t, p.PID())
		if seen[p.PID()] || ppid != f.PID() || pgid != p.PID() {
			t.Fatalf("worker %d: parent %d, group %d, want parent %d (the forker), a group of its own, a pid of its own", p.PID(), ppid, pgid, f.PID())
		}
		seen[p.PID()] = true
	}

	ctx := context.Background()
	lease, err := procs[0].Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("a fork's acquire: %v", err)
	}
	if _, err := procs[1].Acquire(ctx, "k"); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("a second fork took the held key: %v", err)
	}
	if err := procs[0].Release(ctx, lease); err != nil {
		t.Fatalf("a fork's release: %v", err)
	}

	pid := procs[1].PID()
	procs[1].Close()
	if alive(pid) {
		t.Fatalf("worker %d, closed, is still there (a zombie not reaped?)", pid)
	}
	pid = procs[2].PID()
	f.Close()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid) {
		t.Fatalf("worker %d outlived its forker", pid)
	}
}

// parentAndGroup reads pid's parent and process group from /proc.
func parentAndGroup(t *testing.T, pid int) (ppid, pgid int) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state, ppid, pgrp.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, _ = strconv.Atoi(fields[1])
	pgid, _ = strconv.Atoi(fields[2])
	return ppid, pgid
}

// alive says whether pid is a process, a zombie included.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
