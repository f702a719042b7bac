package library

import (
	_ "embed"
	"time"

	"github.com/locktorture/locktorture/locks"
)

// phpLockWorker is the worker program around php-lock's PHPRedisMutex (see
// its header for how acquire and release map onto synchronized()).
//
//go:embed phplock_worker.php
var phpLockWorker string

// phpLockLibrary names the library as Debian ships it.
const phpLockLibrary = "php-lock 2.2 (Debian's php-malkusch-lock)"

// phpLockLocks registers php-lock's Redis mutex, PHPRedisMutex (its
// RedLock over php-redis, mutex/RedisMutex.php), as its README shows it:
// connected \Redis clients, new PHPRedisMutex($redises, $name, $timeout),
// $mutex->synchronized($code). Once on one node, the README's own example,
// and once over five independent nodes, the RedLock it names: five as
// redis.io's RedLock page counts them and as the harness's RedLock stories
// are told (a lock of as many nodes as the story's default follows its
// nodes parameter; one of three would be refused by every such story).
//
// What it is, from Debian's php-malkusch-lock 2.2 sources: each try sets
// the key "lock_<name>" with a fresh random token, SET NX EX timeout+1, on
// every node (PHPRedisMutex::add; SpinlockMutex::lock adds the second "to
// ensure that we delete only our keys"), so the hold ends by Redis's expiry
// on the server's wall clock and nothing renews it; a try holds when a
// majority said OK and its elapsed time is at most the key's life
// (RedisMutex::acquire step 3, with no drift), and a try that does not
// releases on every node (step 5: it retracts). That elapsed-time check is
// not Traits.Validity: it measures against the key's life, timeout + 1,
// not against the timeout the library holds the lock to (unlock's check),
// so a try that took between the two is handed out with its lease already
// over; at a TTL of 1 s (the stories' own, raised to MinTTL) a client
// paused 1.5 TTLs after its SETs' replies (K6) keeps the lock and runs its
// code as the keys expire under it (redlock-paused-replies comes out
// unsafe). Only a try longer than timeout + 1 s is given up. The
// release is the compare-and-delete script on every node
// (RedisMutex::release), and before it SpinlockMutex::unlock refuses, by
// the client's own clock, a hold older than the timeout
// (ExecutionOutsideLockException: nothing is deleted). The lease it
// implies is the timeout from before the try that took the lock; the key
// lives a second longer. The timeout is an int of seconds (MinTTL a
// second, a TTL of 1.5 s is 2 s), and it is also the wait (util/Loop.php):
// the harness's wait is not used. The key in Redis is "lock_" + the
// harness's key (SpinlockMutex::PREFIX): NodeKey tells the harness's
// observer, which reads the lock's key on each node, to read that one.
//
// Its claims are a lease's (locks.LeaseClaims, as the harness's redlock):
// a minority of nodes may be cut off, paused or slow; a client paused
// after its SETs does not break the promise judged, since the deadline
// reported counts from before the try (it is simply over when the lock is
// handed out); no claim when a node loses keys.
func phpLockLocks(register func(locks.Info)) {
	program := phpWorker(phpLockWorker)
	traits := locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall, Retracts: true}
	register(locks.Info{
		Name:    "php-lock-redis",
		Traits:  traits,
		NodeKey: phpLockKey,
		Library: phpLockLibrary,
		Summary: "php-lock's PHPRedisMutex (Debian's php-malkusch-lock 2.2) on one node, its README's example: SET NX EX timeout+1, " +
			"a Lua compare-and-delete refused past the timeout; synchronized() held in a Fiber; each client a PHP worker",
		MinTTL:  time.Second,
		Claims:  locks.LeaseClaims,
		Program: program,
	})
	register(locks.Info{
		Name:    "php-lock-redlock",
		Traits:  traits,
		NodeKey: phpLockKey,
		Library: phpLockLibrary,
		Summary: "php-lock's PHPRedisMutex over five independent nodes: its RedLock (majority, elapsed time <= the key's life, not the timeout; " +
			"releases everywhere after a failed try), the harness's RedLock bound per node; each client a PHP worker",
		Nodes:       5,
		NodeTimeout: true,
		MinTTL:      time.Second,
		Claims:      locks.LeaseClaims,
		Program:     program,
	})
}

// phpLockKey is the key php-lock keeps for a mutex's name: SpinlockMutex
// prefixes "lock_" (SpinlockMutex::__construct).
func phpLockKey(name string) string { return "lock_" + name }
