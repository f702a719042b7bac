package main

// What a person sees while a matrix runs: one line per pair as it ends,
// with its place and the time left; the block of lines behind a verdict
// (its log, checkers and files) only for a pair that did not match, or for
// every pair with -v; and, on a terminal, a status line redrawn in place.

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/verdict"
)

// pairPlan is what the matrix knows of a pair before it runs it.
type pairPlan struct {
	scenario, lock string
	// limit is how long its clients work: the scenario's time limit at its
	// ttl, or -time-limit.
	limit time.Duration
	// alone: the story takes every seat of the machine-wide room.
	alone bool
	// take is how many seats it takes otherwise (engine.Resolved.Seats:
	// one for a light pair, engine.PairSeats else); 0 is one.
	take int
	// kind is the lock's server kind, by which the matrix says where its
	// time went.
	kind string
	// topology is the servers it starts, as a key of the pool that keeps
	// them for the next pair (engine.Resolved.PoolKey); "" for servers
	// never kept.
	topology string
}

func (p pairPlan) name() string { return p.scenario + " / " + p.lock }

// seats is how many of a room of room seats the pair takes: its take, or
// every one for a story that runs alone.
func (p pairPlan) seats(room int) int {
	if p.alone {
		return room
	}
	return min(max(p.take, 1), room)
}

// overhead is a run's time beyond its clients' time limit, in the two
// parts it is learned in: start-up, from taking its seats to every client
// ready (nodes started, clients connected), and wind-up, from the clients'
// time limit to the report written (shutdown, checkers, timeline).
type overhead struct{ startup, windup time.Duration }

func (o overhead) total() time.Duration { return o.startup + o.windup }

// priorOverhead is what a pair is expected to take beyond its time limit
// before any pair has ended: about what a single-node pair took on a
// 2-core machine (0.1 to 0.3 s to start, 0.3 to 0.6 s to check and
// report); multi-node locks and long histories take more, and the runs
// that end teach the estimate that.
var priorOverhead = overhead{startup: 250 * time.Millisecond, windup: 500 * time.Millisecond}

// expectOverhead is what a run of a lock is expected to take beyond its
// time limit: the mean of the runs of its server kind seen so far (kind),
// with the prior counted as one more run so the first few do not swing
// it, and then the mean of this lock's own runs (mine), with that counted
// as one more: locks differ in how many nodes they start and how long
// their histories take to check. Kinds are not mixed: a matrix begins
// with ZooKeeper's pairs, whose three JVMs start in seconds, and their
// mean laid over the hundreds of Redis pairs to come said 39 minutes were
// left where 24 were.
func expectOverhead(prior overhead, kind, mine []overhead) overhead {
	mean := func(start overhead, obs []overhead) overhead {
		sum := start
		for _, o := range obs {
			sum.startup += o.startup
			sum.windup += o.windup
		}
		n := time.Duration(len(obs) + 1)
		return overhead{sum.startup / n, sum.windup / n}
	}
	return mean(mean(prior, kind), mine)
}

// job is a pair as the estimate of the time left sees it.
type job struct {
	// left is how long it holds its seats from when it gets them (from
	// now, for a job that holds them already).
	left time.Duration
	// seats is how many it takes: 1, or the room's every seat for a story
	// that runs alone.
	seats int
	// holding says it holds its seats now; the others start in order.
	holding bool
}

// schedule lays jobs out from now: when each starts, and when the last
// ends. The jobs not holding seats start in their order, each when fewer
// than parallel run and the room has its seats free (a job asking more
// than the room has takes it all), and none before the one ahead of it:
// that is the matrix's runner, whose pairs take a slot of -parallel in
// order, and the room's turnstile, behind which a pair waiting for the
// whole machine holds up the pairs after it. A job holding seats starts
// at 0. Other processes' runs in the room are not laid out: the tracker
// learns what they cost as a wait of its own (extraWait).
func schedule(jobs []job, parallel, seats int) (starts []time.Duration, end time.Duration) {
	type running struct {
		end   time.Duration
		seats int
	}
	parallel, seats = max(parallel, 1), max(seats, 1)
	starts = make([]time.Duration, len(jobs))
	var active []running
	for _, j := range jobs {
		if j.holding {
			active = append(active, running{j.left, min(max(j.seats, 1), seats)})
			end = max(end, j.left)
		}
	}
	var t time.Duration
	for k, j := range jobs {
		if j.holding {
			continue
		}
		need := min(max(j.seats, 1), seats)
		for {
			active = slices.DeleteFunc(active, func(r running) bool { return r.end <= t })
			used := 0
			next := time.Duration(-1)
			for _, r := range active {
				used += r.seats
				if next < 0 || r.end < next {
					next = r.end
				}
			}
			if len(active) < parallel && used+need <= seats {
				break
			}
			t = next
		}
		starts[k] = t
		active = append(active, running{t + j.left, need})
		end = max(end, t+j.left)
	}
	return starts, end
}

// timeLeft is how long jobs take to end, from now, as schedule lays them
// out.
func timeLeft(jobs []job, parallel, seats int) time.Duration {
	_, end := schedule(jobs, parallel, seats)
	return end
}

// extraWait is what a pair is expected to wait for seats beyond what the
// matrix's own pairs explain: the mean of what the pairs that ended
// waited beyond what schedule foresaw when they began (other processes'
// stories in the room, `make test`'s unit tests beside the matrix), with
// a first guess of no wait counted as one of them.
func extraWait(seen []time.Duration) time.Duration {
	var sum time.Duration
	for _, w := range seen {
		sum += w
	}
	return sum / time.Duration(len(seen)+1)
}

// roughly says a time left the way a person reads one: to the nearest
// five seconds (at least five) under a minute and a half, to the minute
// above.
func roughly(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < 90*time.Second:
		s := max((d+2500*time.Millisecond)/(5*time.Second)*5, 5)
		return fmt.Sprintf("~%d s", s)
	}
	return fmt.Sprintf("~%d min", (d+30*time.Second)/time.Minute)
}

// clock says an elapsed time as minutes and seconds, 1:05.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// minSec says a duration as "4 min 34 s" (or "34 s").
func minSec(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s < 60 {
		return fmt.Sprintf("%d s", s)
	}
	return fmt.Sprintf("%d min %d s", s/60, s%60)
}

// pairLine is the one line a pair gets when it ends: its place among the
// pairs, its name padded to width, how it ended (verdictOf), how long it
// held its seats (and how long it waited for them, when that was a second
// or more, and its fault for the traffic before it, engine.Result.Waited),
// and the time left.
func pairLine(place, name string, width int, verdict string, took, waited, fault, left time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-*s  %s  %.1f s", place, width, name, verdict, took.Seconds())
	if waited >= time.Second {
		fmt.Fprintf(&b, " (waited %.1f s for seats)", waited.Seconds())
	}
	if fault > 0 {
		fmt.Fprintf(&b, " (its fault waited %.2f s for traffic)", fault.Seconds())
	}
	if r := roughly(left); r != "" {
		fmt.Fprintf(&b, "  %s left", r)
	}
	return b.String()
}

// place is a pair's place in a pairLine: [ 7/132], or [again 1/2] for the
// second runs of the starved ones.
func place(done, total int, again bool) string {
	w := len(strconv.Itoa(total))
	if again {
		return fmt.Sprintf("[again %*d/%d]", w, done, total)
	}
	return fmt.Sprintf("[%*d/%d]", w, done, total)
}

// verdictOf says in a few words how a run ended: MATCHED, or for a run that
// did not match what it showed against what was expected, and for a
// starved, vacuous or failed run the reason, shortened.
func verdictOf(res *engine.Result, err error) string {
	switch {
	case err != nil:
		return "ERROR  " + short(firstLine(err.Error()))
	case res == nil:
		return "ERROR  no result"
	case res.Outcome == verdict.Starved:
		return "STARVED  " + short(lateReason(res.Starved))
	case res.Outcome == verdict.Vacuous:
		return "NOT MATCHED  vacuous: " + short(res.Vacuous)
	case !res.Matched:
		if res.Finding != "" {
			return "NOT MATCHED  " + string(res.Outcome) + ": " + short(res.Finding)
		}
		return fmt.Sprintf("NOT MATCHED  %s (expected %s)", shown(res), res.Expected)
	case res.Finding != "":
		// A random run that was decided: what it found is why it ran.
		return "MATCHED  finding: " + short(res.Finding)
	case res.Late != "":
		return "MATCHED  late: " + short(lateReason(res.Late))
	}
	return "MATCHED"
}

// shown is a run's outcome with what set it apart from the expectation
// when the outcome itself was the expected one: an observation that had to
// be seen and was not, or one seen that must not be.
func shown(res *engine.Result) string {
	s := string(res.Outcome)
	if res.Outcome != res.Expected.Outcome {
		return s
	}
	for _, o := range res.Expected.Show {
		if !slices.Contains(res.Observations, o) {
			s += " without " + o
		}
	}
	for _, o := range res.Expected.Hide {
		if slices.Contains(res.Observations, o) {
			s += " with " + o
		}
	}
	return s
}

// lateReason shortens a starved or late reason to its first part: what ran
// late, by how much and when, without the limits it was judged by.
func lateReason(s string) string {
	s, _, _ = strings.Cut(s, " (limits:")
	first, rest, more := strings.Cut(s, "; ")
	first = strings.TrimPrefix(first, "the ")
	if strings.HasPrefix(first, "at ") {
		// lateness.Unfitted: a fault the gate could not fit.
		first = "a fault did not fit " + first
	}
	if more && rest != "" {
		first += " (+more)"
	}
	return first
}

// short cuts s to 70 characters.
func short(s string) string {
	const most = 70
	if r := []rune(s); len(r) > most {
		return string(r[:most-1]) + "…"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// pairRun is a pair that has begun and not yet ended.
type pairRun struct {
	begun time.Time
	// ready is when its clients started working (zero before the first
	// Progress): before it the pair waits for seats or starts up.
	ready time.Time
	// foreseen is the wait for seats schedule foresaw when it began.
	foreseen time.Duration
	elapsed  time.Duration
	ops      int
	nemesis  string
}

// seatUse is what one pair held of the machine-wide room, over its runs,
// and, of the runs whose clients got started, how that time went: from
// its seats to every client ready (start), the clients' time limit
// (story), from there until the seats were given up (judge: shutdown and
// the checkers), and the report written after (report, with no seat
// held).
type seatUse struct {
	seats                        int
	held                         time.Duration
	runs                         int
	start, story, judge, reports time.Duration
	// own is the pair's own story time, as its last run told it: its time
	// limit, or where that run ended early (early), to its end (the
	// bound's).
	own   time.Duration
	early bool
}

// tracker keeps what the matrix has done and prints it: a pair's line
// (and block) when it ends and, on a terminal, the status line. Every
// write to the terminal goes through it, so the status line is cleared
// before a line is printed and drawn again after.
type tracker struct {
	mu          sync.Mutex
	out, errOut io.Writer
	// live: out is a terminal, and a status line is drawn on it.
	live    bool
	verbose bool
	plan    []pairPlan
	// parallel is how many pairs the runner starts at once; seats, how
	// many the room has (an alone story takes them all).
	parallel, seats int
	// width is the name column's.
	width int
	now   func() time.Time
	begun time.Time

	// queue lists the pairs not yet begun, in the order they will begin.
	queue       []int
	runs        map[int]*pairRun
	done, total int
	again       bool
	seenByKind  map[string][]overhead
	seenByLock  map[string][]overhead
	// waited lists the unforeseen waits for seats, apart for the stories
	// that run alone (they wait for every other run on the machine) and
	// the others.
	waited      map[bool][]time.Duration
	use         []seatUse
	drawn       bool
	stopDrawing chan struct{}
	drawing     sync.WaitGroup
}

// newTracker starts tracking a matrix of plan, whose pairs begin in order;
// live draws a status line on out, redrawn twice a second until stop.
func newTracker(out, errOut io.Writer, plan []pairPlan, parallel, seats int, live, verbose bool) *tracker {
	t := &tracker{out: out, errOut: errOut, live: live, verbose: verbose, plan: plan, parallel: parallel, seats: seats,
		now: time.Now, runs: map[int]*pairRun{}, seenByKind: map[string][]overhead{}, seenByLock: map[string][]overhead{}, waited: map[bool][]time.Duration{}, use: make([]seatUse, len(plan)),
		total: len(plan)}
	t.begun = t.now()
	for i, p := range plan {
		t.queue = append(t.queue, i)
		t.width = max(t.width, min(len(p.name()), 52))
		t.use[i].seats = p.seats(t.seats)
	}
	if live {
		t.stopDrawing = make(chan struct{})
		t.drawing.Add(1)
		go func() {
			defer t.drawing.Done()
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-t.stopDrawing:
					return
				case <-tick.C:
					t.mu.Lock()
					t.drawLocked()
					t.mu.Unlock()
				}
			}
		}()
	}
	return t
}

// stop ends the status line and clears it, so what follows starts on a
// clean line.
func (t *tracker) stop() {
	if t.stopDrawing != nil {
		close(t.stopDrawing)
		t.drawing.Wait()
		t.stopDrawing = nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLocked()
}

// runAgain tracks the second runs of the starved pairs in order, one at a
// time, as the matrix runs them.
func (t *tracker) runAgain(pairs []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queue, t.again, t.done, t.total, t.parallel = slices.Clone(pairs), true, 0, len(pairs), 1
}

// expected is what pair p is expected to take beyond its time limit.
func (t *tracker) expected(p pairPlan) overhead {
	return expectOverhead(priorOverhead, t.seenByKind[p.kind], t.seenByLock[p.lock])
}

// estimate is how long the whole matrix is expected to take, before it
// starts.
func (t *tracker) estimate() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leftLocked(t.now())
}

// begin marks pair i begun: its goroutine is about to call engine.Run.
func (t *tracker) begin(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := slices.Index(t.queue, i); k >= 0 {
		t.queue = slices.Delete(t.queue, k, k+1)
	}
	now := t.now()
	r := &pairRun{begun: now}
	t.runs[i] = r
	jobs, pairs := t.jobsLocked(now)
	starts, _ := schedule(jobs, t.parallel, t.seats)
	r.foreseen = starts[slices.Index(pairs, i)]
}

// progress is pair i's Options.Progress: it learns when the pair's clients
// became ready, and what the status line shows of it.
func (t *tracker) progress(i int) func(engine.Progress) {
	return func(p engine.Progress) {
		t.mu.Lock()
		defer t.mu.Unlock()
		r := t.runs[i]
		if r == nil {
			return
		}
		if r.ready.IsZero() {
			r.ready = t.now().Add(-p.Elapsed)
		}
		r.elapsed, r.ops, r.nemesis = p.Elapsed, p.Ops, p.Nemesis
	}
}

// forget drops pair i without a line: its run was interrupted.
func (t *tracker) forget(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, i)
	t.drawLocked()
}

// finish records how pair i ended and prints its line, and its block
// (log, then the verdicts) when it did not match, found something (a
// random run) or with -v. freed is when
// engine.Run returned, giving its seats up; err is Run's or the report's.
func (t *tracker) finish(i int, res *engine.Result, err error, log []byte, freed time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	p := t.plan[i]
	r := t.runs[i]
	if r == nil {
		r = &pairRun{begun: freed}
	}
	delete(t.runs, i)
	took, waited := freed.Sub(r.begun), time.Duration(0)
	if res != nil && !res.Started.IsZero() {
		took, waited = freed.Sub(res.Started), res.Started.Sub(r.begun)
		u := &t.use[i]
		u.held += took
		u.runs++
		t.waited[p.alone] = append(t.waited[p.alone], max(waited-r.foreseen, 0))
		if !r.ready.IsZero() {
			// The story is the time limit, or less where the run ended once
			// its story was over; the wind-up is the judging, with seats
			// held, and the report after.
			story := p.limit
			if res.EndedEarly {
				story = res.Played
			}
			u.own, u.early = story, res.EndedEarly
			o := overhead{startup: r.ready.Sub(res.Started), windup: now.Sub(r.ready) - story}
			u.start += o.startup
			u.story += story
			u.judge += freed.Sub(r.ready) - story
			u.reports += now.Sub(freed)
			if err == nil {
				t.seenByKind[p.kind] = append(t.seenByKind[p.kind], o)
				t.seenByLock[p.lock] = append(t.seenByLock[p.lock], o)
			}
		}
	}
	t.done++
	matched := err == nil && res != nil && res.Matched
	var b bytes.Buffer
	var fault time.Duration
	if res != nil {
		fault = res.Waited
	}
	fmt.Fprintln(&b, pairLine(place(t.done, t.total, t.again), p.name(), t.width, verdictOf(res, err), took, waited, fault, t.leftLocked(now)))
	// A random run's finding is read in its block, matched or not.
	if !matched || t.verbose || res != nil && res.Finding != "" {
		b.Write(log)
		if res != nil && res.Outcome != "" {
			report.Summary(&b, res)
		}
	}
	t.clearLocked()
	t.out.Write(b.Bytes())
	if err != nil {
		fmt.Fprintf(t.errOut, "run: %s/%s: %v\n", p.scenario, p.lock, err)
	}
	t.drawLocked()
}

// printf prints a line of the matrix's own between the pairs' lines.
func (t *tracker) printf(format string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLocked()
	fmt.Fprintf(t.out, format, a...)
	t.drawLocked()
}

// jobsLocked is the matrix at now as schedule sees it, and the pair of
// each job: the pairs whose clients work hold their seats for the rest of
// their time limit and their wind-up; a pair begun but not yet ready
// (waiting for seats, or starting up) and every pair not begun start in
// order, with their whole expected time (less what a begun one has spent,
// but never less than its time limit and wind-up).
func (t *tracker) jobsLocked(now time.Time) ([]job, []int) {
	var jobs []job
	var pairs, pending []int
	for i, r := range t.runs {
		p := t.plan[i]
		if r.ready.IsZero() {
			pending = append(pending, i)
			continue
		}
		o := t.expected(p)
		jobs = append(jobs, job{left: max(p.limit+o.windup-now.Sub(r.ready), 0), seats: p.seats(t.seats), holding: true})
		pairs = append(pairs, i)
	}
	whole := func(p pairPlan) time.Duration {
		return extraWait(t.waited[p.alone]) + p.limit + t.expected(p).total()
	}
	slices.SortFunc(pending, t.byBegun)
	for _, i := range pending {
		p := t.plan[i]
		jobs = append(jobs, job{left: max(whole(p)-now.Sub(t.runs[i].begun), p.limit+t.expected(p).windup), seats: p.seats(t.seats)})
	}
	for _, i := range t.queue {
		jobs = append(jobs, job{left: whole(t.plan[i]), seats: t.plan[i].seats(t.seats)})
	}
	return jobs, append(pairs, append(pending, t.queue...)...)
}

// byBegun orders pairs begun by when they began, then (begun in the same
// instant) by their place in the plan, which is the order they begin in.
func (t *tracker) byBegun(a, b int) int {
	return cmp.Or(t.runs[a].begun.Compare(t.runs[b].begun), cmp.Compare(a, b))
}

// leftLocked is the time left at now.
func (t *tracker) leftLocked(now time.Time) time.Duration {
	jobs, _ := t.jobsLocked(now)
	return timeLeft(jobs, t.parallel, t.seats)
}

// statusLocked is the status line: how many pairs are done, the time
// spent and left, and each pair begun: waiting for seats, starting, or
// its clients' time against their limit (with its ops and the nemesis's
// latest action when it runs by itself).
func (t *tracker) statusLocked(now time.Time) string {
	var b strings.Builder
	b.WriteString(place(t.done, t.total, t.again))
	fmt.Fprintf(&b, " %s", clock(now.Sub(t.begun)))
	jobs, pairs := t.jobsLocked(now)
	starts, left := schedule(jobs, t.parallel, t.seats)
	if r := roughly(left); r != "" {
		fmt.Fprintf(&b, ", %s left", r)
	}
	running := make([]int, 0, len(t.runs))
	for i := range t.runs {
		running = append(running, i)
	}
	slices.SortFunc(running, t.byBegun)
	for _, i := range running {
		r, p := t.runs[i], t.plan[i]
		fmt.Fprintf(&b, " · %s/%s ", p.scenario, p.lock)
		if r.ready.IsZero() {
			// Waiting for seats, or starting up: which, the layout says
			// (a wait other processes cause is not foreseen).
			if starts[slices.Index(pairs, i)] > 0 {
				b.WriteString("waits for seats")
			} else {
				b.WriteString("starting")
			}
			continue
		}
		fmt.Fprintf(&b, "%.1f/%.1f s", r.elapsed.Seconds(), p.limit.Seconds())
		if len(running) == 1 {
			fmt.Fprintf(&b, " %d ops", r.ops)
			if r.nemesis != "" {
				fmt.Fprintf(&b, ", %s", r.nemesis)
			}
		}
	}
	return cut(b.String(), columns()-1)
}

// drawLocked draws the status line over the one drawn before.
func (t *tracker) drawLocked() {
	if !t.live {
		return
	}
	fmt.Fprint(t.out, "\r\033[K"+t.statusLocked(t.now()))
	t.drawn = true
}

// clearLocked clears the status line, so a line printed next starts at
// the line's beginning.
func (t *tracker) clearLocked() {
	if t.drawn {
		fmt.Fprint(t.out, "\r\033[K")
		t.drawn = false
	}
}

// columns is the terminal's width, from $COLUMNS where a shell exports
// it, else 80: a status line longer than the terminal wraps, and \r then
// redraws only its last row.
func columns() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n >= 20 {
		return n
	}
	return 80
}

// cut shortens s to n characters, marking the cut.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
