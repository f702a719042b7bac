package library

import (
	_ "embed"
	"time"

	"github.com/locktorture/locktorture/locks"
)

// laravelWorker is the worker program around Laravel's cache lock (see its
// header for how a Laravel 8 application builds it).
//
//go:embed laravel_worker.php
var laravelWorker string

// laravelLocks registers Laravel's cache lock as a Laravel 8 application
// gets it from Cache::lock($name, $seconds) on the redis store: a
// PhpRedisLock over PhpRedisConnection, php-redis being the client
// laravel/laravel 8's config/database.php names ('client' =>
// env('REDIS_CLIENT', 'phpredis')), each client a PHP worker.
//
// What it is, from Debian's php-illuminate-cache 8.83 sources: the key is
// taken by one SET name owner EX seconds NX (Cache/RedisLock.php,
// acquire), so its end is Redis's expiry on the server's wall clock and no
// renewal exists; release() runs LuaScripts::releaseLock, GET, compare the
// owner, DEL, in one EVAL (Cache/PhpRedisLock.php, release), and answers
// false when the key is not the owner's. No validity check, no retract
// after a failed try (block() only sleeps 250 ms and tries again), no loss
// signal. Its seconds are whole (an int EX): MinTTL is a second, and a TTL
// of 1.5 s locks for 2 s, the worker reporting the deadline Laravel implies
// for those 2 s, from just before the SET that took the key.
//
// Its claims are a lease's in one Redis (locks.LeaseClaims): whatever keeps
// the key until its EX ran out keeps the promise, and a client that
// stops, dies or has its clock skewed only lets its own lease lapse.
func laravelLocks(register func(locks.Info)) {
	register(locks.Info{
		Name:    "laravel",
		Traits:  locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerWall},
		Library: "Laravel cache locks 8.83 (Debian's php-illuminate-cache)",
		Summary: "Laravel's Cache::lock (Debian's php-illuminate-cache 8.83) over php-redis, Laravel 8's default client: " +
			"SET NX EX whole seconds, a Lua compare-and-delete, block() in whole seconds; each client a PHP worker",
		MinTTL:  time.Second,
		Claims:  locks.LeaseClaims,
		Program: phpWorker(laravelWorker),
	})
}
