package locks

// Traits are what a lock is, in the words the failure stories judge by.
// A story's expectations are rules over traits (package scenario), so a
// lock registered with its traits is judged in every story whose rules
// reach it, and a test names every story that has no word about it.
// State what the lock does as its users run it, not what a story should
// show: the rules draw the consequences.
type Traits struct {
	// Ends is what ends a hold whose holder never releases it.
	Ends Ending `json:"ends"`
	// Release is what a release checks before it lets the lock go.
	Release Release `json:"release"`
	// Clock is the clock that decides when a lease or a renewed lease
	// ends; empty for a lock with none (a session, a connection, never).
	Clock ExpiryClock `json:"clock,omitempty"`
	// Local is true for a lock that lives in the clients' own process,
	// not on a server: the controls. A server's fault cannot touch it.
	Local bool `json:"local,omitempty"`
	// LocksNothing is true for the control whose every acquire succeeds:
	// the checkers must see two holders with no fault at all.
	LocksNothing bool `json:"locks_nothing,omitempty"`
	// ExpirySeparate is true when the lock sets its key's expiry in a
	// command of its own after the one that takes the key (SETNX, then
	// EXPIRE): a client that dies or loses a reply between them leaves a
	// key that never expires.
	ExpirySeparate bool `json:"expiry_separate,omitempty"`
	// Validity is true when, having taken the lock, the client subtracts
	// the time the taking cost from its lease and gives the lock up when
	// nothing is left (RedLock's elapsed-time check).
	Validity bool `json:"validity,omitempty"`
	// TellsLoss is true when the lock closes Lease.Lost once it knows the
	// lease is gone (a renewal refused or unanswered), and the holder
	// looks before it writes.
	TellsLoss bool `json:"tells_loss,omitempty"`
	// Detached is true when the acquire runs apart from its caller and
	// starts its renewals when the server answers, whoever still listens
	// (Redisson's tryAcquireAsync).
	Detached bool `json:"detached,omitempty"`
	// Retracts is true when, after a try that failed or timed out, the
	// lock deletes whatever that try may have set (redsync).
	Retracts bool `json:"retracts,omitempty"`
	// Waits is true when the lock waits for the master's replicas to
	// acknowledge it (WAIT) and gives it up when none does.
	Waits bool `json:"waits,omitempty"`
	// OtherKeys is true when the lock's commands name keys beside the
	// lock's own (an unlock channel, a waiter queue, a fencing counter),
	// which a Redis Cluster must keep in the key's slot.
	OtherKeys bool `json:"other_keys,omitempty"`
	// Notified is true when a waiter sleeps until the holder's release is
	// published or the lease it last read runs out, rather than trying
	// again every retry delay.
	Notified bool `json:"notified,omitempty"`
	// Quorum is true when the lock lives on a consensus ensemble that
	// keeps it on a quorum of members (ZooKeeper, etcd).
	Quorum bool `json:"quorum,omitempty"`
	// ClientEndsSession is true when the client declares its session
	// lost by its own clock, once it has heard nothing from the ensemble
	// for a session timeout, and opens a new one, while the ensemble may
	// still keep the old session and its nodes (Curator's simulated
	// session expiration, on by default since Curator 3).
	ClientEndsSession bool `json:"client_ends_session,omitempty"`
	// ServerEndsEarly is true when the server may end a hold before the
	// deadline the client reports for it: the server counts the lease in
	// whole seconds, rounded (Symfony's PdoStore), or drops an item up
	// to its clock's tick early (memcached), while the client counts the
	// whole TTL.
	ServerEndsEarly bool `json:"server_ends_early,omitempty"`
	// QuietRelease is true when an owner-checked release that finds the
	// lock no longer the caller's returns as if it had let it go: it
	// deletes nothing and says nothing (Symfony's Lock::release deletes
	// its own token, then checks only that that token is gone).
	QuietRelease bool `json:"quiet_release,omitempty"`
	// RacyAcquire is true when the acquire's commands go out on two
	// connections with nothing ordering them at the server, so a delay
	// on one of them lets two clients in with no fault at all
	// (portalocker: a SUBSCRIBE it does not wait for, then PUBSUB NUMSUB
	// on another connection, wolph/portalocker#139). A story that expects
	// it safe holds only while its links keep their order, as they
	// almost always do with a few clients.
	RacyAcquire bool `json:"racy_acquire,omitempty"`
	// OneMember is true when the client talks to one member of its
	// ensemble, the first it is given, and to no other: when that member
	// stops, every client stops with it, whatever the quorum does
	// (python-etcd3 0.12's client, and tooz's etcd3 driver on it, take
	// one host).
	OneMember bool `json:"one_member,omitempty"`
}

// Ending is what ends a hold whose holder never releases it.
type Ending string

// The endings.
const (
	// Expires is a time to live the server counts down and nobody renews.
	Expires Ending = "expires"
	// Renewed is a time to live a watchdog in the holder's process
	// renews while the process runs and reaches the server.
	Renewed Ending = "renewed"
	// Session is a session the service keeps while the holder's client
	// talks to it (heartbeats, keep-alives) and ends after its timeout of
	// silence.
	Session Ending = "session"
	// Connection is a hold the server keeps while the holder's
	// connection lives, with no expiry of its own.
	Connection Ending = "connection"
	// Never is a hold only a release ends.
	Never Ending = "never"
)

// Release is what a release checks before it lets the lock go.
type Release string

// The releases.
const (
	// OwnerChecked releases only a lock that is still the caller's
	// (compare-and-delete, its own node, session, row or CAS id).
	OwnerChecked Release = "owner-checked"
	// OwnerBlind deletes the lock whoever holds it (a plain DEL).
	OwnerBlind Release = "owner-blind"
	// ClockChecked deletes the lock whoever holds it, but only while the
	// caller's own lease has not run out by its own clock (the GETSET
	// lock's timestamp): a caller whose lease lapsed deletes nothing,
	// while a caller whose clock runs slow may delete a successor's.
	ClockChecked Release = "clock-checked"
)

// ExpiryClock is the clock that decides when a lease ends.
type ExpiryClock string

// The clocks.
const (
	// ServerWall is the server's wall clock (Redis key expiry, a row's
	// expires_at compared with now()): a jump of it ends leases early.
	ServerWall ExpiryClock = "server-wall"
	// ServerMonotonic is the server's monotonic clock (memcached's item
	// clock): a jump of the wall clock does not move it.
	ServerMonotonic ExpiryClock = "server-monotonic"
	// ClientWall is each client's own wall clock (a timestamp in the
	// lock's value): a client whose clock runs ahead ends others' leases.
	ClientWall ExpiryClock = "client-wall"
)
