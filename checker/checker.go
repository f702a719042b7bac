// Package checker judges a recorded history. Every checker is a pure
// function of the ops: no Redis, no clock, no files. Each is proven on
// histories that must pass and histories that must fail.
package checker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/history"
)

// Validity is a checker's answer: valid, invalid, or unknown (the checker
// could not decide, e.g. a search that ran out of time). Unknown never
// counts as valid.
type Validity int

// The three answers.
const (
	Unknown Validity = iota
	Valid
	Invalid
)

func (v Validity) String() string {
	switch v {
	case Valid:
		return "valid"
	case Invalid:
		return "invalid"
	}
	return "unknown"
}

// MarshalJSON writes true, false or "unknown": a reader of results.json
// tells a verdict that failed from one that could not decide.
func (v Validity) MarshalJSON() ([]byte, error) {
	switch v {
	case Valid:
		return []byte("true"), nil
	case Invalid:
		return []byte("false"), nil
	}
	return []byte(`"unknown"`), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *Validity) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		*v = Valid
	case "false":
		*v = Invalid
	case `"unknown"`:
		*v = Unknown
	default:
		return fmt.Errorf("checker: validity %s: want true, false or \"unknown\"", b)
	}
	return nil
}

// Anomaly is one thing that went wrong, told so a person can find it in the
// timeline: which processes, which key, which span of harness time.
type Anomaly struct {
	// Kind is a short name: double-holder, not-linearizable, lost-update,
	// stale-write.
	Kind      string `json:"kind"`
	Key       string `json:"key,omitempty"`
	Processes []int  `json:"processes,omitempty"`
	// Start and End are harness ns (End == Start for a point in time).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Text says it in words.
	Text string `json:"text"`
}

// Verdict is a checker's judgement of one history. It is written to
// results.json and read back to judge a stored run again, so every field
// reads back equal to what was written.
type Verdict struct {
	Checker Name     `json:"checker"`
	Valid   Validity `json:"valid"`
	// Anomalies lists up to maxListed of each kind, in the order found.
	Anomalies []Anomaly `json:"anomalies,omitempty"`
	// Counts has every anomaly of every kind, listed or not.
	Counts map[string]int `json:"anomaly_counts,omitempty"`
	// Details are the checker's own numbers beside the anomalies.
	Details Details `json:"details,omitzero"`
}

// Details are the numbers a checker reports beside its anomalies: how much
// it saw (so a valid verdict can be told from one about nothing), and what
// readers sum up, such as the writes a fenced store refused. They are typed
// fields, not a map, so a verdict loaded from results.json reads the same
// as the one written: a map's numbers would come back as float64.
//
// Each checker fills its own fields and leaves the others zero. A zero
// field is left out of results.json and reads back as zero, which, for the
// checker the verdict names, is what it meant. Spans of harness time are
// time.Duration, written as integer nanoseconds (the _ns keys).
type Details struct {
	// Resource: accepted, unknown-outcome and stale-fence-refused writes
	// of the register, increments lost, and stale writes accepted.
	WritesAccepted      int `json:"writes_accepted,omitempty"`
	WritesUnknown       int `json:"writes_unknown,omitempty"`
	StaleWritesRejected int `json:"stale_writes_rejected,omitempty"`
	// WritesWithheld are writes a holder did not send because its lock
	// had said the lease was lost.
	WritesWithheld      int `json:"writes_withheld,omitempty"`
	LostUpdates         int `json:"lost_updates,omitempty"`
	StaleWritesAccepted int `json:"stale_writes_accepted,omitempty"`

	// Intervals: the holds judged, the pairs that overlapped and their
	// total overlap, and the releases that took another's key.
	Holds           int           `json:"holds,omitempty"`
	DoubleHolders   int           `json:"double_holders,omitempty"`
	Overlap         time.Duration `json:"overlap_ns,omitempty"`
	ForeignReleases int           `json:"foreign_releases,omitempty"`
	// DoubleHeld is the time during which two processes or more held one
	// key, any key (the overlaps' union: time, not pairs), and Episodes
	// the spans of it, key by key (two clients on one key, then three, is
	// one episode).
	DoubleHeld time.Duration `json:"double_held_ns,omitempty"`
	Episodes   int           `json:"episodes,omitempty"`

	// Linearizable: the lock operations searched, the model, the
	// segments they were cut into, and why the search gave no answer
	// (when it did not).
	Operations int    `json:"operations,omitempty"`
	Model      string `json:"model,omitempty"`
	Segments   int    `json:"segments,omitempty"`
	Reason     string `json:"reason,omitempty"`

	// Promise: the promises (validity spans) the lock made, the pairs
	// that overlapped, the releases refused within their lease, and a
	// note when the lock made no promise to check.
	Promises       int    `json:"promises,omitempty"`
	BrokenPromises int    `json:"broken_promises,omitempty"`
	LeasesLost     int    `json:"leases_lost,omitempty"`
	Note           string `json:"note,omitempty"`

	// Liveness: the longest stall a correct lock may show, and the
	// longest stall seen.
	Allowance    time.Duration `json:"allowance_ns,omitempty"`
	LongestStall time.Duration `json:"longest_stall_ns,omitempty"`
	// SlotRefusals counts the acquires and releases that failed because
	// Redis Cluster answered TRYAGAIN: the lock's keys were split between
	// two masters while their slot moved, so its command could not run.
	SlotRefusals int `json:"slot_refusals,omitempty"`

	// GhostHolds: the spans longer than its bound in which the nodes held
	// a key no client believed it held, and the longest of them.
	GhostKeys    int           `json:"ghost_keys,omitempty"`
	LongestGhost time.Duration `json:"longest_ghost_ns,omitempty"`

	// StolenKeys: the keys a node handed from a live lease to another.
	StolenKeys int `json:"stolen_keys,omitempty"`

	// Fairness: the grants judged, and the overtakings among them.
	Grants      int `json:"grants,omitempty"`
	Overtakings int `json:"overtakings,omitempty"`
}

// add records an anomaly: the verdict becomes invalid, the kind is
// counted, and the anomaly is listed unless maxListed of its kind are.
func (v *Verdict) add(a Anomaly) {
	v.Valid = Invalid
	if v.Counts == nil {
		v.Counts = map[string]int{}
	}
	v.Counts[a.Kind]++
	if v.Counts[a.Kind] <= maxListed {
		v.Anomalies = append(v.Anomalies, a)
	}
}

// Checker judges a history.
type Checker interface {
	// Name is how verdicts and expectations refer to it.
	Name() Name
	// Check judges ops (the whole history, in recorded order).
	Check(ops []history.Op) Verdict
}

// maxListed bounds the anomalies of one kind a verdict lists; Counts has
// them all, so nothing is hidden, only abbreviated.
const maxListed = 20

// seconds prints a harness time as seconds since run start.
func seconds(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// span prints a length of harness time at a precision a person can use,
// from microseconds to seconds.
func span(ns int64) string { return time.Duration(ns).Round(time.Microsecond).String() }

// Compile-time proof that the verdict round-trips through results.json.
var _ json.Marshaler = Validity(0)
