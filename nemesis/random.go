package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault is one kind of fault a random schedule may pick: Start injects it,
// Stop undoes it.
type Fault struct {
	Name  string
	Start func(ctx context.Context) error
	Stop  func(ctx context.Context) error
}

// RandomOptions shapes a random schedule.
type RandomOptions struct {
	// Seed decides everything: the same seed gives the same schedule.
	Seed uint64
	// Duration is the whole run; the schedule ends with a heal phase of at
	// least one Interval in which no fault is active, so checks of liveness
	// see the system recover.
	Duration time.Duration
	// Interval is the mean quiet time and the mean fault time (each drawn
	// uniformly from 0.5 to 1.5 Interval), as Jepsen alternates them.
	Interval time.Duration
	// Heal undoes whatever may still be active; it is the last step.
	Heal func(ctx context.Context) error
}

// Random draws a schedule from faults: quiet, fault, quiet, fault, ...,
// then the final heal. The steps depend on the seed alone.
func Random(faults []Fault, o RandomOptions) (Schedule, error) {
	if len(faults) == 0 {
		return nil, fmt.Errorf("nemesis: a random schedule needs at least one fault")
	}
	if o.Interval <= 0 || o.Duration < 3*o.Interval {
		return nil, fmt.Errorf("nemesis: a random schedule needs a positive interval and a duration of at least 3 intervals (got %s and %s)", o.Interval, o.Duration)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	draw := func() time.Duration {
		d := o.Interval/2 + time.Duration(rng.Int64N(int64(o.Interval)+1))
		return d.Round(time.Millisecond)
	}
	var s Schedule
	healAt := o.Duration - o.Interval
	for t := draw(); ; {
		f := faults[rng.IntN(len(faults))]
		stop := t + draw()
		if stop > healAt {
			break
		}
		s = append(s, Step{At: t, Name: "start " + f.Name, Do: f.Start},
			Step{At: stop, Name: "stop " + f.Name, Do: f.Stop})
		t = stop + draw()
	}
	heal := o.Heal
	if heal == nil {
		heal = func(context.Context) error { return nil }
	}
	return append(s, Step{At: healAt, Name: "final heal", Do: heal}), nil
}
