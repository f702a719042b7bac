package lateness

import (
	"fmt"
	"strings"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

// Fraction is the share of the TTL the harness may run late before a
// verdict that rests on timing stops being evidence. A story's schedule
// keeps its margins at a tenth of a TTL or more (a pause ends that far
// inside a lease, a skew is ten TTLs), so lateness of a fifth of a TTL can
// turn a story's intended order of events into another one.
const Fraction = 0.2

// PauseFraction is the share of the TTL a pause or stall may overrun its
// planned end: a story ends a pause that must not outlive a lease a tenth
// of a TTL inside it, so an overrun of more may carry it past the lease.
const PauseFraction = 0.1

// ServerFraction is the share of the TTL a lock's own server (not Redis)
// may take to answer: the bound the service locks here put on one request
// of theirs (half the TTL), past which a client's op ends unknown and a
// story read through it becomes another. A slower answer under that only
// slows the traffic, which the stories' traffic rules measure.
const ServerFraction = 0.5

// FaultFraction is the share of the TTL a fault's own work may take: a
// restart costs tens of milliseconds on an idle machine (a new process, its
// start-up, our readiness poll), and a story that must fit a restart and a
// client's turn inside one lease has no room left past half of it.
const FaultFraction = 0.5

// WallLimit is how far the machine's wall clock may move against its
// monotonic clock in a run before the run is starved, whatever its TTL: a
// lock's promise and its server's expiry are a request's one-way trip
// apart (under a millisecond here), and the promise checker allows no
// slack, so a wall clock stepped a millisecond forward within a lease
// reads as a broken promise. A machine whose clock nobody sets keeps the
// two together.
const WallLimit = 100 * time.Microsecond

// Limits is how late each kind may run before a run is starved.
type Limits struct {
	Timer time.Duration `json:"timer"`
	Reply time.Duration `json:"reply"`
	// Server is zero in a run stored before it was measured: no Server
	// sample is there to judge.
	Server time.Duration `json:"server,omitempty"`
	Pause  time.Duration `json:"pause"`
	Fault  time.Duration `json:"fault"`
	// Wall is zero in a run stored before it was measured.
	Wall time.Duration `json:"wall,omitempty"`
}

// LimitsFor is the limits of a run at ttl: Fraction of it for timers and
// replies, ServerFraction for a lock's own server, PauseFraction for a pause's overrun, FaultFraction for a
// restart. A lock that bounds its own replies more tightly lowers Reply to
// that bound.
func LimitsFor(ttl time.Duration) Limits {
	share := func(f float64) time.Duration { return time.Duration(f * float64(ttl)) }
	return Limits{Timer: share(Fraction), Reply: share(Fraction), Server: share(ServerFraction), Pause: share(PauseFraction), Fault: share(FaultFraction),
		Wall: WallLimit}
}

// Of is the limit of kind k.
func (l Limits) Of(k Kind) time.Duration {
	switch k {
	case Timer:
		return l.Timer
	case Reply:
		return l.Reply
	case Server:
		return l.Server
	case Pause:
		return l.Pause
	case Wall:
		return l.Wall
	}
	return l.Fault
}

// Faults reads the faults' overruns out of a history: how long after its
// planned end a pause or a stall was resumed (Pause), and how long a fault
// that does work of its own took (Fault): a restart from its invoke to the
// node answering as itself (or failing), less the delay the schedule asked
// for and the kind's usual rejoin; a save from its BGSAVE to its end; an
// eviction from its fill's start to its deletes' end, less its usual. Such
// a fault that had not ended when the history did (end, its last op's time) overran by
// at least its time to then: a save still running when the time limit came
// left its story untold, and the run is starved rather than vacuous. A
// fault that began before from (the clients' start) is left out: nothing
// was judged then.
func Faults(ops []history.Op, from, end int64) []Sample {
	var out []Sample
	working := map[string]history.Op{}
	paused := map[string]history.Op{}
	took := func(inv history.Op, at int64) {
		if inv.Time >= from {
			out = append(out, Sample{At: inv.Time, Kind: Fault, Late: max(0, at-inv.Time-inv.Value.Duration-inv.Value.Usual),
				What: inv.F + " of " + inv.Value.Target})
		}
	}
	for _, op := range ops {
		if op.Process != history.NemesisProcess || op.Value == nil {
			continue
		}
		// Starts and ends pair at their place, as the report pairs them.
		place := fault.Place(op)
		if works(fault.Op(op.F)) {
			if op.Type == history.Invoke {
				working[place] = op
			} else if inv, ok := working[place]; ok {
				took(inv, op.Time)
				delete(working, place)
			}
			continue
		}
		if op.Type != history.OK {
			continue
		}
		switch fault.Op(op.F) {
		case fault.Pause, fault.Stall:
			paused[place] = op
		case fault.Resume:
			if p, ok := paused[place]; ok && p.Time >= from {
				// A resume's Duration is how much longer than told the
				// pause was meant to last (nemesis.Trap.Outlast).
				out = append(out, Sample{At: p.Time, Kind: Pause, Late: max(0, op.Time-p.Time-p.Value.Duration-op.Value.Duration),
					What: p.F + " of " + op.Value.Target})
			}
			delete(paused, place)
		}
	}
	for _, inv := range working {
		took(inv, end)
	}
	return out
}

// works says whether a fault's own work takes time worth timing: a
// restart's, a save's or an eviction's fill, which a loaded machine
// stretches.
func works(f fault.Op) bool {
	return f == fault.Restart || f == fault.SaveFail || f == fault.SaveMend || f == fault.Evict
}

// Unfitted says in one line what of the story did not happen as told
// (fault.Starved notes: a pause the gate could not fit, a holder a
// trap's actions kept past its point in its lease, a failover or an
// election later than the story allows), or "" when nothing was noted.
// Such a story did not happen as told, whatever the checkers found: a
// pause cut short tests less than the story claims.
func Unfitted(ops []history.Op) string {
	var parts []string
	for _, op := range ops {
		if op.Process == history.NemesisProcess && op.Type == history.OK && op.F == string(fault.Starved) && op.Value != nil {
			parts = append(parts, fmt.Sprintf("at %s %s", at(op.Time), op.Value.Target))
		}
	}
	return strings.Join(parts, "; ")
}

// Over says in one line which kinds of sample ran later than their limit,
// or "" when none did. Every kind that ran late is named with its worst
// sample, so a reader sees whether the timers, the server or a fault's own
// work was slow, with the limits it was judged by.
func Over(samples []Sample, lim Limits) string {
	worst := map[Kind]Sample{}
	var kinds []Kind
	for _, s := range samples {
		if s.Kind == Worker || s.Late <= int64(lim.Of(s.Kind)) {
			continue // a worker's wait is a figure, not a limit (Worker)
		}
		w, seen := worst[s.Kind]
		if !seen {
			kinds = append(kinds, s.Kind)
		}
		if !seen || s.Late > w.Late {
			worst[s.Kind] = s
		}
	}
	if len(kinds) == 0 {
		return ""
	}
	var parts []string
	for _, k := range kinds {
		s := worst[k]
		what := map[Kind]string{Timer: "the harness's timers ran", Reply: "a node's reply came", Server: "the lock's server answered"}[k]
		if k.FromHistory() {
			what = "the " + s.What + " ran"
		}
		if k == Wall {
			parts = append(parts, fmt.Sprintf("the machine's wall clock moved %s against its monotonic clock by %s", time.Duration(s.Late).Round(time.Microsecond), at(s.At)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s late at %s", what, time.Duration(s.Late).Round(time.Millisecond), at(s.At)))
	}
	server, wall := "", ""
	if _, ok := worst[Server]; ok {
		server = fmt.Sprintf(", the lock's server %s", lim.Server)
	}
	if _, ok := worst[Wall]; ok {
		wall = fmt.Sprintf(", the wall clock %s", lim.Wall)
	}
	return fmt.Sprintf("%s (limits: timers %s, replies %s%s, a pause's overrun %s, a restart, save or eviction %s%s)",
		strings.Join(parts, "; "), lim.Timer, lim.Reply, server, lim.Pause, lim.Fault, wall)
}

// Share is how far the run went toward Over: its worst judged sample as
// a share of its kind's limit (more than 1 is over). Workers' waits are
// a figure, not judged, as in Over, and a kind with no limit is skipped.
// A lock server's late replies count, though the verdict keeps some runs
// they alone made late (a violation): the servers are local processes on
// the same cores, so they too say the machine is behind (a matrix narrows
// by it).
func Share(samples []Sample, lim Limits) float64 {
	worst := 0.0
	for _, s := range samples {
		l := lim.Of(s.Kind)
		if s.Kind == Worker || !s.Kind.Load() || l <= 0 {
			continue
		}
		worst = max(worst, float64(s.Late)/float64(l))
	}
	return worst
}

// Worst is the largest lateness of each kind, for a summary line.
func Worst(samples []Sample) map[Kind]time.Duration {
	out := map[Kind]time.Duration{}
	for _, s := range samples {
		out[s.Kind] = max(out[s.Kind], time.Duration(s.Late))
	}
	return out
}

func at(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }
