package checker

import (
	"maps"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/history"
)

// MutexOperations turns the lock ops of a history into porcupine operations.
// An op with no completion or an info completion returns at +inf: it may
// take effect at any time after its call.
//
// A process retired while holding keys (it crashed, or any of its ops,
// a lock op too, had an unknown outcome) never gives them back, yet its
// leases run out: each key it holds gets a lapse, which frees the key
// whole (every reentrant entry) and may take effect any time after the
// retirement, and not before the latest deadline its hold's leases
// promised, where they promised one. The lock gave its word that the key
// was the holder's until then, and a crash does not make the lock give
// the key away sooner: another process granted it earlier got a key the
// lock still owed the dead holder. A lapse taking effect later than the
// deadline is no safety violation, so it may. A hold with no deadline
// lapses any time after the retirement.
//
// Three reductions keep the verdict and are what keeps the search small on
// long, faulty runs:
//   - a failed acquire is left out: every model allows it in every state
//     and it changes nothing, so it can be added to or removed from any
//     linearization;
//   - an acquire of unknown outcome that is its process's last op is left
//     out: it returns at +inf, so a linearization of the rest extends to one
//     of the whole by placing it last, without effect; and in a
//     linearization of the whole where it took the key, nothing after it can
//     be a success of another process until its process's lapse (the only
//     op of its process that may follow, which frees the key whether or not
//     it was taken), so every op between is a failed acquire or an unknown
//     one that may as well not take effect, and removing it leaves a
//     linearization. That needs every other op of its process before it,
//     and porcupine takes equal times as concurrent: one called at the
//     instant its process's previous op returned, which porcupine may
//     place before that op, is kept;
//   - a release of unknown outcome, or a lapse, that is its process's last
//     op returns at its call instead of +inf, and may be taken to have freed
//     the key: in a linearization of the whole, between that call and the
//     point where it took effect (or the end, if it never did) its process
//     holds the key, so every op of another process placed there is one that
//     may leave the state as it is (an unknown acquire that did not take
//     effect); moving it to its call, which every op called later follows
//     and every op returned earlier precedes, frees the key sooner and
//     leaves those ops legal. Its process has no later op that needs the key
//     held.
//
// Ops are ordered by their harness times alone: one that returned at the
// instant another was called is concurrent with it, as porcupine has it,
// even two of one process; the clock could not tell them apart.
//
// TestReductionKeepsTheVerdict checks the reductions against the full
// search on random histories, and TestCheckersAgreeWithReferences the
// whole against a brute-force search written from the definition.
func MutexOperations(ops []history.Op) []porcupine.Operation {
	return mutexOperations(ops, true)
}

// held is what a process holds of a key: how many entries, and the
// latest deadline their leases promised (0: none).
type held struct {
	entries  int
	deadline int64
}

func mutexOperations(ops []history.Op, reduce bool) []porcupine.Operation {
	pairs := history.Pairs(ops)
	last := map[int]int{} // each process's last op, as a place in pairs
	for i, p := range pairs {
		last[p.Invoke.Process] = i
	}
	var out []porcupine.Operation
	holding := map[int]map[string]held{}
	returned := map[int]int64{} // the latest return of each process's ops so far
	for i, p := range pairs {
		inv, c := p.Invoke, p.Completion
		if inv.Process == history.NemesisProcess {
			continue
		}
		if inv.F == history.Acquire || inv.F == history.Release {
			prev, seen := returned[inv.Process]
			o, keep := lockOperation(inv, c, holding, reduce && last[inv.Process] == i, seen && inv.Time <= prev)
			if keep {
				out = append(out, o)
				if !seen || o.Return > prev {
					returned[inv.Process] = o.Return
				}
			}
		}
		if c == nil || c.Type != history.Info {
			continue
		}
		// Retired: every key it still holds lapses.
		hs := holding[inv.Process]
		for _, key := range slices.Sorted(maps.Keys(hs)) {
			call := max(c.Time, hs[key].deadline)
			ret := int64(math.MaxInt64)
			if reduce && last[inv.Process] == i {
				ret = call
			}
			out = append(out, porcupine.Operation{ClientId: inv.Process,
				Input: MutexInput{F: lapse, Key: key, Process: inv.Process}, Call: call,
				Output: MutexOutput{Type: history.Info}, Return: ret})
		}
		delete(holding, inv.Process)
	}
	return out
}

// lockOperation is the porcupine operation of one acquire or release, and
// whether the reductions keep it (lastOp: it is its process's last op and
// the reductions are on; tied: it was called at the instant its process's
// previous op returned). It counts what the process holds.
func lockOperation(inv history.Op, c *history.Op, holding map[int]map[string]held, lastOp, tied bool) (porcupine.Operation, bool) {
	o := porcupine.Operation{
		ClientId: inv.Process,
		Input:    MutexInput{F: inv.F, Key: inv.Key, Process: inv.Process},
		Call:     inv.Time,
		Output:   MutexOutput{Type: history.Info},
		Return:   math.MaxInt64,
	}
	if c != nil && c.Type != history.Info {
		o.Output = MutexOutput{Type: c.Type}
		if c.Value != nil {
			o.Output = MutexOutput{Type: c.Type, Fence: c.Value.Fence}
		}
		o.Return = c.Time
	}
	typ := o.Output.(MutexOutput).Type
	hs := holding[inv.Process]
	switch {
	case inv.F == history.Acquire && typ == history.OK:
		if hs == nil {
			hs = map[string]held{}
			holding[inv.Process] = hs
		}
		h := hs[inv.Key]
		h.entries++
		if c.Value != nil {
			h.deadline = max(h.deadline, c.Value.Deadline)
		}
		hs[inv.Key] = h
	case inv.F == history.Release:
		if h, ok := hs[inv.Key]; ok {
			if h.entries--; h.entries == 0 {
				delete(hs, inv.Key)
			} else {
				hs[inv.Key] = h
			}
		}
	}
	if inv.F == history.Acquire && (typ == history.Fail || typ == history.Info && lastOp && !tied) {
		return o, false
	}
	if inv.F == history.Release && typ == history.Info && lastOp {
		o.Return = o.Call
	}
	return o, true
}
