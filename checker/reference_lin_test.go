package checker

import (
	"math"

	"github.com/locktorture/locktorture/history"
)

// refLapse names a retired holder's lease running out.
const refLapse = "lapse"

// refLinOp is one lock op as the definition sees it: who, what, when it
// was called and returned (+inf: unknown outcome, it may take effect any
// time after its call, or never), and how it came out.
type refLinOp struct {
	p         int
	f         string // acquire, release, or lapse (a retired holder's lease running out)
	call, ret int64
	typ       history.Type
	fence     int64
}

// refLinOps is each key's lock ops, from the history directly: every
// acquire and release, and for each key a process held when it was
// retired (an info completion of any op), a lapse called at the
// retirement or at the latest deadline its hold was promised, if later.
func refLinOps(ops []history.Op) map[string][]refLinOp {
	out := map[string][]refLinOp{}
	for _, pops := range refProcs(ops) {
		for i, op := range pops {
			if op.Type == history.Info {
				for _, k := range refKeys(ops) {
					if s := refFold(pops[:i+1], k); s.entries > 0 {
						out[k] = append(out[k], refLinOp{p: op.Process, f: refLapse, call: max(op.Time, s.deadline), ret: math.MaxInt64, typ: history.Info})
					}
				}
			}
			if op.Type != history.Invoke || (op.F != history.Acquire && op.F != history.Release) {
				continue
			}
			o := refLinOp{p: op.Process, f: op.F, call: op.Time, ret: math.MaxInt64, typ: history.Info}
			if i+1 < len(pops) && pops[i+1].Type != history.Info {
				c := pops[i+1]
				o.ret, o.typ = c.Time, c.Type
				if c.Value != nil {
					o.fence = c.Value.Fence
				}
			}
			out[op.Key] = append(out[op.Key], o)
		}
	}
	return out
}

// refMutex is a key's state under the model.
type refMutex struct {
	holder, count int // holder -1: free
	fence         int64
}

// refStep is every state o may leave st in, by the model's definition:
// an acquire takes a free key, or re-enters the holder's (reentrant); a
// fenced acquire must bring a token greater than any before it; a failed
// acquire does nothing; a release must be the holder's and gives back one
// entry; an op of unknown outcome may also not happen; a lapse frees its
// process's key whole, and of another's key does nothing.
func refStep(sem Semantics, st refMutex, o refLinOp) []refMutex {
	var next []refMutex
	switch o.f {
	case history.Acquire:
		if o.typ == history.Fail {
			return []refMutex{st}
		}
		switch {
		case st.holder == -1:
			n := refMutex{o.p, 1, st.fence}
			if sem == Fenced && o.typ == history.OK {
				if o.fence > st.fence {
					next = append(next, refMutex{o.p, 1, o.fence})
				}
			} else {
				next = append(next, n)
			}
		case sem == Reentrant && st.holder == o.p:
			next = append(next, refMutex{o.p, st.count + 1, st.fence})
		}
	case history.Release:
		if st.holder != o.p {
			return nil
		}
		if st.count > 1 {
			next = append(next, refMutex{o.p, st.count - 1, st.fence})
		} else {
			next = append(next, refMutex{-1, 0, st.fence})
		}
	case refLapse:
		if st.holder != o.p {
			return []refMutex{st}
		}
		next = append(next, refMutex{-1, 0, st.fence})
	}
	if o.typ == history.Info {
		next = append(next, st)
	}
	return next
}

// refLinearizable tries every order of each key's ops that respects real
// time (an op may come next unless another op left returned before it was
// called), remembering the (done, state) pairs that led nowhere.
func refLinearizable(sem Semantics, ops []history.Op) bool {
	for _, kops := range refLinOps(ops) {
		if len(kops) > 62 {
			panic("refLinearizable: too many ops on one key for a brute force")
		}
		type at struct {
			done uint64
			st   refMutex
		}
		dead := map[at]bool{}
		all := uint64(1)<<len(kops) - 1
		var search func(done uint64, st refMutex) bool
		search = func(done uint64, st refMutex) bool {
			if done == all {
				return true
			}
			if dead[at{done, st}] {
				return false
			}
			for i, o := range kops {
				if done&(1<<i) != 0 {
					continue
				}
				first := true
				for j, u := range kops {
					if done&(1<<j) == 0 && j != i && u.ret < o.call {
						first = false
						break
					}
				}
				if !first {
					continue
				}
				for _, n := range refStep(sem, st, o) {
					if search(done|1<<i, n) {
						return true
					}
				}
			}
			dead[at{done, st}] = true
			return false
		}
		if !search(0, refMutex{holder: -1}) {
			return false
		}
	}
	return true
}
