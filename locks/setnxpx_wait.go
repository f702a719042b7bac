package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func registerSetNXPXWait(register func(Info)) {
	register(Info{
		Name:    "set-nx-px-wait",
		Traits:  Traits{Ends: Expires, Release: OwnerChecked, Clock: ServerWall, Waits: true},
		Claims:  LeaseClaims,
		Summary: "set-nx-px whose SET is followed by WAIT for the master's replicas, undone when none acknowledged it (Redisson RLock's synced lock)",
		New: func(c Config) Lock {
			l := &setNXPXWait{cfg: c}
			l.replicas.Store(-1)
			return l
		},
	})
}

// noSyncRetries is how many times an acquire is tried again after no
// replica acknowledged it, before Acquire gives up: Redisson's default
// retryAttempts (BaseConfig), which bounds its retries of a
// NoSyncedSlavesException.
const noSyncRetries = 4

// setNXPXWait is the mitigation Redisson offers for a lock lost with its
// master since it deprecated RedissonRedLock (redisson/redisson issues
// #2669 and #5965): a lock write is only kept once a replica acknowledged
// it. It follows Redisson's behaviour as read in redisson/redisson at
// 6686397 (August 2026), not its code:
//
//   - CommandAsyncService.syncedEval sends the lock script and, in the
//     same batch on the same connection, WAIT n slavesSyncTimeout, where n
//     is the replica count the master's INFO gives (connected_slaves,
//     cached per master and read again once a WAIT answers a different
//     count). With no replicas connected it sends no WAIT and takes the
//     lock as it is. (With AOF on, Redis 7.2 gets WAITAOF instead; the
//     harness's nodes keep no AOF unless a story asks.)
//   - It fails the attempt only when not one replica acknowledged
//     (synced == 0 while n > 0: NoSyncedSlavesException, since commit
//     12af118 "Fixed - Lock synced slaves check"); some of several is
//     enough.
//   - RedissonBaseLock.handleNoSync then runs the unlock script, so the
//     key does not stay behind on the master (commit ec2e41a, issue
//     #4822), and rethrows.
//   - ServiceManager.execute retries the whole attempt on that exception
//     up to retryAttempts times (4 by default), and then the exception
//     reaches the caller of lock or tryLock: an error, not a lock.
//
// Here, an attempt is SET key token NX PX ttl pipelined with WAIT n
// timeout on one connection (WAIT counts only its own connection's
// writes). When no replica acknowledged, the key is compare-and-deleted
// (set-nx-px's release) and the attempt is tried again, at most
// noSyncRetries more times in a row within Config.Wait, then Acquire
// fails with ErrNotAcquired. Redisson checks the WAIT answer whatever
// the script answered; so does this, but it only deletes a key its own
// SET took (Redisson's unlock script does nothing for a non-holder
// either). Between attempts it waits Config.RetryDelay, not Redisson's
// retryDelay of a second or two: a harness lease is about a second long.
// So while replication is cut and the master still counts its replica,
// nobody gets the lock: safety bought with availability.
//
// Where this differs from Redisson: the replica count is cached per lock
// handle rather than per master; the unlock after a short WAIT does not
// itself WAIT (Redisson's does, and ignores the answer); and an INFO that
// fails ends the attempt as not acquired (nothing was written yet).
//
// WAIT makes the lock survive the loss of a master whose replica got the
// write, but replication stays asynchronous for everything else: a lock
// that a replica acknowledged can still be lost if another replica, one
// that never had it, is promoted; and once the master has noticed its
// replicas gone (repl-timeout), it takes locks unconfirmed again.
type setNXPXWait struct {
	cfg Config
	// replicas is the master's connected_slaves as last read, -1 for
	// unknown: Redisson's MasterSlaveEntry.availableSlaves.
	replicas atomic.Int64
}

func (l *setNXPXWait) Acquire(ctx context.Context, key string) (Lease, error) {
	c := l.cfg.Clients[0]
	timeout := l.waitTimeout(c)
	noSync := 0
	return Retry(ctx, l.cfg, func() (Lease, bool, error) {
		n := l.replicas.Load()
		if n < 0 {
			var err error
			if n, err = connectedReplicas(ctx, c); err != nil {
				return Lease{}, false, fmt.Errorf("%w: INFO replication: %v", ErrNotAcquired, err)
			}
			l.replicas.Store(n)
		}
		token := newToken()
		start := l.cfg.Clock.Now()
		var set *redis.BoolCmd
		var wait *redis.Cmd
		// Each command carries its own error; the pipeline's is the first.
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			set = p.SetNX(ctx, key, token, l.cfg.TTL)
			if n > 0 {
				// Pipeliner has no Wait; the pipeline reads every reply
				// under the connection's one read timeout anyway.
				wait = p.Do(ctx, "WAIT", n, timeout.Milliseconds())
			}
			return nil
		})
		if err := set.Err(); err != nil {
			return Lease{}, false, unknown("SET NX PX", err)
		}
		if wait == nil {
			noSync = 0
			if !set.Val() {
				return Lease{}, false, nil
			}
			return Lease{Key: key, Token: token, ValidUntil: start.Add(l.cfg.TTL)}, true, nil
		}
		// The SET answered. A WAIT with no answer leaves a key the SET
		// took unconfirmed and in place (unknown); after a SET that took
		// nothing, nothing is held.
		acked, err := wait.Int64()
		if err != nil && set.Val() {
			return Lease{}, false, unknown("WAIT", err)
		} else if err != nil {
			return Lease{}, false, fmt.Errorf("%w: WAIT: %v", ErrNotAcquired, err)
		}
		if acked != n {
			l.replicas.Store(-1) // read INFO again next time, as Redisson does
		}
		if acked > 0 {
			noSync = 0 // Redisson counts retries within one tryAcquire
			if !set.Val() {
				return Lease{}, false, nil
			}
			return Lease{Key: key, Token: token, ValidUntil: start.Add(l.cfg.TTL)}, true, nil
		}
		// Not one replica acknowledged: undo the SET, if it took the key,
		// and try again, a bounded number of times.
		if set.Val() {
			err := compareAndDelete(ctx, c, Lease{Key: key, Token: token})
			if err != nil && !errors.Is(err, ErrNotHeld) {
				return Lease{}, false, unknown("compare-and-delete after an unacknowledged SET", err)
			}
		}
		if noSync++; noSync > noSyncRetries {
			return Lease{}, false, fmt.Errorf("%w: none of %d replicas acknowledged the lock within %v, %d times", ErrNotAcquired, n, timeout, noSync)
		}
		return Lease{}, false, nil
	})
}

// waitTimeout is WAIT's timeout: a tenth of the TTL, so a lease keeps
// nine tenths of its time once confirmed (Redisson's default
// slavesSyncTimeout is 1 s of a 30 s watchdog lease; a replica on the
// loopback acknowledges within a millisecond, and a tenth leaves a busy
// machine room). It stays under half the connection's read timeout:
// go-redis reads a pipeline's replies under that one timeout, so a
// longer WAIT would turn every short WAIT into a transport error. Never
// 0, which WAIT takes as forever.
func (l *setNXPXWait) waitTimeout(c redis.UniversalClient) time.Duration {
	d := l.cfg.TTL / 10
	if o, ok := c.(interface{ Options() *redis.Options }); ok && o.Options().ReadTimeout > 0 {
		d = min(d, o.Options().ReadTimeout/2)
	}
	return max(d, time.Millisecond)
}

func (l *setNXPXWait) Release(ctx context.Context, lease Lease) error {
	return compareAndDelete(ctx, l.cfg.Clients[0], lease)
}

// connectedReplicas is the master's connected_slaves from INFO
// replication.
func connectedReplicas(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info := c.InfoMap(ctx, "replication")
	if err := info.Err(); err != nil {
		return 0, err
	}
	v := info.Item("Replication", "connected_slaves")
	if v == "" {
		return 0, errors.New("no connected_slaves in INFO replication")
	}
	return strconv.ParseInt(v, 10, 64)
}
