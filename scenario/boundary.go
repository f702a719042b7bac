package scenario

import (
	"context"
	"fmt"
	"strings"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/verdict"
	"github.com/locktorture/locktorture/workloads"
)

// Probe is a boundary run's one fault: a client caught at one command
// boundary of its lock, and paused there past its lease or crashed.
type Probe struct {
	At    nemesis.Boundary `json:"at"`
	Crash bool             `json:"crash,omitempty"`
}

// String is the probe as -probe takes it: "pause release before DEL#1".
func (p Probe) String() string {
	if p.Crash {
		return "crash " + p.At.String()
	}
	return "pause " + p.At.String()
}

// ParseProbe reads a probe as String writes it.
func ParseProbe(s string) (Probe, error) {
	what, at, _ := strings.Cut(strings.TrimSpace(s), " ")
	var p Probe
	switch what {
	case "pause":
	case "crash":
		p.Crash = true
	default:
		return Probe{}, fmt.Errorf("probe %q: begins with pause or crash (e.g. \"pause release before DEL#1\")", s)
	}
	b, err := nemesis.ParseBoundary(at)
	if err != nil {
		return Probe{}, err
	}
	p.At = b
	return p, nil
}

// Check says what is wrong with a probe built in code or read from a
// stored run, in ParseProbe's words: it must read back as itself.
func (p Probe) Check() error {
	q, err := ParseProbe(p.String())
	if err == nil && q != p {
		err = fmt.Errorf("probe %q: does not read back as itself", p)
	}
	return err
}

// Evidence is the nemesis action that proves the probe happened: its pause
// or crash, at its command, in its op (a renewal is caught in whatever op
// is running).
func (p Probe) Evidence() fault.Evidence {
	e := fault.Evidence{Op: fault.Pause, Reply: p.At.Reply}
	if f := strings.Fields(p.At.Command); len(f) > 0 {
		e.Command = strings.ToLower(f[0])
	}
	if p.Crash {
		e.Op = fault.Crash
	}
	if p.At.In != nemesis.Renewal {
		e.In = p.At.In
	}
	return e
}

// boundaryStories are the stories of boundary exploration (package
// explore): a fault-free warm-up that learns which commands each kind of
// op sends, and one short run per command boundary.
func boundaryStories(add func(Scenario)) {
	promise := []Rule{expect(anyLock, verdict.Expectation{Outcome: verdict.PromiseKept,
		Why: "exploration, judged against the lock's own fault model: a broken promise under a fault it claims to survive is a finding"})}
	add(Scenario{
		Name: "warm-up",
		Story: "Exploration: no fault; holders work half a lease, so a watchdog renews while they do. What each kind of op " +
			"sends (acquire, release, a renewal between them) is learned from the hooks and kept in results.json.",
		TimeLimitTTLs: 3, MinTimeLimitTTLs: 2,
		Exploration: true,
		HoldTTLs:    0.5,
		Rules:       promise,
		Plan:        Plan{},
	})
	add(Scenario{
		Name: "boundary",
		Story: "Exploration: the first client to reach one command boundary of its lock (-probe: before a command is sent or " +
			"after its reply, in an acquire, a release or a renewal) is paused there for 1.5 TTLs, and the next holder works " +
			"0.8 TTL, so whatever the paused client does on waking lands inside that holder's lease; or it is crashed there.",
		TimeLimitTTLs: 5, MinTimeLimitTTLs: 4,
		Exploration: true,
		Probed:      true,
		// Holders work 0.1 TTL, as in random: the lock is held most of the
		// time, and a paused releaser wakes with 0.5 TTL of its successor's
		// lease to go.
		HoldTTLs: 0.1,
		Rules:    promise,
		Schedule: boundarySchedule,
	})
}

// boundarySchedule arms the probe's trap a TTL in, when clients have taken
// the lock in turn often enough that the traffic before the fault is a
// story's (verdict.Vacuity); half a TTL in, on a loaded machine, the first
// release could spring it with one acquire done. A renewal is sent
// only while a holder works longer than its watchdog's period, which a
// tenth of a TTL is not: for a renewal's probe the next holder to work is
// stalled for 0.8 TTL first, its watchdog running, so the renewal it sends
// meanwhile is where the probe catches it.
func boundarySchedule(e *Env) (nemesis.Schedule, error) {
	if e.Probe == nil {
		return nil, fmt.Errorf("scenario boundary needs a probe (-probe)")
	}
	var sched nemesis.Schedule
	if e.Probe.At.In == nemesis.Renewal {
		sched = append(sched, e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.TTLs(0.8), Stall: true}))
	}
	t := nemesis.Trap{Command: e.Probe.At.Trap(), Client: nemesis.AnyClient, Crash: e.Probe.Crash}
	if !t.Crash {
		t.Pause = e.TTLs(1.5)
		t.ThenName = "stall the next client to work for 0.8 TTL"
		t.Then = func(context.Context, int, int) error {
			e.Gate.Arm(nemesis.Trap{Point: workloads.BeforeWrite, Client: nemesis.AnyClient, Pause: e.TTLs(0.8), Stall: true})
			return nil
		}
	}
	return append(sched, e.Gate.ArmStep(e.TTL, t)), nil
}
