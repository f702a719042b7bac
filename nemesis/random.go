package nemesis

import (
	"fmt"
	"math/rand/v2"
	"time"
)

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
}

// Span is one fault of a random schedule: the Fault-th of the faults it
// was drawn from, in place from Start to Stop.
type Span struct {
	Fault       int
	Start, Stop time.Duration
}

// Random draws a random schedule's timing from n kinds of fault: quiet,
// fault, quiet, fault, ..., and when the final heal comes, which undoes
// everything. The spans depend on n and o alone: a seed gives the same
// spans only with the same n, so a caller that draws from one more fault
// gives every seed another schedule. What each fault does to whom is the
// caller's to draw (package scenario writes it as a plan).
func Random(n int, o RandomOptions) (spans []Span, healAt time.Duration, err error) {
	if n == 0 {
		return nil, 0, fmt.Errorf("nemesis: a random schedule needs at least one fault")
	}
	if o.Interval <= 0 || o.Duration < 3*o.Interval {
		return nil, 0, fmt.Errorf("nemesis: a random schedule needs a positive interval and a duration of at least 3 intervals (got %s and %s)", o.Interval, o.Duration)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	draw := func() time.Duration {
		d := o.Interval/2 + time.Duration(rng.Int64N(int64(o.Interval)+1))
		return d.Round(time.Millisecond)
	}
	healAt = o.Duration - o.Interval
	for t := draw(); ; {
		f := rng.IntN(n)
		stop := t + draw()
		if stop > healAt {
			break
		}
		spans = append(spans, Span{Fault: f, Start: t, Stop: stop})
		t = stop + draw()
	}
	return spans, healAt, nil
}
