package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/lateness"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Result is everything a run found out. It is written to the run
// directory as results.json, beside history.jsonl; Load reads both back.
type Result struct {
	Scenario string              `json:"scenario"`
	Lock     string              `json:"lock"`
	Backend  string              `json:"backend"`
	Story    string              `json:"story"`
	Expected verdict.Expectation `json:"expected"`
	// Judgement is the verdict: its fields are the result's own in
	// results.json.
	verdict.Judgement
	Seed      int64              `json:"seed"`
	Clients   int                `json:"clients"`
	TTL       string             `json:"ttl"`
	TimeLimit string             `json:"time_limit"`
	Started   time.Time          `json:"started"`
	Elapsed   string             `json:"elapsed"`
	Nodes     []cluster.NodeInfo `json:"nodes"`
	// Reused names the run ("scenario/lock") that left these servers,
	// reset, when the run did not start its own (Options.Pool).
	Reused string `json:"reused,omitempty"`
	// Schedule lists the nemesis steps, so a random run can be read and
	// replayed (same seed, same steps).
	Schedule string `json:"schedule,omitempty"`
	// Params are the story's parameters as the run was told with them.
	Params map[string]float64 `json:"params,omitempty"`
	// Workload is the shape of the clients' work where the run was told
	// one (a user's system); Interval the faults of an interval run.
	Workload workloads.Shape    `json:"workload,omitzero"`
	Interval *scenario.Interval `json:"interval,omitempty"`
	// Probe is a boundary run's fault.
	Probe *scenario.Probe `json:"probe,omitempty"`
	// Told is the story the run was told, when it was not a built-in one
	// but a story as data (a scenario file's): -check judges the run by
	// it, whatever the catalogue holds under its name.
	Told *scenario.Scenario `json:"told,omitempty"`
	// Commands are what the clients' ops sent, op kind by op kind, as the
	// gate's hooks saw them: what boundary exploration learns a lock's
	// commands from.
	Commands nemesis.Profile `json:"commands,omitempty"`
	// ServerLogs are the servers' logs the run kept, relative to Dir: a
	// run that did not match its expectation keeps what each server
	// logged while the run had it (engine/serverlogs.go).
	ServerLogs []string `json:"server_logs,omitempty"`
	// CommandLog is the file, relative to Dir, in which a run that did
	// not match keeps when the lock issued each command of its
	// connections and when it was answered (engine/commandlog.go).
	CommandLog string `json:"command_log,omitempty"`
	// Seats are how many of the machine room's seats the run held (every
	// one for a run alone), from Started for Held, until it gave them up.
	Seats int           `json:"seats,omitempty"`
	Held  time.Duration `json:"held_ns,omitempty"`
	// Waited is how long the story's fault waited for the attempts it
	// needs before it: the schedule's first step past its time
	// (nemesis.Hold), and the suspensions of a trap that fitted before
	// them (nemesis.Gate.Hold). The later steps and the time limit moved
	// as far.
	Waited time.Duration `json:"waited_ns,omitempty"`
	// Played is how long the clients worked, from Ready until they were
	// told to stop: the schedule's opening steps, then the time limit
	// (moved as far as Waited), or less where the story was over first
	// and the run ended early (EndedEarly, Options.FullTime).
	Played     time.Duration `json:"played_ns,omitempty"`
	EndedEarly bool          `json:"ended_early,omitempty"`
	// SpawnWorkers is Options.SpawnWorkers: each worker was an interpreter
	// of its own where it could have been a fork. A replay does the same.
	SpawnWorkers bool `json:"spawn_workers,omitempty"`
	// Ready is when every client was up and the schedule began (harness
	// ns): nothing before it is judged for timing.
	Ready int64 `json:"ready"`
	// Dir is the run directory.
	Dir string `json:"dir"`
	// Recorded is how many ops the history holds.
	Recorded int `json:"recorded,omitempty"`
	// Streamed says the run was too long to hold: it was judged from its
	// file as a stream, and Ops holds only the nemesis's ops (its report
	// draws the faults, not the clients' ops).
	Streamed bool `json:"streamed,omitempty"`
	// Ops is the whole history (also in Dir/history.jsonl), or, for a
	// streamed run, the nemesis's ops.
	Ops []history.Op `json:"-"`
}

// OpCount is how many ops the run's history holds, kept in Ops or not.
func (r *Result) OpCount() int {
	if r.Streamed {
		return r.Recorded
	}
	return len(r.Ops)
}

// StreamAfter is the time limit from which a run is judged as a stream:
// an hour at 16 clients records about 17M ops, 3.4 GB held in memory,
// and ten minutes already more than half a gigabyte.
const StreamAfter = 5 * time.Minute

// judgeFile judges the stored history of r by c, read as a stream, and
// keeps the nemesis's ops in r.Ops.
func (r *Result) judgeFile(c verdict.Case) error {
	f, err := history.Open(filepath.Join(r.Dir, "history.jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	r.Judgement, r.Ops, err = verdict.JudgeStream(c, func(fn func(history.Op)) error { return history.Each(f, fn) }, r.Ready, r.Lateness)
	return err
}

// Load reads back the run stored in dir: its results.json and its
// history.
func Load(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	r.Dir = dir
	if r.Streamed {
		// Judged again as it was judged: Rejudge reads the file.
		return &r, nil
	}
	if r.Ops, err = history.LoadFile(filepath.Join(dir, "history.jsonl")); err != nil {
		return nil, err
	}
	return &r, nil
}

// Save writes results.json into the run directory: what Load reads back,
// and, for a run that was interrupted and never judged, what puts it in
// results/index.html.
func (r *Result) Save() error {
	if err := writeJSON(filepath.Join(r.Dir, "results.json"), r); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// Rejudge judges a stored run again, with today's checkers, from its
// history, its lateness meter's samples (Lateness) and the case its
// built-in scenario and registered lock give: a run judged twice with the
// same code gets the same verdict. A run of a story or lock of a user's own cannot be
// rejudged this way (their definitions are not stored).
func Rejudge(r *Result) error {
	s, err := scenario.Lookup(r.Scenario)
	if r.Told != nil {
		if err := r.Told.Check(); err != nil {
			return fmt.Errorf("%s: the story it was told: %w", r.Dir, err)
		}
		s, err = r.Told.WithDefaults(), nil
	}
	if err != nil {
		return err
	}
	info, err := locks.Lookup(r.Lock)
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(r.TTL)
	if err != nil {
		return fmt.Errorf("%s: ttl %q: %w", r.Dir, r.TTL, err)
	}
	if r.Probe != nil {
		if err := r.Probe.Check(); err != nil {
			return fmt.Errorf("%s: %w", r.Dir, err)
		}
	}
	// A story's evidence is read from the sites its faults recorded; a
	// history from before sites would read as vacuous, which it was not.
	for _, op := range r.Ops {
		if op.Process == history.NemesisProcess && op.Value != nil && op.Value.Site == nil {
			return fmt.Errorf("%s: its history records no fault sites (an older run): it cannot be judged again", r.Dir)
		}
	}
	info = toldOn(s, info, r.Params)
	c := judgeCase(s, info, ttl, r.Expected, r.Probe, r.Params)
	if r.Streamed {
		return r.judgeFile(c)
	}
	r.Judgement = verdict.Judge(c, r.Ops, r.Ready, r.Lateness)
	return nil
}

// judgeCase is what a run of s with the lock info at ttl and params is
// judged by; a boundary run's probe (its fault, Options.Probe) must have
// happened too.
func judgeCase(s scenario.Scenario, info locks.Info, ttl time.Duration, expected verdict.Expectation, probe *scenario.Probe, params map[string]float64) verdict.Case {
	c := verdict.Case{Expected: expected, Checkers: Checkers(s, info, ttl), Requires: s.Requires, Traffic: s.TrafficOf(params),
		Limits: lateness.LimitsFor(ttl)}
	if probe != nil {
		c.Requires = append(slices.Clone(c.Requires), probe.Evidence())
	}
	if info.NodeTimeout {
		c.Limits.Reply = min(c.Limits.Reply, locks.DefaultNodeTimeout(ttl))
	}
	if s.Exploration {
		c.Claims = &info
	}
	return c
}

// Allowance is the longest a correct lock may keep a key from everyone
// after a fault: a dead client's lease runs out within a TTL, and the next
// try comes within a retry; a dead fair-lock waiter holds the queue for up
// to its waiter timeout on top. The liveness and ghost checkers judge by
// it, and a run ends early only once it has passed (over.go).
func Allowance(s scenario.Scenario, info locks.Info, ttl time.Duration) time.Duration {
	allowance := 2*ttl + 250*time.Millisecond
	if info.Queued {
		allowance += s.WaiterTimeout(ttl)
	}
	return allowance
}

// Checkers is the set of checkers a (scenario, lock) pair is judged by.
func Checkers(s scenario.Scenario, info locks.Info, ttl time.Duration) []checker.Checker {
	sem := checker.Mutex
	switch {
	case info.Fenced:
		sem = checker.Fenced
	case info.Reentrant:
		sem = checker.Reentrant
	}
	allowance := Allowance(s, info, ttl)
	cs := []checker.Checker{
		checker.Intervals{},
		checker.Linearizable{Semantics: sem, Timeout: time.Minute},
		checker.Promise{},
		checker.Resource{},
		checker.Liveness{Allowance: allowance},
		// A ghost is counted past a tenth of the lease (well past a reply's
		// round trip) and blocks others only past the liveness allowance;
		// a RedLock client is blocked once the nodes left free are fewer
		// than its majority.
		checker.GhostHolds{Bound: max(50*time.Millisecond, ttl/10), Allowance: allowance, Quorum: info.Nodes - info.Nodes/2},
		checker.StolenKeys{},
	}
	if s.Fairness {
		cs = append(cs, checker.Fairness{Margin: 20 * time.Millisecond})
	}
	return cs
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// SeatSeconds is what the run held of the machine's room: a second of one
// seat each, every seat for a run alone (0 for a run that never had its
// seats).
func (r *Result) SeatSeconds() float64 {
	if r == nil {
		return 0
	}
	return float64(r.Seats) * r.Held.Seconds()
}
