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
// the file holds, with the language its users write in (Info.Language)
// and whether its workers fork from one process that imported the library
// (Info.Forks; protocol.py's serve forks them): a new library is a file
// with its function and a line here.
var adapters = []struct {
	register func(register func(locks.Info))
	language string
	forks    bool
}{
	{redsyncLocks, "Go", false},    // redsync.go
	{redislockLocks, "Go", false},  // redislock.go
	{redisPyLocks, "Python", true}, // redispy.go
	{curatorLocks, "Java", false},  // curator.go
	{kazooLocks, "Python", true},   // kazoo.go
	{toozLocks, "Python", true},    // tooz.go
	// portalocker's worker makes, before serve, a thread and a signal
	// pipe that must be each process's own (portalocker_worker.py).
	{portalockerLocks, "Python", false}, // portalocker.go
	{etcd3Locks, "Python", true},        // etcd3.go
	{symfonyLocks, "PHP", false},        // symfony.go
	{laravelLocks, "PHP", false},        // laravel.go
	{phpLockLocks, "PHP", false},        // phplock.go
}

// Register puts every adapter in the lock registry (locks.Lookup), once
// however often it is called: cmd/run and the tests that run libraries
// call it, and a user of locktest who wants the libraries beside a lock
// of their own.
func Register() {
	registered.Do(func() {
		for _, a := range adapters {
			a.register(func(info locks.Info) {
				info.Language = a.language
				info.Forks = a.forks
				locks.Register(info)
			})
		}
	})
}

var registered sync.Once

// classified wraps a library's error in the harness's kind of it, keeping
// the library's words for the report.
func classified(kind error, step string, err error) error {
	return fmt.Errorf("%w: %s: %v", kind, step, err)
}
