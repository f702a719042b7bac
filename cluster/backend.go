package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Backend is where a cluster's servers run: processes on this machine's
// loopback (the default, "local") or containers on a network of the run's
// own ("docker", package docker). Scenarios and nemeses see only Nodes and
// Links; a backend decides what a node is and how a fault reaches it.
type Backend interface {
	// Start makes the server spec describes and starts it; when Start
	// returns, the server is ready by its kind's Ready, with its data
	// loaded. A backend that cannot run spec's kind says so here.
	Start(ctx context.Context, spec ServerSpec) (Server, error)
	// Close removes everything the backend made for the cluster: it is
	// called on every exit path, after a panic too, and more than once.
	Close() error
}

// EnsembleBackend is a backend that can start the members of an ensemble
// kind (Kind.Ensemble) together: all of them launched before any is
// waited for, since none answers until a quorum has formed. AddSentinels
// starts its sentinels through it too, each told the others' places
// (Place.Members, SentinelConf.Peers).
type EnsembleBackend interface {
	// StartEnsemble starts one server per spec, all of one kind; when it
	// returns, every member is Ready.
	StartEnsemble(ctx context.Context, specs []ServerSpec) ([]Server, error)
}

// Server is one server (of any Kind) as a backend runs it, and what the
// nemesis can do to it. The caller serialises calls on a server.
type Server interface {
	// Addr is where the harness reaches the server (admin commands, and
	// the upstream of the client links).
	Addr() string
	// PeerAddr is where other servers reach it (REPLICAOF, sentinel
	// monitor, an ensemble's peers), and what sentinels name when asked
	// for the master.
	PeerAddr() string
	// Start starts a killed or stopped server again: same addresses, and
	// what its disk kept.
	Start(ctx context.Context) error
	// Kill is kill -9: no shutdown, no final fsync.
	Kill() error
	// PowerLoss is Kill plus the loss of what the disk had not been told
	// to keep (Kind.Unsynced: for appendfsync everysec the last second).
	PowerLoss() error
	// Stop shuts the server down gracefully (its kind's stop signal).
	Stop() error
	// Pause freezes the server whole: it keeps its state and its port but
	// answers nothing until Resume.
	Pause() error
	Resume() error
	// Paused reports whether Pause froze it (a kill or restart ends that).
	Paused() bool
	// SetClockOffset moves the wall clock the server reads (for Redis,
	// the one its key expiry follows). The cluster calls it only for a
	// spec that asked for Clock.
	SetClockOffset(d time.Duration) error
	// Info says where to find the server, for the run directory.
	Info() NodeInfo
}

// Firewall is a backend whose servers have addresses of their own, so the
// packets between two of them can be dropped where they flow. A backend
// without one (local: every server shares the loopback) routes
// server-to-server traffic through toxiproxy links instead.
type Firewall interface {
	// Drop drops every packet from one server to another, one way (on),
	// or lets them through again (off). Established connections stall,
	// as in a real partition: nothing is refused or reset.
	Drop(from, to Server, on bool) error
}

// ServerSpec is a server as the harness wants it, the same for every
// backend.
type ServerSpec struct {
	Name string
	// Kind is what server runs; the cluster always sets it, and
	// ServerKind reads a spec made without it as Redis (or Sentinel).
	Kind        *Kind
	Persistence Persistence
	// Clock runs the server under libfaketime so SetClockOffset works.
	Clock bool
	// Args are appended to a data node's command line.
	Args []string
	// Sentinel is what a SentinelKind server watches.
	Sentinel *SentinelConf
}

// RedisArgs is a data node's command line, listening on bind:port with its
// files in dir.
func (s ServerSpec) RedisArgs(bind string, port int, dir string) []string {
	// Loopback binds keep protected mode, and DEBUG and the protected
	// configs local-only; a container's address is on a network the run
	// made for itself, and the harness reaches it from the network's
	// gateway.
	guard := map[bool]string{true: "yes", false: "no"}[strings.HasPrefix(bind, "127.")]
	debug := map[bool]string{true: "local", false: "yes"}[guard == "yes"]
	a := []string{
		"--port", fmt.Sprint(port),
		"--bind", bind,
		"--protected-mode", guard,
		"--dir", dir,
		"--logfile", dir + "/redis.log",
		"--daemonize", "no",
		"--save", "",
		"--enable-debug-command", debug,
		// The nemesis moves a node's dir to fail a save (MISCONF).
		"--enable-protected-configs", debug,
		// A replica's first sync is written to disk and sent from there: a
		// diskless sync holds every write after it until the replica's
		// first REPLCONF ACK, up to a second later, so a lock taken in that
		// second never reaches the replica however fast replication is.
		// The file is deleted once sent, so a node restarted without
		// persistence still comes back empty.
		"--repl-diskless-sync", "no",
		"--rdb-del-sync-files", "yes",
	}
	switch s.Persistence {
	case AOFEverySec:
		a = append(a, "--appendonly", "yes", "--appendfsync", "everysec")
	case AOFAlways:
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	default:
		a = append(a, "--appendonly", "no")
	}
	return append(a, s.Args...)
}

// SentinelConf is what one sentinel is told to watch.
type SentinelConf struct {
	MasterName string
	// MasterAddr is the master's PeerAddr.
	MasterAddr                 string
	Quorum                     int
	DownAfter, FailoverTimeout time.Duration
}

// File is the sentinel's config file for a sentinel listening on
// bind:port with its files in dir. Sentinel rewrites it as it learns, so
// each sentinel needs its own writable copy.
func (c SentinelConf) File(bind string, port int, dir string) string {
	host, mport, _ := strings.Cut(c.MasterAddr, ":")
	return fmt.Sprintf("port %d\nbind %s\ndaemonize no\ndir %s\nlogfile %s/sentinel.log\n"+
		"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s %d\nsentinel parallel-syncs %s 1\n",
		port, bind, dir, dir,
		c.MasterName, host, mport, c.Quorum, c.MasterName, c.DownAfter.Milliseconds(),
		c.MasterName, c.FailoverTimeout.Milliseconds(), c.MasterName)
}

// Peers is what a sentinel started beside its peers (Place.Members) is
// told of them: its own id and each other's id and place, as Sentinel
// writes them once hellos have told it. Each id is made from the port, so
// every sentinel names the others as they name themselves. Empty for a
// sentinel started alone.
func (c SentinelConf) Peers(at Place) string {
	if len(at.Members) == 0 {
		return ""
	}
	out := fmt.Sprintf("sentinel myid %s\n", sentinelID(at.Port))
	for _, m := range at.Members {
		if m.Port != at.Port {
			out += fmt.Sprintf("sentinel known-sentinel %s %s %d %s\n", c.MasterName, m.Bind, m.Port, sentinelID(m.Port))
		}
	}
	return out
}

// sentinelID is a sentinel's run id, 40 hex digits as Sentinel requires.
func sentinelID(port int) string { return fmt.Sprintf("%040x", port) }

// FaketimeOffset is libfaketime's text for an offset from the real clock:
// fractional seconds ("+1.500s"), as libfaketime reads "ms" as minutes.
func FaketimeOffset(d time.Duration) string { return fmt.Sprintf("%+.3fs", d.Seconds()) }

// NewBackend makes a backend for one cluster from its options.
type NewBackend func(Options) (Backend, error)

var (
	backendsMu sync.Mutex
	// backends starts with the package's own: a cluster runs locally with
	// nothing registered.
	backends = map[string]NewBackend{Local: newLocal}
)

// RegisterBackend makes a backend available by name (Options.Backend,
// -backend). A program calls it, through the backend's package (such as
// docker.Register), before it makes a cluster on that backend: importing
// a backend changes nothing by itself.
func RegisterBackend(name string, f NewBackend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[name]; dup {
		panic("cluster: backend " + name + " registered twice")
	}
	backends[name] = f
}

// Backends lists the registered backends' names.
func Backends() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	var out []string
	for n := range backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func newBackend(o Options) (Backend, error) {
	name := o.Backend
	if name == "" {
		name = Local
	}
	backendsMu.Lock()
	f, ok := backends[name]
	backendsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("cluster: no backend %q (have: %s)", name, strings.Join(Backends(), ", "))
	}
	return f(o)
}
