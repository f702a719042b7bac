// Package library puts the locks people install under test: Redis locks,
// and the ZooKeeper recipes of Curator (Java) and kazoo (Python). Each
// adapter is one file that uses its library as the library's own README
// does (its options, its retries, its clock, its way to extend a lease) and
// sorts the library's errors into the three the harness judges by:
// locks.ErrNotAcquired (certainly not held), locks.ErrNotHeld (the release
// deleted nothing) and locks.ErrUnknown (a command's outcome is unknown).
// A program that wants them under test calls Register.
package library

import (
	"fmt"
	"sync"

	"github.com/locktorture/locktorture/locks"
)

// adapters are the libraries, one function per file that registers what
// the file holds: a new library is a file with its function and a line
// here.
var adapters = []func(register func(locks.Info)){
	redsyncLocks,     // redsync.go
	redislockLocks,   // redislock.go
	redisPyLocks,     // redispy.go
	curatorLocks,     // curator.go
	kazooLocks,       // kazoo.go
	toozLocks,        // tooz.go
	portalockerLocks, // portalocker.go
	etcd3Locks,       // etcd3.go
	symfonyLocks,     // symfony.go
	laravelLocks,     // laravel.go
	phpLockLocks,     // phplock.go
}

// Register puts every adapter in the lock registry (locks.Lookup), once
// however often it is called: cmd/run and the tests that run libraries
// call it, and a user of locktest who wants the libraries beside a lock
// of their own.
func Register() {
	registered.Do(func() {
		for _, a := range adapters {
			a(locks.Register)
		}
	})
}

var registered sync.Once

// classified wraps a library's error in the harness's kind of it, keeping
// the library's words for the report.
func classified(kind error, step string, err error) error {
	return fmt.Errorf("%w: %s: %v", kind, step, err)
}
