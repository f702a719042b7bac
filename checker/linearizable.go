package checker

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/history"
)

// MutexInput is what porcupine sees of a lock op.
type MutexInput struct {
	F       string // history.Acquire or history.Release
	Key     string
	Process int
}

// MutexOutput is the op's outcome; Unknown ops are the info ones.
type MutexOutput struct {
	Type history.Type
}

// free is the state of an unheld key; any other state is the holder's
// process id.
const free = math.MinInt

// MutexModel is an owner-aware mutex per key. acquire ok takes a free key;
// release by the holder (ok or refused: either way its belief ends) frees
// it; failed acquires change nothing; an unknown acquire may or may not have
// taken the key, and an unknown release may or may not have freed it.
var MutexModel = porcupine.NondeterministicModel{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range ops {
			k := op.Input.(MutexInput).Key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{free} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(int), input.(MutexInput), output.(MutexOutput)
		switch in.F {
		case history.Acquire:
			switch out.Type {
			case history.OK:
				if s == free {
					return []any{in.Process}
				}
				return nil
			case history.Info:
				if s == free {
					return []any{free, in.Process}
				}
			}
			return []any{s}
		case history.Release:
			if s != in.Process {
				return nil
			}
			if out.Type == history.Info {
				return []any{free, s}
			}
			return []any{free}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(MutexInput), output.(MutexOutput)
		return fmt.Sprintf("%s(%s) by %d → %s", in.F, in.Key, in.Process, out.Type)
	},
	DescribeState: func(state any) string {
		if state.(int) == free {
			return "free"
		}
		return fmt.Sprintf("held by %d", state.(int))
	},
}

// MutexOperations turns the lock ops of a history into porcupine operations.
// An op with no completion or an info completion returns at +inf: it may
// take effect at any time after its call.
func MutexOperations(ops []history.Op) []porcupine.Operation {
	var out []porcupine.Operation
	for _, p := range history.Pairs(ops) {
		inv := p.Invoke
		if inv.Process == history.NemesisProcess || (inv.F != history.Acquire && inv.F != history.Release) {
			continue
		}
		o := porcupine.Operation{
			ClientId: inv.Process,
			Input:    MutexInput{F: inv.F, Key: inv.Key, Process: inv.Process},
			Call:     inv.Time,
			Output:   MutexOutput{Type: history.Info},
			Return:   math.MaxInt64,
		}
		if c := p.Completion; c != nil && c.Type != history.Info {
			o.Output = MutexOutput{Type: c.Type}
			o.Return = c.Time
		}
		out = append(out, o)
	}
	return out
}

// Linearizable checks the lock ops against MutexModel with porcupine.
type Linearizable struct {
	// Timeout bounds the search; when it runs out the answer is Unknown.
	Timeout time.Duration
}

// Name is "linearizable".
func (Linearizable) Name() string { return "linearizable" }

// Check runs porcupine and reports the verdict.
func (l Linearizable) Check(ops []history.Op) Verdict {
	v, _ := l.CheckInfo(ops)
	return v
}

// CheckInfo is Check that also returns porcupine's linearization info, from
// which the report draws the HTML timeline.
func (l Linearizable) CheckInfo(ops []history.Op) (Verdict, porcupine.LinearizationInfo) {
	timeout := l.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	pops := MutexOperations(ops)
	res, info := porcupine.CheckOperationsVerbose(MutexModel.ToModel(), pops, timeout)
	v := Verdict{Checker: "linearizable", Details: map[string]any{"operations": len(pops)}}
	switch res {
	case porcupine.Ok:
		v.Valid = Valid
	case porcupine.Illegal:
		v.Valid = Invalid
		v.Anomalies = append(v.Anomalies, Anomaly{
			Kind: "not-linearizable",
			Text: "no order of the acquire/release operations is consistent with a mutex: some acquire succeeded while another process held the key (see timeline.html for the longest legal prefix)",
		})
	default:
		v.Valid = Unknown
		v.Details["reason"] = fmt.Sprintf("search did not finish within %s", timeout)
	}
	return v, info
}
