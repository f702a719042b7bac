// Package verdict turns what a run recorded into its outcome: the
// checkers' verdicts summed up by severity, whether the story happened
// (vacuity), whether the harness ran too late for the verdict to be
// evidence (starved), and whether all of that meets the expectation the
// story states for the lock. It knows nothing of how a run is started, so
// a run stored on disk can be judged again with the same code.
package verdict

// Outcome is what a run showed, in the words expectations are stated in.
// A typed word, not a string, so every place that names one is found by
// the compiler and stays in this one list.
type Outcome string

// Outcomes an expectation can state, most serious first.
const (
	// Unsafe: the protected resource was corrupted (lost update or stale
	// write).
	Unsafe Outcome = "unsafe"
	// LockUnsafe: two processes held the lock at once, yet the resource is
	// intact: what fencing tokens buy (Kleppmann).
	LockUnsafe Outcome = "lock-unsafe"
	// Deadlock: a key nobody held stayed unobtainable past the allowance.
	Deadlock Outcome = "deadlock"
	// Unfair: a later waiter was granted the lock before an earlier one.
	Unfair Outcome = "unfair"
	// Safe: every checker valid.
	Safe Outcome = "safe"
	// PromiseKept is what exploration expects of every lock: its promise
	// kept under the faults it claims to survive (locks.Info.Claims). A
	// random run is matched against the lock's claims, not a fixed outcome.
	PromiseKept Outcome = "promise-kept"
)

// Outcomes a run can end with that no expectation states: each says the
// run is not evidence, and none ever matches.
const (
	// Undecided: some checker could not decide.
	Undecided Outcome = "unknown"
	// Vacuous: the story did not happen (a required fault never fired, or
	// too few clients were at work around it).
	Vacuous Outcome = "vacuous"
	// Starved: the harness itself ran late (its timers, a node's replies,
	// a pause's overrun, a restart) by more than the story's timing
	// allows, so the checkers' verdict is not evidence either way.
	Starved Outcome = "starved"
	// Interrupted: the run was cancelled before it was judged; what it
	// recorded is on disk.
	Interrupted Outcome = "interrupted"
	// Errored: the run failed before it could be judged (a node that did
	// not start, say); the error is reported beside it.
	Errored Outcome = "error"
)

// Outcomes lists the outcomes an expectation may state, most serious
// first.
var Outcomes = []Outcome{Unsafe, LockUnsafe, Deadlock, Unfair, Safe}

// Judged says whether the outcome is evidence: the checkers decided, the
// story happened and the harness kept its timing. Only a judged outcome
// can match an expectation.
func (o Outcome) Judged() bool {
	switch o {
	case Undecided, Vacuous, Starved, Interrupted, Errored, "":
		return false
	}
	return true
}
