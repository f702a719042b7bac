package checker

import (
	"container/heap"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/history"
)

// MutexInput is what porcupine sees of a lock op.
type MutexInput struct {
	F       string // history.Acquire, history.Release or "lapse"
	Key     string
	Process int
	// from is the state a segment starts in, for the op that opens it.
	from *MutexState
}

// from names the op that opens a segment in its starting state.
const from = "from"

// lapse names the op by which a retired holder's lease runs out: its
// process gave nothing back, yet the key is free again once the lease is
// over, every entry of it at once.
const lapse = "lapse"

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
// taken the key, and an unknown release may or may not have freed it. A
// lapse frees its process's key whole, whatever the count, or leaves the
// state be (it has no outcome: placed last, it would not matter); of a key
// its process does not hold it changes nothing.
func Model(s Semantics) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{MutexState{Holder: free}} },
		Step: func(state, input, output any) []any {
			return step(s, state.(MutexState), input.(MutexInput), output.(MutexOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(MutexInput), output.(MutexOutput)
			if in.F == from {
				return fmt.Sprintf("(%s at this point)", describeState(*in.from))
			}
			if out.Fence > 0 {
				return fmt.Sprintf("%s(%s) by %d → %s, fence %d", in.F, in.Key, in.Process, out.Type, out.Fence)
			}
			return fmt.Sprintf("%s(%s) by %d → %s", in.F, in.Key, in.Process, out.Type)
		},
		DescribeState: func(state any) string { return describeState(state.(MutexState)) },
	}
	return m.ToModel()
}

func describeState(st MutexState) string {
	if st.Holder == free {
		return "free"
	}
	if st.Count > 1 {
		return fmt.Sprintf("held by %d ×%d", st.Holder, st.Count)
	}
	return fmt.Sprintf("held by %d", st.Holder)
}

func step(s Semantics, st MutexState, in MutexInput, out MutexOutput) []any {
	switch in.F {
	case from:
		return []any{*in.from}
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
	case lapse:
		if st.Holder != in.Process {
			return []any{st}
		}
		return []any{MutexState{Holder: free, Fence: st.Fence}, st}
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

// Linearizable checks the lock ops against a mutex model with porcupine.
//
// It does not hand porcupine the whole history: porcupine's memory grows
// with the square of what it is given, and the bookkeeping for the
// timeline costs most of its time. Each key's ops are cut at quiescent
// points (every op before returned before every op after was called), where
// the state is known, into segments checked one by one from that state;
// only the timeline asks for the detailed search, of a window.
type Linearizable struct {
	// Semantics picks the model (default Mutex).
	Semantics Semantics
	// Timeout bounds the search; when it runs out the answer is Unknown.
	Timeout time.Duration
	// fences are, by key, the greatest fencing token granted before the
	// ops (a Stream's earlier segments), which each key's search starts
	// from.
	fences map[string]int64
}

// Name is LinearizableName.
func (Linearizable) Name() Name { return LinearizableName }

// timeout is Timeout, a minute if unset.
func (l Linearizable) timeout() time.Duration {
	if l.Timeout == 0 {
		return time.Minute
	}
	return l.Timeout
}

// Check runs porcupine and reports the verdict.
func (l Linearizable) Check(ops []history.Op) Verdict {
	timeout := l.timeout()
	pops := MutexOperations(ops)
	segs := segmentsOf(l.Semantics, pops, minSegment, l.fences)
	v := Verdict{Checker: LinearizableName, Details: Details{
		Operations: len(pops), Model: l.Semantics.String(), Segments: len(segs)}}
	res, bad := checkSegments(l.Semantics, segs, timeout)
	switch res {
	case porcupine.Ok:
		v.Valid = Valid
	case porcupine.Illegal:
		s := segs[bad]
		v.add(Anomaly{
			Kind:  "not-linearizable",
			Key:   s.key,
			Start: s.from,
			End:   s.to,
			Text: fmt.Sprintf("no order of the acquire/release operations on %q between %s and %s is consistent with %s, "+
				"starting from %s: some acquire succeeded while another process held the key (see timeline.html for the longest legal prefix)",
				s.key, seconds(s.from), seconds(s.to), l.Semantics, describeState(s.init)),
		})
	default:
		v.Valid = Unknown
		v.Details.Reason = fmt.Sprintf("search did not finish within %s", timeout)
	}
	return v
}

// Window is porcupine's detailed search over a stretch of the lock ops,
// for the timeline: the longest legal prefixes it found, and the model to
// replay them with.
type Window struct {
	Model porcupine.Model
	Info  porcupine.LinearizationInfo
	// From and To are the harness times (ns) the stretch covers.
	From, To int64
}

// Timeline runs the detailed search over the segments of each key that lie
// nearest to the harness time at, up to about max operations a key. Each
// key's stretch opens with an operation "from" that sets the state its
// first segment starts in.
func (l Linearizable) Timeline(ops []history.Op, at int64, maxOps int) Window {
	w := Window{Model: Model(l.Semantics), From: math.MaxInt64, To: math.MinInt64}
	var window []porcupine.Operation
	byKey := map[string][]segment{}
	var keys []string
	for _, s := range segmentsOf(l.Semantics, MutexOperations(ops), minSegment, nil) {
		if _, seen := byKey[s.key]; !seen {
			keys = append(keys, s.key)
		}
		byKey[s.key] = append(byKey[s.key], s)
	}
	for _, k := range keys {
		segs := byKey[k]
		// The segment holding at (or the last one before it), then its
		// neighbours, later first, while the window has room.
		i := sort.Search(len(segs), func(i int) bool { return segs[i].from > at })
		lo := max(i-1, 0)
		hi := lo + 1
		n := len(segs[lo].ops)
		for n < maxOps && (lo > 0 || hi < len(segs)) {
			if hi < len(segs) {
				n += len(segs[hi].ops)
				hi++
			} else {
				lo--
				n += len(segs[lo].ops)
			}
		}
		window = append(window, segs[lo].opening())
		for _, s := range segs[lo:hi] {
			window = append(window, s.ops...)
		}
		w.From, w.To = min(w.From, segs[lo].from), max(w.To, segs[hi-1].to)
	}
	_, w.Info = porcupine.CheckOperationsVerbose(w.Model, window, l.timeout())
	return w
}

// segment is a stretch of one key's operations that starts in a known
// state: every op before it returned before any op in it was called.
type segment struct {
	key      string
	init     MutexState
	ops      []porcupine.Operation
	from, to int64 // first call, last finite return
}

// opening is the op that puts the model in the segment's starting state,
// placed before every op of the segment.
func (s segment) opening() porcupine.Operation {
	st := s.init
	return porcupine.Operation{ClientId: -1, Input: MutexInput{F: from, Key: s.key, Process: -1, from: &st},
		Output: MutexOutput{Type: history.OK}, Call: s.from - 2, Return: s.from - 1}
}

// minSegment is how many ops a segment gathers before it may end: one
// porcupine call a segment, each of a few thousand ops at most, keeps both
// the per-call cost and the search's square small.
const minSegment = 250

// segmentsOf cuts each key's ops at points where everything still in
// flight is a successful acquire (nothing at all, at a quiescent point).
// Such an acquire is moved whole to the segment after the point, called at
// the point, which keeps the verdict:
//   - if the key is held there, by H, another process's acquire cannot
//     have taken effect before (the key was held from before the point
//     until after it, and had it been taken before H's acquire, its
//     release, called after its return, would have come after the point
//     too), and H's own (reentrant) one only counts up while H holds, with
//     nobody else able to act on the key until H's releases, called after
//     it returned;
//   - if the key is free there, a linearization where it took effect
//     before the point can have it at the point instead: in between its
//     process held the key, so only ops that may leave the state alone sit
//     there, and its process has no other op in flight.
//
// Without these cuts, blocking acquires that wait through one hold after
// another leave no quiescent point on a busy key. No cut is made while an
// acquire in flight was called at the instant an op of its own process
// returned: porcupine takes the two as concurrent and may order the
// acquire first, which moving it past the cut would forbid.
//
// The state at a cut is known without a search: the ops before it are
// settled (failed and unknown acquires are reduced away or return at +inf,
// so no cut follows them; a last unknown release or a lapse is taken to
// have freed the key, which the reduction shows to be harmless), and in
// any legal order of them the holder is the one process with more
// successful acquires than releases and no lapse, the count is that
// surplus, and the fence is the greatest handed out. If they have no
// legal order the verdict is illegal whatever follows.
func segmentsOf(sem Semantics, ops []porcupine.Operation, minOps int, fences map[string]int64) []segment {
	var out []segment
	for _, kops := range partitionByKey(ops) {
		sort.SliceStable(kops, func(i, j int) bool { return kops[i].Call < kops[j].Call })
		key := kops[0].Input.(MutexInput).Key
		w := &sweep{sem: sem, key: key, net: map[int]int{}, fence: fences[key], flying: &byReturn{},
			returned: map[int]int64{}, out: out}
		w.cur = segment{key: key, init: w.state(), from: kops[0].Call}
		w.maxReturn = math.MinInt64
		for _, o := range kops {
			w.settleBefore(o.Call)
			if len(w.cur.ops) >= minOps && w.blocking == 0 && !w.tied() {
				w.cutAt(o.Call)
			}
			w.take(o)
		}
		w.cur.to = w.maxReturn
		out = append(w.out, w.cur)
	}
	return out
}

// sweep walks one key's ops by call time for segmentsOf, settling each op
// once the sweep passes its return.
type sweep struct {
	sem   Semantics
	key   string
	net   map[int]int // by process, acquires less releases over the ops settled
	fence int64       // the greatest fence among the acquires settled
	// flying is the ops called and not yet returned, by return time;
	// blocking counts those that are not successful acquires (they block a
	// cut).
	flying   *byReturn
	blocking int
	returned map[int]int64 // each process's latest return among the ops settled

	cur       segment
	maxReturn int64 // the latest return among cur's ops
	out       []segment
}

// state is the model's state after the ops settled, in any legal order of
// them: the holder is the one process with more acquires than releases.
func (w *sweep) state() MutexState {
	st := MutexState{Holder: free}
	for p, n := range w.net {
		if n > 0 {
			st = MutexState{Holder: p, Count: 1}
			if w.sem == Reentrant {
				st.Count = n
			}
		}
	}
	if w.sem == Fenced {
		st.Fence = w.fence
	}
	return st
}

// tied says whether an acquire in flight was called at the instant an op
// of its own process returned.
func (w *sweep) tied() bool {
	for _, f := range *w.flying {
		if r, ok := w.returned[f.ClientId]; ok && r >= f.Call {
			return true
		}
	}
	return false
}

// isAcquire says whether o is a successful acquire.
func isAcquire(o porcupine.Operation) bool {
	return o.Input.(MutexInput).F == history.Acquire && o.Output.(MutexOutput).Type == history.OK
}

// settleBefore settles every op in flight that returned before t.
func (w *sweep) settleBefore(t int64) {
	for w.flying.Len() > 0 && (*w.flying)[0].Return < t {
		done := heap.Pop(w.flying).(porcupine.Operation)
		in, res := done.Input.(MutexInput), done.Output.(MutexOutput)
		if r, ok := w.returned[done.ClientId]; !ok || done.Return > r {
			w.returned[done.ClientId] = done.Return
		}
		switch {
		case isAcquire(done):
			w.net[in.Process]++
			w.fence = max(w.fence, res.Fence)
		default:
			w.blocking--
			switch in.F {
			case history.Release:
				if w.net[in.Process]--; w.net[in.Process] == 0 {
					delete(w.net, in.Process)
				}
			case lapse:
				delete(w.net, in.Process)
			}
		}
	}
}

// cutAt ends the current segment at t, if any of its ops has settled:
// what is still in flight moves to the next segment, called at t.
func (w *sweep) cutAt(t int64) {
	settled := len(w.cur.ops) - w.flying.Len() // in flight: all in cur, moved ones included
	if settled == 0 {
		return
	}
	next := segment{key: w.key, init: w.state(), from: t}
	nextReturn := int64(math.MinInt64)
	keep := w.cur.ops[:0]
	for _, p := range w.cur.ops {
		if p.Return < t {
			keep = append(keep, p)
			continue
		}
		p.Call = t
		next.ops = append(next.ops, p)
		nextReturn = max(nextReturn, p.Return)
	}
	w.cur.ops, w.cur.to = keep, w.maxReturn
	w.out = append(w.out, w.cur)
	w.cur, w.maxReturn = next, nextReturn
}

// take adds o, just called, to the current segment and to the ops in
// flight.
func (w *sweep) take(o porcupine.Operation) {
	w.cur.ops = append(w.cur.ops, o)
	w.maxReturn = max(w.maxReturn, o.Return)
	heap.Push(w.flying, o)
	if !isAcquire(o) {
		w.blocking++
	}
}

// byReturn is a min-heap of ops by return time.
type byReturn []porcupine.Operation

func (h byReturn) Len() int           { return len(h) }
func (h byReturn) Less(i, j int) bool { return h[i].Return < h[j].Return }
func (h byReturn) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byReturn) Push(x any)        { *h = append(*h, x.(porcupine.Operation)) }
func (h *byReturn) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// checkSegments runs the plain search on the segments, one worker per
// core, and returns the first illegal one by time.
func checkSegments(sem Semantics, segs []segment, timeout time.Duration) (porcupine.CheckResult, int) {
	deadline := time.Now().Add(timeout)
	results := make([]porcupine.CheckResult, len(segs))
	var next atomic.Int64
	var wg sync.WaitGroup
	m := Model(sem)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(segs) {
					return
				}
				left := time.Until(deadline)
				if left <= 0 {
					results[i] = porcupine.Unknown
					continue
				}
				ops := append([]porcupine.Operation{segs[i].opening()}, segs[i].ops...)
				results[i] = porcupine.CheckOperationsTimeout(m, ops, left)
			}
		}()
	}
	wg.Wait()
	bad, unknown := -1, false
	for i, r := range results {
		switch {
		case r == porcupine.Illegal && (bad < 0 || segs[i].from < segs[bad].from):
			bad = i
		case r == porcupine.Unknown:
			unknown = true
		}
	}
	switch {
	case bad >= 0:
		return porcupine.Illegal, bad
	case unknown:
		return porcupine.Unknown, -1
	}
	return porcupine.Ok, -1
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
