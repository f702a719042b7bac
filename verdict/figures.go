package verdict

import (
	"fmt"
	"time"

	"github.com/locktorture/locktorture/checker"
)

// Figures are a run's answer as a person weighs it, beside its verdict:
// how much of what the store acknowledged was lost, and for how long two
// clients believed they held the same key. Jepsen reports a lock's
// findings this way ("the loss of ~18% of acknowledged updates").
type Figures struct {
	// WritesAcked are the register writes the store acknowledged;
	// WritesLost the increments among them that another holder's write
	// undid (lost updates). LostFraction is the one over the other (0
	// when nothing was acknowledged).
	WritesAcked  int     `json:"writes_acked"`
	WritesLost   int     `json:"writes_lost"`
	LostFraction float64 `json:"lost_fraction"`
	// Span is the time the clients worked, from the run's start (every
	// client up) to its last op; DoubleHeld the time within it during
	// which two clients or more held one key, and DoubleHeldFraction
	// the one over the other. Episodes are the separate spans of it, key
	// by key.
	Span               time.Duration `json:"span_ns"`
	DoubleHeld         time.Duration `json:"double_held_ns"`
	DoubleHeldFraction float64       `json:"double_held_fraction"`
	Episodes           int           `json:"episodes"`
}

// figuresOf reads the figures from the verdicts of a run whose clients
// worked from ready to last (harness ns).
func figuresOf(vs []checker.Verdict, ready, last int64) Figures {
	var f Figures
	for _, v := range vs {
		switch v.Checker {
		case checker.ResourceName:
			f.WritesAcked, f.WritesLost = v.Details.WritesAccepted, v.Details.LostUpdates
		case checker.IntervalsName:
			f.DoubleHeld, f.Episodes = v.Details.DoubleHeld, v.Details.Episodes
		}
	}
	if f.WritesAcked > 0 {
		f.LostFraction = float64(f.WritesLost) / float64(f.WritesAcked)
	}
	if last > ready {
		f.Span = time.Duration(last - ready)
		f.DoubleHeldFraction = min(1, float64(f.DoubleHeld)/float64(f.Span))
	}
	return f
}

// String says the figures in one line.
func (f Figures) String() string {
	return fmt.Sprintf("%d of %d acknowledged writes lost (%.2f%%); two holders for %s of %s (%.2f%%) in %d episode(s)",
		f.WritesLost, f.WritesAcked, 100*f.LostFraction, f.DoubleHeld.Round(time.Millisecond), f.Span.Round(time.Millisecond),
		100*f.DoubleHeldFraction, f.Episodes)
}
