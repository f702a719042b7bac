package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Kind is one sort of server a node can be: which binary runs, how it is
// started on a port with a data dir, how the harness knows the process it
// started is the one answering, and what its persistence modes mean. The
// faults need nothing more from it: a kill, pause or restart acts on the
// process, a faked clock on its libc, a cut or delay on its link. A new
// kind is a file holding its Kind and a line in kinds.
type Kind struct {
	// Name is how NodeOptions.Kind, locks.Info.Server and NodeInfo.Kind
	// name the kind.
	Name string
	// Binary is the executable looked up on PATH when Options names no
	// other for the kind (Options.Binaries, or Server and Sentinel).
	Binary string
	// Install finishes "cluster: <binary> not found: ", telling a person
	// how to get the binary.
	Install string
	// Persistence lists the modes the kind can run with, its default first;
	// a node asking for another is refused rather than run with a promise
	// the server does not keep.
	Persistence []Persistence
	// Args is the command line after the binary of a server listening at
	// at.Bind:at.Port with its files in at.Dir, ending with spec.Args. It
	// may write files into at.Dir (a config file). A backend calls it
	// before the first start only, once per port it tries: a restart runs
	// the same command line on the same dir, so the server finds what it
	// left there.
	Args func(spec ServerSpec, at Place) ([]string, error)
	// Ready asks the server on addr once whether it serves, with its data
	// loaded. It returns the pid the server reports of itself, or 0 when
	// its protocol tells none; the local backend then checks that the
	// socket listening on the port is its own process's, so a neighbour
	// that took the port between the pick and the bind is never taken
	// for the node.
	Ready func(ctx context.Context, addr string) (pid int, err error)
	// Session, when set, opens a session of the harness's own with the
	// server on addr and returns a round trip on it and its close: how the
	// lateness meter asks a lock node how long it takes to answer. Unset,
	// the meter asks Ready, which costs such a server no more than a reply
	// (memcached's stats, a ZooKeeper four-letter word, etcd's /health);
	// a kind whose Ready opens a new session each time (PostgreSQL forks a
	// backend per connection) sets it, or a busy machine's fork times
	// would read as the server's replies.
	Session func(ctx context.Context, addr string) (ask func(context.Context) error, end func(), err error)
	// Alone, when set, says why a pair of another language's library
	// (its clients a Python, PHP or JVM worker process each) whose lock
	// runs on this kind takes the whole machine rather than two seats: what
	// its servers and those workers take of two cores makes a neighbour's
	// timers late (docs/ci-and-benchmarks.md). A Go lock's pairs on the
	// kind take two of the room's seats (engine.Resolved.Alone). Unset,
	// every pair takes two seats, or one where Light or LightWorkers.
	Alone string
	// Light, when set, says why a pair on local servers of this kind whose
	// clients are goroutines of the harness takes one seat of the room
	// (engine.Resolved.Seats) rather than two, as measured:
	// its servers and clients leave most of a core idle, and the lateness
	// meter reads everything a neighbour could delay.
	Light string
	// LightWorkers, when set, says why a pair on local servers of this kind
	// takes one seat even with a worker process per client (a library's
	// Python, PHP or JVM worker, or the harness's own for a Go lock), as
	// measured beside neighbours.
	LightWorkers string
	// StartTimeout bounds how long a local start waits for Ready (default
	// 5 s).
	StartTimeout time.Duration
	// Log is the file in the data dir whose last line says why a start
	// failed; empty means the process's own stdout and stderr, which the
	// local backend keeps in output.log there.
	Log string
	// BindExit, when set, is the exit code with which the server says it
	// could not bind one of its ports, where its log's last lines do not
	// say so (a ZooKeeper member's election port: a stack trace, retries,
	// then exit 14). The local backend then starts the set again on new
	// ports, as it does when the log says "address already in use".
	BindExit int
	// ReadyPeers are the indexes in a member's Place.PeerPorts of the
	// ports a ready member listens on: a start waits for those too, since
	// a server may answer before it binds one (a lone ZooKeeper member
	// leads before its election listener is bound, and exits when it
	// cannot bind it).
	ReadyPeers []int
	// StopSignal asks the server to shut down gracefully (default
	// SIGTERM).
	StopSignal syscall.Signal
	// ProcessGroup sends every signal (kill, pause, stop) to the server's
	// whole process group: a server whose forked children serve clients
	// would otherwise go on answering while its parent is frozen or dead.
	ProcessGroup bool
	// Unsynced, when set, says which files a power loss cuts back under
	// persistence p: the glob, relative to the data dir, of the files
	// whose last lag of writes may not be on disk yet. An empty glob
	// means a power loss is a plain kill.
	Unsynced func(p Persistence) (glob string, lag time.Duration)
	// FaketimeBinary, when set, is the binary a node with a faked clock
	// runs instead of the usual one (Redis's jemalloc build hangs under
	// libfaketime); unset, the usual binary runs under libfaketime.
	FaketimeBinary func(o Options) (string, error)
	// RESP says the server speaks Redis's protocol, so the harness's own
	// commands (Node.Do, ReplicaOf, Role, a sentinel's questions) reach
	// it; they are refused on other kinds.
	RESP bool
	// User is the account a server of this kind runs as when the harness
	// runs as root (PostgreSQL refuses to run as root); its data dir is
	// handed to that account first. Empty: the harness's own.
	User string
	// Ensemble says the kind's nodes form one replicated service: they
	// are started together (Cluster.AddNodes), each member's Args sees
	// every member's Place, and a member is Ready only once a quorum has
	// formed, so none of them can be waited for alone.
	Ensemble bool
	// Cleanup, when set, removes what a server killed for good leaves
	// outside its dir (PostgreSQL's System V shared memory segment), so a
	// run leaves nothing behind on the machine.
	Cleanup func(dir string)
	// Recovery is how long a killed server takes on an idle machine to
	// answer Ready again (its crash recovery, a member's rejoin to its
	// quorum): the server's own time, which a restart's lateness is
	// counted past.
	Recovery time.Duration
	// ExpiryLag, for a kind that ends expired leases in a loop of its own
	// rather than at their deadline, is that loop's period: a lease can
	// outlive its TTL by that and the work of ending it. A story that
	// waits for a lease nobody renews to end tells such a lock at a lease
	// the lag is a small share of (scenario.Scenario.ExpiryShare).
	ExpiryLag time.Duration
	// PeerPorts is how many ports besides its client port a member
	// listens on for its peers (ZooKeeper's quorum and election ports,
	// etcd's peer port); the backend picks them free.
	PeerPorts int
	// Role asks the server on addr what it is in its ensemble ("leader",
	// "follower"), for a kind that is not RESP: how a story finds the
	// leader to kill.
	Role func(ctx context.Context, addr string) (string, error)
	// Reset, when set, empties the server on addr of everything clients
	// left in it (keys, leases, znodes, tables, and the locks their
	// sessions hold), so that the next run finds it as a fresh start
	// would, and returns once addr itself answers that it holds nothing.
	// A killed worker's ZooKeeper session may outlive the reset until it
	// expires, holding nothing: its ephemeral nodes are gone. It runs on
	// every member of an ensemble. A kind without it is never reused
	// (Cluster.Reset, Pool).
	Reset func(ctx context.Context, addr string) error
}

// Place is where a server listens and keeps its files.
type Place struct {
	Bind string
	Port int
	Dir  string
	// ID is a member's number in its ensemble, or a sentinel's among
	// those started together, from 1 (0 for a server started alone).
	ID int
	// PeerPorts are the member's Kind.PeerPorts ports.
	PeerPorts []int
	// Members is every member's Place in ID order, this one's included,
	// for the Args of an ensemble kind or of sentinels started together;
	// their own Members are nil.
	Members []Place
}

// readyPorts are the peer ports of a member at at that it listens on
// once ready (ReadyPeers).
func (k *Kind) readyPorts(at Place) []int {
	var out []int
	for _, i := range k.ReadyPeers {
		out = append(out, at.PeerPorts[i])
	}
	return out
}

// kinds holds every kind a node can be, by name: adding a kind is its
// file and a line here.
var kinds = map[string]*Kind{
	RedisKind.Name:       RedisKind,
	SentinelKind.Name:    SentinelKind,
	MemcachedKind.Name:   MemcachedKind,
	ZooKeeperKind.Name:   ZooKeeperKind,
	EtcdKind.Name:        EtcdKind,
	ClusterNodeKind.Name: ClusterNodeKind,
	PostgresKind.Name:    PostgresKind,
	MariaDBKind.Name:     MariaDBKind,
}

// LookupKind finds a kind by name; "" is Redis, the kind of a lock that
// names none (locks.Info.Server) and of the harness's own store.
func LookupKind(name string) (*Kind, error) {
	if name == "" {
		return RedisKind, nil
	}
	if k, ok := kinds[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("cluster: no server kind %q (have: %s)", name, strings.Join(Kinds(), ", "))
}

// Kinds lists the kinds' names, sorted, for usage messages and for
// checking a lock's Server before a run starts.
func Kinds() []string { return slices.Sorted(maps.Keys(kinds)) }

func (k *Kind) startTimeout() time.Duration {
	if k.StartTimeout == 0 {
		return 5 * time.Second
	}
	return k.StartTimeout
}

func (k *Kind) stopSignal() syscall.Signal {
	if k.StopSignal == 0 {
		return syscall.SIGTERM
	}
	return k.StopSignal
}

// unsynced is Unsynced for p, or nothing when the kind has none.
// Offers says whether a node of this kind runs with persistence p: ""
// (the kind's default) always, another mode when the kind lists it or
// lists none. AddNode refuses the rest, and a run is refused before it
// starts by the same rule.
func (k *Kind) Offers(p Persistence) bool {
	return p == "" || len(k.Persistence) == 0 || slices.Contains(k.Persistence, p)
}

func (k *Kind) unsynced(p Persistence) (string, time.Duration) {
	if k.Unsynced == nil {
		return "", 0
	}
	return k.Unsynced(p)
}

// ServerKind is the spec's kind: Kind when set, else Sentinel for a spec
// with a SentinelConf and Redis for the rest, so a backend handed a spec
// built by hand still knows what it runs.
func (s ServerSpec) ServerKind() *Kind {
	switch {
	case s.Kind != nil:
		return s.Kind
	case s.Sentinel != nil:
		return SentinelKind
	}
	return RedisKind
}
