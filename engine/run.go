package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/internal/spool"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/observe"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/worker"
	"github.com/locktorture/locktorture/workloads"
)

// Run runs one (scenario, lock) pair. It streams the history to disk as it
// goes; on every exit path (error, cancel, panic) it stops every process it
// started. ctx cancellation returns the partial Result with ErrInterrupted.
//
// Each phase is a method of runner, in the order a run goes through them.
func Run(ctx context.Context, o Options) (*Result, error) {
	p, err := Resolve(o)
	if err != nil {
		return nil, err
	}
	r := newRunner(p)
	// What any phase started is stopped here, the latest first, however
	// Run returns: an error, a cancel, a panic.
	defer r.cleanup()
	// A run that did not match, or failed on the way, keeps its locks'
	// commands; this runs before cleanup.
	defer r.keepCommands()
	if err := r.enterRoom(ctx); err != nil {
		return nil, err
	}
	// From here on a failed run returns what it recorded so far (nil only
	// when its directory could not be made).
	if err := r.createRecorder(); err != nil {
		return r.res, err
	}
	if err := r.startTopology(ctx); err != nil {
		return r.res, err
	}
	if err := r.prepareClients(); err != nil {
		return r.res, err
	}
	if err := r.drawSchedule(); err != nil {
		return r.res, err
	}
	clients, err := r.openClients()
	if err != nil {
		return r.res, err
	}
	werr, nerr := r.play(ctx, clients)
	if err := r.tally(ctx, werr, nerr); err != nil {
		return r.res, err
	}
	err = r.judge()
	if err == nil {
		r.dropLogs()
	}
	return r.res, err
}

// runner is one run as its phases build it up: each phase reads what the
// phases before it left here, and hands what it starts to onExit.
type runner struct {
	o        Options
	s        scenario.Scenario
	info     locks.Info
	expected verdict.Expectation
	seats    int // Resolved.Seats
	// poolKey is Resolved.PoolKey; parked says the pool keeps the
	// servers, so the run's exit leaves them running.
	poolKey string
	parked  bool

	res   *Result
	rec   *history.Recorder
	cl    *cluster.Cluster
	env   *scenario.Env
	store *cluster.Node
	// lag is the lateness meter's own client of the store (startStore);
	// sessions are its sessions with lock nodes (pings), ended with it.
	lag      *redis.Client
	sessions []func()
	procs    *processes
	wo       workloads.Options
	sched    nemesis.Schedule
	// plan is the schedule as data, nil for a story told in Go.
	plan scenario.Plan
	// stepped is how long the schedule's first step waited, suspended
	// how long traps were suspended, in ns (hold).
	stepped, suspended atomic.Int64
	// ended is when the clients were told to stop (harness ns): the time
	// limit, or the story over (endWhenOver, which sets early).
	ended atomic.Int64
	early bool

	// logFrom is where each node's log ended as the run took servers
	// another run left (markLogs); logsCopied says copyLogs copied them.
	logFrom    map[string]int64
	logsCopied bool

	// exits stop what the phases started, in the order they started it.
	exits []func()
}

// newRunner is the run p resolves to, before its first phase.
func newRunner(p Resolved) *runner {
	return &runner{o: p.Options, s: p.Scenario, info: p.Lock, expected: p.Expected, seats: p.Seats(), poolKey: p.PoolKey()}
}

// onExit has cleanup call stop.
func (r *runner) onExit(stop func()) { r.exits = append(r.exits, stop) }

// cleanup calls every stop handed to onExit, the latest first. Each is
// deferred, as Run's own defers would be: one that panics does not keep
// the others from running.
func (r *runner) cleanup() {
	for _, stop := range r.exits {
		defer stop()
	}
}

// logf writes one progress line, naming the pair, to Options.Log.
func (r *runner) logf(format string, a ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, "%s/%s: "+format+"\n", append([]any{r.s.Name, r.o.Lock}, a...)...)
	}
}

// enterRoom takes the run's seats in the machine's room (all of them for
// a run alone) and gives them up when the run ends. A run told to be
// alone (Options.Alone) then waits for quiet cores, its seats held and
// counted in Held.
func (r *runner) enterRoom(ctx context.Context) error {
	leave, err := machineRoom().enter(ctx, r.seats, r.logf)
	if err != nil {
		return err
	}
	var quiet time.Duration
	r.onExit(func() {
		leave()
		if r.res != nil {
			r.res.Held = time.Since(r.res.Started) + quiet
		}
	})
	if r.o.Alone {
		if quiet, err = machineQuiet().await(ctx, r.logf); err != nil {
			return roomErr(err)
		}
	}
	return nil
}

// createRecorder makes the run's directory and the Result, and starts the
// history in it. The run's time starts here, once it has its seats.
func (r *runner) createRecorder() error {
	o, s := r.o, r.s
	started := time.Now()
	dir, err := RunDir(filepath.Join(o.Out, s.Name, o.Lock), started)
	if err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	r.res = &Result{Seats: r.seats, Scenario: s.Name, Lock: o.Lock, Backend: o.Backend, SpawnWorkers: o.SpawnWorkers, Story: s.Story, Expected: r.expected, Seed: o.Seed,
		Clients: o.Clients, TTL: o.TTL.String(), TimeLimit: o.TimeLimit.String(), Started: started, Dir: dir, Probe: o.Probe, Params: o.Params,
		Workload: o.Workload, Interval: o.Interval}
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), o.Clients)
	if err != nil {
		return err
	}
	r.rec = rec
	r.onExit(func() { rec.Close() })
	if r.res.Streamed = o.Stream || o.TimeLimit >= StreamAfter; r.res.Streamed {
		rec.Forget()
	}
	return nil
}

// startTopology starts the story's servers (the lock nodes, as plain
// nodes or a Redis Cluster, a replica and Sentinel if the story has them,
// and the store), or takes those a run of the same topology left in the
// pool, and writes what runs to cluster.json. The cluster's Close, on
// exit, stops every node it started, a failed start's included, unless
// the pool keeps them (release).
func (r *runner) startTopology(ctx context.Context) error {
	r.onExit(r.closeCluster)
	if ok, err := r.reuseTopology(ctx); ok || err != nil {
		return errors.Join(err, r.writeTopology())
	}
	o := r.o
	cl, err := cluster.New(cluster.Options{Backend: o.Backend, Server: o.Server, Logf: r.logf})
	if err != nil {
		return err
	}
	r.cl = cl
	r.newEnv()
	if err := r.startLockNodes(ctx); err != nil {
		return err
	}
	if r.s.Topology.Replicated {
		if err := r.startReplica(ctx); err != nil {
			return err
		}
	}
	if err := r.startStore(ctx); err != nil {
		return err
	}
	return r.writeTopology()
}

// newEnv is the story's Env before its servers are named in it.
func (r *runner) newEnv() {
	o := r.o
	r.env = &scenario.Env{TTL: o.TTL, TimeLimit: o.TimeLimit, Lock: o.Lock, Seed: o.Seed, Probe: o.Probe, Params: o.Params,
		Interval: o.Interval}
}

// writeTopology writes what runs to cluster.json.
func (r *runner) writeTopology() error {
	r.res.Nodes = r.cl.Info()
	return writeJSON(filepath.Join(r.res.Dir, "cluster.json"), r.res.Nodes)
}

// startLockNodes starts the lock's nodes, or a Redis Cluster for a story
// told on one, and names them in the Env.
func (r *runner) startLockNodes(ctx context.Context) error {
	t, env := r.s.Topology, r.env
	var lockNodes []cluster.NodeOptions
	if !t.Cluster {
		env.Nodes = lockNodeNames(r.info.Nodes)
	}
	for _, name := range env.Nodes {
		lockNodes = append(lockNodes, cluster.NodeOptions{Name: name, Kind: r.info.Server, Clock: t.Clock, Persistence: t.Persistence,
			Args: t.Args})
	}
	if _, err := r.cl.AddNodes(ctx, lockNodes); err != nil {
		return err
	}
	if !t.Cluster {
		return nil
	}
	var err error
	if env.Cluster, err = r.cl.AddRedisCluster(ctx, cluster.RedisClusterOptions{}); err != nil {
		return err
	}
	for _, n := range env.Cluster.Nodes() {
		env.Nodes = append(env.Nodes, n.Name)
	}
	return nil
}

// startReplica starts a replica of the first lock node, and what follows
// its master through a failover: Sentinel, or a Primary moved by hand.
func (r *runner) startReplica(ctx context.Context) error {
	env := r.env
	env.Replica = cluster.ReplicaName(env.Nodes[0])
	replica, err := r.cl.AddNode(ctx, cluster.NodeOptions{Name: env.Replica, Persistence: r.s.Topology.Persistence})
	if err != nil {
		return err
	}
	master := r.cl.Node(env.Nodes[0])
	if err := replica.ReplicaOf(ctx, master); err != nil {
		return err
	}
	if !r.s.Topology.Sentinel {
		env.Primary = cluster.NewPrimary(master)
		return nil
	}
	// The sentinels are the cluster's nodes: its Close stops them on every
	// exit path, a failed start's included.
	env.Sentinels, err = r.cl.AddSentinels(ctx, cluster.SentinelOptions{Master: master})
	return err
}

// startStore starts the store, the node that holds the register the
// clients' work writes, and the lateness meter's client of it.
func (r *runner) startStore(ctx context.Context) error {
	store, err := r.cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		return err
	}
	r.store = store
	return r.connectMeter(ctx)
}

// connectMeter opens the lateness meter's client of the store.
func (r *runner) connectMeter(ctx context.Context) error {
	store := r.store
	// The lateness meter pings the store straight at its port: no fault
	// touches that path, so a slow answer is the machine's, not a story's.
	lag := cluster.NewClient(store.Addr(), cluster.ClientOptions{Timeout: 5 * time.Second, PoolSize: 1})
	r.lag = lag
	r.onExit(func() { lag.Close() })
	// Connected before the meter starts: the first ping would otherwise
	// time the dial and handshake with the reply, when every client is
	// dialling its nodes too, and read as a slow store.
	if err := lag.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the store does not answer the lateness meter: %w", err)
	}
	return nil
}

// prepareClients names the clients in the Env, with their clocks, and
// readies what opens their processes (processes, one OS process each
// with ClientProcs), the gate whose hooks reach every process's commands,
// and the nemesis. Nothing is opened yet: the schedule is drawn first.
func (r *runner) prepareClients() error {
	o, env := r.o, r.env
	var workerLog io.Writer
	if o.ClientProcs {
		f, err := os.Create(filepath.Join(r.res.Dir, "workers.log"))
		if err != nil {
			return err
		}
		// Through a spool: a worker's write to its stderr (a library's
		// log line, from the thread that renews its lease) never waits
		// on the disk. Closed after the workers are (onExit: latest first).
		w := spool.New(f)
		r.onExit(func() { _ = w.Close(); f.Close() })
		workerLog = w
	}
	r.procs = &processes{env: env, cl: r.cl, store: r.store, info: r.info, workers: o.ClientProcs, worker: o.Worker, workerLog: workerLog, patience: o.WorkerPatience,
		forks: r.info.Forks && r.info.Program != nil && !o.SpawnWorkers,
		lock:  locks.Config{TTL: o.TTL, Wait: r.s.Wait(o.TTL), WaiterTimeout: r.s.WaiterTimeout(o.TTL)},
		// The store's timeout leaves room for the delays K2 puts on its links.
		storeOpts: cluster.ClientOptions{Timeout: max(500*time.Millisecond, 6*o.TTL)}}
	r.onExit(r.procs.close)
	env.Gate = nemesis.NewGate(r.rec)
	env.Nemesis = nemesis.New(r.rec, r.cl)
	r.wo = r.workload()
	r.wo.Final = r.procs.final
	// A story's schedule names the first key: the one key it is told on.
	env.Key = r.wo.Keys[0].Lock
	for i := 0; i < o.Clients; i++ {
		peer := workloads.ProcessName(i)
		env.Clients = append(env.Clients, peer)
		clock := &nemesis.ClientClock{Name: peer}
		env.Clocks = append(env.Clocks, clock)
		r.wo.Clients = append(r.wo.Clients, workloads.Client{Open: r.procs.opener(i, clock), Clock: clock})
	}
	return nil
}

// workload is what the clients do: the user's shape where the options
// set one, else the story's hold and the default think time.
func (r *runner) workload() workloads.Options {
	shape := r.o.Workload
	if shape.Hold.IsZero() && r.s.HoldTTLs > 0 {
		shape.Hold = workloads.FixedDist(r.env.TTLs(r.s.HoldTTLs))
	}
	if shape.Think.IsZero() {
		shape.Think = workloads.DefaultThink
	}
	return workloads.Options{Keys: workloads.KeysOf(shape.Keys), Think: shape.Think, Hold: shape.Hold, Gate: r.env.Gate, Seed: uint64(r.o.Seed),
		FenceReads: shape.FenceReads}
}

// drawSchedule compiles (or draws) the story's nemesis schedule against
// the Env, and keeps a story told as data with the run.
func (r *runner) drawSchedule() error {
	sched, plan, err := r.s.Steps(r.env)
	if err != nil {
		return err
	}
	r.sched, r.plan = sched, plan
	r.res.Schedule = sched.String()
	// A story told as data that is not the catalogue's own (a file's), or
	// whose plan was drawn for this run, is kept with the run: -check
	// judges it by that story, and scenario.json replays the run's
	// schedule (-scenario-file).
	if plan != nil && (r.o.Told != nil || r.s.Draw != nil) {
		told := r.s
		told.Plan, told.Draw = plan, nil
		r.res.Told = &told
		if err := told.Save(filepath.Join(r.res.Dir, "scenario.json")); err != nil {
			return err
		}
	}
	r.logf("%d lock node(s) + store up, %d clients, ttl %s, running %s", r.info.Nodes, r.o.Clients, r.o.TTL, r.o.TimeLimit)
	return nil
}

// openClients opens every client's first process. Every client is up
// before anything that times the story starts (the time limit, the
// lateness meter, the schedule), so a slow start (a worker process per
// client) takes nothing from the story's time. A failed start returns
// the Result with what was recorded by then.
func (r *runner) openClients() (*workloads.Clients, error) {
	clients, err := workloads.Open(r.rec, r.wo)
	if err != nil {
		r.res.Ops = r.rec.Ops()
		r.res.Elapsed = time.Since(r.res.Started).Round(time.Millisecond).String()
		return nil, errors.Join(err, r.env.Gate.Err())
	}
	return clients, nil
}

// play runs the clients and the schedule until the time limit (or ctx)
// ends them, with the lock nodes watched and the lateness meter sampling
// beside them, and then stops every process, so the history is complete.
// It returns the clients' error and the schedule's.
func (r *runner) play(ctx context.Context, clients *workloads.Clients) (werr, nerr error) {
	stop, cancelStop := context.WithCancel(ctx)
	r.onExit(cancelStop)
	r.res.Ready = r.rec.Now()
	observer := r.watchNodes()
	r.onExit(observer.Stop)
	r.onExit(r.endSessions)
	var workers func() []int // read only where clients are OS processes
	if r.o.ClientProcs {
		workers = r.env.Gate.Workers
	}
	meter := lateness.Start(lateness.Options{Now: r.rec.Now, Pings: r.pings(ctx), Workers: workers, Span: r.o.TTL})
	// The schedule's opening is in place before any client moves; a failed
	// opening stops the clients before their first cycle.
	nemErr := make(chan error, 1)
	opening, rest := r.sched.Opening()
	if err := opening.Run(stop); err != nil {
		nemErr <- err
		cancelStop()
	} else {
		// Sampling ends with the clients' work: their shutdown (closing
		// connections, workers exiting) is no part of any verdict.
		end := func() {
			r.ended.CompareAndSwap(0, r.rec.Now())
			meter.Stop()
			cancelStop()
		}
		limit := time.AfterFunc(r.o.TimeLimit, end)
		r.onExit(func() { limit.Stop() })
		hold := r.hold(stop, limit, time.Now())
		go func() {
			err := rest.RunHeld(stop, hold)
			if err == nil && r.endsEarly() {
				r.endWhenOver(stop, func() { limit.Stop(); end() })
			}
			nemErr <- err
		}()
		if r.o.Progress != nil {
			go reportProgress(stop, r.o, r.rec)
		}
	}
	// A worker that breaks the protocol ends the clients' work at once:
	// nothing after it judges a lock.
	abort, cancelAbort := context.WithCancelCause(ctx)
	r.onExit(func() { cancelAbort(nil) })
	if err := r.procs.aborting(cancelAbort); err != nil {
		cancelAbort(err)
	}
	werr = clients.Run(stop, abort)
	cancelStop()
	// An op still under way after the time limit must not start a
	// suspension that moves nothing.
	r.env.Gate.Hold(nil, 0, 0, nil)
	observer.Stop()
	r.res.Lateness = meter.Stop()
	r.endSessions()
	nerr = <-nemErr
	if ended := r.ended.Load(); ended > 0 {
		r.res.Played, r.res.EndedEarly = time.Duration(ended-r.res.Ready), r.early
	}
	r.waited()
	r.procs.close()
	r.release(ctx, errors.Join(werr, nerr))
	return werr, nerr
}

// hold keeps the story's fault until the clients have made the attempts
// its verdict counts before it: the schedule's first step, unless it arms
// a trap, waits for them, and a trap that fits before them is suspended a
// quarter of a TTL at a time (nemesis.Gate.Hold says why not less). Each
// wait moves the later steps and the time limit (limit, started at
// played) as far, so the story keeps its time after the fault. What
// waited is in the log and the Result (Waited): only a loaded machine's
// run waits.
func (r *runner) hold(stop context.Context, limit *time.Timer, played time.Time) nemesis.Hold {
	before := r.s.TrafficOf(r.o.Params).Floor().Before
	if len(r.s.Requires) == 0 || before == 0 {
		return nemesis.Hold{}
	}
	ready := func() bool { return r.rec.Attempts() >= before }
	// Called from the schedule's goroutine and the clients': one at a
	// time, so the latest total is the one the limit keeps, and never
	// once the limit has ended the run. What they moved is logged once
	// play is over (waited).
	var moving sync.Mutex
	move := func() {
		moving.Lock()
		defer moving.Unlock()
		if stop.Err() != nil {
			return
		}
		total := time.Duration(r.stepped.Load() + r.suspended.Load())
		limit.Reset(time.Until(played.Add(r.o.TimeLimit + total)))
	}
	r.env.Gate.Hold(ready, r.o.TTL/4, r.o.TimeLimit, func(d time.Duration) {
		if stop.Err() == nil {
			r.suspended.Add(int64(d))
			move()
		}
	})
	return nemesis.Hold{
		Ready: ready,
		Max:   r.o.TimeLimit,
		Moved: func(d time.Duration) {
			r.stepped.Store(int64(d))
			move()
		},
		Later: func() time.Duration { return time.Duration(r.suspended.Load()) },
	}
}

// waited sets Result.Waited, once play is over, and logs what waited.
func (r *runner) waited() {
	stepped, suspended := time.Duration(r.stepped.Load()), time.Duration(r.suspended.Load())
	before := r.s.TrafficOf(r.o.Params).Floor().Before
	if stepped > 0 {
		r.logf("the schedule waited %s past its first step for %d lock attempts, the story's floor before its fault", stepped.Round(time.Millisecond), before)
	}
	if suspended > 0 {
		r.logf("traps were suspended %s in all before %d lock attempts were made, the story's floor before its fault", suspended, before)
	}
	r.res.Waited = stepped + suspended
}

// endSessions ends the lateness meter's sessions with lock nodes.
func (r *runner) endSessions() {
	for _, end := range r.sessions {
		end()
	}
	r.sessions = nil
}

// pings are the lateness meter's round trips: the store's, straight to
// its port (Reply), and, in a story whose plan touches no lock node's
// process (scenario.Plan.TouchesNodes), each lock node's of a kind other
// than Redis (Server), straight to its port every 100 ms, on a session of
// the harness's own where the kind has one (Kind.Session), else by asking
// Ready. A PostgreSQL, ZooKeeper or etcd that stalls on this machine is
// then seen, and starves the verdicts a stalled server can make (package
// verdict, harnessLate); the store alone would not show it, and the story
// would read as too little traffic. A Redis lock node answers as the store
// does.
func (r *runner) pings(ctx context.Context) []lateness.Ping {
	out := []lateness.Ping{{Do: func(ctx context.Context) error { return r.lag.Ping(ctx).Err() }}}
	if r.plan == nil || r.plan.TouchesNodes() {
		return out
	}
	for _, n := range r.cl.Nodes() {
		kind, addr := n.Kind(), n.Addr()
		switch {
		case n == r.store || kind.RESP || kind.Ready == nil:
		case kind.Session != nil:
			// Opened before the meter starts: a connection's set-up is no
			// reply of the server's.
			octx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ask, end, err := kind.Session(octx, addr)
			cancel()
			if err != nil {
				r.logf("lateness: no session with %s (%v): its replies go unmeasured", n.Name, err)
				continue
			}
			r.sessions = append(r.sessions, end)
			out = append(out, lateness.Ping{Every: 100 * time.Millisecond, Do: ask, Kind: lateness.Server})
		default:
			out = append(out, lateness.Ping{Every: 100 * time.Millisecond, Kind: lateness.Server, Do: func(ctx context.Context) error {
				_, err := kind.Ready(ctx, addr)
				return err
			}})
		}
	}
	return out
}

// watchNodes starts reading what the lock nodes (and the replica) hold,
// beside the clients, straight from each node's own port, until stopped.
func (r *runner) watchNodes() *observe.Observer {
	var watched []*cluster.Node
	for _, name := range r.env.Nodes {
		watched = append(watched, r.cl.Node(name))
	}
	if r.env.Replica != "" {
		watched = append(watched, r.cl.Node(r.env.Replica))
	}
	var keys []string
	for _, k := range r.wo.Keys {
		keys = append(keys, r.info.KeyOnNode(k.Lock))
	}
	return observe.Start(observe.Options{Nodes: watched, Keys: keys, Rec: r.rec})
}

// tally fills in the Result from the finished history and closes it; a
// run that failed, or was cancelled (ErrInterrupted), ends here, with
// what it recorded.
func (r *runner) tally(ctx context.Context, werr, nerr error) error {
	r.res.Ops = r.rec.Ops()
	r.res.Commands = r.env.Gate.Profile()
	r.res.Elapsed = time.Since(r.res.Started).Round(time.Millisecond).String()
	breach := r.procs.breach()
	if errors.Is(werr, worker.ErrMisbehaved) {
		breach = nil // the clients' error says it already
	}
	if err := errors.Join(werr, nerr, r.env.Gate.Err(), breach, r.rec.Close()); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	return nil
}

// judge judges the history by the pair's case: from memory, or, for a
// streamed run, from its file.
func (r *runner) judge() error {
	res := r.res
	res.Recorded, _ = r.rec.Summary()
	r.logf("%d ops recorded; checking", res.Recorded)
	c := judgeCase(r.s, r.info, r.o.TTL, r.expected, r.o.Probe, r.o.Params)
	if res.Streamed {
		return res.judgeFile(c)
	}
	res.Judgement = verdict.Judge(c, res.Ops, res.Ready, res.Lateness)
	return nil
}

// RunDir makes a directory of its own under parent, named by its start
// time: made exclusively, so runs of one pair that start in the same
// millisecond (boundary runs, side by side) each get their own, the
// later ones with a suffix; a shrink's directory is made the same way.
func RunDir(parent string, started time.Time) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	name := started.UTC().Format("20060102T150405.000Z")
	for i := 1; ; i++ {
		dir := filepath.Join(parent, name)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return "", err
		}
		name = fmt.Sprintf("%s-%d", started.UTC().Format("20060102T150405.000Z"), i)
	}
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
