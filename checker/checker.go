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

// MarshalJSON writes true, false or "unknown", as DESIGN.md's verdict says.
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

// Verdict is a checker's judgement of one history.
type Verdict struct {
	Checker string   `json:"checker"`
	Valid   Validity `json:"valid"`
	// Anomalies lists up to maxListed of each kind, in the order found.
	Anomalies []Anomaly `json:"anomalies,omitempty"`
	// Counts has every anomaly of every kind, listed or not.
	Counts  map[string]int `json:"anomaly_counts,omitempty"`
	Details map[string]any `json:"details,omitempty"`
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
	Name() string
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
