// Package scenario is the catalogue of failure stories: what each one
// does to the cluster and the clients (its schedule), what proves it
// happened, and what every lock it applies to must show under it. Package
// engine runs a story; package verdict judges the run.
package scenario

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/verdict"
)

// families are the catalogue's files of stories, one function each that
// adds its stories: a new story goes in the file of its family, a new
// family adds its line here.
var families = []func(add func(Scenario)){
	leaseStories,    // stories_lease.go: the baseline, K1 to K3
	redlockStories,  // stories_redlock.go: K4 to K6
	clientStories,   // stories_clients.go: S1 to S5
	failoverStories, // stories_failover.go: F1
	sentinelStories, // stories_sentinel.go: F1 failed over by Sentinel
	clusterStories,  // stories_cluster.go: Redis Cluster's failover and resharding
	serviceStories,  // stories_services.go: the services' own faults
	fieldStories,    // stories_field.go: failures users report
	randomStory,     // random.go: exploration
	boundaryStories, // boundary.go: exploration, one command boundary at a time
}

// catalogue is the built-in stories by name. It is built on each use (a
// few dozen values), never kept, so that an expectation naming every
// registered lock (the baseline's, exploration's) sees every lock
// registered so far, whenever the program registered it.
func catalogue() map[string]Scenario {
	out := map[string]Scenario{}
	for _, family := range families {
		family(func(s Scenario) { s = s.WithDefaults(); out[s.Name] = s })
	}
	return out
}

// Lookup finds a scenario; the error lists the valid names.
func Lookup(name string) (Scenario, error) {
	s, ok := catalogue()[name]
	if !ok {
		return Scenario{}, fmt.Errorf("unknown scenario %q (valid: %s, all)", name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// Names lists the scenarios, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(catalogue()))
}

// Lock groups the expectations are written for.
var (
	// ownerBlind locks release with a plain DEL: a client whose lease lapsed
	// deletes whoever holds the lock when its release lands, which breaks
	// the lock's own promise whenever someone does hold it then (S3).
	ownerBlind    = []string{"set-nx-px-del", "setnx-expire"}
	ownerChecked  = all([]string{"set-nx-px", "getset", "redlock", "redlock-novalidity"}, libraryLeases, []string{"redsync-redlock"})
	watchdogLocks = []string{"reentrant", "fair", "multilock", "redislock-refresh"}
	// libraryLeases are the installed libraries' single-node leases with an
	// owner-checked release (package locks/library): they stand beside
	// set-nx-px wherever a story names it alone.
	libraryLeases = []string{"redsync", "redislock", "redis-py"}
)

// expect builds an expectation table: the same expectation for each lock
// named, merged over earlier entries.
func expect(groups ...any) map[string]verdict.Expectation {
	out := map[string]verdict.Expectation{}
	for i := 0; i+1 < len(groups); i += 2 {
		e := groups[i+1].(verdict.Expectation)
		switch names := groups[i].(type) {
		case string:
			out[names] = e
		case []string:
			for _, n := range names {
				out[n] = e
			}
		}
	}
	return out
}

func all(names ...[]string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n...)
	}
	return out
}

// step is a plan's step: a at TTLs in.
func step(at float64, a Action) Step { return Step{At: TTLs(at), Action: a} }

// arm is a plan's step that sets t at TTLs in.
func arm(at float64, t Trap) Step { return step(at, armed(t)) }

// armed is the action that sets t.
func armed(t Trap) Action { return Action{Do: "arm", Trap: &t} }

// The server kinds of the locks beside Redis (locks/services), as
// NotFor names them.
const (
	zookeeper = "zookeeper"
	etcd      = "etcd"
	postgres  = "postgres"
	memcached = "memcached"
	redis     = "redis"
)

// serviceKinds are the kinds a Redis-only story gives its reason for.
var serviceKinds = []string{zookeeper, etcd, postgres, memcached}

// notFor is a NotFor table: reason for each kind named, merged over
// earlier entries.
func notFor(pairs ...any) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		why := pairs[i+1].(string)
		switch kinds := pairs[i].(type) {
		case string:
			out[kinds] = why
		case []string:
			for _, k := range kinds {
				out[k] = why
			}
		}
	}
	return out
}
