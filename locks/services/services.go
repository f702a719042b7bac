// Package services puts the locks people choose instead of a Redis lock
// under the same faults: ZooKeeper's and etcd's recipes, PostgreSQL's
// advisory locks and lease rows, memcached's add. Each file holds one
// service's locks, built on the client library that service's users use
// and sorting its errors into the three the harness judges by
// (locks.ErrNotAcquired, locks.ErrNotHeld, locks.ErrUnknown). Each lock
// dials its nodes' links (locks.Config.Addrs), so every byte crosses a
// link a nemesis cuts or slows. A program that wants them under test
// calls Register.
package services

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/locktorture/locktorture/locks"
)

// families are the services, one function per file that registers what
// the file holds: a new service is a file with its function and a line
// here.
var families = []func(register func(locks.Info)){
	zkLocks,        // zk.go
	etcdLocks,      // etcd.go
	pgLocks,        // pg.go
	memcachedLocks, // memcached.go
	mysqlLocks,     // mysql.go
}

// Register puts every service's locks in the lock registry, once however
// often it is called.
func Register() {
	registered.Do(func() {
		for _, f := range families {
			f(locks.Register)
		}
	})
}

var registered sync.Once

// newToken is a random token per acquisition.
func newToken() string { return crand.Text() }

// unknown wraps a transport error as an unknown outcome.
func unknown(step string, err error) error {
	return fmt.Errorf("%w: %s: %v", locks.ErrUnknown, step, err)
}

// prepareRetry is how long a Prepare waits between tries.
const prepareRetry = 50 * time.Millisecond

// prepareUntil runs try until it succeeds or ctx ends, prepareRetry
// apart: a lock's Prepare (locks.Preparer), which returns ctx's error with
// the last try's once ctx ends.
func prepareUntil(ctx context.Context, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (the last try: %v)", ctx.Err(), err)
		case <-time.After(prepareRetry):
		}
	}
}
