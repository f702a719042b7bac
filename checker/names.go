package checker

import "slices"

// Name names a checker. A verdict carries it (Verdict.Checker, the
// "checker" key of results.json) and readers pick a run's verdicts by it,
// so they compare with these constants instead of spelling the words.
type Name string

// The checkers' names, as results.json writes them.
const (
	// ResourceName is Resource's: the protected register.
	ResourceName Name = "resource"
	// IntervalsName is Intervals': overlapping beliefs of holding a key.
	IntervalsName Name = "intervals"
	// LinearizableName is Linearizable's: the lock ops against a model.
	LinearizableName Name = "linearizable"
	// PromiseName is Promise's: the lock against its validity deadlines.
	PromiseName Name = "promise"
	// LivenessName is Liveness': keys stuck past the allowance.
	LivenessName Name = "liveness"
	// GhostHoldsName is GhostHolds': keys the nodes held for nobody.
	GhostHoldsName Name = "ghost-holds"
	// StolenKeysName is StolenKeys': keys taken from a live owner.
	StolenKeysName Name = "stolen-keys"
	// FairnessName is Fairness': later waiters granted first.
	FairnessName Name = "fairness"
)

// Severity is what one checker's Invalid verdict means for the run as a
// whole, in the outcome word expectations are stated in. The word is a
// plain string: the packages that type outcomes import this one.
type Severity struct {
	// Checker is the checker whose Invalid verdict this entry reads.
	Checker Name
	// Outcome is the run's outcome when this is the most serious entry
	// whose checker found the history invalid.
	Outcome string
}

// severities is the table Severities copies and Worst walks.
var severities = [...]Severity{
	{ResourceName, "unsafe"},
	{IntervalsName, "lock-unsafe"},
	{LinearizableName, "lock-unsafe"},
	{PromiseName, "lock-unsafe"},
	{StolenKeysName, "lock-unsafe"},
	{LivenessName, "deadlock"},
	{GhostHoldsName, "deadlock"},
	{FairnessName, "unfair"},
}

// Severities returns the outcome each checker's failure means, the most
// serious first: a corrupted resource ("unsafe"), then a violated lock,
// whichever of four checkers saw it ("lock-unsafe"), then a stuck one
// ("deadlock"), then an unfair one ("unfair"). A run's outcome is the
// Outcome of the first entry whose checker found the history invalid, so
// code that sums verdicts up walks this table rather than naming checkers.
// Every checker of this package has exactly one entry. The slice is a
// copy, so no caller can reorder the table for the others.
func Severities() []Severity { return slices.Clone(severities[:]) }

// Worst returns the first entry of Severities whose checker gave an
// Invalid verdict in vs, and false when none did. It decides nothing about
// Unknown verdicts (whether one leaves the run undecided is the caller's
// rule), and a verdict of a checker not in the table is not counted.
func Worst(vs []Verdict) (Severity, bool) {
	for _, s := range severities {
		if slices.ContainsFunc(vs, func(v Verdict) bool { return v.Checker == s.Checker && v.Valid == Invalid }) {
			return s, true
		}
	}
	return Severity{}, false
}
