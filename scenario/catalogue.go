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
)

// families are the catalogue's files of stories, one function each that
// adds its stories: a new story goes in the file of its family, a new
// family adds its line here.
var families = []func(add func(Scenario)){
	leaseStories,     // stories_lease.go: the baseline, K1 to K3
	redlockStories,   // stories_redlock.go: K4 to K6
	clientStories,    // stories_clients.go: S1 to S5
	failoverStories,  // stories_failover.go: F1
	sentinelStories,  // stories_sentinel.go: F1 failed over by Sentinel
	clusterStories,   // stories_cluster.go: Redis Cluster's failover and resharding
	serviceStories,   // stories_services.go: the services' own faults
	fieldStories,     // stories_field.go: failures users report
	zooKeeperStories, // stories_zookeeper.go: ZooKeeper lock recipes' reports, a killed holder
	randomStory,      // random.go: exploration
	intervalStory,    // interval.go: a user's faults on an interval
	boundaryStories,  // boundary.go: exploration, one command boundary at a time
}

// catalogue is the built-in stories by name. It is built on each use (a
// few dozen values), never kept, so that an expectation naming every
// registered lock (the baseline's, exploration's) sees every lock
// registered so far, whenever the program registered it.
func catalogue() map[string]Scenario {
	out := map[string]Scenario{}
	for _, family := range families {
		family(func(s Scenario) {
			s = s.WithDefaults()
			if s.Rules != nil {
				s.Expect = s.expectations()
			}
			out[s.Name] = s
		})
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
	mariadb   = "mariadb"
	redis     = "redis"
)

// serviceKinds are the kinds a Redis-only story gives its reason for.
var serviceKinds = []string{zookeeper, etcd, postgres, memcached, mariadb}

// notFor is a NotFor table: why, for each kind named.
func notFor(why string, kinds ...string) map[string]string {
	out := map[string]string{}
	for _, k := range kinds {
		out[k] = why
	}
	return out
}

// joined is the NotFor tables ts in one.
func joined(ts ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, t := range ts {
		maps.Copy(out, t)
	}
	return out
}
