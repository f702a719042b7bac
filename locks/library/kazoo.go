package library

import (
	_ "embed"

	"github.com/locktorture/locktorture/locks"
)

// kazooWorker is the worker program around kazoo's Lock.
//
//go:embed kazoo_worker.py
var kazooWorker string

// kazooLibrary names the library as Debian ships it.
const kazooLibrary = "kazoo 2.8 (Debian's python3-kazoo)"

// kazooLocks registers kazoo's Lock recipe as its docs show it (a
// KazooClient whose session timeout is the TTL, client.Lock(path,
// identifier), acquire(timeout=...), release()), each client a Python
// worker: plain, fenced by the lock node's creation zxid, and with the
// connection listener kazoo's docs ask lock users to add. kazoo never ends
// a session itself: LOST comes only from the ensemble (its
// _session_callback).
func kazooLocks(register func(locks.Info)) {
	program := pythonWorker(kazooWorker)
	register(zooKeeperLibrary("kazoo", kazooLibrary,
		"kazoo's Lock recipe (Debian's python3-kazoo 2.8): lowest ephemeral sequential node holds while its session lives; each client a Python worker",
		false, false, false, program))
	register(zooKeeperLibrary("kazoo-fenced", kazooLibrary,
		"kazoo's Lock, the lock node's creation zxid (read after the acquire) as fencing token",
		true, false, false, program))
	register(zooKeeperLibrary("kazoo-listener", kazooLibrary,
		"kazoo's Lock with a connection listener that takes SUSPENDED and LOST as a lost lock, as kazoo's docs ask",
		false, true, false, program))
}
