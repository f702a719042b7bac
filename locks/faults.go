package locks

import "strings"

// Fault is a kind of fault a lock may claim to survive: its fault model.
// Random exploration judges a lock against its own claims, not against
// "safe under everything": a broken promise under a claimed fault is a
// finding, one under a fault the lock makes no claim about is expected.
type Fault string

// The fault kinds a random schedule draws, as the history names them.
const (
	// Partition: links between clients and nodes cut, in Jepsen's shapes.
	Partition Fault = "partition"
	// Latency: a link slowed.
	Latency Fault = "latency"
	// NodePause: a node stopped (SIGSTOP) and resumed with its keys.
	NodePause Fault = "node-pause"
	// NodeCrash: a node killed and restarted without persistence: its keys
	// are gone.
	NodeCrash Fault = "node-crash"
	// NodeClock: a node's wall clock moved, so its keys expire early or late.
	NodeClock Fault = "node-clock"
	// ClientPause: a client stopped whole (GC pause), at a point or a
	// command boundary, for longer than the TTL.
	ClientPause Fault = "client-pause"
	// ClientCrash: a client's process killed mid-op.
	ClientCrash Fault = "client-crash"
	// ClientClock: a client's wall clock skewed.
	ClientClock Fault = "client-clock"
	// Failover: a replica promoted in the master's place.
	Failover Fault = "failover"
)

// Faults lists every kind, in the order reports show them.
var Faults = []Fault{Partition, Latency, NodePause, NodeCrash, NodeClock, ClientPause, ClientCrash, ClientClock, Failover}

// Claims that several locks share.
var (
	// LeaseClaims are a lease's, held in one Redis: whatever keeps the key in
	// Redis until its PX ran out keeps the promise; a client that
	// stops or dies does not break it (its lease simply lapses), nor does
	// its clock (the deadline is measured from the client's own start).
	LeaseClaims = []Fault{Partition, Latency, NodePause, ClientPause, ClientCrash, ClientClock}
	// WatchdogClaims are a watchdog lock's: no deadline is promised, only that the key stays the
	// holder's while its watchdog renews it, which needs the holder's
	// process running and reaching Redis.
	WatchdogClaims = []Fault{Latency, ClientCrash, ClientClock}
)

// ClaimList names the faults i claims to survive, comma-separated, or
// "none".
func (i Info) ClaimList() string {
	if len(i.Claims) == 0 {
		return "none"
	}
	names := make([]string, len(i.Claims))
	for k, f := range i.Claims {
		names[k] = string(f)
	}
	return strings.Join(names, ", ")
}

// without is claims less the faults named.
func without(claims []Fault, drop ...Fault) []Fault {
	var out []Fault
	for _, c := range claims {
		keep := true
		for _, d := range drop {
			keep = keep && c != d
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}
