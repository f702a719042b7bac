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
	var out []hold
	open := map[int]map[string]int{} // process → key → place in out
	type sent struct {
		at       int64
		hold     int
		deadline int64
		last     bool // gave back the hold's last entry
	}
	pending := map[int]sent{} // a release by a holder, awaiting its completion
	type refused struct {
		hold                int
		sent, ret, deadline int64
	}
	var refusals []refused
	var last int64
	for j := range ops {
		op := &ops[j]
		last = op.Time
		p := op.Process
		if p == history.NemesisProcess {
			continue
		}
		if s, ok := pending[p]; ok && op.Type != history.Invoke {
			delete(pending, p)
			if op.F == history.Release {
				if s.last {
					out[s.hold].release = op
				}
				if op.Type == history.Fail && op.Time < s.deadline {
					refusals = append(refusals, refused{s.hold, s.at, op.Time, s.deadline})
				}
			}
		}
		switch {
		case op.F == history.Acquire && op.Type == history.OK:
			i, ok := open[p][op.Key]
			if !ok {
				if open[p] == nil {
					open[p] = map[string]int{}
				}
				i = len(out)
				open[p][op.Key] = i
				out = append(out, hold{Hold: Hold{Key: op.Key, Process: p, Start: op.Time}})
			}
			l := lease{at: op.Time}
			if op.Value != nil {
				l.deadline, l.token = op.Value.Deadline, op.Value.Token
			}
			out[i].entries++
			out[i].leases = append(out[i].leases, l)
		case op.F == history.Release && op.Type == history.Invoke:
			i, ok := open[p][op.Key]
			if !ok {
				break // not held: it gives back nothing
			}
			out[i].entries--
			done := out[i].entries == 0
			pending[p] = sent{at: op.Time, hold: i, deadline: out[i].deadline(op.Time), last: done}
			if done {
				out[i].End, out[i].Released = op.Time, true
				delete(open[p], op.Key)
			}
		}
		if op.Type == history.Info {
			// A retired process is gone; whatever it believed ends here,
			// though nothing was given back.
			for _, i := range open[p] {
				out[i].End = op.Time
			}
			delete(open, p)
		}
	}
	for _, keys := range open {
		for _, i := range keys {
			out[i].End, out[i].Open = last, true
		}
	}
	rs := make([]Refusal, len(refusals))
	for n, r := range refusals {
		rs[n] = Refusal{Hold: out[r.hold].Hold, Sent: r.sent, Returned: r.ret, Deadline: r.deadline}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, rs
}
