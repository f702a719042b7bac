package checker

import (
	"math"
	"slices"
	"sort"

	"github.com/locktorture/locktorture/history"
)

// The reference judges say what each checker must say of a small history
// straight from its definition, by brute force: who believes or is
// promised what is worked out afresh at every instant from the process's
// own ops, and linearizability by trying every order. They share no code
// with the checkers, and are slow on purpose.

// refProcs is each client process's ops, in recorded order.
func refProcs(ops []history.Op) map[int][]history.Op {
	out := map[int][]history.Op{}
	for _, op := range ops {
		if op.Process != history.NemesisProcess {
			out[op.Process] = append(out[op.Process], op)
		}
	}
	return out
}

// refKeys is every lock key the history names, sorted.
func refKeys(ops []history.Op) []string {
	var ks []string
	for _, op := range ops {
		if (op.F == history.Acquire || op.F == history.Release) && !slices.Contains(ks, op.Key) {
			ks = append(ks, op.Key)
		}
	}
	sort.Strings(ks)
	return ks
}

// refHeld is what a process holds of a key after some of its ops: how
// many entries (acquires that returned ok, less releases it sent while it
// held any), whether it was retired, and the latest deadline promised
// since the key was last given back.
type refHeld struct {
	entries  int
	retired  bool
	deadline int64
}

func refFold(pops []history.Op, key string) refHeld {
	var s refHeld
	for _, op := range pops {
		switch {
		case op.F == history.Acquire && op.Type == history.OK && op.Key == key:
			if s.entries == 0 {
				s.deadline = 0
			}
			s.entries++
			if op.Value != nil {
				s.deadline = max(s.deadline, op.Value.Deadline)
			}
		case op.F == history.Release && op.Type == history.Invoke && op.Key == key && s.entries > 0:
			if s.entries--; s.entries == 0 {
				s.deadline = 0
			}
		}
		if op.Type == history.Info {
			s.retired = true
		}
	}
	return s
}

// refUpTo is the ops of pops recorded at or before t.
func refUpTo(pops []history.Op, t int64) []history.Op {
	i := 0
	for i < len(pops) && pops[i].Time <= t {
		i++
	}
	return pops[:i]
}

// refBelieves: at t, p has entries and has not been retired.
func refBelieves(pops []history.Op, key string, t int64) bool {
	s := refFold(refUpTo(pops, t), key)
	return s.entries > 0 && !s.retired
}

// refPromised: at t, p has entries (a retirement gives nothing back) and
// a lease granted by then runs past t.
func refPromised(pops []history.Op, key string, t int64) bool {
	s := refFold(refUpTo(pops, t), key)
	return s.entries > 0 && s.deadline > t
}

// refPair names two processes on a key, the smaller first.
type refPair struct {
	key  string
	a, b int
}

func pairOf(key string, p, q int) refPair {
	return refPair{key, min(p, q), max(p, q)}
}

// refDoubleHolders is every pair of processes of which one began to hold a
// key at an instant when the other believed it held it, and for each pair
// how many time units both believed at once.
func refDoubleHolders(ops []history.Op) map[refPair]int64 {
	out := map[refPair]int64{}
	if len(ops) == 0 {
		return out
	}
	procs := refProcs(ops)
	last := ops[len(ops)-1].Time
	for q, qops := range procs {
		for i, op := range qops {
			if op.F != history.Acquire || op.Type != history.OK || refFold(qops[:i], op.Key).entries > 0 {
				continue
			}
			for p, pops := range procs {
				if p != q && refBelieves(pops, op.Key, op.Time) {
					out[pairOf(op.Key, p, q)] += 0
				}
			}
		}
	}
	refAtOnce(out, procs, refKeys(ops), last-1, refBelieves)
	return out
}

// refAtOnce adds to out, for every key and every instant from 0 to until,
// each pair of processes of which holds says both at once.
func refAtOnce(out map[refPair]int64, procs map[int][]history.Op, keys []string, until int64,
	holds func(pops []history.Op, key string, t int64) bool) {
	for _, k := range keys {
		for t := int64(0); t <= until; t++ {
			var in []int
			for p, pops := range procs {
				if holds(pops, k, t) {
					in = append(in, p)
				}
			}
			for i := range in {
				for _, q := range in[i+1:] {
					out[pairOf(k, in[i], q)]++
				}
			}
		}
	}
}

// refBrokenPromises is every pair of processes the lock promised a key to
// at one instant, with how many time units it did.
func refBrokenPromises(ops []history.Op) map[refPair]int64 {
	out := map[refPair]int64{}
	procs := refProcs(ops)
	var until int64
	for _, op := range ops {
		until = max(until, op.Time)
		if op.Value != nil {
			until = max(until, op.Value.Deadline)
		}
	}
	refAtOnce(out, procs, refKeys(ops), until, refPromised)
	return out
}

// refLost names a release by when it was sent.
type refLost struct {
	p    int
	sent int64
}

// refLeasesLost is every release refused, by the answer that came back
// first, while its sender held the key and a lease granted by then still
// ran.
func refLeasesLost(ops []history.Op) map[refLost]bool {
	out := map[refLost]bool{}
	for p, pops := range refProcs(ops) {
		for i, op := range pops {
			if op.F != history.Release || op.Type != history.Invoke || i+1 == len(pops) || pops[i+1].Type != history.Fail {
				continue
			}
			if s := refFold(pops[:i], op.Key); s.entries > 0 && pops[i+1].Time < s.deadline {
				out[refLost{p, op.Time}] = true
			}
		}
	}
	return out
}

// refHold is a hold found by walking its process's ops: from the acquire
// that took the key to the first later op that gave back its last entry
// or retired the process (places in the process's ops; end -1: open).
type refHold struct {
	p, start, end int
	at, until     int64
}

func refHoldsOf(pops []history.Op, key string, last int64) []refHold {
	var out []refHold
	for i, op := range pops {
		if op.F != history.Acquire || op.Type != history.OK || op.Key != key || refFold(pops[:i], key).entries > 0 {
			continue
		}
		h := refHold{p: op.Process, start: i, end: -1, at: op.Time, until: last}
		for j := i + 1; j < len(pops); j++ {
			if s := refFold(pops[:j+1], key); s.entries == 0 || s.retired {
				h.end, h.until = j, pops[j].Time
				break
			}
		}
		out = append(out, h)
	}
	return out
}

// refForeign names a foreign release: who sent it when, whose lock it hit.
type refForeign struct {
	p    int
	sent int64
	q    int
}

// refForeignReleases is, by Intervals' definition, every release that
// returned ok, gave back its sender's last entry, did not return within
// its sender's own lease, while a hold of another process begun after the
// sender's was on when it was sent, or began while it was in flight and
// had a release refused within its lease after it was sent.
func refForeignReleases(ops []history.Op) map[refForeign]int {
	out := map[refForeign]int{}
	if len(ops) == 0 {
		return out
	}
	last := ops[len(ops)-1].Time
	procs := refProcs(ops)
	lost := refLeasesLost(ops)
	for p, pops := range procs {
		for i, op := range pops {
			if op.F != history.Release || op.Type != history.Invoke || i+1 == len(pops) || pops[i+1].Type != history.OK {
				continue
			}
			s, ret := refFold(pops[:i], op.Key), pops[i+1].Time
			if s.entries != 1 || ret < s.deadline {
				continue
			}
			var mine refHold
			for _, h := range refHoldsOf(pops, op.Key, last) {
				if h.end == i {
					mine = h
				}
			}
			for q, qops := range procs {
				if q == p {
					continue
				}
				for _, hq := range refHoldsOf(qops, op.Key, last) {
					if hq.at <= mine.at || hq.at >= ret || hq.until <= op.Time {
						continue
					}
					refused := false
					for j := hq.start + 1; j < len(qops) && (hq.end < 0 || j <= hq.end); j++ {
						if r := qops[j]; r.F == history.Release && r.Type == history.Invoke && r.Key == op.Key && r.Time >= op.Time && lost[refLost{q, r.Time}] {
							refused = true
						}
					}
					if hq.at < op.Time || refused {
						out[refForeign{p, op.Time, q}]++
					}
				}
			}
		}
	}
	return out
}

// refStall is a flagged stall of a key.
type refStall struct {
	key      string
	from, to int64
}

// refDeadlocks is, by Liveness' definition, every stall of a key some
// acquire failed on, ending at the call of an acquire granted or of
// unknown outcome or at the end, begun at the latest of the key's first
// acquire, the end of a span begun before it in which the key was held or
// may have been, and the last nemesis action before it (before the answer
// of a grant called at its end, if later); flagged when longer
// than allow with an acquire failed after allow ran out. Also the longest
// stall that ended, or the flagged one still on at the end.
func refDeadlocks(ops []history.Op, allow int64) (map[refStall]bool, int64) {
	out := map[refStall]bool{}
	var longest int64
	if len(ops) == 0 {
		return out, 0
	}
	end := ops[len(ops)-1].Time
	procs := refProcs(ops)
	for _, k := range refKeys(ops) {
		ready, failed := int64(math.MaxInt64), false
		var spans [][2]int64
		var fails []int64
		answered := map[int64]int64{} // a grant's call → its answer
		for _, pops := range procs {
			for i, op := range pops {
				if op.F != history.Acquire || op.Key != k || op.Type != history.Invoke {
					continue
				}
				ready = min(ready, op.Time)
				switch {
				case i+1 == len(pops):
					spans = append(spans, [2]int64{op.Time, end})
				case pops[i+1].Type == history.Info:
					spans = append(spans, [2]int64{op.Time, pops[i+1].Time})
				case pops[i+1].Type == history.OK:
					spans = append(spans, [2]int64{op.Time, pops[i+1].Time})
					answered[op.Time] = max(answered[op.Time], pops[i+1].Time)
				case pops[i+1].Type == history.Fail:
					failed = true
					fails = append(fails, pops[i+1].Time)
				}
			}
			for _, h := range refHoldsOf(pops, k, end) {
				spans = append(spans, [2]int64{h.at, h.until})
			}
		}
		if !failed {
			continue
		}
		ends := map[int64]bool{}
		for _, s := range spans {
			ends[s[0]] = true
		}
		atEnd := !ends[end]
		ends[end] = true
		for g := range ends {
			from := ready
			for _, s := range spans {
				if s[0] < g {
					from = max(from, s[1])
				}
			}
			excused := max(g, answered[g])
			if g == end && atEnd {
				excused = g
			}
			for _, op := range ops {
				if op.Process == history.NemesisProcess && op.Type != history.Invoke && op.Time < excused {
					from = max(from, op.Time)
				}
			}
			if g <= from {
				continue
			}
			final := g == end && atEnd
			if !final {
				longest = max(longest, g-from)
			}
			if g-from <= allow || !slices.ContainsFunc(fails, func(f int64) bool { return f > from+allow && f <= g }) {
				continue
			}
			longest = max(longest, g-from)
			out[refStall{k, from, g}] = true
		}
	}
	return out, longest
}

// refResource is, by Resource's definition: per key, the accepted writes
// of a value already accepted (lost updates), the accepted fenced writes
// whose token is no greater than that of an accepted write that returned
// before they were sent (stale writes), and the final count: a read begun
// after every write of its key completed, no write of unknown outcome and
// no lost update on that key, that does not equal the accepted writes.
func refResource(ops []history.Op) (lost, stale map[string]int) {
	lost, stale = map[string]int{}, map[string]int{}
	type w struct {
		reg, fence, call, ret int64
	}
	accepted := map[string][]w{}
	unknown := map[string]bool{}
	lastWrite := map[string]int64{}
	type rd struct{ index, at, value int64 }
	final := map[string]rd{} // the read called last
	for _, pops := range refProcs(ops) {
		for i, op := range pops {
			if op.Type != history.Invoke {
				continue
			}
			var c *history.Op
			if i+1 < len(pops) {
				c = &pops[i+1]
			}
			switch {
			case op.F == history.Write && op.Value != nil && op.Value.Reg != nil:
				done := op.Time
				if c != nil {
					done = c.Time
				}
				lastWrite[op.Key] = max(lastWrite[op.Key], done)
				switch {
				case c == nil || c.Type == history.Info:
					unknown[op.Key] = true
				case c.Type == history.OK:
					accepted[op.Key] = append(accepted[op.Key], w{*op.Value.Reg, op.Value.Fence, op.Time, c.Time})
				}
			case op.F == history.Read && c != nil && c.Type == history.OK && c.Value != nil && c.Value.Reg != nil:
				if r, ok := final[op.Key]; !ok || op.Index > r.index {
					final[op.Key] = rd{op.Index, op.Time, *c.Value.Reg}
				}
			}
		}
	}
	for k, ws := range accepted {
		seen := map[int64]int{}
		for _, x := range ws {
			seen[x.reg]++
		}
		for _, n := range seen {
			lost[k] += n - 1
		}
		for _, x := range ws {
			for _, u := range ws {
				if x.fence > 0 && u.fence > 0 && u.ret < x.call && u.fence >= x.fence {
					stale[k]++
					break
				}
			}
		}
		if r, ok := final[k]; ok && r.at > lastWrite[k] && !unknown[k] && lost[k] == 0 && r.value != int64(len(ws)) {
			lost[k]++
		}
	}
	return lost, stale
}
