package main

// The matrix's width: how many of the machine room's seats its own first
// runs may hold at once. The room has three seats a core, a figure
// measured on one machine; a slower one, or one busy with work the room
// does not count (a compile, a test's CPU, another user's loops), starves
// more runs at that width than the width saves, and a starved run costs
// its pair a second run alone. So the width follows what the runs
// measure: it narrows by a pair's seats, down to one pair, when a first
// run's harness ran a whole lateness limit late, or when lateNeeded of
// the last lateWindow first runs ran narrowShare of one late; widenAfter
// first runs in a row under narrowShare widen it again by a seat, up to
// the room's. One run half a limit late is the noise of an idle machine,
// which makes them one at a time; a machine that stays busy makes them in
// runs (docs/ci-and-benchmarks.md has both).

import (
	"context"
	"fmt"
	"sync"

	"github.com/locktorture/locktorture/engine"
)

const (
	// narrowShare is how late, as a share of its limit, a run's worst
	// judged sample counts as late: half way to starved, so the width
	// narrows before its runs starve rather than after.
	narrowShare = 0.5
	// lateNeeded of the last lateWindow first runs late narrow the width.
	lateNeeded, lateWindow = 2, 4
	// widenAfter is how many first runs in a row must stay under
	// narrowShare before the width grows by a seat.
	widenAfter = 8
)

// width is the matrix's own bound on the seats its runs hold, below the
// room's, which bounds every process's.
type width struct {
	mu sync.Mutex
	// room is the most it may be; floor the least, a pair's seats.
	room, floor int
	// now is the width; used the seats its runs hold; calm how many
	// first runs in a row have run on time since it last changed.
	now, used int
	calm      int
	// recent says which of the last lateWindow first runs were late.
	recent []bool
	// narrowest is the least it has been, narrowed how many times it
	// narrowed: for the matrix's closing lines.
	narrowest, narrowed int
	// changed is closed whenever a run leaves or the width grows.
	changed chan struct{}
	logf    func(format string, args ...any)
}

func newWidth(room int, logf func(format string, args ...any)) *width {
	floor := min(engine.PairSeats, room)
	return &width{room: room, floor: floor, now: room, narrowest: room, changed: make(chan struct{}), logf: logf}
}

// enter waits until n more seats fit the width (a run that asks the
// width or more takes all of it, once no other run holds any) and
// returns what gives them up, and how many times the width had narrowed
// then, for measure.
func (w *width) enter(ctx context.Context, n int) (leave func(), at int, err error) {
	for {
		w.mu.Lock()
		take := min(max(n, 1), w.now)
		if w.used+take <= w.now {
			w.used += take
			at := w.narrowed
			w.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { w.give(take) }) }, at, nil
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

func (w *width) give(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.used -= n
	w.wake()
}

// wake tells every waiting run to look again; w.mu is held.
func (w *width) wake() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// measure takes one first run's lateness into the width: share is its
// worst judged sample over that kind's limit (lateness.Share), at what enter
// returned. A run that entered before the width last narrowed ran beside
// as many as the width held before that narrowing, which has answered
// its like: it narrows nothing again, nor counts toward it, so that the
// runs a late moment caught side by side narrow the width once, not once
// each.
func (w *width) measure(run string, share float64, at int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	late := share >= narrowShare
	if at != w.narrowed {
		if late {
			w.calm = 0
		}
		return
	}
	if w.recent = append(w.recent, late); len(w.recent) > lateWindow {
		w.recent = w.recent[1:]
	}
	if n, seen := countTrue(w.recent), len(w.recent); share >= 1 || n >= lateNeeded {
		w.recent, w.calm = w.recent[:0], 0
		if w.now > w.floor {
			w.now = max(w.floor, w.now-w.floor)
			w.narrowest = min(w.narrowest, w.now)
			w.narrowed++
			w.logf("%s ran %.0f%% of a lateness limit late (%d of the last %d first runs half a limit or more); the matrix narrows to %d of the room's %d seats\n",
				run, 100*share, n, seen, w.now, w.room)
		}
		return
	}
	if late {
		w.calm = 0
		return
	}
	if w.now >= w.room {
		return
	}
	if w.calm++; w.calm >= widenAfter {
		w.calm = 0
		w.now++
		w.wake()
		w.logf("%d first runs in a row on time: the matrix widens to %d of the room's %d seats\n", widenAfter, w.now, w.room)
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// summary says how the width went, or "" when it never narrowed.
func (w *width) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.narrowed == 0 {
		return ""
	}
	return fmt.Sprintf("the matrix narrowed %d time(s), to as few as %d of the room's %d seats, where its runs ran late", w.narrowed, w.narrowest, w.room)
}
