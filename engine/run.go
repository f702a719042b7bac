package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/observe"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Run runs one (scenario, lock) pair. It streams the history to disk as it
// goes; on every exit path (error, cancel, panic) it stops every process it
// started. ctx cancellation returns the partial Result with ErrInterrupted.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	p, err := Resolve(o)
	if err != nil {
		return nil, err
	}
	o, s, info, expected := p.Options, p.Scenario, p.Lock, p.Expected
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s/%s: "+format+"\n", append([]any{s.Name, o.Lock}, a...)...)
		}
	}
	leave, err := machineRoom().enter(ctx, p.Alone(), logf)
	if err != nil {
		return nil, err
	}
	defer leave()
	started := time.Now()
	dir, err := RunDir(filepath.Join(o.Out, s.Name, o.Lock), started)
	if err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	res = &Result{Scenario: s.Name, Lock: o.Lock, Backend: o.Backend, Story: s.Story, Expected: expected, Seed: o.Seed,
		Clients: o.Clients, TTL: o.TTL.String(), TimeLimit: o.TimeLimit.String(), Started: started, Dir: dir, Probe: o.Probe, Params: o.Params}
	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), o.Clients)
	if err != nil {
		return res, err
	}
	defer rec.Close()
	if res.Streamed = o.Stream || o.TimeLimit >= StreamAfter; res.Streamed {
		rec.Forget()
	}

	cl, err := cluster.New(cluster.Options{Backend: o.Backend, Server: o.Server, Logf: logf})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	env := &scenario.Env{TTL: o.TTL, TimeLimit: o.TimeLimit, Lock: o.Lock, Seed: o.Seed, Key: "lock", Probe: o.Probe, Params: o.Params}
	var lockNodes []cluster.NodeOptions
	for i := 1; i <= info.Nodes && !s.Topology.Cluster; i++ {
		name := fmt.Sprintf("n%d", i)
		lockNodes = append(lockNodes, cluster.NodeOptions{Name: name, Kind: info.Server, Clock: s.Topology.Clock, Persistence: s.Topology.Persistence,
			Args: s.Topology.Args})
		env.Nodes = append(env.Nodes, name)
	}
	if _, err := cl.AddNodes(ctx, lockNodes); err != nil {
		return res, err
	}
	if s.Topology.Cluster {
		if env.Cluster, err = cl.AddRedisCluster(ctx, cluster.RedisClusterOptions{}); err != nil {
			return res, err
		}
		for _, n := range env.Cluster.Nodes() {
			env.Nodes = append(env.Nodes, n.Name)
		}
	}
	if s.Topology.Replicated {
		env.Replica = cluster.ReplicaName(env.Nodes[0])
		r, err := cl.AddNode(ctx, cluster.NodeOptions{Name: env.Replica, Persistence: s.Topology.Persistence})
		if err != nil {
			return res, err
		}
		master := cl.Node(env.Nodes[0])
		if err := r.ReplicaOf(ctx, master); err != nil {
			return res, err
		}
		if s.Topology.Sentinel {
			// The sentinels are the cluster's nodes: its Close stops them
			// on every exit path, a failed start's included.
			if env.Sentinels, err = cl.AddSentinels(ctx, cluster.SentinelOptions{Master: master}); err != nil {
				return res, err
			}
		} else {
			env.Primary = cluster.NewPrimary(master)
		}
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
		lock: locks.Config{TTL: o.TTL, WaiterTimeout: s.WaiterTimeout(o.TTL)},
		// The store's timeout leaves room for the delays K2 puts on its links.
		storeOpts: cluster.ClientOptions{Timeout: max(500*time.Millisecond, 6*o.TTL)}}
	defer procs.close()
	env.Gate = nemesis.NewGate(rec)
	env.Nemesis = nemesis.New(rec, cl)
	wo := workloads.Options{Key: env.Key, Register: "register", Think: 2 * time.Millisecond, Gate: env.Gate,
		Hold: env.TTLs(s.HoldTTLs)}
	for i := 0; i < o.Clients; i++ {
		peer := workloads.ProcessName(i)
		env.Clients = append(env.Clients, peer)
		clock := &nemesis.ClientClock{Name: peer}
		env.Clocks = append(env.Clocks, clock)
		wo.Clients = append(wo.Clients, workloads.Client{Open: procs.opener(i, clock), Clock: clock})
	}
	sched, plan, err := s.Steps(env)
	if err != nil {
		return res, err
	}
	res.Schedule = sched.String()
	// A story told as data that is not the catalogue's own (a file's), or
	// whose plan was drawn for this run, is kept with the run: -check
	// judges it by that story, and scenario.json replays the run's
	// schedule (-scenario-file).
	if plan != nil && (o.Story != nil || s.Draw != nil) {
		told := s
		told.Plan, told.Draw = plan, nil
		res.Told = &told
		if err := told.Save(filepath.Join(dir, "scenario.json")); err != nil {
			return res, err
		}
	}
	logf("%d lock node(s) + store up, %d clients, ttl %s, running %s", info.Nodes, o.Clients, o.TTL, o.TimeLimit)

	// Every client is up before anything that times the story starts (the
	// time limit, the probe, the schedule), so a slow start (a worker
	// process per client) takes nothing from the story's time.
	clients, err := workloads.Open(rec, wo)
	if err != nil {
		res.Ops = rec.Ops()
		res.Elapsed = time.Since(started).Round(time.Millisecond).String()
		return res, errors.Join(err, env.Gate.Err())
	}
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	res.Ready = rec.Now()
	// What the lock nodes hold is read beside the clients, straight from
	// each node's own port, until the clients stop.
	var watched []*cluster.Node
	for _, name := range env.Nodes {
		watched = append(watched, cl.Node(name))
	}
	if env.Replica != "" {
		watched = append(watched, cl.Node(env.Replica))
	}
	observer := observe.Start(observe.Options{Nodes: watched, Key: wo.Key, Rec: rec})
	defer observer.Stop()
	probe := lateness.Start(lateness.Options{Now: rec.Now,
		Ping: func(ctx context.Context) error { return probeClient.Ping(ctx).Err() }})
	// The schedule's opening is in place before any client moves; a failed
	// opening stops the clients before their first cycle.
	nemErr := make(chan error, 1)
	opening, rest := sched.Opening()
	if err := opening.Run(stop); err != nil {
		nemErr <- err
		cancelStop()
	} else {
		// Sampling ends with the clients' work: their shutdown (closing
		// connections, workers exiting) is no part of any verdict.
		time.AfterFunc(o.TimeLimit, func() { probe.Stop(); cancelStop() })
		go func() { nemErr <- rest.Run(stop) }()
		if o.Progress != nil {
			go reportProgress(stop, o, rec)
		}
	}
	werr := clients.Run(stop, ctx)
	cancelStop()
	observer.Stop()
	res.Lateness = probe.Stop()
	nerr := <-nemErr
	procs.close()
	cl.Close()
	res.Ops = rec.Ops()
	res.Commands = env.Gate.Profile()
	res.Elapsed = time.Since(started).Round(time.Millisecond).String()
	if err := errors.Join(werr, nerr, env.Gate.Err(), rec.Close()); err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	res.Recorded, _ = rec.Summary()
	logf("%d ops recorded; checking", res.Recorded)
	c := judgeCase(s, info, o.TTL, expected, o.Probe, o.Params)
	if res.Streamed {
		return res, res.judgeFile(c)
	}
	res.Judgement = verdict.Judge(c, res.Ops, res.Ready, res.Lateness)
	return res, nil
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
