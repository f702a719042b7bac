package library

import (
	_ "embed"

	"github.com/locktorture/locktorture/locks"
)

// redispyWorker is the worker program: the protocol's worked example for a
// lock in another language (see its docstring).
//
//go:embed redispy_worker.py
var redispyWorker string

func redisPyLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "redis-py",
		Traits:  locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall},
		Library: "redis-py (Debian's python3-redis)",
		Summary: "redis-py's Lock (Debian's python3-redis): SET NX PX, a Lua compare-and-delete; " +
			"each client a Python worker process",
		Claims:  locks.LeaseClaims,
		Program: pythonWorker(redispyWorker),
	})
}
