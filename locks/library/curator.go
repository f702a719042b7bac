package library

import (
	"os/exec"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/internal/prereq"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/locks/library/java"
)

// zooKeeperClaims are the faults under which kazoo's ZooKeeper lock says
// it holds: the lock is the lowest ephemeral sequential node, and an
// ephemeral node lives exactly as long as the session that made it
// (kazoo's Lock docstring; Curator's InterProcessMutex docs). So one
// member of three killed or restarted, the leader too, leaves a quorum
// that keeps the node and gives the session a fresh timeout (NodeCrash,
// Failover); a dead client's session ends and its node goes
// (ClientCrash); no wall clock is read (ClientClock); latency below the
// session timeout keeps the session (Latency).
//
// Not ClientPause nor Partition: both libraries' docs tell users that a
// SUSPENDED connection may mean the lock is lost, and that after LOST it
// is (Curator's Tech Note 10, kazoo's "Understanding Kazoo States"): a
// holder silent past its session loses its node while it believes it
// holds. Not NodePause: a paused member accepts connections and answers
// nothing, and at the sessions the stories run the holder's client may
// not find another member before the new leader's fresh timeout ends.
var zooKeeperClaims = []fault.Kind{fault.NodeCrash, fault.Failover, fault.ClientCrash, fault.ClientClock, fault.Latency}

// curatorClaims are kazoo's less a member's death (NodeCrash, Failover):
// Curator declares its session LOST once it has been SUSPENDED for a
// session timeout, by its own clock, and opens a new one, and at the
// sessions the stories run the ZooKeeper client's pause of up to a
// second before each reconnect, beside an election, can outlast it; a
// node of the old session, which the ensemble still keeps, may then be
// taken for the lock and die under its holder (curator#1121,
// ensemble-restart).
var curatorClaims = []fault.Kind{fault.ClientCrash, fault.ClientClock, fault.Latency}

// zooKeeperMinTTL is the shortest session the libraries are run with: a
// JVM or Python worker per client beside three ZooKeeper JVMs on two
// cores leaves a shorter session too few acquisitions before a story's
// fault, and too little room beside the machine's own delays.
const zooKeeperMinTTL = time.Second

// zooKeeperLibrary is what Curator's and kazoo's locks share: the
// ensemble they run on and what ends their hold.
func zooKeeperLibrary(name, library, summary string, fenced, tellsLoss, endsSession bool, program func() *exec.Cmd) locks.Info {
	claims := zooKeeperClaims
	if endsSession {
		claims = curatorClaims
	}
	return locks.Info{
		Name: name,
		Traits: locks.Traits{Ends: locks.Session, Release: locks.OwnerChecked, Quorum: true, TellsLoss: tellsLoss,
			ClientEndsSession: endsSession},
		Library: library,
		Summary: summary,
		Nodes:   3,
		Server:  "zookeeper",
		Fenced:  fenced,
		MinTTL:  zooKeeperMinTTL,
		Claims:  claims,
		Program: program,
	}
}

// curatorLibrary names the library as Debian ships it.
const curatorLibrary = "Apache Curator 5.4 (Debian's libcurator-recipes-java)"

// curatorLocks registers Curator's InterProcessMutex as its users run it
// (a CuratorFramework with session and connection timeouts of the TTL and
// an exponential-backoff retry policy; acquire(time, unit) and release()),
// each client a JVM running locks/library/java/CuratorWorker.java: plain,
// fenced by the lock node's creation zxid, and with the
// ConnectionStateListener Curator's docs ask of careful users. Curator
// ends a session itself once it has been SUSPENDED for a session timeout
// (ConnectionStateManager's simulated expiration, Tech Note 14), and opens
// a new one.
func curatorLocks(register func(locks.Info)) {
	program := func() *exec.Cmd { return java.CuratorCommand(prereq.CacheDir()) }
	register(zooKeeperLibrary("curator", curatorLibrary,
		"Apache Curator's InterProcessMutex (Debian's libcurator-recipes-java 5.4): lowest ephemeral sequential node holds while its session lives; each client a JVM",
		false, false, true, program))
	register(zooKeeperLibrary("curator-fenced", curatorLibrary,
		"Curator's InterProcessMutex, the lock node's creation zxid (read after the acquire) as fencing token",
		true, false, true, program))
	register(zooKeeperLibrary("curator-listener", curatorLibrary,
		"Curator's InterProcessMutex with a ConnectionStateListener that takes SUSPENDED and LOST as a lost lock, as Curator's docs ask",
		false, true, true, program))
}
