package library

import (
	_ "embed"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
)

// etcd3Worker is the worker program around python-etcd3's Lock (see its
// docstring).
//
//go:embed etcd3_worker.py
var etcd3Worker string

// etcd3Library names the library as Debian ships it.
const etcd3Library = "python-etcd3 0.12 (Debian's python3-etcd3)"

// etcd3Locks registers python-etcd3's Lock as its docs show it
// (etcd3.client(host, port, timeout=...), client.lock(name, ttl=...),
// acquire(timeout=...), release()), each client a Python worker: plain,
// and fenced by the lock key's create revision read after the acquire.
//
// It is a lease nobody renews (etcd3/locks.py, Lock: acquire grants a lease
// of ttl whole seconds and puts the lock's uuid under /locks/<name> on it
// if the key was never created; refresh() is the user's to call): a hold
// ends when etcd's lessor expires the lease, on the leader's monotonic
// clock (a new leader only extends leases), or at the release, a
// transaction that deletes the key only while it holds the lock's uuid.
// The key lives on etcd's quorum. As Debian packages it, acquire cannot
// wait: under tenacity 8 its old-style wait function raises TypeError on
// the first try that finds the key taken (the worker's docstring), which
// the worker answers as not-acquired, at once. The client takes one host
// (etcd3.client(host, port)): every client talks to the first member, and
// stops while that member is down (OneMember).
//
// Claims, a lease's as the Redis leases' (locks.LeaseClaims), and what a
// quorum adds: the lease's deadline is counted from before the acquire,
// so a holder paused, cut off, slowed or with its clock moved has been
// promised nothing past the lease, which a member's crash or pause, or a
// change of leader, does not shorten (the WAL is fsynced before a write
// is answered; a promoted leader renews every lease for its full TTL).
// Not claimed: a server's clock (etcd is a Go program; no story can move
// its clock here, and the lessor reads a monotonic one anyway).
func etcd3Locks(register func(locks.Info)) {
	program := pythonWorker(etcd3Worker)
	claims := append(append([]fault.Kind(nil), locks.LeaseClaims...), fault.NodeCrash, fault.Failover)
	for _, fenced := range []bool{false, true} {
		name, summary := "etcd3",
			"python-etcd3's Lock (Debian's python3-etcd3 0.12): a lease of whole seconds nobody renews, a key put if never created, "+
				"a value-compared delete; a contended acquire raises TypeError under Debian's tenacity 8 instead of waiting; each client a Python worker"
		if fenced {
			name, summary = "etcd3-fenced", "python-etcd3's Lock, the lock key's create revision (read after the acquire) as fencing token"
		}
		register(locks.Info{
			Name:    name,
			Traits:  locks.Traits{Ends: locks.Expires, Release: locks.OwnerChecked, Clock: locks.ServerMonotonic, Quorum: true, OneMember: true},
			Library: etcd3Library,
			Summary: summary,
			Nodes:   3,
			Server:  "etcd",
			Fenced:  fenced,
			// etcd counts a lease's TTL in whole seconds; the worker rounds
			// a story's TTL up to them.
			MinTTL:  time.Second,
			Claims:  claims,
			Program: program,
		})
	}
}
