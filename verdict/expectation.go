package verdict

import (
	"fmt"
	"slices"
	"strings"
)

// Expectation is what a lock must show under a scenario.
type Expectation struct {
	// Outcome is one of Outcomes (PromiseKept for exploration).
	Outcome Outcome `json:"outcome"`
	// Show lists observations that must be seen: proof the story happened
	// the way it is told, not some other way.
	Show []string `json:"show,omitempty"`
	// Hide lists observations that must not be seen.
	Hide []string `json:"hide,omitempty"`
	// Why cites the argument behind the expectation.
	Why string `json:"why"`
}

// String prints the expectation as the matrix shows it and
// ParseExpectation reads it back.
func (e Expectation) String() string {
	s := string(e.Outcome)
	for _, o := range e.Show {
		s += " +" + o
	}
	for _, o := range e.Hide {
		s += " −" + o
	}
	return s
}

// The observations that are facts of the run rather than anomaly kinds a
// checker counts.
const (
	// StaleWriteRejected: the fenced store refused at least one write.
	StaleWriteRejected = "stale-write-rejected"
	// GhostKey: a node held the lock key while no client believed it held
	// it, longer than a command's round trip (a lost reply, a dead
	// holder's lease): what a story of lost replies must show happened.
	GhostKey = "ghost-key"
	// WriteWithheld: a holder did not write because its lock had said the
	// lease was lost (locks.Lease.Lost).
	WriteWithheld = "write-withheld"
	// SlotBusy: Redis Cluster refused a lock's acquire or release with
	// TRYAGAIN while the key's slot moved (a script of several keys, some
	// moved and some not yet).
	SlotBusy = "slot-busy"
)

// ObservationWords lists what an expectation may require (+) or forbid (−):
// the anomaly kinds the checkers report, and the facts a run records.
var ObservationWords = []string{
	"deadlock", "double-holder", "foreign-release", "ghost-hold", GhostKey, "lease-lost", "lost-update", "not-linearizable",
	"overtaken", "promise-broken", SlotBusy, "stale-write", StaleWriteRejected, "stolen-key", WriteWithheld,
}

// ParseExpectation reads an expectation in the words the matrix prints:
// an outcome, then observations that must be seen ("+promise-broken") or
// must not ("-foreign-release", or with the matrix's "−"). Unknown words are
// an error that lists the valid ones.
func ParseExpectation(s string) (Expectation, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Expectation{}, fmt.Errorf("empty expectation: want an outcome (%s)", outcomeList())
	}
	e := Expectation{Outcome: Outcome(fields[0])}
	if !slices.Contains(Outcomes, e.Outcome) {
		return Expectation{}, fmt.Errorf("unknown outcome %q (valid: %s)", e.Outcome, outcomeList())
	}
	for _, f := range fields[1:] {
		var word string
		var list *[]string
		switch {
		case strings.HasPrefix(f, "+"):
			word, list = f[1:], &e.Show
		case strings.HasPrefix(f, "-"):
			word, list = f[1:], &e.Hide
		case strings.HasPrefix(f, "−"):
			word, list = strings.TrimPrefix(f, "−"), &e.Hide
		default:
			return Expectation{}, fmt.Errorf("%q in %q: an observation needs + (must be seen) or - (must not be)", f, s)
		}
		if !slices.Contains(ObservationWords, word) {
			return Expectation{}, fmt.Errorf("unknown observation %q (valid: %s)", word, strings.Join(ObservationWords, ", "))
		}
		*list = append(*list, word)
	}
	return e, nil
}

func outcomeList() string {
	words := make([]string, len(Outcomes))
	for i, o := range Outcomes {
		words[i] = string(o)
	}
	return strings.Join(words, ", ")
}

// Matches says whether an outcome and its observations meet e. An outcome
// that is not evidence (Judged false) meets nothing.
func Matches(e Expectation, outcome Outcome, observations []string) bool {
	if outcome != e.Outcome || !outcome.Judged() {
		return false
	}
	for _, o := range e.Show {
		if !slices.Contains(observations, o) {
			return false
		}
	}
	for _, o := range e.Hide {
		if slices.Contains(observations, o) {
			return false
		}
	}
	return true
}
