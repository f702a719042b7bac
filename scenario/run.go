package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/cluster"
	// Nodes as containers (-backend docker) beside local processes.
	_ "github.com/locktorture/locktorture/docker"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/worker"
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
	Expect *Expectation
	// Story runs a story of your own instead of a built-in one (Scenario
	// is then ignored): a Schedule composed from the nemesis pieces the Env
	// hands it, the evidence it Requires, and Expect or Options.Expect for
	// what the lock must show. Its Name must not be a built-in's.
	Story *Scenario
	// ClientProcs runs every client process as an OS process of its own (a
	// worker, see package worker), reaching Redis through its own links: a
	// pause is SIGSTOP and a crash SIGKILL, with nothing left running.
	ClientProcs bool
	// Worker builds the command that starts a worker for the named lock
	// (nil: this program again, which must call worker.ServeIfWorker
	// first; a Custom lock needs a program that knows it, as locktest
	// arranges).
	Worker func(lock string) *exec.Cmd
	// Alone runs the story alone on the machine, whatever the story says:
	// how a starved run is tried a second time (RunUnstarved).
	Alone bool
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

// expectation is what the lock must show under s.
func (o Options) expectation(s Scenario) (Expectation, bool) {
	if o.Expect != nil {
		return *o.Expect, true
	}
	e, ok := s.Expect[o.Lock]
	return e, ok
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

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &UsageError{msg: fmt.Sprintf(format, a...)} }

// ErrInterrupted is returned when the run was cancelled; what it recorded is
// on disk and in the partial Result.
var ErrInterrupted = errors.New("run interrupted")

// Resolve checks the options against the catalogue and fills in defaults.
// Every error is a *UsageError naming the valid choices.
func Resolve(o Options) (Options, Scenario, error) {
	s, err := Lookup(o.Scenario)
	if o.Story != nil {
		if _, builtIn := catalogue[o.Story.Name]; builtIn {
			return o, s, usagef("story %q: a built-in scenario has that name", o.Story.Name)
		}
		if o.Story.Name == "" || o.Story.Schedule == nil {
			return o, s, usagef("a story of your own needs a Name and a Schedule")
		}
		s, err = o.Story.withDefaults(), nil
		o.Scenario = s.Name
	}
	if err != nil {
		return o, s, &UsageError{msg: err.Error()}
	}
	info, err := o.lockInfo()
	if err != nil {
		return o, s, &UsageError{msg: err.Error()}
	}
	if info.Program != nil {
		// A lock outside this program exists only as worker processes.
		o.ClientProcs = true
		o.Worker = func(string) *exec.Cmd { return info.Program() }
	}
	if _, ok := o.expectation(s); !ok {
		return o, s, usagef("scenario %s has no expectation for lock %s (it applies to: %s)", s.Name, o.Lock, strings.Join(s.Locks(), ", "))
	}
	if o.Clients == 0 {
		o.Clients = s.Clients
	}
	if o.TTL == 0 {
		o.TTL = s.TTL
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
	if !slices.Contains(cluster.Backends(), o.Backend) {
		return o, s, usagef("-backend %s: want one of %s", o.Backend, strings.Join(cluster.Backends(), ", "))
	}
	switch {
	case o.Clients < 2:
		return o, s, usagef("-clients %d: a lock needs at least 2 clients to be contended", o.Clients)
	case o.Clients > 256:
		return o, s, usagef("-clients %d: at most 256", o.Clients)
	case o.TTL < 100*time.Millisecond:
		return o, s, usagef("-ttl %s: at least 100ms (loopback round trips and the scheduler need room)", o.TTL)
	case o.TimeLimit <= 0:
		return o, s, usagef("-time-limit %s: must be positive", o.TimeLimit)
	case s.ExactClients > 0 && o.Clients != s.ExactClients:
		return o, s, usagef("-clients %d: scenario %s is told with exactly %d clients", o.Clients, s.Name, s.ExactClients)
	case s.Nodes > 0 && info.Nodes != s.Nodes:
		return o, s, usagef("scenario %s is told with %d lock nodes; lock %s uses %d", s.Name, s.Nodes, o.Lock, info.Nodes)
	case s.Topology.Replicated && info.Nodes != 1:
		return o, s, usagef("scenario %s replicates a single master; lock %s uses %d nodes", s.Name, o.Lock, info.Nodes)
	case o.ClientProcs && s.Topology.Replicated:
		return o, s, usagef("scenario %s follows a failover inside the harness's own clients, which a worker process (-client-procs, or a lock with a Program) cannot yet do", s.Name)
	case o.TimeLimit < s.MinTimeLimit(o.TTL):
		return o, s, usagef("-time-limit %s: scenario %s needs at least %s at -ttl %s for its story to play out",
			o.TimeLimit, s.Name, s.MinTimeLimit(o.TTL), o.TTL)
	}
	return o, s, nil
}

// Result is everything a run found out.
type Result struct {
	Scenario  string             `json:"scenario"`
	Lock      string             `json:"lock"`
	Backend   string             `json:"backend"`
	Story     string             `json:"story"`
	Expected  Expectation        `json:"expected"`
	Outcome   string             `json:"outcome"`
	Matched   bool               `json:"matched"`
	Verdicts  []checker.Verdict  `json:"checkers"`
	Seed      int64              `json:"seed"`
	Clients   int                `json:"clients"`
	TTL       string             `json:"ttl"`
	TimeLimit string             `json:"time_limit"`
	Started   time.Time          `json:"started"`
	Elapsed   string             `json:"elapsed"`
	Nodes     []cluster.NodeInfo `json:"nodes"`
	// Schedule lists the nemesis steps, so a random run can be read and
	// replayed (same seed, same steps).
	Schedule string `json:"schedule,omitempty"`
	// Observations are the anomaly kinds and facts the verdicts show.
	Observations []string `json:"observations"`
	// Vacuous says why the story did not happen (a required fault never
	// fired, or too little traffic around it); the outcome is then
	// Vacuous, whatever the checkers found.
	Vacuous string `json:"vacuous,omitempty"`
	// Ready is when every client was up and the schedule began (harness
	// ns): nothing before it is judged for timing.
	Ready int64 `json:"ready"`
	// Lateness is how late the harness ran from Ready on: its timers and a
	// node's replies window by window, and each fault's overrun.
	Lateness []lateness.Sample `json:"lateness"`
	// Late says, when the lateness passed a limit, by how much and where,
	// whether or not the verdict rested on it.
	Late string `json:"late,omitempty"`
	// Starved says why the run's verdict is not evidence (see starved); the
	// outcome is then Starved, whatever the checkers found.
	Starved string `json:"starved,omitempty"`
	// Limits is what the lateness was judged by (zero for a run not
	// judged): a lock that bounds its own replies has a tighter Reply.
	Limits lateness.Limits `json:"limits"`
	// Finding (random runs) says how the lock broke its promise under
	// faults it claims to survive; Explained, which unclaimed faults
	// account for a broken promise that is therefore expected.
	Finding   string `json:"finding,omitempty"`
	Explained string `json:"explained,omitempty"`
	// Dir is the run directory.
	Dir string `json:"dir"`
	// Ops is the whole history (also in Dir/history.jsonl).
	Ops []history.Op `json:"-"`
	// Semantics is the model the lock ops were checked against, which the
	// timeline is drawn with.
	Semantics checker.Semantics `json:"-"`
}

// Verdict returns the named checker's verdict.
func (r *Result) Verdict(name string) (checker.Verdict, bool) {
	for _, v := range r.Verdicts {
		if v.Checker == name {
			return v, true
		}
	}
	return checker.Verdict{}, false
}

// Run runs one (scenario, lock) pair. It streams the history to disk as it
// goes; on every exit path (error, cancel, panic) it stops every process it
// started. ctx cancellation returns the partial Result with ErrInterrupted.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	o, s, err := Resolve(o)
	if err != nil {
		return nil, err
	}
	info, _ := o.lockInfo()
	expected, _ := o.expectation(s)
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s/%s: "+format+"\n", append([]any{s.Name, o.Lock}, a...)...)
		}
	}
	leave, err := machineRoom().enter(ctx, s.Alone != "" || o.Alone, logf)
	if err != nil {
		return nil, err
	}
	defer leave()
	started := time.Now()
	dir := filepath.Join(o.Out, s.Name, o.Lock, started.UTC().Format("20060102T150405.000Z"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	res = &Result{Scenario: s.Name, Lock: o.Lock, Backend: o.Backend, Story: s.Story, Expected: expected, Seed: o.Seed,
		Clients: o.Clients, TTL: o.TTL.String(), TimeLimit: o.TimeLimit.String(), Started: started, Dir: dir}
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), o.Clients)
	if err != nil {
		return res, err
	}
	defer rec.Close()

	cl, err := cluster.New(cluster.Options{Backend: o.Backend, Server: o.Server, Logf: logf})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	env := &Env{TTL: o.TTL, TimeLimit: o.TimeLimit, Lock: o.Lock, Seed: o.Seed}
	for i := 1; i <= info.Nodes; i++ {
		name := fmt.Sprintf("n%d", i)
		if _, err := cl.AddNode(ctx, cluster.NodeOptions{Name: name, Clock: s.Topology.Clock, Persistence: s.Topology.Persistence}); err != nil {
			return res, err
		}
		env.Nodes = append(env.Nodes, name)
	}
	if s.Topology.Replicated {
		env.Replica = env.Nodes[0] + "-replica"
		r, err := cl.AddNode(ctx, cluster.NodeOptions{Name: env.Replica, Persistence: s.Topology.Persistence})
		if err != nil {
			return res, err
		}
		master := cl.Node(env.Nodes[0])
		if err := r.ReplicaOf(ctx, master); err != nil {
			return res, err
		}
		env.Primary = cluster.NewPrimary(master)
	}
	store, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		return res, err
	}
	// The lateness probe pings the store straight at its port: no fault
	// touches that path, so a slow answer is the machine's, not a story's.
	probeClient := cluster.NewClient(store.Addr(), cluster.ClientOptions{Timeout: 5 * time.Second, PoolSize: 1})
	defer probeClient.Close()
	res.Nodes = cl.Info()
	if err := writeJSON(filepath.Join(dir, "cluster.json"), res.Nodes); err != nil {
		return res, err
	}

	var workerLog io.Writer
	if o.ClientProcs {
		f, err := os.Create(filepath.Join(dir, "workers.log"))
		if err != nil {
			return res, err
		}
		defer f.Close()
		workerLog = f
	}
	procs := &processes{env: env, cl: cl, store: store, info: info, workers: o.ClientProcs, worker: o.Worker, workerLog: workerLog,
		lock: locks.Config{TTL: o.TTL, WaiterTimeout: s.waiterTimeout(o.TTL)},
		// The store's timeout leaves room for the delays K2 puts on its links.
		storeOpts: cluster.ClientOptions{Timeout: max(500*time.Millisecond, 6*o.TTL)}}
	defer procs.close()
	env.Gate = nemesis.NewGate(rec)
	env.Nemesis = nemesis.New(rec, cl)
	wo := workloads.Options{Key: "lock", Register: "register", Think: 2 * time.Millisecond, Gate: env.Gate,
		Hold: env.TTLs(s.HoldTTLs)}
	for i := 0; i < o.Clients; i++ {
		peer := workloads.ProcessName(i)
		env.Clients = append(env.Clients, peer)
		clock := &nemesis.ClientClock{Name: peer}
		env.Clocks = append(env.Clocks, clock)
		wo.Clients = append(wo.Clients, workloads.Client{Open: procs.opener(i, clock), Clock: clock})
	}
	sched, err := s.Schedule(env)
	if err != nil {
		return res, err
	}
	res.Schedule = sched.String()
	logf("%d lock node(s) + store up, %d clients, ttl %s, running %s", info.Nodes, o.Clients, o.TTL, o.TimeLimit)

	// The time limit and the schedule start once every client is up; the
	// schedule's opening is in place before any client moves.
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	nemErr := make(chan error, 1)
	scheduled := false
	var probe *lateness.Probe
	wo.Ready = func() {
		scheduled = true
		res.Ready = rec.Now()
		probe = lateness.Start(lateness.Options{Now: rec.Now,
			Ping: func(ctx context.Context) error { return probeClient.Ping(ctx).Err() }})
		opening, rest := sched.Opening()
		if err := opening.Run(stop); err != nil {
			nemErr <- err
			cancelStop()
			return
		}
		// Sampling ends with the clients' work: their shutdown (closing
		// connections, workers exiting) is no part of any verdict.
		time.AfterFunc(o.TimeLimit, func() { probe.Stop(); cancelStop() })
		go func() { nemErr <- rest.Run(stop) }()
		if o.Progress != nil {
			go reportProgress(stop, o, rec)
		}
	}
	werr := workloads.Register(stop, ctx, rec, wo)
	cancelStop()
	if probe != nil {
		res.Lateness = probe.Stop()
	}
	var nerr error
	if scheduled {
		nerr = <-nemErr
	}
	procs.close()
	cl.Close()
	res.Ops = rec.Ops()
	res.Elapsed = time.Since(started).Round(time.Millisecond).String()
	if err := errors.Join(werr, nerr, env.Gate.Err(), rec.Close()); err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	logf("%d ops recorded; checking", len(res.Ops))
	res.judge(s, info, o.TTL)
	return res, nil
}

// processes opens the clients' processes. Every process gets its own
// connections, to the lock nodes and the store, each with the gate's hook:
// faults reach the lock through them without its help, and a process that
// dies takes its connections with it.
type processes struct {
	env       *Env
	cl        *cluster.Cluster
	store     *cluster.Node
	info      locks.Info
	lock      locks.Config // what every process's lock shares: TTL, waiter timeout
	storeOpts cluster.ClientOptions
	// workers: every process is a worker started by worker (nil: Self),
	// writing to workerLog.
	workers   bool
	worker    func(lock string) *exec.Cmd
	workerLog io.Writer

	mu          sync.Mutex
	conns       []*redis.Client // every connection opened, for close
	workerProcs []*worker.Proc  // every worker started, for close
}

// opener opens the processes of client, whose wall clock is clock.
func (p *processes) opener(client int, clock *nemesis.ClientClock) func(process int) (workloads.Process, error) {
	peer := p.env.Clients[client]
	if p.workers {
		return func(process int) (workloads.Process, error) { return p.startWorker(client, process, clock) }
	}
	return func(process int) (workloads.Process, error) {
		var mine []*redis.Client
		closeMine := func() {
			for _, c := range mine {
				c.Close()
			}
		}
		dial := func(name string, co cluster.ClientOptions, traps bool) error {
			var c *redis.Client
			if name == p.env.Nodes[0] && p.env.Primary != nil {
				c = p.env.Primary.Client(peer, co)
			} else {
				l, err := p.cl.Node(name).Link(peer)
				if err != nil {
					return err
				}
				c = cluster.NewClient(l.Addr(), co)
			}
			c.AddHook(p.env.Gate.Hook(client, process, traps))
			mine = append(mine, c)
			return nil
		}
		for _, name := range p.env.Nodes {
			if err := dial(name, cluster.ClientOptions{}, true); err != nil {
				closeMine()
				return workloads.Process{}, err
			}
		}
		if err := dial(p.store.Name, p.storeOpts, false); err != nil {
			closeMine()
			return workloads.Process{}, err
		}
		cfg := p.lock
		cfg.Clients, cfg.Clock, cfg.Owner = mine[:len(p.env.Nodes)], clock, fmt.Sprintf("%s:%d", peer, process)
		cfg.Point = func(ctx context.Context, name string) error { return p.env.Gate.At(ctx, client, process, name) }
		lock, err := locks.Build(p.info, cfg)
		if err != nil {
			closeMine()
			return workloads.Process{}, err
		}
		p.mu.Lock()
		p.conns = append(p.conns, mine...)
		p.mu.Unlock()
		return workloads.Process{Lock: lock, Store: workloads.NewStore(mine[len(mine)-1]), Close: closeMine}, nil
	}
}

// startWorker starts process of client as a worker that reaches the lock
// nodes and the store through the client's own links.
func (p *processes) startWorker(client, process int, clock *nemesis.ClientClock) (workloads.Process, error) {
	peer := p.env.Clients[client]
	h := worker.Hello{Lock: p.info.Name, TTLNS: int64(p.lock.TTL), WaitNS: int64(p.lock.Wait), WaiterTimeoutNS: int64(p.lock.WaiterTimeout),
		StoreTimeoutNS: int64(p.storeOpts.Timeout), Owner: fmt.Sprintf("%s:%d", peer, process)}
	for _, name := range append(slices.Clone(p.env.Nodes), p.store.Name) {
		l, err := p.cl.Node(name).Link(peer)
		if err != nil {
			return workloads.Process{}, err
		}
		h.Nodes = append(h.Nodes, l.Addr())
	}
	h.Nodes, h.Store = h.Nodes[:len(h.Nodes)-1], h.Nodes[len(h.Nodes)-1]
	w, err := worker.Start(context.Background(), worker.Options{Command: p.worker, Hello: h, Gate: p.env.Gate,
		Client: client, Process: process, Clock: clock, Stderr: p.workerLog})
	if err != nil {
		return workloads.Process{}, err
	}
	p.mu.Lock()
	p.workerProcs = append(p.workerProcs, w)
	p.mu.Unlock()
	return workloads.Process{Lock: w, Store: w, Close: w.Close}, nil
}

// close closes every connection any process opened.
func (p *processes) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	for _, w := range p.workerProcs {
		w.Close()
	}
	p.workerProcs = nil
}

func reportProgress(ctx context.Context, o Options, rec *history.Recorder) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := Progress{Scenario: o.Scenario, Lock: o.Lock, Elapsed: time.Since(start), TimeLimit: o.TimeLimit}
		p.Ops, p.Nemesis = rec.Summary()
		o.Progress(p)
	}
}

// waiterTimeout is a queued lock's waiter timeout in a run of s: by
// default 2 TTLs, short enough that a dead waiter's stall fits a run.
func (s Scenario) waiterTimeout(ttl time.Duration) time.Duration {
	if s.WaiterTimeoutTTLs > 0 {
		return time.Duration(s.WaiterTimeoutTTLs * float64(ttl))
	}
	return 2 * ttl
}

// Checkers is the set of checkers a (scenario, lock) pair is judged by.
func Checkers(s Scenario, info locks.Info, ttl time.Duration) []checker.Checker {
	sem := checker.Mutex
	switch {
	case info.Fenced:
		sem = checker.Fenced
	case info.Reentrant:
		sem = checker.Reentrant
	}
	// A dead client's lease runs out within a TTL, and the next try comes
	// within a retry; a dead fair-lock waiter holds the queue for up to its
	// waiter timeout on top.
	allowance := 2*ttl + 250*time.Millisecond
	if info.Queued {
		allowance += s.waiterTimeout(ttl)
	}
	cs := []checker.Checker{
		checker.Intervals{},
		checker.Linearizable{Semantics: sem, Timeout: time.Minute},
		checker.Promise{},
		checker.Resource{},
		checker.Liveness{Allowance: allowance},
	}
	if s.Fairness {
		cs = append(cs, checker.Fairness{Margin: 20 * time.Millisecond})
	}
	return cs
}

// judge runs the checkers and compares the outcome with the expectation.
func (r *Result) judge(s Scenario, info locks.Info, ttl time.Duration) {
	r.Verdicts = nil
	for _, c := range Checkers(s, info, ttl) {
		if l, ok := c.(checker.Linearizable); ok {
			r.Semantics = l.Semantics
		}
		r.Verdicts = append(r.Verdicts, c.Check(r.Ops))
	}
	r.Outcome = Outcome(r.Verdicts)
	r.Observations = Observations(r.Verdicts)
	if r.Vacuous = vacuity(s, r.Ops); r.Vacuous != "" {
		r.Outcome = Vacuous
	}
	// The faults' overruns are read again from the history, so a run
	// judged twice counts them once.
	r.Lateness = append(slices.DeleteFunc(r.Lateness, func(s lateness.Sample) bool { return s.Kind.FromHistory() }),
		lateness.Faults(r.Ops, r.Ready)...)
	// A starved run's story may not have happened as told, or happened in
	// another order: that, not its vacuity, is what a reader needs to know.
	r.Limits = lateness.LimitsFor(ttl)
	if info.NodeTimeout {
		r.Limits.Reply = min(r.Limits.Reply, locks.DefaultNodeTimeout(ttl))
	}
	r.Late = lateness.Over(r.Lateness, r.Limits)
	passed := r.Outcome == Safe && faultFree(r.Ops) && Matches(r.Expected, r.Outcome, r.Observations)
	if r.Starved = starved(lateness.Unfitted(r.Ops), r.Late, passed); r.Starved != "" {
		r.Outcome = Starved
	}
	r.Matched = Matches(r.Expected, r.Outcome, r.Observations)
	if s.Random {
		r.judgeClaims(info)
	}
}

// starved says why a run's verdict is not evidence, or "" when it is. A
// fault the gate could not fit (unfitted) means the story did not happen as
// told, so nothing the run shows counts. A harness that ran late (late)
// can move a fault's window: a pause that overran, a successor's acquire
// stalled until the sleeper has woken, RedLock replies past its per-node
// timeout that fail the very grant a story needs. So lateness starves a
// violation or a stall it could have made, and a pass it could have
// caused by moving a window. It starves every verdict but one: passed, a
// run in which the nemesis did nothing, every checker passed and the run
// showed what it was expected to. With no fault there is no window to
// move, and a stalled client is not a violation.
func starved(unfitted, late string, passed bool) string {
	switch {
	case unfitted != "" && late != "":
		return unfitted + "; " + late
	case unfitted != "":
		return unfitted
	case late != "" && !passed:
		return late
	}
	return ""
}

// faultFree says whether the nemesis did nothing in the run, read from
// what it recorded rather than from the story's schedule.
func faultFree(ops []history.Op) bool {
	return !slices.ContainsFunc(ops, func(op history.Op) bool { return op.Process == history.NemesisProcess })
}

// Matches says whether an outcome and its observations meet e. Vacuous,
// starved and undecided runs meet nothing.
func Matches(e Expectation, outcome string, observations []string) bool {
	if outcome != e.Outcome || outcome == Vacuous || outcome == Starved || outcome == Undecided {
		return false
	}
	for _, o := range e.Show {
		if !slices.Contains(observations, o) {
			return false
		}
	}
	for _, o := range e.Hide {
		if slices.Contains(observations, o) {
			return false
		}
	}
	return true
}

// Outcome sums verdicts up in the words expectations use, the most serious
// first: a corrupted resource, then a violated lock, then a stuck one, then
// an unfair one.
func Outcome(vs []checker.Verdict) string {
	valid := map[string]checker.Validity{}
	for _, v := range vs {
		valid[v.Checker] = v.Valid
	}
	if slices.ContainsFunc(vs, func(v checker.Verdict) bool { return v.Valid == checker.Unknown }) {
		return Undecided
	}
	switch {
	case valid["resource"] == checker.Invalid:
		return Unsafe
	case valid["intervals"] == checker.Invalid || valid["linearizable"] == checker.Invalid || valid["promise"] == checker.Invalid:
		return LockUnsafe
	case valid["liveness"] == checker.Invalid:
		return Deadlock
	case valid["fairness"] == checker.Invalid:
		return Unfair
	}
	return Safe
}

// Observations lists, sorted, the anomaly kinds the verdicts report and
// StaleWriteRejected when the fenced store refused a write.
func Observations(vs []checker.Verdict) []string {
	seen := map[string]bool{}
	for _, v := range vs {
		for kind := range v.Counts {
			seen[kind] = true
		}
		if n, _ := v.Details["stale_writes_rejected"].(int); n > 0 {
			seen[StaleWriteRejected] = true
		}
	}
	out := make([]string, 0, len(seen))
	for o := range seen {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
