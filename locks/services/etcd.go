package services

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

func etcdLocks(register func(locks.Info)) {
	// The lock lives on a quorum: one member's crash, pause or restart and
	// the leader's loss leave it in place. The session's lease is renewed
	// by a keepalive while the holder's process runs and reaches the
	// cluster, so a paused or cut-off holder loses it without knowing
	// (Jepsen's etcd 3.4.3 analysis): neither is claimed. A dead client's
	// lease expires: a dead holder holds nothing.
	claims := []fault.Kind{fault.NodeCrash, fault.NodePause, fault.Failover, fault.ClientCrash, fault.ClientClock, fault.Latency}
	for _, fenced := range []bool{false, true} {
		name, summary := "etcd", "etcd: concurrency.Mutex on a session lease kept alive while the client runs; go.etcd.io/etcd/client/v3"
		if fenced {
			name, summary = "etcd-fenced", "etcd: the same, with the lock key's create revision as its fencing token"
		}
		register(locks.Info{
			Name: name, Summary: summary, Server: "etcd",
			Traits: locks.Traits{Ends: locks.Session, Release: locks.OwnerChecked, Quorum: true}, Nodes: 3, Fenced: fenced,
			// etcd counts a lease's TTL in whole seconds.
			MinTTL: time.Second,
			// After the keepalive stream to a dead member breaks,
			// client v3.5 waits 500 ms (lease.go, retryConnWait)
			// before it opens one to another, and sends due
			// keepalives every 500 ms: a 1 s lease renewed a third
			// of a TTL before the break lapsed in 2 of 16 idle runs
			// of server-crash, a 2 s one has half a second to spare,
			// a 3 s one a second (docs/lock-services.md).
			FailoverTTL: 3 * time.Second,
			Claims:      claims,
			New:         func(c locks.Config) locks.Lock { return &etcdMutex{cfg: c, fenced: fenced} },
		})
	}
}

// etcdMutex is etcd's own lock recipe: a key under the lock's prefix per
// contender, on a session lease; the lowest create revision holds.
type etcdMutex struct {
	cfg    locks.Config
	fenced bool
	cli    *clientv3.Client
}

// held is what a lease carries for its release: the session whose lease
// keeps the key, and the key with its create revision.
type held struct {
	session *concurrency.Session
	key     string
	rev     int64
}

func (l *etcdMutex) client() (*clientv3.Client, error) {
	if l.cli != nil {
		return l.cli, nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: l.cfg.Addrs, DialTimeout: l.cfg.TTL, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	l.cli = cli
	return cli, nil
}

// bound limits one request to the cluster.
func (l *etcdMutex) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.TTL/2)
}

// Acquire opens a session (a lease, kept alive) for this acquisition and
// tries the mutex on it until it holds or the wait runs out; a session
// that took nothing is orphaned, and its lease expires.
func (l *etcdMutex) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	cli, err := l.client()
	if err != nil {
		return locks.Lease{}, locks.ErrNotAcquired
	}
	// The lease is granted here, bounded, and handed to the session,
	// whose own grant would wait for the cluster as long as ctx lasts.
	gctx, cancel := l.bound(ctx)
	grant, err := cli.Grant(gctx, int64((l.cfg.TTL+time.Second-1)/time.Second))
	cancel()
	if err != nil {
		// A lease granted unseen holds no key and expires on its own.
		return locks.Lease{}, locks.ErrNotAcquired
	}
	session, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return locks.Lease{}, locks.ErrNotAcquired
	}
	m := concurrency.NewMutex(session, "/locks/"+key)
	lease, err := locks.Retry(ctx, l.cfg, func() (locks.Lease, bool, error) {
		tctx, cancel := l.bound(ctx)
		defer cancel()
		err := m.TryLock(tctx)
		switch {
		case errors.Is(err, concurrency.ErrLocked):
			return locks.Lease{}, false, nil
		case err != nil:
			return locks.Lease{}, false, unknown("try lock", err)
		}
		h := &held{session: session, key: m.Key()}
		gctx, cancel := l.bound(ctx)
		defer cancel()
		resp, err := cli.Get(gctx, h.key)
		if err != nil || len(resp.Kvs) == 0 {
			return locks.Lease{}, false, unknown("read the lock key's revision", errors.Join(err, errors.New("key missing")))
		}
		h.rev = resp.Kvs[0].CreateRevision
		lease := locks.Lease{Key: key, Token: newToken(), Handle: h}
		if l.fenced {
			lease.Fence = h.rev
		}
		return lease, true, nil
	})
	if err != nil {
		// No key of this acquisition is held, or one may be (an unknown
		// outcome): either way the keepalive stops and the lease ends
		// within its TTL, taking any key with it.
		session.Orphan()
	}
	return lease, err
}

// Release deletes the lock key only if it is still the one this
// acquisition made (the mutex's own Unlock deletes whatever is there and
// reports nothing), then closes the session, revoking its lease.
func (l *etcdMutex) Release(ctx context.Context, lease locks.Lease) error {
	h, ok := lease.Handle.(*held)
	if !ok {
		return locks.ErrNotHeld
	}
	tctx, cancel := l.bound(ctx)
	defer cancel()
	resp, err := l.cli.Txn(tctx).
		If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
		Then(clientv3.OpDelete(h.key)).Commit()
	if err != nil {
		// The keepalive stops; the lease ends within its TTL.
		h.session.Orphan()
		return unknown("delete the lock key", err)
	}
	// Revoke the lease, bounded: a lease not revoked expires anyway.
	h.session.Orphan()
	rctx, rcancel := l.bound(ctx)
	_, _ = l.cli.Revoke(rctx, h.session.Lease())
	rcancel()
	if !resp.Succeeded {
		return locks.ErrNotHeld
	}
	return nil
}

// Close closes the client, ending every session's keepalive.
func (l *etcdMutex) Close() error {
	if l.cli == nil {
		return nil
	}
	return l.cli.Close()
}
