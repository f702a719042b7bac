// Package nemesis injects faults into a run and records each of them as ops
// in the same history as the clients', so checkers and timelines can line a
// fault up against what the clients saw.
package nemesis

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Step is one scripted action, taken At this long after the schedule starts.
type Step struct {
	At time.Duration
	// Name says what the step does, for logs and errors.
	Name string
	Do   func(ctx context.Context) error
}

// Schedule is a scripted fault plan: the same steps at the same offsets on
// every run, so a failure story reproduces every time.
type Schedule []Step

// Run takes each step at its time until ctx ends. A step's error ends the
// schedule and is returned: a fault that could not be injected makes the run
// meaningless, so it must not pass silently.
func (s Schedule) Run(ctx context.Context) error {
	steps := append(Schedule(nil), s...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At < steps[j].At })
	start := time.Now()
	for _, st := range steps {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(start.Add(st.At))):
		}
		if err := st.Do(ctx); err != nil {
			return fmt.Errorf("nemesis: %s: %w", st.Name, err)
		}
	}
	return nil
}

// record writes one nemesis action as an invoke and its ok: nemesis actions
// are instantaneous in the history; a fault that lasts has a start action
// and an end action.
func record(rec *history.Recorder, f string, v *history.Value) {
	inv := rec.Invoke(history.NemesisProcess, f, "", v)
	rec.Complete(inv, history.OK, v, nil)
}
