package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Overlap is a span during which two processes held one key: A's hold
// (begun at AStart) was still on when B's began.
type Overlap struct {
	Key        string
	A, B       int
	AStart     int64
	Start, End int64
}

// Overlaps finds every pair of holds of different processes on one key
// where one began while the other was held, ordered by key, then by the
// earlier hold's start. Holds that began at the same instant overlap if
// either lasted at all.
func Overlaps(holds []Hold) []Overlap {
	byKey := map[string][]Hold{}
	for _, h := range holds {
		byKey[h.Key] = append(byKey[h.Key], h)
	}
	var out []Overlap
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		hs := byKey[k]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].Start < hs[j].Start })
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if b.Start > a.Start && b.Start >= a.End && !a.Open {
					break // neither this one nor any later began during a
				}
				first, second := a, b
				if !a.beganDuring(b) {
					first, second = b, a // both began at one instant, and a lasted not at all
				}
				if a.Process == b.Process || !first.beganDuring(second) {
					continue
				}
				out = append(out, Overlap{Key: k, A: first.Process, B: second.Process, AStart: first.Start,
					Start: second.Start, End: min(a.End, b.End)})
			}
		}
	}
	return out
}

// DoubleHeld is the time during which some key had two holders or more
// (the union of the overlaps, over every key), and the episodes: the
// spans of it, key by key.
func DoubleHeld(overlaps []Overlap) (time.Duration, int) {
	type span struct{ start, end int64 }
	var all []span
	episodes := 0
	byKey := map[string][]span{}
	for _, o := range overlaps {
		byKey[o.Key] = append(byKey[o.Key], span{o.Start, o.End})
		all = append(all, span{o.Start, o.End})
	}
	// merge sorts spans and joins those that touch or overlap.
	merge := func(ss []span) []span {
		slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.start, b.start) })
		var out []span
		for _, s := range ss {
			if n := len(out); n > 0 && s.start <= out[n-1].end {
				out[n-1].end = max(out[n-1].end, s.end)
				continue
			}
			out = append(out, s)
		}
		return out
	}
	for _, ss := range byKey {
		episodes += len(merge(ss))
	}
	var total int64
	for _, s := range merge(all) {
		total += s.end - s.start
	}
	return time.Duration(total), episodes
}

// Intervals finds mutual-exclusion violations as plainly as possible: two
// processes whose belief intervals on one key overlap in real time, whatever
// Redis believed. It names both holders and the span they shared.
type Intervals struct{}

// Name is IntervalsName.
func (Intervals) Name() Name { return IntervalsName }

// Check reports every overlapping pair of holds.
func (Intervals) Check(ops []history.Op) Verdict {
	hs, refusals := holdsOf(ops)
	holds := make([]Hold, len(hs))
	for i := range hs {
		holds[i] = hs[i].Hold
	}
	v := Verdict{Checker: IntervalsName, Valid: Valid, Details: Details{Holds: len(holds)}}
	count := 0
	var overlap int64
	overlaps := Overlaps(holds)
	v.Details.DoubleHeld, v.Details.Episodes = DoubleHeld(overlaps)
	for _, o := range overlaps {
		count++
		overlap += o.End - o.Start
		v.add(Anomaly{
			Kind: "double-holder", Key: o.Key, Processes: []int{o.A, o.B},
			Start: o.Start, End: o.End,
			Text: fmt.Sprintf("processes %d and %d both held %q from %s to %s (%s)",
				o.A, o.B, o.Key, seconds(o.Start), seconds(o.End), span(o.End-o.Start)),
		})
	}
	if count > 0 {
		v.Details.DoubleHolders = count
		v.Details.Overlap = time.Duration(overlap)
	}
	if n := foreignReleases(hs, refusals, &v); n > 0 {
		v.Details.ForeignReleases = n
	}
	return v
}

// foreignReleases finds releases that succeeded while another process,
// which acquired the key after the releaser did, still held it: the
// release deleted someone else's lock (S3, owner-blind DEL). Two shapes:
//   - the other's hold began before the release was sent and was still on
//     when it was sent;
//   - the other's acquire returned while the release was in flight (its
//     SET may have landed before the DEL), and its own release was then
//     refused while its lease was still promised (Refused): the key it was
//     promised was gone, and the DEL in flight is what took it.
//
// A release that returned while its own lease was still promised is
// never foreign: the lock said the key was the releaser's all the while
// the release ran, so the key it deleted was its own. Another holder
// then means the lock granted the key twice, which double-holder and
// promise-broken report.
//
// The history cannot say what a DEL deleted: the text says what the
// history shows, and claims the deletion only with the refusal as witness.
func foreignReleases(holds []hold, refusals []Refusal, v *Verdict) int {
	type id struct {
		process int
		key     string
		start   int64
	}
	byKey := map[string][]Hold{} // ordered by start, as holds are
	for _, h := range holds {
		byKey[h.Key] = append(byKey[h.Key], h.Hold)
	}
	refused := map[id][]Refusal{} // a hold's releases refused within its lease, in order
	for _, r := range refusals {
		k := id{r.Process, r.Key, r.Start}
		refused[k] = append(refused[k], r)
	}
	n := 0
	for i := range holds {
		mine := &holds[i]
		c := mine.release
		if c == nil || c.Type != history.OK || c.Time < mine.deadline(mine.End) {
			continue
		}
		sent := mine.End
		hs := byKey[mine.Key]
		// Holds that began after mine and before my release returned...
		j := sort.Search(len(hs), func(j int) bool { return hs[j].Start > mine.Start })
		for ; j < len(hs) && hs[j].Start < c.Time; j++ {
			q := hs[j]
			if q.Process == mine.Process || q.End <= sent {
				continue
			}
			var r Refusal
			wasRefused := false
			for _, x := range refused[id{q.Process, q.Key, q.Start}] {
				if x.Sent >= sent {
					r, wasRefused = x, true
					break
				}
			}
			var text string
			switch {
			case q.Start < sent && wasRefused:
				// ...still on when it was sent, and the victim's own
				// release later refused within its lease;
				text = fmt.Sprintf("process %d's release at %s succeeded while process %d held %q; process %d's own release at %s, "+
					"within its lease, was refused: the key had been deleted from under it",
					mine.Process, seconds(sent), q.Process, mine.Key, q.Process, seconds(r.Sent))
			case q.Start < sent:
				// ...still on when it was sent;
				text = fmt.Sprintf("process %d's release at %s succeeded while process %d held %q: if it deleted anything, it was process %d's lock",
					mine.Process, seconds(sent), q.Process, mine.Key, q.Process)
			case wasRefused:
				// ...or begun while it was in flight, with the victim's
				// release refused within its lease.
				text = fmt.Sprintf("process %d acquired %q at %s while process %d's release (sent at %s) was in flight; process %d's own release at %s, "+
					"%s later and within its lease, was refused: the release in flight deleted process %d's lock",
					q.Process, mine.Key, seconds(q.Start), mine.Process, seconds(sent), q.Process, seconds(r.Sent), span(r.Sent-q.Start), q.Process)
			default:
				continue
			}
			n++
			v.add(Anomaly{Kind: "foreign-release", Key: mine.Key, Processes: []int{mine.Process, q.Process},
				Start: sent, End: c.Time, Text: text})
		}
	}
	return n
}
