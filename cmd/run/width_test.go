package main

import (
	"context"
	"testing"
	"time"
)

// A run a whole limit late narrows the width by a pair's seats at once;
// one half a limit late does not, a second within lateWindow does; never
// below one pair. Runs on time widen it a seat per widenAfter, never above
// the room.
func TestWidthFollowsLateness(t *testing.T) {
	w := newWidth(6, t.Logf)
	w.measure("a", 1.3, w.narrowed)
	if w.now != 4 {
		t.Fatalf("after a starved run: %d seats, want 4", w.now)
	}
	w.measure("b", narrowShare, w.narrowed)
	if w.now != 4 {
		t.Fatalf("one run half a limit late narrowed the width to %d", w.now)
	}
	for range lateWindow - lateNeeded {
		w.measure("calm", 0, w.narrowed)
	}
	w.measure("c", 0.9, w.narrowed)
	if w.now != 2 {
		t.Fatalf("after %d of %d runs late: %d seats, want 2", lateNeeded, lateWindow, w.now)
	}
	w.measure("d", 2, w.narrowed)
	if w.now != 2 {
		t.Fatalf("narrowed below one pair: %d seats", w.now)
	}
	apart := newWidth(6, t.Logf)
	apart.measure("e", narrowShare, apart.narrowed)
	for range lateWindow - 1 {
		apart.measure("calm", 0, apart.narrowed)
	}
	apart.measure("f", narrowShare, apart.narrowed)
	if apart.now != 6 {
		t.Fatalf("two late runs %d apart narrowed the width to %d", lateWindow, apart.now)
	}
	for range widenAfter - 1 {
		w.measure("calm", narrowShare/2, w.narrowed)
	}
	if w.now != 2 {
		t.Fatalf("widened after %d calm runs, before %d", widenAfter-1, widenAfter)
	}
	w.measure("calm", 0, w.narrowed)
	if w.now != 3 {
		t.Fatalf("after %d calm runs: %d seats, want 3", widenAfter, w.now)
	}
	for range 10 * widenAfter {
		w.measure("calm", 0, w.narrowed)
	}
	if w.now != 6 {
		t.Fatalf("after many calm runs: %d seats, want the room's 6", w.now)
	}
	if s := w.summary(); s == "" {
		t.Fatal("a width that narrowed says nothing")
	}
	if s := newWidth(6, t.Logf).summary(); s != "" {
		t.Fatalf("a width that never narrowed says %q", s)
	}
}

// Runs a late moment caught side by side narrow the width once: one
// that entered before the width narrowed, starved too, narrows it no
// further; one that entered after it does.
func TestWidthNarrowsOnceForRunsSideBySide(t *testing.T) {
	ctx := context.Background()
	w := newWidth(6, t.Logf)
	var ats []int
	for range 3 {
		leave, at, err := w.enter(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer leave()
		ats = append(ats, at)
	}
	w.measure("first", 1.5, ats[0])
	w.measure("beside", 1.5, ats[1])
	w.measure("beside, half late", narrowShare, ats[2])
	if w.now != 4 {
		t.Fatalf("three runs entered together, all late: %d seats, want 4 (narrowed once)", w.now)
	}
	w.measure("fresh, half late", narrowShare, w.narrowed)
	if w.now != 4 {
		t.Fatalf("a run half a limit late after two stale late ones: %d seats, want 4 (stale runs do not count toward a narrowing)", w.now)
	}
	w.measure("after", 1.5, w.narrowed)
	if w.now != 2 {
		t.Fatalf("a run entered after the narrowing, starved: %d seats, want 2", w.now)
	}
}

// Runs enter while their seats fit the width; a run asking for the whole
// width waits until no other holds any; a cancelled wait returns the
// context's error and takes nothing.
func TestWidthBoundsTheSeatsHeld(t *testing.T) {
	ctx := context.Background()
	w := newWidth(6, t.Logf)
	w.measure("late", 1, w.narrowed) // 4 seats
	a, _, err := w.enter(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := w.enter(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	entered, left := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(left)
		leave, _, err := w.enter(ctx, 6) // alone: the whole width
		if err != nil {
			t.Error(err)
			return
		}
		close(entered)
		leave()
	}()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := w.enter(short, 2); err == nil {
		t.Fatal("a pair entered 3 of 4 seats already held")
	}
	a()
	select {
	case <-entered:
		t.Fatal("a run alone entered beside a run still holding its seat")
	case <-time.After(50 * time.Millisecond):
	}
	b()
	b() // a second leave gives nothing back twice
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("a run alone still waits with every seat free")
	}
	<-left
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.used != 0 {
		t.Fatalf("%d seats held after every run left", w.used)
	}
}
