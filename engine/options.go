package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Options selects and tunes one run. Zero values take the scenario's
// defaults.
type Options struct {
	Scenario string
	Lock     string
	Clients  int
	TTL      time.Duration
	// TimeLimit is how long clients keep starting new cycles.
	TimeLimit time.Duration
	// FullTime keeps the clients working to the time limit. Without it a
	// story's run ends once its story is over (over.go): every fault it
	// started has ended, its evidence and traffic are in the history, and
	// the checkers' allowance has passed since its last fault.
	FullTime bool
	// SpawnWorkers starts every worker as a process of its own, where the
	// lock's program could fork them from one that imported its library
	// once (locks.Info.Forks): what the forks save, measured.
	SpawnWorkers bool
	// Stream judges the run from its file as a stream instead of holding
	// its history in memory (verdict.JudgeStream); a run of StreamAfter
	// or longer always is.
	Stream bool
	// Seed is stored with the run; scripted schedules do not depend on it.
	Seed int64
	// Out is the results root; the run goes to Out/<scenario>/<lock>/<time>.
	Out string
	// Backend is where the Redis nodes run: "local" processes (the
	// default) or "docker" containers (cluster.Backends lists them).
	Backend string
	// Server is the redis-server binary of the local backend (empty: from
	// PATH).
	Server string
	// Log receives a few progress lines (nil: silent).
	Log io.Writer
	// Progress, if set, is called about four times a second while clients
	// run.
	Progress func(Progress)
	// Custom runs a lock that is not in the registry (a user's own) under
	// the name Lock; Expect then says what it must show.
	Custom *locks.Info
	// Expect overrides the scenario's expectation for the lock.
	Expect *verdict.Expectation
	// Told runs a story of your own instead of a built-in one (Scenario
	// is then ignored): a Plan (a scenario file's, see scenario.Parse) or
	// a Schedule composed from the nemesis pieces the Env hands it, the
	// evidence it Requires, and Expect or Options.Expect for what the lock
	// must show. A story with a Plan may take a built-in's name (a file
	// printed from it, then changed): its runs keep the story they were
	// told (Result.Told), which -check judges them by. One written in Go
	// may not.
	Told *scenario.Scenario
	// ClientProcs runs every client process as an OS process of its own (a
	// worker, see package worker), reaching Redis through its own links: a
	// pause is SIGSTOP and a crash SIGKILL, with nothing left running.
	ClientProcs bool
	// Worker builds the command that starts a worker for the named lock
	// (nil: this program again, which must call worker.ServeIfWorker
	// first; a Custom lock needs a program that knows it, as locktest
	// arranges).
	Worker func(lock string) *exec.Cmd
	// WorkerPatience is how long a worker may leave hello or a request
	// unanswered before it is killed as hung and the run fails (0:
	// worker.DefaultPatience, 30 s beside the wait and ten TTLs).
	WorkerPatience time.Duration
	// Params set the story's parameters (scenario.Param) by name; the
	// others keep their defaults.
	Params map[string]float64
	// Workload shapes the clients' work as a user's system has it: the
	// critical section's length and the think time as distributions, and
	// how many keys the clients contend for. Each field set here takes
	// the place of the story's (Scenario.Workload, or its HoldTTLs).
	Workload workloads.Shape
	// Interval, for the interval story, is the faults it applies, one
	// every interval for the whole run (scenario.Interval); a story file
	// may carry its own.
	Interval *scenario.Interval
	// Probe is a boundary run's fault (scenario boundary, package
	// explore): where one client is caught and what is done to it.
	Probe *scenario.Probe
	// Alone runs the story alone on the machine, whatever the story says:
	// how a starved run is tried a second time (RunUnstarved). Once it
	// holds the room it also waits, up to 20 s, for the cores to be
	// quiet, as what runs outside the room may not be (quietness).
	Alone bool
	// Pool, when set, keeps the servers a run left healthy for the next
	// run of the same topology, reset, and starts a run on such servers
	// where it holds some (Resolved.PoolKey says which runs may). The
	// caller closes it after its last run. Nil: every run starts its own.
	Pool *cluster.Pool
}

// lockInfo is the lock the options name: Custom, or from the registry.
func (o Options) lockInfo() (locks.Info, error) {
	if o.Custom != nil {
		info := *o.Custom
		info.Name = o.Lock
		if info.Nodes == 0 {
			info.Nodes = 1
		}
		if info.New == nil && info.Program == nil {
			return info, fmt.Errorf("custom lock %s has neither a New function nor a Program", o.Lock)
		}
		return info, nil
	}
	return locks.Lookup(o.Lock)
}

// expectation is what the lock (info) must show under s: Expect, else
// the story's for a registered lock, or, for a lock of the user's own,
// what the story's rules say of its traits (a story lists the registered
// locks only).
func (o Options) expectation(s scenario.Scenario, info locks.Info) (verdict.Expectation, bool) {
	if o.Expect != nil {
		return *o.Expect, true
	}
	if e, ok := s.Expect[o.Lock]; ok || o.Custom == nil {
		return e, ok
	}
	if j := s.Judge(info); j.Expect != nil {
		return *j.Expect, true
	}
	return verdict.Expectation{}, false
}

// Progress is a running run's state, for a status line.
type Progress struct {
	Scenario, Lock     string
	Elapsed, TimeLimit time.Duration
	// Ops is how many ops are recorded so far.
	Ops int
	// Nemesis is the latest nemesis action, in words ("" before the first).
	Nemesis string
}

// UsageError is a bad option: cmd/run exits 2 on it.
type UsageError struct{ msg string }

// Error is the one line cmd/run prints before it exits 2.
func (e *UsageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &UsageError{msg: fmt.Sprintf(format, a...)} }

// ErrInterrupted is returned when the run was cancelled; what it recorded is
// on disk and in the partial Result.
var ErrInterrupted = errors.New("run interrupted")

// Resolved is a run's options resolved against the catalogue: every default
// filled in, the scenario, the lock and what it must show, each checked
// once.
type Resolved struct {
	Options  Options
	Scenario scenario.Scenario
	Lock     locks.Info
	Expected verdict.Expectation
}

// Alone says whether the run takes the whole machine: its story's timing
// would be disturbed by a neighbour (Scenario.Alone, or
// Scenario.AloneWorkers where its clients are worker processes, whose
// timing the lateness meter does not judge), the options ask for it, or
// its lock is another language's library (locks.Info.Program) on a
// kind of server whose library pairs take more than a core, as measured
// (cluster.Kind.Alone). A Go lock on such a kind runs its clients as this
// harness's own worker processes, and its pairs share the machine a core
// each: measured beside a neighbour, their lateness stays a third of its
// limits (docs/ci-and-benchmarks.md).
func (p Resolved) Alone() bool {
	return p.Scenario.Alone != "" || p.Options.Alone || (p.Scenario.AloneWorkers != "" && p.Options.ClientProcs) ||
		(p.Lock.Program != nil && p.kind().Alone != "")
}

// kind is the lock's server kind (kindOf).
func (p Resolved) kind() *cluster.Kind { return kindOf(p.Lock) }

// kindOf is the server kind of lock info, or an empty one for a kind the
// cluster does not know (a user's own lock's), which asks for nothing.
func kindOf(info locks.Info) *cluster.Kind {
	if k, err := cluster.LookupKind(info.ServerKind()); err == nil {
		return k
	}
	return &cluster.Kind{}
}

// Seats is how many of the machine-wide room's seats the run takes (a
// seat is a third of a core): every one alone; one where the run is light, its
// clients goroutines of the harness (whose timers the lateness meter
// reads, so a neighbour that delays them starves the run, which then
// runs again alone) on local servers of a kind measured light
// (cluster.Kind.Light), or any clients on local servers of a kind
// measured light with worker processes (cluster.Kind.LightWorkers); else
// PairSeats.
func (p Resolved) Seats() int {
	k := p.kind()
	switch {
	case p.Alone():
		return Seats()
	case p.Options.Backend != cluster.Local:
		return PairSeats
	case k.LightWorkers != "", k.Light != "" && !p.Options.ClientProcs:
		return 1
	}
	return PairSeats
}

// Resolve checks the options against the catalogue and fills in defaults.
// Every error is a *UsageError naming the valid choices.
func Resolve(o Options) (Resolved, error) {
	s, err := lookupScenario(o)
	if err != nil {
		return Resolved{}, err
	}
	if o.Told != nil {
		o.Scenario = s.Name
	}
	info, err := o.lockInfo()
	if err != nil {
		return Resolved{}, &UsageError{msg: err.Error()}
	}
	o = o.withWorkers(info)
	expected, ok := o.expectation(s, info)
	if !ok {
		return Resolved{}, usagef("scenario %s has no expectation for lock %s (it applies to: %s)", s.Name, o.Lock, strings.Join(s.Locks(), ", "))
	}
	if o.Params, err = resolveParams(s, o.Params); err != nil {
		return Resolved{}, err
	}
	info = toldOn(s, info, o.Params)
	if s, o, err = withSystem(s, o, info); err != nil {
		return Resolved{}, err
	}
	o = o.withDefaults(s, info)
	if !slices.Contains(cluster.Backends(), o.Backend) {
		return Resolved{}, usagef("-backend %s: want one of %s", o.Backend, strings.Join(cluster.Backends(), ", "))
	}
	for _, check := range []func(Options, scenario.Scenario, locks.Info) error{checkSizes, checkTopology, checkTold} {
		if err := check(o, s, info); err != nil {
			return Resolved{}, err
		}
	}
	return Resolved{Options: o, Scenario: s, Lock: info, Expected: expected}, nil
}

// lookupScenario is the story the options name: the catalogue's, or a
// story of the user's own (Options.Told) with its defaults filled in.
func lookupScenario(o Options) (scenario.Scenario, error) {
	if o.Told != nil {
		if _, err := scenario.Lookup(o.Told.Name); err == nil && o.Told.Plan == nil {
			return scenario.Scenario{}, usagef("story %q: a built-in scenario has that name", o.Told.Name)
		}
		if o.Told.Name == "" || o.Told.Schedule == nil && o.Told.Plan == nil && o.Told.Draw == nil {
			return scenario.Scenario{}, usagef("a story of your own needs a Name, and a Plan, an Interval or a Schedule")
		}
		if o.Told.Sources() > 1 {
			return scenario.Scenario{}, usagef("story %q gives its schedule %d ways: give one of a Plan, a Draw or a Schedule", o.Told.Name, o.Told.Sources())
		}
		return o.Told.WithDefaults(), nil
	}
	s, err := scenario.Lookup(o.Scenario)
	if err != nil {
		return scenario.Scenario{}, &UsageError{msg: err.Error()}
	}
	return s, nil
}

// withWorkers is o with its clients run as worker processes when the lock
// needs that.
func (o Options) withWorkers(info locks.Info) Options {
	if info.Program != nil {
		// A lock outside this program exists only as worker processes.
		o.ClientProcs = true
		o.Worker = func(string) *exec.Cmd { return info.Program() }
	}
	if info.ServerKind() != locks.ServerRedis {
		// A lock that dials its own server keeps connections and work of
		// its own (a session's pings, a lease's keepalive) that the gate's
		// hooks on Redis clients never see: only a process of its own is
		// paused or killed whole, as a GC pause or a crash takes a client.
		o.ClientProcs = true
	}
	return o
}

// resolveParams checks the parameters the options set against the story's
// and returns all of them, the others at their defaults.
func resolveParams(s scenario.Scenario, set map[string]float64) (map[string]float64, error) {
	for name, v := range set {
		p, ok := s.Param(name)
		switch {
		case !ok:
			return nil, usagef("scenario %s has no parameter %q (it has: %s)", s.Name, name, paramNames(s))
		case !(v >= p.Min && v <= p.Max): // NaN too
			return nil, usagef("%s=%g: scenario %s is told with %s from %g to %g %s", name, v, s.Name, name, p.Min, p.Max, p.Unit)
		}
	}
	params := s.ParamsOf(set)
	if _, ok := s.Param(scenario.NodesParam); ok {
		if n := params[scenario.NodesParam]; n != math.Trunc(n) || int(n)%2 == 0 {
			return nil, usagef("%s=%g: scenario %s splits an odd number of lock nodes around the middle one", scenario.NodesParam, n, s.Name)
		}
	}
	return params, nil
}

// withDefaults is o with what it leaves out taken from the story and the
// lock (info, as the story runs it).
func (o Options) withDefaults(s scenario.Scenario, info locks.Info) Options {
	if o.Clients == 0 {
		o.Clients = s.Clients
	}
	if o.TTL == 0 {
		o.TTL = max(s.TTL, info.MinTTL, restartTTL(s, info), expiryTTL(s, info), failoverTTL(s, info), splitTTL(s, info))
	}
	if o.TimeLimit == 0 {
		o.TimeLimit = s.TimeLimit(o.TTL)
	}
	if o.Out == "" {
		o.Out = "results"
	}
	if o.Backend == "" {
		o.Backend = cluster.Local
	}
	return o
}

// restartTTL is the shortest lease at which a story that leaves a node's
// restart a share of the lease (Scenario.RestartShare) fits the restart of
// the lock's server kind (cluster.Kind.Recovery, as measured), for a lock
// whose holds end at a deadline (a session's have none to cut a pause
// at), in the lock's own grain (shareTTL); 0 for any other.
func restartTTL(s scenario.Scenario, info locks.Info) time.Duration {
	if info.Traits.Ends != locks.Expires {
		return 0
	}
	return shareTTL(kindOf(info).Recovery, s.RestartShare, info)
}

// expiryTTL is the shortest lease at which the lag of the lock's server
// kind in ending an expired lease (cluster.Kind.ExpiryLag) takes at most
// the story's share of it (Scenario.ExpiryShare), for a lock whose lease
// nobody renews (a renewed lease or a session ends only once its holder
// goes quiet, which the stories that set the share do not make it do), in
// the lock's own grain; 0 for any other.
func expiryTTL(s scenario.Scenario, info locks.Info) time.Duration {
	if info.Traits.Ends != locks.Expires {
		return 0
	}
	return shareTTL(kindOf(info).ExpiryLag, s.ExpiryShare, info)
}

// shareTTL is the shortest lease d takes at most share of, rounded up to a
// multiple of the lock's MinTTL (which for the locks whose server kinds
// state a Recovery or an ExpiryLag is the whole second etcd counts leases
// in); 0 where d or share is unset.
func shareTTL(d time.Duration, share float64, info locks.Info) time.Duration {
	if d <= 0 || share <= 0 {
		return 0
	}
	need := time.Duration(float64(d) / share)
	if g := info.MinTTL; g > 0 {
		need = (need + g - 1) / g * g
	}
	return need
}

// splitTTL is the lock's SplitTTL for a story that splits its nodes
// (Scenario.Split), and 0 for any other.
func splitTTL(s scenario.Scenario, info locks.Info) time.Duration {
	if s.Split {
		return info.SplitTTL
	}
	return 0
}

// failoverTTL is the lock's FailoverTTL for a story that kills a node
// (a fault of kind NodeCrash among its evidence), and 0 for any other.
func failoverTTL(s scenario.Scenario, info locks.Info) time.Duration {
	for _, e := range s.Requires {
		if k, _ := fault.KindOf(e.Op); k == fault.NodeCrash {
			return info.FailoverTTL
		}
	}
	return 0
}

// checkSizes checks the run's client count, lease and time limit against
// what the harness, the lock's server and the story allow.
func checkSizes(o Options, s scenario.Scenario, info locks.Info) error {
	switch {
	case o.Clients < 2:
		return usagef("-clients %d: a lock needs at least 2 clients to be contended", o.Clients)
	case o.Clients > 256:
		return usagef("-clients %d: at most 256", o.Clients)
	case o.TTL < 100*time.Millisecond:
		return usagef("-ttl %s: at least 100ms (loopback round trips and the scheduler need room)", o.TTL)
	case o.TTL < info.MinTTL:
		return usagef("-ttl %s: lock %s's server grants leases of at least %s", o.TTL, o.Lock, info.MinTTL)
	case o.TTL < s.MinTTL:
		return usagef("-ttl %s: scenario %s is told with a lease of at least %s", o.TTL, s.Name, s.MinTTL)
	case o.TimeLimit <= 0:
		return usagef("-time-limit %s: must be positive", o.TimeLimit)
	case s.ExactClients > 0 && o.Clients != s.ExactClients:
		return usagef("-clients %d: scenario %s is told with exactly %d clients", o.Clients, s.Name, s.ExactClients)
	case s.NodesAt(o.Params) > 0 && info.Nodes != s.NodesAt(o.Params):
		return usagef("scenario %s is told with %d lock nodes; lock %s uses %d", s.Name, s.NodesAt(o.Params), o.Lock, info.Nodes)
	}
	return nil
}

// checkTopology checks that cluster can start the servers the story is
// told on for this lock, and that the clients can run where the options
// put them (in the harness, or as worker processes).
func checkTopology(o Options, s scenario.Scenario, info locks.Info) error {
	t, kind := s.Topology, info.ServerKind()
	switch {
	case !slices.Contains(cluster.Kinds(), kind):
		return usagef("lock %s runs against a %q server, which cluster does not start (it starts: %s)", o.Lock, info.Server, strings.Join(cluster.Kinds(), ", "))
	case t.Sentinel && !t.Replicated:
		return usagef("scenario %s asks for Sentinel, which watches a replicated master: set Topology.Replicated too", s.Name)
	case t.Replicated && kind != locks.ServerRedis:
		return usagef("scenario %s replicates a Redis master; lock %s runs against %s", s.Name, o.Lock, kind)
	case !kindPersists(kind, t.Persistence):
		return usagef("scenario %s runs its nodes with persistence %s, which a %s node does not have", s.Name, t.Persistence, kind)
	case t.Replicated && info.Nodes != 1:
		return usagef("scenario %s replicates a single master; lock %s uses %d nodes", s.Name, o.Lock, info.Nodes)
	case t.Cluster && (kind != locks.ServerRedis || info.Nodes != 1):
		return usagef("scenario %s puts a single-node Redis lock in a Redis Cluster; lock %s uses %d %s node(s)", s.Name, o.Lock, info.Nodes, kind)
	case t.Cluster && o.Backend != cluster.Local:
		return usagef("scenario %s runs a Redis Cluster, which the %s backend cannot start yet (its nodes announce loopback links): use -backend local", s.Name, o.Backend)
	case o.ClientProcs && s.InProcess != "":
		return usagef("scenario %s cannot run its clients as processes (-client-procs, or a lock with a Program): %s", s.Name, s.InProcess)
	case o.ClientProcs && t.Cluster:
		return usagef("scenario %s routes every command by hash slot with go-redis's cluster client inside the harness, which a worker process (-client-procs, or a lock with a Program) cannot yet do", s.Name)
	}
	return nil
}

// checkTold checks what the story is told with: a boundary run's probe
// (Options.Probe, the fault it plays), which only a probed story takes
// and it must, and the time the story needs to play out.
func checkTold(o Options, s scenario.Scenario, _ locks.Info) error {
	switch {
	case s.Probed && o.Probe == nil:
		return usagef("scenario %s needs a probe: -probe \"pause|crash OP before|after COMMAND#N\" (package explore lists a lock's)", s.Name)
	case o.Probe != nil && o.Probe.Check() != nil:
		return usagef("-probe: %v", o.Probe.Check())
	case !s.Probed && o.Probe != nil:
		return usagef("-probe %s: scenario %s takes no probe (scenario boundary does)", o.Probe, s.Name)
	case o.TimeLimit < s.MinTimeLimit(o.TTL):
		return usagef("-time-limit %s: scenario %s needs at least %s at -ttl %s for its story to play out",
			o.TimeLimit, s.Name, s.MinTimeLimit(o.TTL), o.TTL)
	}
	return nil
}

// withSystem resolves the user's system the run is told with: the
// workload's shape (the options' over the story's) and, for a story of
// faults on an interval, its faults (the options', else the story's),
// whose clock faults run the lock nodes under libfaketime.
func withSystem(s scenario.Scenario, o Options, info locks.Info) (scenario.Scenario, Options, error) {
	o.Workload = s.Workload.Over(o.Workload)
	if err := o.Workload.Check(); err != nil {
		return s, o, usagef("-%v", err)
	}
	if o.Workload.FenceReads && o.ClientProcs {
		return s, o, usagef("-fence-reads: the store checks a token on a read for clients inside the harness; lock %s's clients are processes of their own (-client-procs, a worker program or a lock service's), whose reads carry no token", o.Lock)
	}
	onInterval := s.Name == scenario.IntervalStory || s.Interval != nil
	switch {
	case o.Interval != nil && !onInterval:
		return s, o, usagef("-faults: scenario %s tells its own faults; faults on an interval are the %s story's (-scenario %s)", s.Name, scenario.IntervalStory, scenario.IntervalStory)
	case !onInterval:
		return s, o, nil
	case o.Interval == nil && s.Interval == nil:
		return s, o, usagef("scenario %s needs the faults to apply: -faults (%s), -fault-every and -fault-for", s.Name, strings.Join(scenario.IntervalKinds(), "; "))
	case o.Interval == nil:
		iv := *s.Interval
		o.Interval = &iv
	}
	nodes := info.Nodes
	if info.Traits.Local {
		nodes = 0
	}
	if err := o.Interval.Check(nodes); err != nil {
		return s, o, usagef("%v", err)
	}
	if o.Interval.Clock() {
		s.Topology.Clock = true
	}
	return s, o, nil
}

// toldOn is the lock as the story at params runs it: a lock of as many
// nodes as the story is told on by default runs on as many as its nodes
// parameter says (RedLock on 3, 5, 7 or 9 nodes).
func toldOn(s scenario.Scenario, info locks.Info, params map[string]float64) locks.Info {
	if _, ok := s.Param(scenario.NodesParam); ok && info.Nodes == s.Nodes {
		info.Nodes = s.NodesAt(params)
	}
	return info
}

// paramNames lists a story's parameters, or says it has none.
func paramNames(s scenario.Scenario) string {
	if len(s.Params) == 0 {
		return "none"
	}
	var names []string
	for _, p := range s.Params {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// kindPersists says whether a node of the named server kind runs with
// persistence p, by the rule AddNode keeps (Kind.Offers).
func kindPersists(kind string, p cluster.Persistence) bool {
	k, err := cluster.LookupKind(kind)
	return err == nil && k.Offers(p)
}
