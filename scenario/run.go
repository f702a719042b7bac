package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
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
	// Server is the redis-server binary (empty: from PATH).
	Server string
	// Log receives a few progress lines (nil: silent).
	Log io.Writer
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
	if err != nil {
		return o, s, &UsageError{msg: err.Error()}
	}
	if _, err := locks.Lookup(o.Lock); err != nil {
		return o, s, &UsageError{msg: err.Error()}
	}
	if _, ok := s.Expect[o.Lock]; !ok {
		return o, s, usagef("scenario %s has no expectation for lock %s (it applies to: %s)", s.Name, o.Lock, strings.Join(s.Locks(), ", "))
	}
	if o.Clients == 0 {
		o.Clients = s.Clients
	}
	if o.TTL == 0 {
		o.TTL = s.TTL
	}
	if o.TimeLimit == 0 {
		o.TimeLimit = s.TimeLimit
	}
	if o.Out == "" {
		o.Out = "results"
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
	// Dir is the run directory.
	Dir string `json:"dir"`
	// Ops is the whole history (also in Dir/history.jsonl).
	Ops []history.Op `json:"-"`
	// Linearization is porcupine's info, for the HTML timeline.
	Linearization porcupine.LinearizationInfo `json:"-"`
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
	info, _ := locks.Lookup(o.Lock)
	started := time.Now()
	dir := filepath.Join(o.Out, s.Name, o.Lock, started.UTC().Format("20060102T150405.000Z"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	res = &Result{Scenario: s.Name, Lock: o.Lock, Story: s.Story, Expected: s.Expect[o.Lock], Seed: o.Seed,
		Clients: o.Clients, TTL: o.TTL.String(), TimeLimit: o.TimeLimit.String(), Started: started, Dir: dir}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s/%s: "+format+"\n", append([]any{s.Name, o.Lock}, a...)...)
		}
	}

	rec, err := history.Create(filepath.Join(dir, "history.jsonl"), o.Clients)
	if err != nil {
		return res, err
	}
	defer rec.Close()

	cl, err := cluster.New(cluster.Options{Server: o.Server})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	for i := 1; i <= info.Nodes; i++ {
		if _, err := cl.AddNode(ctx, cluster.NodeOptions{Name: fmt.Sprintf("n%d", i)}); err != nil {
			return res, err
		}
	}
	store, err := cl.AddNode(ctx, cluster.NodeOptions{Name: "store"})
	if err != nil {
		return res, err
	}
	res.Nodes = cl.Info()
	if err := writeJSON(filepath.Join(dir, "cluster.json"), res.Nodes); err != nil {
		return res, err
	}

	var conns []*redis.Client
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(n *cluster.Node, peer string) (*redis.Client, error) {
		l, err := n.Link(peer)
		if err != nil {
			return nil, err
		}
		c := cluster.NewClient(l.Addr(), cluster.ClientOptions{})
		conns = append(conns, c)
		return c, nil
	}
	gate := nemesis.NewGate(rec)
	wo := workloads.Options{Key: "lock", Register: "register", Think: 2 * time.Millisecond, Gate: gate}
	for i := 0; i < o.Clients; i++ {
		peer := workloads.ProcessName(i)
		var nodeClients []*redis.Client
		for _, n := range cl.Nodes() {
			if n == store {
				continue
			}
			c, err := dial(n, peer)
			if err != nil {
				return res, err
			}
			nodeClients = append(nodeClients, c)
		}
		sc, err := dial(store, peer)
		if err != nil {
			return res, err
		}
		clock := &nemesis.ClientClock{Name: peer}
		newLock := func(process int) (locks.Lock, error) {
			point := func(ctx context.Context, name string) error { return gate.At(ctx, i, process, name) }
			return locks.New(o.Lock, locks.Config{Clients: nodeClients, TTL: o.TTL, Clock: clock,
				Owner: fmt.Sprintf("%s:%d", peer, process), Point: point})
		}
		wo.Clients = append(wo.Clients, workloads.Client{NewLock: newLock, Store: workloads.NewStore(sc), Clock: clock})
	}
	logf("%d lock node(s) + store up, %d clients, ttl %s, running %s", info.Nodes, o.Clients, o.TTL, o.TimeLimit)

	stop, cancelStop := context.WithTimeout(ctx, o.TimeLimit)
	defer cancelStop()
	nemErr := make(chan error, 1)
	go func() { nemErr <- s.Schedule(Env{TTL: o.TTL, Gate: gate}).Run(stop) }()
	werr := workloads.Register(stop, ctx, rec, wo)
	cancelStop()
	nerr := <-nemErr
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	cl.Close()
	res.Ops = rec.Ops()
	res.Elapsed = time.Since(started).Round(time.Millisecond).String()
	if err := errors.Join(werr, nerr, rec.Close()); err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	logf("%d ops recorded; checking", len(res.Ops))
	res.judge()
	return res, nil
}

// judge runs the checkers and compares the outcome with the expectation.
func (r *Result) judge() {
	lv, info := checker.Linearizable{Timeout: time.Minute}.CheckInfo(r.Ops)
	r.Linearization = info
	r.Verdicts = []checker.Verdict{checker.Intervals{}.Check(r.Ops), lv, checker.Resource{}.Check(r.Ops)}
	r.Outcome = Outcome(r.Verdicts)
	r.Matched = r.Outcome == r.Expected.Outcome
	if r.Expected.StaleWriteRejected {
		v, _ := r.Verdict("resource")
		if n, _ := v.Details["stale_writes_rejected"].(int); n == 0 {
			r.Matched = false
		}
	}
}

// Outcome sums verdicts up in the words expectations use.
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
	case valid["intervals"] == checker.Invalid || valid["linearizable"] == checker.Invalid:
		return LockUnsafe
	}
	return Safe
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
