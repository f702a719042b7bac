package checker

import (
	"sort"

	"github.com/locktorture/locktorture/history"
)

// Hold is one span during which a process believed it held a key: from the
// return of the acquire that took it until the invoke of the release that
// gave back its last entry (a reentrant holder enters and leaves as often
// as it likes; a hold counts its entries), until its process was retired
// by an unknown outcome, or until the history ended. A process holds each
// key on its own.
type Hold struct {
	Key     string
	Process int
	Start   int64
	End     int64
	// Open is true when the history ended with the hold still believed.
	Open bool
	// Released is true when a release ended the hold. A hold ended by its
	// process's retirement gave nothing back: the key stays where it was
	// until the lease runs out.
	Released bool
}

// beganDuring reports whether b began while a was held: from the instant a's
// acquire returned until a's release was sent (or for good, if a is open).
func (a Hold) beganDuring(b Hold) bool {
	return a.Start <= b.Start && (b.Start < a.End || a.Open)
}

// lease is one successful acquire within a hold: when it returned, the
// validity deadline it came with (0: none), and its token, by which what
// a node held is told apart ("": none recorded).
type lease struct {
	at, deadline int64
	token        string
}

// hold is a Hold with the leases granted in it, how many entries it
// still counts and, for a hold a release ended, that release's completion
// (nil if none was recorded).
type hold struct {
	Hold
	leases  []lease
	entries int
	release *history.Op
}

// deadline is the latest deadline promised in h by time t (0: none).
func (h *hold) deadline(t int64) int64 {
	var d int64
	for _, l := range h.leases {
		if l.at <= t {
			d = max(d, l.deadline)
		}
	}
	return d
}

// Holds extracts every belief interval from a history, ordered by start.
func Holds(ops []history.Op) []Hold {
	hs, _ := holdsOf(ops)
	out := make([]Hold, len(hs))
	for i := range hs {
		out[i] = hs[i].Hold
	}
	return out
}

// holdsOf walks the history once and returns its holds, ordered by start,
// and the releases refused while their lease was still promised.
func holdsOf(ops []history.Op) ([]hold, []Refusal) {
	w := holdWalk{open: map[int]map[string]int{}, pending: map[int]sentRelease{}}
	var last int64
	for j := range ops {
		op := &ops[j]
		last = op.Time
		if op.Process != history.NemesisProcess {
			w.step(op)
		}
	}
	return w.finish(last)
}

// holdWalk is holdsOf's walk through the history.
type holdWalk struct {
	out     []hold
	open    map[int]map[string]int // process → key → place in out
	pending map[int]sentRelease    // a release by a holder, awaiting its completion
	refused []refusedRelease
}

// sentRelease is a holder's release, sent and not yet answered.
type sentRelease struct {
	at       int64
	hold     int
	deadline int64
	last     bool // gave back the hold's last entry
}

// refusedRelease is a release refused before its hold's deadline.
type refusedRelease struct {
	hold                int
	sent, ret, deadline int64
}

// step takes in one client op.
func (w *holdWalk) step(op *history.Op) {
	if op.Type != history.Invoke {
		w.answer(op)
	}
	switch {
	case op.F == history.Acquire && op.Type == history.OK:
		w.enter(op)
	case op.F == history.Release && op.Type == history.Invoke:
		w.leave(op)
	}
	if op.Type == history.Info {
		w.retire(op)
	}
}

// answer settles the release its process sent, if op completes one: the
// completion of a hold's last release is kept, and a refusal within the
// lease's promise is noted.
func (w *holdWalk) answer(op *history.Op) {
	s, ok := w.pending[op.Process]
	if !ok {
		return
	}
	delete(w.pending, op.Process)
	if op.F != history.Release {
		return
	}
	if s.last {
		w.out[s.hold].release = op
	}
	if op.Type == history.Fail && op.Time < s.deadline {
		w.refused = append(w.refused, refusedRelease{s.hold, s.at, op.Time, s.deadline})
	}
}

// enter takes in a granted acquire: it begins a hold of its key by its
// process, or enters the one it has again.
func (w *holdWalk) enter(op *history.Op) {
	p := op.Process
	i, ok := w.open[p][op.Key]
	if !ok {
		if w.open[p] == nil {
			w.open[p] = map[string]int{}
		}
		i = len(w.out)
		w.open[p][op.Key] = i
		w.out = append(w.out, hold{Hold: Hold{Key: op.Key, Process: p, Start: op.Time}})
	}
	l := lease{at: op.Time}
	if op.Value != nil {
		l.deadline, l.token = op.Value.Deadline, op.Value.Token
	}
	w.out[i].entries++
	w.out[i].leases = append(w.out[i].leases, l)
}

// leave takes in a sent release: it gives back one entry of its process's
// hold of the key, ending the hold with the last. A release of a key not
// held gives back nothing.
func (w *holdWalk) leave(op *history.Op) {
	p := op.Process
	i, ok := w.open[p][op.Key]
	if !ok {
		return
	}
	w.out[i].entries--
	done := w.out[i].entries == 0
	w.pending[p] = sentRelease{at: op.Time, hold: i, deadline: w.out[i].deadline(op.Time), last: done}
	if done {
		w.out[i].End, w.out[i].Released = op.Time, true
		delete(w.open[p], op.Key)
	}
}

// retire ends every hold of op's process: a retired process is gone, and
// whatever it believed ends here, though nothing was given back.
func (w *holdWalk) retire(op *history.Op) {
	for _, i := range w.open[op.Process] {
		w.out[i].End = op.Time
	}
	delete(w.open, op.Process)
}

// finish leaves the holds still believed open at last, the history's
// end, and returns the holds by start and the refusals.
func (w *holdWalk) finish(last int64) ([]hold, []Refusal) {
	for _, keys := range w.open {
		for _, i := range keys {
			w.out[i].End, w.out[i].Open = last, true
		}
	}
	rs := make([]Refusal, len(w.refused))
	for n, r := range w.refused {
		rs[n] = Refusal{Hold: w.out[r.hold].Hold, Sent: r.sent, Returned: r.ret, Deadline: r.deadline}
	}
	sort.SliceStable(w.out, func(i, j int) bool { return w.out[i].Start < w.out[j].Start })
	return w.out, rs
}
