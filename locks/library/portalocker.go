package library

import (
	_ "embed"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

// portalockerWorker is the worker program around portalocker's RedisLock
// (see its docstring).
//
//go:embed portalocker_worker.py
var portalockerWorker string

// portalockerLibrary names the library as Debian ships it.
const portalockerLibrary = "portalocker 2.2 (Debian's python3-portalocker)"

// portalockerLocks registers portalocker's RedisLock as its docs show it
// (RedisLock(channel, connection=redis.Redis(...), timeout=...),
// acquire(), release()), each client a Python worker.
//
// It is no key and no lease (portalocker/redis.py, RedisLock): a holder is
// a client subscribed to the lock's channel, a contender takes the lock
// when PUBSUB NUMSUB counts no subscriber, and the hold lasts while the
// holder's PubSub connection does: the server drops the subscription when
// that connection closes, and nothing expires. The release stops the
// holder's own reading thread, which closes its own subscribed connection:
// it cannot let another client's hold go, so it is owner-checked in the
// traits' sense, although it checks nothing and answers nothing. When the
// subscribed connection fails, the reading thread interrupts the main
// thread (PubSubWorkerThread.run: _thread.interrupt_main()) before it
// dies: the library tells its holder, which the worker passes on as a
// lost lease.
//
// Claims, as pg-advisory's, a lock held while a connection lives: a
// paused or slow holder keeps its connection open and its hold, and a
// paused node keeps every connection; a dead holder's connection closes,
// and its hold with it; no clock is read. check_or_kill_lock, which is
// meant to kill a holder silent for unavailable_timeout, takes its own
// SUBSCRIBE's confirmation for the holder's answer and never kills (see
// the worker's docstring), so a paused holder is not robbed. Latency is
// claimed as the design means it, though the acquire does not wait for its
// SUBSCRIBE before it counts subscribers on another connection, so jitter
// that reorders the two can give two holders (the worker's docstring):
// exploration holds it to that. Not claimed: a
// restarted node, which drops every subscription while the holders still
// believe (their threads' interrupts race their work), and a cut link,
// which keeps the hold only as long as the server keeps the holder's
// connection (the harness's proxy keeps it; a real network's TCP keepalive
// ends it while the holder still believes).
func portalockerLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "portalocker",
		Traits:  locks.Traits{Ends: locks.Connection, Release: locks.OwnerChecked, TellsLoss: true, RacyAcquire: true},
		Library: portalockerLibrary,
		Summary: "portalocker's RedisLock (Debian's python3-portalocker 2.2): held while the holder's SUBSCRIBE to the lock's channel lives, " +
			"taken when PUBSUB NUMSUB counts no subscriber; its thread's interrupt on a dropped connection told as a lost lease; each client a Python worker",
		Claims:  []fault.Kind{fault.Latency, fault.NodePause, fault.ClientPause, fault.ClientCrash, fault.ClientClock},
		Program: pythonWorker(portalockerWorker),
	})
}
