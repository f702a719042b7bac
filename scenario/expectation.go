package scenario

import (
	"fmt"
	"slices"
	"strings"
)

// Outcomes lists the outcome words an expectation may state, most serious
// first.
var Outcomes = []string{Unsafe, LockUnsafe, Deadlock, Unfair, Safe}

// ObservationWords lists what an expectation may require (+) or forbid (−):
// the anomaly kinds the checkers report, and the facts a run records.
var ObservationWords = []string{
	"deadlock", "double-holder", "foreign-release", "lease-lost", "lost-update", "not-linearizable",
	"overtaken", "promise-broken", "stale-write", StaleWriteRejected,
}

// ParseExpectation reads an expectation in the words the matrix prints:
// an outcome, then observations that must be seen ("+promise-broken") or
// must not ("-foreign-release", or with the matrix's "−"). Unknown words are
// an error that lists the valid ones.
func ParseExpectation(s string) (Expectation, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Expectation{}, fmt.Errorf("empty expectation: want an outcome (%s)", strings.Join(Outcomes, ", "))
	}
	e := Expectation{Outcome: fields[0]}
	if !slices.Contains(Outcomes, e.Outcome) {
		return Expectation{}, fmt.Errorf("unknown outcome %q (valid: %s)", e.Outcome, strings.Join(Outcomes, ", "))
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
