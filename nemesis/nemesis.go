// Package nemesis injects faults into a run and records each of them as ops
// in the same history as the clients', so checkers and timelines can line a
// fault up against what the clients saw. Every fault here happens to real
// Redis processes or real client code: nothing is simulated.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Nemesis acts on one cluster and records what it does in rec.
type Nemesis struct {
	rec *history.Recorder
	cl  *cluster.Cluster
	// delayed holds the links Latency has delayed, keyed by (peer, node):
	// a delay removed from a link that has none is no fault's end, and a
	// history that showed one would pair an end with nothing.
	mu      sync.Mutex
	delayed map[[2]string]bool
	// moves holds the Redis Cluster slot moves under way, by slot: each
	// channel is closed when its move's MigrateEnd returns.
	moves map[int]chan struct{}
}

// New returns a nemesis for cl recording in rec.
func New(rec *history.Recorder, cl *cluster.Cluster) *Nemesis {
	return &Nemesis{rec: rec, cl: cl, delayed: map[[2]string]bool{}, moves: map[int]chan struct{}{}}
}

// record writes one nemesis action as an invoke and its completion: a
// fault that lasts has a start action and an end action (package fault
// says which ends which). An action that failed is recorded as such and
// its error returned.
func record(rec *history.Recorder, f fault.Op, v *history.Value, act func() error) error {
	inv := rec.Invoke(history.NemesisProcess, string(f), "", v)
	var err error
	if act != nil {
		err = act()
	}
	if err != nil {
		rec.Complete(inv, history.Fail, v, err)
		return err
	}
	rec.Complete(inv, history.OK, v, nil)
	return nil
}

// Node is the cluster's node called name, or nil.
func (n *Nemesis) Node(name string) *cluster.Node { return n.cl.Node(name) }

func (n *Nemesis) node(name string) (*cluster.Node, error) {
	nd := n.cl.Node(name)
	if nd == nil {
		return nil, fmt.Errorf("nemesis: no node %q", name)
	}
	return nd, nil
}

// link is peer's link to the node called node.
func (n *Nemesis) link(peer, node string) (*cluster.Link, error) {
	nd, err := n.node(node)
	if err != nil {
		return nil, err
	}
	return nd.Link(peer)
}

// Step is one scripted action, taken At this long after the schedule starts.
type Step struct {
	At time.Duration
	// Name says what the step does, for logs and errors.
	Name string
	Do   func(ctx context.Context) error
	// Arms says the step only arms a trap (Gate.ArmStep): its fault comes
	// when the trap springs, at a client's command or point, so a Hold of
	// the schedule leaves the step at its time.
	Arms bool
}

// Schedule is a fault plan: the same steps at the same offsets on every
// run, so a failure story reproduces every time.
type Schedule []Step

// Run takes each step at its time until ctx ends. A step's error ends the
// schedule and is returned: a fault that could not be injected makes the run
// meaningless, so it must not pass silently. A step that ctx ends midway
// (the time limit, during a slot's hand-over) is not one: see CutShort.
func (s Schedule) Run(ctx context.Context) error {
	return s.RunHeld(ctx, Hold{})
}

// Hold keeps a schedule's first step, unless it arms a trap, until the
// clients have made the traffic its story needs before its fault
// (verdict.Traffic's Before). On a loaded machine clients can be slow to
// make their first attempts; held, the fault still comes after them,
// where a fixed time would leave the run vacuous.
type Hold struct {
	// Ready says the traffic is there (nil: no hold).
	Ready func() bool
	// Max is how long past its own time the first step may wait: a run
	// whose clients never make the traffic then goes on, and reads
	// vacuous.
	Max time.Duration
	// Moved, when set, is told how far the wait has moved the steps so
	// far, as it goes and when it ends (the run's time limit moves with
	// them, so it does not end the run while the step waits).
	Moved func(time.Duration)
	// Later, when set, says how much later than planned every step not
	// yet taken comes for holds elsewhere (a trap's, Gate.Hold); it only
	// grows.
	Later func() time.Duration
}

// pollHold is how often a held step asks Ready.
const pollHold = 5 * time.Millisecond

// RunHeld is Run with its first step held by h. Every later step keeps
// its distance from the first, so the story after the hold is the one
// told; an idle machine, whose clients are ready in time, holds nothing.
func (s Schedule) RunHeld(ctx context.Context, h Hold) error {
	steps := append(Schedule(nil), s...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At < steps[j].At })
	start := time.Now()
	for i, st := range steps {
		if !h.until(ctx, start.Add(st.At)) {
			return nil
		}
		if i == 0 && h.Ready != nil && !st.Arms {
			moved, ok := h.wait(ctx)
			if !ok {
				return nil
			}
			start = start.Add(moved)
		}
		if err := CutShort(ctx, st.Do(ctx)); err != nil {
			return fmt.Errorf("nemesis: %s: %w", st.Name, err)
		}
	}
	return nil
}

// until waits for at, moved by Later as it grows, and says false where
// ctx ended first.
func (h Hold) until(ctx context.Context, at time.Time) bool {
	for {
		var later time.Duration
		if h.Later != nil {
			later = h.Later()
		}
		d := time.Until(at.Add(later))
		if d <= 0 {
			return true
		}
		if h.Later != nil {
			d = min(d, pollLater)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
		}
	}
}

// pollLater is how often a step's wait reads Hold.Later.
const pollLater = 20 * time.Millisecond

// wait holds until Ready or Max and returns how long it held; ok is
// false where ctx ended first.
func (h Hold) wait(ctx context.Context) (held time.Duration, ok bool) {
	if h.Ready() {
		return 0, true
	}
	due := time.Now()
	tick := time.NewTicker(pollHold)
	defer tick.Stop()
	for !h.Ready() && time.Since(due) < h.Max {
		select {
		case <-ctx.Done():
			return time.Since(due), false
		case <-tick.C:
		}
		if h.Moved != nil {
			h.Moved(time.Since(due))
		}
	}
	held = time.Since(due)
	if h.Moved != nil {
		h.Moved(held)
	}
	return held, true
}

// CutShort is err, or nil when err is ctx's own end: an action the run's
// end interrupts failed for no fault of its own. Its history says so (the
// fault completes as failed), and a story that needed it lacks its
// evidence, so the verdict still does not count a story that did not
// happen. An action that failed for a reason of its own, even after ctx
// ended, still fails the run.
func CutShort(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	return err
}

// Untold notes that a fault's own course (what, on node, waited on for
// took) had not run when the run ended: the story did not happen as told,
// and the run's outcome is starved, whatever the checkers found.
func (n *Nemesis) Untold(what, node string, took time.Duration) error {
	return record(n.rec, fault.Starved, &history.Value{Target: fmt.Sprintf("%s, %s after the wait began", what, took.Round(time.Millisecond)),
		Duration: int64(took), Site: &history.Site{Node: node}}, nil)
}

// Opening splits off the steps at offset zero, the story's setting (a
// replication link cut, clients split across nodes), from the rest. A run
// takes the opening before any client moves, so how long a backend takes
// to make the setting (a few ms for a proxy, tens for iptables in a
// container) never lets the clients act in a world the story did not set.
func (s Schedule) Opening() (opening, rest Schedule) {
	for _, st := range s {
		if st.At <= 0 {
			opening = append(opening, st)
		} else {
			rest = append(rest, st)
		}
	}
	return opening, rest
}

// String lists the steps, one per line, for logs and for replaying a seed.
func (s Schedule) String() string {
	var b strings.Builder
	for _, st := range s {
		fmt.Fprintf(&b, "%8s  %s\n", st.At, st.Name)
	}
	return b.String()
}
