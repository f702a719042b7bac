package main

// Seat-seconds: what each story costs the machine. A seat-second is one
// second of one seat of the machine-wide room (engine/room.go, a seat
// per core); a story that runs alone holds every seat. The matrix's wall
// time is at least its seat-seconds over the room's seats, so they are
// what a budget for the matrix is spent in.

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// seatFile is where a whole matrix (or a shard) writes its seat-seconds,
// beside summary.json.
const seatFile = "seat-seconds.txt"

// storySeats is one scenario's seat-seconds, summed over its locks.
type storySeats struct {
	scenario    string
	pairs, runs int
	seats       int
	held        time.Duration
	seatSeconds float64
}

// seatsByStory sums use per scenario, the most seat-seconds first.
func seatsByStory(plan []pairPlan, use []seatUse) []storySeats {
	by := map[string]*storySeats{}
	var out []*storySeats
	for i, p := range plan {
		s := by[p.scenario]
		if s == nil {
			s = &storySeats{scenario: p.scenario}
			by[p.scenario] = s
			out = append(out, s)
		}
		u := use[i]
		s.pairs++
		s.runs += u.runs
		s.seats = max(s.seats, u.seats)
		s.held += u.held
		s.seatSeconds += float64(u.seats) * u.held.Seconds()
	}
	slices.SortStableFunc(out, func(a, b *storySeats) int {
		return cmp.Or(cmp.Compare(b.seatSeconds, a.seatSeconds), cmp.Compare(a.scenario, b.scenario))
	})
	res := make([]storySeats, len(out))
	for i, s := range out {
		res[i] = *s
	}
	return res
}

// seatTable writes the seat-seconds per scenario, the most first, and
// their total against the wall time the matrix took.
func seatTable(w io.Writer, plan []pairPlan, use []seatUse, roomSeats int, wall time.Duration) {
	stories := seatsByStory(plan, use)
	fmt.Fprintf(w, "seat-seconds per story (a second of one of the room's %d seats; a story that runs alone holds all %d):\n", roomSeats, roomSeats)
	fmt.Fprintf(w, "%-30s %5s %5s %9s %12s\n", "SCENARIO", "PAIRS", "SEATS", "SECONDS", "SEAT-SECONDS")
	var total storySeats
	for _, s := range stories {
		fmt.Fprintf(w, "%-30s %5d %5d %9.1f %12.1f\n", s.scenario, s.pairs, s.seats, s.held.Seconds(), s.seatSeconds)
		total.pairs += s.pairs
		total.runs += s.runs
		total.held += s.held
		total.seatSeconds += s.seatSeconds
	}
	fmt.Fprintf(w, "%-30s %5d %5s %9.1f %12.1f\n", "total", total.pairs, "", total.held.Seconds(), total.seatSeconds)
	floor := time.Duration(total.seatSeconds / float64(max(roomSeats, 1)) * float64(time.Second))
	fmt.Fprintf(w, "%.1f seat-seconds fill %d seats for at least %s; the matrix took %s", total.seatSeconds, roomSeats, minSec(floor), minSec(wall))
	if again := total.runs - total.pairs; again > 0 {
		fmt.Fprintf(w, "; counted with %d starved or vacuous first run(s) that ran again", again)
	}
	fmt.Fprintln(w)
	bound := storyBound(plan, use, roomSeats)
	fmt.Fprintf(w, "the bound no scheduler can beat: the pairs' own story time (their time limits, or to where a run ended once its story was over) over the %d seats, %s; the matrix took %.2f times it\n",
		roomSeats, minSec(bound), wall.Seconds()/max(bound.Seconds(), 1e-9))
	earlyLine(w, plan, use, roomSeats)
	kindTable(w, plan, use, roomSeats, wall)
}

// earlyLine says how many pairs' runs ended once their story was over,
// and the seat-seconds of time limit that saved.
func earlyLine(w io.Writer, plan []pairPlan, use []seatUse, roomSeats int) {
	var n int
	var saved float64
	for i, p := range plan {
		if u := use[i]; u.early {
			n++
			saved += float64(p.seats(roomSeats)) * max(p.limit-u.own, 0).Seconds()
		}
	}
	fmt.Fprintf(w, "%d of %d pairs ended once their story was over (-full-time keeps them to their time limits): %.1f seat-seconds of time limits not spent\n", n, len(plan), saved)
}

// storyBound is the pairs' own story time, each on the seats its pair
// takes, over the room's seats: a matrix cannot end sooner. A pair's own
// story time is its time limit, or, where its run ended early, the time
// to that end (its last fault and the checkers' allowance after it).
func storyBound(plan []pairPlan, use []seatUse, roomSeats int) time.Duration {
	var seatTime float64
	for i, p := range plan {
		own := p.limit
		if i < len(use) && use[i].own > 0 {
			own = use[i].own
		}
		seatTime += float64(p.seats(roomSeats)) * own.Seconds()
	}
	return time.Duration(seatTime / float64(max(roomSeats, 1)) * float64(time.Second))
}

// kindTable says where the seat-seconds beyond the stories went, server
// kind by server kind: start-up (nodes, clients), the story itself, and
// judging (shutdown, the checkers); the reports written after a run gave
// its seats up hold none, and are summed in wall time; what is left of
// the wall time is seats waiting (an alone story waiting for the machine
// to empty, the matrix's tail).
func kindTable(w io.Writer, plan []pairPlan, use []seatUse, roomSeats int, wall time.Duration) {
	type sums struct {
		pairs                       int
		start, story, judge, seatTm float64
		reports                     time.Duration
	}
	by := map[string]*sums{}
	var kinds []string
	var all sums
	for i, p := range plan {
		s := by[p.kind]
		if s == nil {
			s = &sums{}
			by[p.kind] = s
			kinds = append(kinds, p.kind)
		}
		u, seats := use[i], float64(use[i].seats)
		for _, t := range []*sums{s, &all} {
			t.pairs++
			t.start += seats * u.start.Seconds()
			t.story += seats * u.story.Seconds()
			t.judge += seats * u.judge.Seconds()
			t.seatTm += seats * u.held.Seconds()
			t.reports += u.reports
		}
	}
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Compare(by[b].seatTm, by[a].seatTm) })
	fmt.Fprintf(w, "where the seat-seconds went, by server kind (reports are written with no seat held: wall seconds):\n")
	fmt.Fprintf(w, "%-12s %5s %12s %9s %9s %9s %9s\n", "KIND", "PAIRS", "SEAT-SECONDS", "STORY", "START-UP", "JUDGING", "REPORTS")
	line := func(name string, s *sums) {
		fmt.Fprintf(w, "%-12s %5d %12.1f %9.1f %9.1f %9.1f %9.1f\n", name, s.pairs, s.seatTm, s.story, s.start, s.judge, s.reports.Seconds())
	}
	for _, k := range kinds {
		line(cmp.Or(k, "-"), by[k])
	}
	line("total", &all)
	idle := wall.Seconds()*float64(roomSeats) - all.seatTm
	fmt.Fprintf(w, "seats idle: %.1f of the %.1f seat-seconds the matrix's wall time offered (waiting for an alone story's turn, the tail)\n",
		max(idle, 0), wall.Seconds()*float64(roomSeats))
}

// writeSeats writes the seat-seconds table, and every pair's line under
// it, to dir's seat-seconds.txt, for a README to cite.
func writeSeats(dir string, plan []pairPlan, use []seatUse, roomSeats int, wall time.Duration, started time.Time) error {
	f, err := os.Create(filepath.Join(dir, seatFile))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "matrix started %s\n\n", started.UTC().Format(time.RFC3339))
	seatTable(f, plan, use, roomSeats, wall)
	fmt.Fprintf(f, "\nper pair:\n%-52s %5s %4s %9s %12s\n", "SCENARIO / LOCK", "SEATS", "RUNS", "SECONDS", "SEAT-SECONDS")
	for i, p := range plan {
		u := use[i]
		fmt.Fprintf(f, "%-52s %5d %4d %9.1f %12.1f\n", p.name(), u.seats, u.runs, u.held.Seconds(), float64(u.seats)*u.held.Seconds())
	}
	return f.Close()
}
