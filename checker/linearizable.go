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

// MutexOutput is the op's outcome; Unknown ops are the info ones. Fence is
// the fencing token an acquire returned (0: none).
type MutexOutput struct {
	Type  history.Type
	Fence int64
}

// free is the holder of an unheld key.
const free = math.MinInt

// MutexState is one key's state: who holds it, how many times (reentrant
// model), and the greatest fencing token handed out (fenced model).
type MutexState struct {
	Holder int
	Count  int
	Fence  int64
}

// Semantics picks what the lock promises, and so the model it is held to.
type Semantics int

// The three models.
const (
	// Mutex: one holder; acquire by the holder again is a violation.
	Mutex Semantics = iota
	// Reentrant: the holder may acquire again; it is free after as many
	// releases as acquires (owner + count).
	Reentrant
	// Fenced: a mutex whose every acquire returns a token greater than every
	// token handed out before it.
	Fenced
)

// Model is the porcupine model for s, partitioned by key. acquire ok takes
// a free key (or, reentrant, re-enters one); release by the holder (ok or
// refused: either way its belief ends) frees it (reentrant: counts down);
// failed acquires change nothing; an unknown acquire may or may not have
// taken the key, and an unknown release may or may not have freed it.
func Model(s Semantics) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{MutexState{Holder: free}} },
		Step: func(state, input, output any) []any {
			return step(s, state.(MutexState), input.(MutexInput), output.(MutexOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(MutexInput), output.(MutexOutput)
			if out.Fence > 0 {
				return fmt.Sprintf("%s(%s) by %d → %s, fence %d", in.F, in.Key, in.Process, out.Type, out.Fence)
			}
			return fmt.Sprintf("%s(%s) by %d → %s", in.F, in.Key, in.Process, out.Type)
		},
		DescribeState: func(state any) string {
			st := state.(MutexState)
			if st.Holder == free {
				return "free"
			}
			if st.Count > 1 {
				return fmt.Sprintf("held by %d ×%d", st.Holder, st.Count)
			}
			return fmt.Sprintf("held by %d", st.Holder)
		},
	}
	return m.ToModel()
}

func step(s Semantics, st MutexState, in MutexInput, out MutexOutput) []any {
	switch in.F {
	case history.Acquire:
		take := func() (MutexState, bool) {
			switch {
			case st.Holder == free:
				next := MutexState{Holder: in.Process, Count: 1, Fence: st.Fence}
				if s == Fenced && out.Type == history.OK {
					if out.Fence <= st.Fence {
						return st, false
					}
					next.Fence = out.Fence
				}
				return next, true
			case s == Reentrant && st.Holder == in.Process:
				return MutexState{Holder: st.Holder, Count: st.Count + 1, Fence: st.Fence}, true
			}
			return st, false
		}
		switch out.Type {
		case history.OK:
			if next, ok := take(); ok {
				return []any{next}
			}
			return nil
		case history.Info:
			if next, ok := take(); ok {
				return []any{st, next}
			}
		}
		return []any{st}
	case history.Release:
		if st.Holder != in.Process {
			return nil
		}
		next := MutexState{Holder: free, Fence: st.Fence}
		if st.Count > 1 {
			next = MutexState{Holder: st.Holder, Count: st.Count - 1, Fence: st.Fence}
		}
		if out.Type == history.Info {
			return []any{next, st}
		}
		return []any{next}
	}
	return nil
}

func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
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
}

// MutexOperations turns the lock ops of a history into porcupine operations.
// An op with no completion or an info completion returns at +inf: it may
// take effect at any time after its call. A process retired while holding a
// key (it crashed, or an op in its critical section had an unknown outcome)
// never releases it, yet its lease runs out: it gets a release of unknown
// outcome at its retirement, which may take effect any time after.
//
// Two kinds of op are left out, because they cannot change the verdict and
// they are what makes the search blow up on long, faulty runs:
//   - a failed acquire: every model allows it in every state and it changes
//     nothing, so it can be added to or removed from any linearization;
//   - an acquire of unknown outcome that is its process's last op: it
//     returns at +inf, so a linearization of the rest extends to one of the
//     whole by placing it last, without effect; and in a linearization of
//     the whole where it took the key, nothing after it can be a success
//     of another process (the key stays its holder's: no release follows),
//     so every later op is a failed acquire or an unknown one that may as
//     well not take effect, and removing it leaves a linearization.
//
// TestReductionKeepsTheVerdict checks this against the full search on
// random histories.
func MutexOperations(ops []history.Op) []porcupine.Operation {
	return mutexOperations(ops, true)
}

func mutexOperations(ops []history.Op, reduce bool) []porcupine.Operation {
	pairs := history.Pairs(ops)
	last := map[int]int{} // each process's last op, as a place in pairs
	for i, p := range pairs {
		last[p.Invoke.Process] = i
	}
	var out []porcupine.Operation
	holding := map[int]string{}
	for i, p := range pairs {
		inv := p.Invoke
		if inv.Process == history.NemesisProcess {
			continue
		}
		if inv.F != history.Acquire && inv.F != history.Release {
			if c := p.Completion; c != nil && c.Type == history.Info {
				if key, ok := holding[inv.Process]; ok {
					out = append(out, porcupine.Operation{ClientId: inv.Process,
						Input: MutexInput{F: history.Release, Key: key, Process: inv.Process}, Call: c.Time,
						Output: MutexOutput{Type: history.Info}, Return: math.MaxInt64})
					delete(holding, inv.Process)
				}
			}
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
			if c.Value != nil {
				o.Output = MutexOutput{Type: c.Type, Fence: c.Value.Fence}
			}
			o.Return = c.Time
		}
		typ := o.Output.(MutexOutput).Type
		switch {
		case inv.F == history.Acquire && typ == history.OK:
			holding[inv.Process] = inv.Key
		case inv.F == history.Release:
			delete(holding, inv.Process)
		}
		if reduce && inv.F == history.Acquire && (typ == history.Fail || typ == history.Info && last[inv.Process] == i) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// Linearizable checks the lock ops against a mutex model with porcupine.
type Linearizable struct {
	// Semantics picks the model (default Mutex).
	Semantics Semantics
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
	res, info := porcupine.CheckOperationsVerbose(Model(l.Semantics), pops, timeout)
	v := Verdict{Checker: "linearizable", Details: map[string]any{"operations": len(pops), "model": l.Semantics.String()}}
	switch res {
	case porcupine.Ok:
		v.Valid = Valid
	case porcupine.Illegal:
		v.add(Anomaly{
			Kind: "not-linearizable",
			Text: "no order of the acquire/release operations is consistent with " + l.Semantics.String() +
				": some acquire succeeded while another process held the key (see timeline.html for the longest legal prefix)",
		})
	default:
		v.Valid = Unknown
		v.Details["reason"] = fmt.Sprintf("search did not finish within %s", timeout)
	}
	return v, info
}

func (s Semantics) String() string {
	switch s {
	case Reentrant:
		return "a reentrant mutex (owner + count)"
	case Fenced:
		return "a fenced mutex (tokens strictly increasing)"
	}
	return "a mutex"
}
