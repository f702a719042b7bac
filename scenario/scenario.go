package scenario

import (
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Topology is how a scenario's lock nodes are set up.
type Topology struct {
	// Clock runs every lock node under libfaketime (node clock faults).
	Clock bool `json:"clock,omitempty"`
	// Persistence is every lock node's.
	Persistence cluster.Persistence `json:"persistence,omitempty"`
	// Replicated gives the (single) lock node a replica that replicates
	// through its own link; clients dial whichever is primary.
	Replicated bool `json:"replicated,omitempty"`
	// Sentinel has real redis-sentinel processes watch the replicated
	// master (Replicated must be set) and fail it over on their own; the
	// clients ask them for the master, as applications do, instead of
	// dialling a primary the harness switches by hand.
	Sentinel bool `json:"sentinel,omitempty"`
	// Args are appended to every lock node's command line (a maxmemory
	// and its eviction policy).
	Args []string `json:"args,omitempty"`
	// Cluster puts the lock in a Redis Cluster: three masters, each with
	// a replica, sharing the slots; every client routes by slot through
	// go-redis's cluster client. A single-node lock's key lives on the
	// master of its slot.
	Cluster bool `json:"cluster,omitempty"`
}

// Env is what a scenario's schedule acts on.
type Env struct {
	TTL       time.Duration
	TimeLimit time.Duration
	Lock      string
	Seed      int64
	// Nodes are the lock nodes' names, in order; Clients the clients' peer
	// names (client i is Clients[i]).
	Nodes, Clients []string
	Gate           *nemesis.Gate
	Nemesis        *nemesis.Nemesis
	// Primary is set in a replicated topology without Sentinel; Replica
	// names the replica in either.
	Primary *cluster.Primary
	Replica string
	// Sentinels watch the master in a topology with Sentinel: a schedule
	// asks them who the master is, never tells them.
	Sentinels *cluster.Sentinels
	// Clocks are the clients' own clocks.
	Clocks []*nemesis.ClientClock
	// Cluster is the Redis Cluster in a topology with one; Nodes then
	// lists its nodes, masters first.
	Cluster *cluster.RedisCluster
	// Key is the lock's key.
	Key string
	// Probe is a boundary run's fault (Scenario.Probed), nil otherwise.
	Probe *Probe
	// Params are the story's parameters (Scenario.Params), each its
	// default or the value a run or a sweep gave it.
	Params map[string]float64
	// Interval is the faults an interval run applies (the run's, or the
	// story's own), nil in any other.
	Interval *Interval

	// deeds counts the actions a plan put off (a delay, a lasting fault)
	// that have not ended yet (Settle); pending is their number (Busy).
	deeds   sync.WaitGroup
	pending atomic.Int64
}

// Busy says an action the schedule put off has not ended yet: a delayed
// kill not yet done is a fault to come, which the history does not show.
// A run ends early only once none is (engine).
func (e *Env) Busy() bool { return e.pending.Load() > 0 }

// Settle waits until every action the schedule put off has ended: one
// whose delay was up as the run ended may still act on a node, and the
// servers are not handed to another run (engine's pool) until it has,
// and its fault is marked on the node.
func (e *Env) Settle() { e.deeds.Wait() }

// Param is a number a story's schedule is told with, which a run may set
// (engine.Options.Params) and a sweep varies (package sweep): how long a
// holder is paused, how far a clock jumps.
type Param struct {
	Name string `json:"name"`
	// Unit is what the number counts: "TTLs", say.
	Unit string `json:"unit"`
	// Default is the value the story is told with.
	Default float64 `json:"default"`
	// Min and Max bound the values at which the story still plays out in
	// its time limit.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Threshold, when set, is where the story's outcome turns for a lease
	// (a pause of 1 TTL): a sweep's plot marks it.
	Threshold float64 `json:"threshold,omitempty"`
	// Help says what the number is.
	Help string `json:"help"`
}

// NodesParam is the parameter that sets how many lock nodes a story is
// told on, where it has one: the RedLock splits, whose schedules name the
// nodes by their place around the middle one, so any odd count tells the
// same story.
const NodesParam = "nodes"

// NodesAt is how many lock nodes the story is told on at params (its
// nodes parameter where it has one, else Nodes), and 0 where the lock's
// own count goes.
func (s Scenario) NodesAt(params map[string]float64) int {
	if _, ok := s.Param(NodesParam); ok {
		return int(s.ParamsOf(params)[NodesParam])
	}
	return s.Nodes
}

// Param is the value of the story's parameter name in this run.
func (e *Env) Param(name string) float64 { return e.Params[name] }

// ParamsOf is every parameter of the story at set's value, or its default
// where set has none (a run stored before the story had it).
func (s Scenario) ParamsOf(set map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, p := range s.Params {
		out[p.Name] = p.Default
		if v, ok := set[p.Name]; ok {
			out[p.Name] = v
		}
	}
	return out
}

// Param finds the story's parameter name.
func (s Scenario) Param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Scenario is one failure story.
type Scenario struct {
	Name string `json:"name"`
	// Story tells what happens, in a sentence or two.
	Story string `json:"story"`
	// TTL and Clients are defaults the flags may override; TimeLimitTTLs
	// is the default time limit in TTLs, MinTimeLimitTTLs the shortest at
	// which the story can play out.
	TTL     time.Duration `json:"-"`
	Clients int           `json:"clients,omitempty"`
	// MinTTL, when set, is the shortest lease the story can be told with:
	// its fault takes seconds of its own (a Sentinel failover), not TTLs.
	MinTTL time.Duration `json:"-"`
	// RestartShare, when set, is the share of a lease the story leaves a
	// node's restart (the rest is the holder's pause inside its lease and
	// the margin it wakes with): a lock whose holds end at a deadline is
	// told at a lease its server kind's restart (cluster.Kind.Recovery)
	// fits in, or the pause would be cut below the story's and the run
	// starve.
	RestartShare float64 `json:"restart_share,omitempty"`
	// ExpiryShare, when set, is the most of a lease the story lets a
	// server's lateness in ending it take (cluster.Kind.ExpiryLag): the
	// story leaves a window after a lease's end for a successor to act
	// in, and a lock whose leases expire unrenewed on such a server is
	// told at a lease its lag takes at most this share of, or the window
	// can close before the lease has ended at all.
	ExpiryShare float64 `json:"expiry_share,omitempty"`
	// Split says the story splits a RedLock's nodes around the middle
	// one, and its other client must take the lock while the holder is
	// paused: a lock is told at no shorter a lease than its attempts on a
	// split majority need (locks.Info.SplitTTL).
	Split bool `json:"split,omitempty"`
	// ExactClients, when set, is the only client count the story works
	// with (one client on each side of a partition).
	ExactClients int `json:"exact_clients,omitempty"`
	// Nodes, when set, is the only lock-node count the story is told with
	// (its schedule names n1..n5), or, with a nodes parameter, the count
	// it is told with by default; a lock on another count is refused.
	Nodes            int      `json:"nodes,omitempty"`
	TimeLimitTTLs    float64  `json:"time_limit_ttls"`
	MinTimeLimitTTLs float64  `json:"min_time_limit_ttls,omitempty"`
	Topology         Topology `json:"topology,omitzero"`
	// Expect says, for every lock the story applies to, what it must show.
	// A built-in story's is made from its Rules over the registered locks;
	// a scenario file's names its locks.
	Expect map[string]verdict.Expectation `json:"expect"`
	// Rules say, by what a lock is (locks.Traits), what it must show in
	// the story or why the story leaves it out: the first rule that picks
	// a lock decides for it.
	Rules []Rule `json:"-"`
	// NotFor says, for each server kind (locks.Info.ServerKind) none of
	// whose locks the story judges, why it cannot apply to them: -list
	// prints it, so a reader comparing services sees a reason where a
	// cell is empty, never a silent gap.
	NotFor map[string]string `json:"not_for,omitempty"`
	// Fairness adds the fairness checker (the story is about order).
	Fairness bool `json:"fairness,omitempty"`
	// HoldTTLs is how long, in TTLs, each client works in its critical
	// section (0: no time at all).
	HoldTTLs float64 `json:"hold_ttls,omitempty"`
	// Workload, where it sets a field, shapes the clients' work in the
	// story's place: a critical section and a think time as a user's
	// system has them (its hold over HoldTTLs), and how many keys.
	Workload workloads.Shape `json:"workload,omitzero"`
	// Interval, when set, is the faults the story applies on an interval
	// (a file of a user's system): its plan is drawn from the seed.
	Interval *Interval `json:"interval,omitempty"`
	// WaiterTimeoutTTLs is a queued lock's waiter timeout, in TTLs (0: 2).
	WaiterTimeoutTTLs float64 `json:"waiter_timeout_ttls,omitempty"`
	// WaitTTLs is how long an acquire keeps trying while the lock is
	// taken, in TTLs (0: the lock's default, one TTL).
	WaitTTLs float64 `json:"wait_ttls,omitempty"`
	// InProcess, when set, says why the story needs its clients inside
	// the harness's process: -client-procs is refused with it.
	InProcess string `json:"in_process,omitempty"`
	// Probed says the story takes a Probe (Env.Probe): where one client
	// is caught and what is done to it there. A run of it without one is
	// refused, as is a probe for any other story.
	Probed bool `json:"-"`
	// Exploration marks a story that explores rather than tells: it is
	// judged against the lock's own fault model (locks.Info.Claims), is
	// not part of "all", and runs only the locks named for it.
	Exploration bool `json:"exploration,omitempty"`
	// Alone, when set, says why the story's verdict hangs on timing that a
	// busy machine would disturb: a matrix run in parallel gives it the
	// machine to itself.
	Alone string `json:"alone,omitempty"`
	// AloneWorkers, when set, says why the story's verdict hangs on timing
	// that the lateness meter reads in the harness's own clients (a timer
	// late past its limit starves the run, which runs again alone) and not
	// in worker processes (a library's, or -client-procs'): a pair whose
	// clients are workers takes the machine to itself, and one whose
	// clients are the harness's takes its seats beside other pairs.
	AloneWorkers string `json:"alone_workers,omitempty"`
	// Requires lists the nemesis actions the story needs to have happened;
	// the first is its fault, around which Traffic is counted. A run
	// without them is vacuous.
	Requires []fault.Evidence `json:"requires,omitempty"`
	// Traffic is the least traffic around the fault (zero: the default
	// floor of verdict.Vacuity).
	Traffic verdict.Traffic `json:"traffic,omitzero"`
	// TrafficAt, when set, is the floor at the run's parameters instead:
	// a fault a sweep shortens below what lets others through leaves
	// nothing to complete during it.
	TrafficAt *TrafficRule `json:"traffic_at,omitempty"`
	// Params are the numbers the schedule is told with that a run may set
	// and a sweep vary (Env.Param reads them).
	Params []Param `json:"params,omitempty"`
	// Plan is the schedule of faults and traps, as data: what a
	// scenario file holds.
	Plan Plan `json:"schedule"`
	// Draw, when Plan is nil, draws the run's plan from what the run is
	// told (random's, from the seed): the plan is then the run's told
	// story (engine.Result.Told), a file that replays the run's schedule.
	Draw func(*Env) (Plan, error) `json:"-"`
	// Schedule, when Plan and Draw are nil, builds the faults in code: a
	// boundary run's (from the probe), or a story of a user's own written
	// in Go. Such a story has no file form.
	Schedule func(*Env) (nemesis.Schedule, error) `json:"-"`
}

// TrafficRule is a story's traffic floor below a value of one of its
// parameters.
type TrafficRule struct {
	Param   string          `json:"param"`
	Below   float64         `json:"below"`
	Traffic verdict.Traffic `json:"traffic"`
}

// TrafficOf is the least traffic around the story's fault in a run at
// params (its parameters' values): Traffic, or TrafficAt's floor where
// the run's parameter is below it.
func (s Scenario) TrafficOf(params map[string]float64) verdict.Traffic {
	if r := s.TrafficAt; r != nil && s.ParamsOf(params)[r.Param] < r.Below {
		return r.Traffic
	}
	return s.Traffic
}

// Steps is the schedule of one run: the plan compiled (the story's, or
// the one it draws for this run, which it returns), or the story's own
// code.
func (s Scenario) Steps(e *Env) (nemesis.Schedule, Plan, error) {
	p := s.Plan
	switch {
	case p == nil && s.Draw != nil:
		var err error
		if p, err = s.Draw(e); err != nil {
			return nil, nil, err
		}
	case p == nil && s.Schedule != nil:
		sched, err := s.Schedule(e)
		return sched, nil, err
	}
	sched, err := p.Schedule(e)
	return sched, p, err
}

// Sources counts the ways s gives its schedule (Plan, Draw, Schedule): a
// story gives it one way, and Steps would read only the first of two.
func (s Scenario) Sources() int {
	n := 0
	for _, set := range []bool{s.Plan != nil, s.Draw != nil, s.Schedule != nil} {
		if set {
			n++
		}
	}
	return n
}

// TimeLimit is the default time limit at ttl.
func (s Scenario) TimeLimit(ttl time.Duration) time.Duration {
	return time.Duration(s.TimeLimitTTLs * float64(ttl))
}

// MinTimeLimit is the shortest time limit at which the story can happen.
func (s Scenario) MinTimeLimit(ttl time.Duration) time.Duration {
	return time.Duration(s.MinTimeLimitTTLs * float64(ttl))
}

// WithDefaults fills in what a story leaves out: a story of a user's own
// gets the same defaults as a built-in one.
func (s Scenario) WithDefaults() Scenario {
	if s.TTL == 0 {
		s.TTL = 500 * time.Millisecond
	}
	if s.ExactClients > 0 {
		s.Clients = s.ExactClients
	}
	if s.Clients == 0 {
		s.Clients = 5
	}
	if s.TimeLimitTTLs == 0 {
		s.TimeLimitTTLs = 6
	}
	if s.MinTimeLimitTTLs == 0 {
		s.MinTimeLimitTTLs = s.TimeLimitTTLs
	}
	return s
}

// TTLs is n TTLs: schedules are told in TTLs so a story keeps its shape at
// any -ttl. It rounds to the nanosecond, so a time written in TTLs from a
// duration (a random plan's) comes back as that duration.
func (e *Env) TTLs(n float64) time.Duration { return time.Duration(math.Round(n * float64(e.TTL))) }

// Locks lists the locks a scenario has expectations for, sorted.
func (s Scenario) Locks() []string {
	return slices.Sorted(maps.Keys(s.Expect))
}

// Wait is how long an acquire keeps trying in a run of s (0: the lock's
// default).
func (s Scenario) Wait(ttl time.Duration) time.Duration {
	return time.Duration(s.WaitTTLs * float64(ttl))
}

// WaiterTimeout is a queued lock's waiter timeout in a run of s: by
// default 2 TTLs, short enough that a dead waiter's stall fits a run.
func (s Scenario) WaiterTimeout(ttl time.Duration) time.Duration {
	if s.WaiterTimeoutTTLs > 0 {
		return time.Duration(s.WaiterTimeoutTTLs * float64(ttl))
	}
	return 2 * ttl
}
