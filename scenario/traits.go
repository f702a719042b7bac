package scenario

import (
	"slices"
	"strings"

	"github.com/locktorture/locktorture/locks"
)

// The matches the stories' rules are written with: each picks locks by a
// trait (locks.Traits) or by what locks.Info says of them.
var (
	anyLock = is("every lock", func(locks.Info) bool { return true })
	// nothingLocked is the control whose acquires all succeed.
	nothingLocked = is("the control that locks nothing", func(i locks.Info) bool { return i.Traits.LocksNothing })
	// local is a lock in the clients' own process (the mutex control).
	local = is("a lock in the clients' own process", func(i locks.Info) bool { return i.Traits.Local })
	// onRedis is a lock whose state lives on Redis nodes.
	onRedis = is("on Redis", func(i locks.Info) bool { return i.ServerKind() == locks.ServerRedis && !i.Traits.Local })
	// oneNode is a lock on one node of its server.
	oneNode = is("on one node", func(i locks.Info) bool { return i.Nodes == 1 })
	// majority is a lease on several independent Redis nodes, held on a
	// majority of them (RedLock).
	majority = is("a lease on a majority of independent Redis nodes", func(i locks.Info) bool {
		return i.ServerKind() == locks.ServerRedis && i.Nodes > 1 && i.Traits.Ends == locks.Expires
	})
	expires    = ends(locks.Expires)
	renewed    = ends(locks.Renewed)
	session    = ends(locks.Session)
	connection = ends(locks.Connection)
	// never is a lock on a server that only a release ends (the lock
	// table's row); the controls, which end the same way, are local.
	never      = and(ends(locks.Never), not(local))
	ownerBlind = is("released by a delete that checks no owner", func(i locks.Info) bool { return i.Traits.Release == locks.OwnerBlind })
	fenced     = is("fenced", func(i locks.Info) bool { return i.Fenced })
	unfenced   = not(fenced)
	quorum     = is("kept on a quorum of an ensemble", func(i locks.Info) bool { return i.Traits.Quorum })
	// installed is a lock people install (locks/library), not one of this
	// repository's own.
	installed = is("an installed library", func(i locks.Info) bool { return i.Library != "" })
	// zooKeeperLibrary is an installed library's ZooKeeper lock recipe
	// (Curator's InterProcessMutex, kazoo's Lock): the stories cite its
	// own docs and trackers where they judge it.
	zooKeeperLibrary = is("a ZooKeeper library's lock (Curator, kazoo)", func(i locks.Info) bool {
		return i.Library != "" && i.ServerKind() == zookeeper
	})
	// worker is a lock whose clients run as worker processes.
	worker            = is("run as worker processes", func(i locks.Info) bool { return i.Program != nil })
	queued            = is("queued", func(i locks.Info) bool { return i.Queued })
	expirySeparate    = is("its expiry set by a command of its own", func(i locks.Info) bool { return i.Traits.ExpirySeparate })
	validity          = is("checking its validity after acquiring", func(i locks.Info) bool { return i.Traits.Validity })
	tellsLoss         = is("telling its holder of a lost lease", func(i locks.Info) bool { return i.Traits.TellsLoss })
	detached          = is("acquiring apart from its caller", func(i locks.Info) bool { return i.Traits.Detached })
	retracts          = is("deleting its key after a failed try", func(i locks.Info) bool { return i.Traits.Retracts })
	waits             = is("waiting for its replicas (WAIT)", func(i locks.Info) bool { return i.Traits.Waits })
	otherKeys         = is("naming keys beside its own", func(i locks.Info) bool { return i.Traits.OtherKeys })
	clientEndsSession = is("ending its session by its own clock", func(i locks.Info) bool { return i.Traits.ClientEndsSession })
	serverEndsEarly   = is("ended by its server before the deadline it reports", func(i locks.Info) bool { return i.Traits.ServerEndsEarly })
	quietRelease      = is("releasing quietly what is no longer its own", func(i locks.Info) bool { return i.Traits.QuietRelease })
	oneMember         = is("talking to one member of its ensemble", func(i locks.Info) bool { return i.Traits.OneMember })
	racyAcquire       = is("racing its own acquire's commands", func(i locks.Info) bool { return i.Traits.RacyAcquire })
	// fiveNodes is a lock on as many nodes as the RedLock stories are told on.
	fiveNodes = is("on five nodes", func(i locks.Info) bool { return i.Nodes == redlockNodes })
	// phpLock is php-lock's mutexes, whose key outlives the lease they
	// hold themselves to by a second (SpinlockMutex::lock: the key's
	// expiry is timeout + 1): the stories whose delay falls in that second
	// judge them apart, citing it.
	phpLock  = or(lock("php-lock-redis"), lock("php-lock-redlock"))
	notified = is("waking its waiters by a published release", func(i locks.Info) bool { return i.Traits.Notified })
)

// ends picks the locks whose hold ends as e says.
func ends(e locks.Ending) Match {
	says := map[locks.Ending]string{
		locks.Expires:    "a lease that expires",
		locks.Renewed:    "a lease a watchdog renews",
		locks.Session:    "a session's lock",
		locks.Connection: "a connection's lock",
		locks.Never:      "a lock only a release ends",
	}[e]
	return is(says, func(i locks.Info) bool { return i.Traits.Ends == e })
}

// clock picks the locks whose leases end by c.
func clock(c locks.ExpiryClock) Match {
	return is("ending on the "+string(c)+" clock", func(i locks.Info) bool { return i.Traits.Clock == c })
}

// timestampRace leaves out the lock whose lease is a timestamp its clients
// judge (getset) from a story whose waiters, when (its words), all meet one
// expired timestamp at once: the losers of the GETSET race overwrite the
// winner's (its summary's flaw, stolen-key) in some runs and not in
// others, a race of one round trip, so the story's question cannot be
// told on it; seen says where that was measured.
func timestampRace(when, question, seen string) Rule {
	return leaveOut(clock(locks.ClientWall), when+", the waiters meet one expired timestamp: "+
		"getset's losers of the GETSET race overwrite the winner's (its summary's flaw, stolen-key) in some runs and not in others, "+
		"so the story's question, "+question+", cannot be told on it ("+seen+")")
}

// kind picks the locks on server kind k.
func kind(k string) Match {
	return is("on "+k, func(i locks.Info) bool { return i.ServerKind() == k })
}

// standsFor leaves out, with why, the locks named in covered, which the
// story judges the locks named in stand in place of: this repository's
// own variants, each judged where its variation matters. The covered are
// named, not matched, so a lock added later is not stood for unseen:
// TestEveryStoryJudgesEveryLock names it until a rule or this list takes
// it in. An installed library is never stood for: it is what people run.
func standsFor(stand []string, why string, covered ...string) Rule {
	verb := " stand for them: "
	if len(stand) == 1 {
		verb = " stands for them: "
	}
	m := is(strings.Join(covered, ", "), func(i locks.Info) bool { return slices.Contains(covered, i.Name) })
	return leaveOut(and(m, not(installed)), strings.Join(stand, ", ")+verb+why)
}

// The variants of this repository's locks whose variation only some
// stories touch: elsewhere the lock they vary stands for them.
var (
	controlOut          = leaveOut(or(nothingLocked, racyAcquire), "it lets two in with no fault at all: the control that locks nothing always (baseline), an acquire that races its own commands now and then (portalocker: wolph/portalocker#139, which docs/scenarios/subscribe-race.json tells); a fault adds nothing a run could tell apart")
	detachedAsReentrant = leaveOut(detached, "its acquire differs from reentrant's only when its caller gives up as the lock is taken (interrupted-acquire); anywhere else it is reentrant, judged here")
	lossRace            = leaveOut(and(tellsLoss, renewed), "its watchdog and its holder wake together from a pause of the whole client, and whether the watchdog learns of the loss before the holder looks is a race between two goroutines; isolated-holder tells what the signal buys")
	lossAsReentrant     = leaveOut(and(tellsLoss, renewed), "it differs from reentrant only in telling its holder of a failed renewal, and no renewal fails here while its holder still has a write to withhold; delayed-write, isolated-holder and watchdog-stall judge it")
	waitsAsSetNXPX      = leaveOut(waits, "with no replica it sends no WAIT and is set-nx-px, judged here; wait-replica-restart and misconf judge it")
)
