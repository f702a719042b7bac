// Package explore tries every place a lock's client can be caught, one at a
// time, where random exploration draws a few by luck. A fault-free warm-up
// learns, from the gate's hooks, which commands each kind of op sends (an
// acquire, a release, a watchdog's renewal between them, and their
// retries); then one short run per command boundary (before a command is
// sent, after its reply) pauses the first client to reach it past its
// lease, and another crashes it there. Each run is judged as random runs
// are, against the lock's own fault model, so a finding is a promise the
// lock broke under a fault it claims to survive, at a boundary a person
// can replay with -probe.
package explore

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// Options tunes an exploration of one lock.
type Options struct {
	// Run is what every run starts from: Lock (and Custom for a lock of
	// a user's own), Out, TTL, Clients, Backend, ClientProcs. Scenario and
	// Probe are set per run.
	Run engine.Options
	// Parallel is how many runs go at once (0: the machine's seats).
	Parallel int
	// Share is the least share of its op kind's ops a command is sent in
	// to be explored (0: DefaultShare).
	Share float64
	// Ops limits exploration to these op kinds (history.Acquire,
	// history.Release, nemesis.Renewal; empty: every one).
	Ops []string
	// Faults limits the probes to pauses or crashes ("pause", "crash";
	// empty: both).
	Faults []string
	// Logf, when set, hears of each run as it ends; calls never overlap.
	Logf func(format string, args ...any)
}

// DefaultShare keeps the commands an op sends at least once in twenty
// times: its usual path and its retries, without the rare ones a short
// boundary run may never reach.
const DefaultShare = 0.05

// OpKinds are the kinds of op explored, in the order a lock's life has
// them.
var OpKinds = []string{history.Acquire, history.Release, nemesis.Renewal}

// Coverage is what an exploration tried and found.
type Coverage struct {
	Lock    string    `json:"lock"`
	Started time.Time `json:"started"`
	// WarmUp is the warm-up run's directory.
	WarmUp string `json:"warm_up"`
	// Kinds are the op kinds, in OpKinds' order.
	Kinds []Kind `json:"kinds"`
	// Dir is where coverage.json and coverage.txt are.
	Dir string `json:"dir"`
	// Flags are the flags the runs were made with beyond the stories'
	// defaults, for a replay to repeat.
	Flags string `json:"flags,omitempty"`
	// Custom says the lock is a user's own (engine.Options.Custom), which
	// cmd/run cannot name: a finding is replayed from the user's test
	// (locktest.Replay), not with a command line.
	Custom bool `json:"custom,omitempty"`
	// SeatSeconds are what the warm-up and the boundary runs held of the
	// machine's room: a second of one seat each, every seat for a run
	// alone (see RunOne).
	SeatSeconds float64 `json:"seat_seconds,omitempty"`
	// Starved are the directories of first tries that starved, each
	// followed by a try alone (RunOne), kept as evidence of the load.
	Starved []string `json:"starved,omitempty"`
}

// Kind is one op kind's share of an exploration.
type Kind struct {
	Op string `json:"op"`
	// Ops is how many ops of the kind the warm-up saw send a command.
	Ops int `json:"ops"`
	// Commands are the commands explored, in the order they are sent.
	Commands []string `json:"commands"`
	// Runs are its boundary runs, a pause and a crash per boundary.
	Runs []Run `json:"runs"`
}

// Run is one boundary run.
type Run struct {
	Probe scenario.Probe `json:"probe"`
	Dir   string         `json:"dir,omitempty"`
	// Reached says the probe's client got to the boundary: a run that
	// never did is no evidence of anything.
	Reached   bool            `json:"reached"`
	Outcome   verdict.Outcome `json:"outcome"`
	Finding   string          `json:"finding,omitempty"`
	Explained string          `json:"explained,omitempty"`
	Err       string          `json:"error,omitempty"`
}

// Findings are the runs of every kind that found a broken promise.
func (c *Coverage) Findings() []Run {
	var out []Run
	for _, k := range c.Kinds {
		for _, r := range k.Runs {
			if r.Finding != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// Failed are the runs that could not be carried out or judged.
func (c *Coverage) Failed() []Run {
	var out []Run
	for _, k := range c.Kinds {
		for _, r := range k.Runs {
			if r.Err != "" || r.Reached && !r.Outcome.Judged() {
				out = append(out, r)
			}
		}
	}
	return out
}

// Boundaries runs the warm-up and every boundary run of o.Run.Lock, and
// writes coverage.json and coverage.txt under Out/boundaries/<lock>/<time>.
// The runs' own directories are under Out/boundary/<lock>, as any run's.
//
// A lock of the user's own (Run.Custom) is judged by what the stories'
// rules say of it (engine.Resolve), so it needs no Run.Expect. Bad options are
// refused in one line before the warm-up starts (Check).
func Boundaries(ctx context.Context, o Options) (*Coverage, error) {
	if err := Check(o); err != nil {
		return nil, err
	}
	if o.Share == 0 {
		o.Share = DefaultShare
	}
	if o.Parallel == 0 {
		o.Parallel = engine.Seats()
	}
	logf := engine.Serialized(o.Logf)
	cov := &Coverage{Lock: o.Run.Lock, Started: time.Now(), Flags: flags(o.Run), Custom: o.Run.Custom != nil}
	w := o.Run
	w.Scenario, w.Probe = "warm-up", nil
	warm, cost, err := RunOne(ctx, w, logf)
	cov.count(cost)
	if err == nil {
		err = report.Write(warm)
	}
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	cov.WarmUp = warm.Dir
	if !warm.Matched {
		return nil, fmt.Errorf("warm-up of %s came out %s, not a fault-free run: %s", o.Run.Lock, warm.Outcome, warm.Dir)
	}
	type job struct{ kind, run int }
	var jobs []job
	for _, op := range OpKinds {
		if len(o.Ops) > 0 && !slices.Contains(o.Ops, op) {
			continue
		}
		k := Kind{Op: op}
		if oc := warm.Commands[op]; oc != nil {
			k.Ops = oc.Ops
		}
		for _, b := range warm.Commands.Commands(op, o.Share) {
			k.Commands = append(k.Commands, fmt.Sprintf("%s#%d", b.Command, b.Nth))
			for _, reply := range []bool{false, true} {
				at := b
				at.Reply = reply
				for _, crash := range []bool{false, true} {
					if f := map[bool]string{false: "pause", true: "crash"}[crash]; len(o.Faults) > 0 && !slices.Contains(o.Faults, f) {
						continue
					}
					jobs = append(jobs, job{len(cov.Kinds), len(k.Runs)})
					k.Runs = append(k.Runs, Run{Probe: scenario.Probe{At: at, Crash: crash}})
				}
			}
		}
		cov.Kinds = append(cov.Kinds, k)
	}
	costs := make([]Cost, len(jobs))
	engine.Spread(ctx, o.Parallel, len(jobs), func(i int) {
		j := jobs[i]
		r := &cov.Kinds[j.kind].Runs[j.run]
		ro := o.Run
		ro.Scenario, ro.Probe = "boundary", &r.Probe
		res, cost, err := RunOne(ctx, ro, logf)
		costs[i] = cost
		if err == nil {
			err = report.Write(res)
		}
		r.record(res, err)
		logf("%s %s: %s", o.Run.Lock, r.Probe, r.Line())
	})
	for _, c := range costs {
		cov.count(c)
	}
	if err := ctx.Err(); err != nil {
		return cov, err
	}
	cov.Dir = filepath.Join(o.Run.Out, "boundaries", o.Run.Lock, cov.Started.UTC().Format("20060102T150405.000Z"))
	return cov, cov.write()
}

// count adds what a run cost to the coverage's.
func (c *Coverage) count(cost Cost) {
	c.SeatSeconds += cost.SeatSeconds
	if cost.Starved != "" {
		c.Starved = append(c.Starved, cost.Starved)
	}
}

// record keeps what a run showed.
func (r *Run) record(res *engine.Result, err error) {
	if res != nil {
		r.Dir = res.Dir
		r.Reached = r.Probe.Evidence().First(res.Ops) != nil
		r.Outcome, r.Finding, r.Explained = res.Outcome, res.Finding, res.Explained
	}
	if err != nil {
		r.Err = err.Error()
	}
}

// Line is a run's result in a few words.
func (r Run) Line() string {
	switch {
	case r.Err != "":
		return "error: " + r.Err
	case !r.Reached:
		return "not reached"
	case r.Finding != "":
		return "FINDING: " + r.Finding
	case r.Explained != "":
		return string(r.Outcome) + ", expected: " + r.Explained
	}
	return string(r.Outcome)
}

// Summary is the kind's coverage in one line: "release: 2 command(s)
// (GET#1, DEL#1), 4 boundaries, 4 tried, 4 reached; 1 finding(s): pause
// release before DEL#1".
func (k Kind) Summary() string {
	if len(k.Commands) == 0 {
		return fmt.Sprintf("%s: no command seen in the warm-up", k.Op)
	}
	boundaries := 2 * len(k.Commands)
	tried, reached := map[string]bool{}, map[string]bool{}
	var found []string
	for _, r := range k.Runs {
		at := r.Probe.At
		at.In = ""
		key := strings.TrimSpace(at.String())
		tried[key] = true
		if r.Reached {
			reached[key] = true
		}
		if r.Finding != "" {
			found = append(found, short(r.Probe.String()))
		}
	}
	line := fmt.Sprintf("%s: %d command(s) (%s), %d boundaries, %d tried, %d reached", k.Op, len(k.Commands),
		short(strings.Join(k.Commands, ", ")), boundaries, len(tried), len(reached))
	if len(found) == 0 {
		return line + "; no finding"
	}
	return fmt.Sprintf("%s; %d finding(s): %s", line, len(found), strings.Join(found, "; "))
}

// Text writes the coverage as a person reads it: a line per op kind, then
// a line per run.
func (c *Coverage) Text(w io.Writer) {
	fmt.Fprintf(w, "%s: boundaries explored (warm-up %s)\n", c.Lock, c.WarmUp)
	for _, k := range c.Kinds {
		fmt.Fprintf(w, "  %s\n", k.Summary())
	}
	for _, k := range c.Kinds {
		for _, r := range k.Runs {
			fmt.Fprintf(w, "    %-42s %s\n", short(r.Probe.String()), r.Line())
			switch {
			case r.Finding != "" && c.Custom:
				fmt.Fprintf(w, "    %-42s replay: locktest.Replay(ctx, lock, locktest.ExploredRun{Scenario: \"boundary\", Probe: %q}, options) (%s)\n", "", r.Probe.String(), r.Dir)
			case r.Finding != "":
				fmt.Fprintf(w, "    %-42s replay: go run ./cmd/run -scenario boundary -lock %s%s -probe %q (%s)\n", "", c.Lock, c.Flags, r.Probe.String(), r.Dir)
			}
		}
	}
}

// flags are the options of o that cmd/run takes as flags and a story
// would otherwise fill in, as flags.
func flags(o engine.Options) string {
	var b strings.Builder
	if o.Clients > 0 {
		fmt.Fprintf(&b, " -clients %d", o.Clients)
	}
	if o.TTL > 0 {
		fmt.Fprintf(&b, " -ttl %s", o.TTL)
	}
	if o.TimeLimit > 0 {
		fmt.Fprintf(&b, " -time-limit %s", o.TimeLimit)
	}
	if o.Backend != "" && o.Backend != "local" {
		fmt.Fprintf(&b, " -backend %s", o.Backend)
	}
	if o.ClientProcs {
		b.WriteString(" -client-procs")
	}
	return b.String()
}

// short shortens the scripts' digests in s to 8 digits, for reading; a
// probe to replay names the whole digest.
func short(s string) string {
	f := strings.Fields(s)
	for i, w := range f {
		if len(w) >= 40 && strings.Trim(w[:40], "0123456789abcdef") == "" {
			f[i] = w[:8] + "…" + w[40:]
		}
	}
	return strings.Join(f, " ")
}

func (c *Coverage) write() error {
	return report.WriteTextAndJSON(c.Dir, "coverage.txt", c.Text, "coverage.json", c)
}
