package checker

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/history"
)

// randomHistory is a history of acquires and releases on one key by a few
// processes, with every kind of completion, overlaps, crashes in the
// critical section, and retirement after every unknown outcome, as the
// workload records them; fences drawn from a small range so the fenced
// model sees both orders. With faithful > 0, an acquire that would succeed
// while another process holds the key fails instead with that
// probability: a lock that mostly works, so long histories are not all
// illegal within their first steps.
func randomHistory(rng *rand.Rand, steps int, faithful float64) []history.Op {
	var x h
	now := int64(0)
	tick := func() int64 { now += 1 + rng.Int64N(3); return now }
	type proc struct {
		id      int
		holding bool
		open    *history.Op // an invoke waiting for its completion
	}
	procs := []*proc{{id: 0}, {id: 1}, {id: 2}}
	next := 3
	for step := 0; step < steps; step++ {
		p := procs[rng.IntN(len(procs))]
		if p.open == nil {
			f := history.Acquire
			switch {
			case p.holding && rng.IntN(4) == 0:
				f = "write" // a critical-section op that may end in a crash
			case p.holding && faithful > 0 && rng.IntN(5) == 0:
				f = history.Acquire // the holder again: reentrant, or a bug for a mutex
			case p.holding:
				f = history.Release
			}
			x.add(p.id, history.Invoke, f, "k", nil, tick(), "")
			op := x[len(x)-1]
			p.open = &op
			continue
		}
		f := p.open.F
		types := []history.Type{history.OK, history.Fail, history.Info}
		if f == "write" {
			types = []history.Type{history.OK, history.Info}
		}
		typ := types[rng.IntN(len(types))]
		if faithful > 0 && f == history.Acquire && typ == history.OK && rng.Float64() < faithful {
			for _, q := range procs {
				if q != p && q.holding {
					typ = history.Fail
				}
			}
		}
		var v *history.Value
		if f == history.Acquire && typ == history.OK {
			v = &history.Value{Fence: 1 + rng.Int64N(4)}
		}
		x.add(p.id, typ, f, "k", v, tick(), "")
		p.open = nil
		switch {
		case typ == history.Info:
			// Retired: the client goes on as a new process.
			*p = proc{id: next}
			next++
		case f == history.Acquire && typ == history.OK:
			p.holding = true
		case f == history.Release:
			p.holding = false
		}
	}
	return x
}

// Leaving out failed acquires and a process's last unknown acquire, and
// answering a last unknown release or a lapse at its call, never changes
// the verdict: on thousands of random histories, every model, the reduced
// search says what the whole search says. The histories are of every
// shape the differential tests draw (two keys, re-entry, equal
// timestamps, crashes, every unknown outcome, deadlines) besides the
// workload's own.
func TestReductionKeepsTheVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	differ, illegal, checks := 0, 0, 0
	for i := 0; i < 1500; i++ {
		hs := [][]history.Op{randomHistory(rng, 14, 0)}
		for _, o := range shapes {
			hs = append(hs, genHistory(rng, o))
		}
		for _, h := range hs {
			for _, s := range []Semantics{Mutex, Reentrant, Fenced} {
				whole := porcupine.CheckOperationsTimeout(Model(s), mutexOperations(h, false), 10*time.Second)
				reduced := porcupine.CheckOperationsTimeout(Model(s), mutexOperations(h, true), 10*time.Second)
				checks++
				if whole != reduced {
					differ++
					if differ < 4 {
						t.Errorf("%s: whole search %v, reduced %v, on %+v", s, whole, reduced, h)
					}
				}
				if whole == porcupine.Illegal {
					illegal++
				}
			}
		}
	}
	// The test means something only if both verdicts occur often.
	if illegal < checks/10 || illegal > checks*9/10 {
		t.Fatalf("only %d of %d checks were illegal: the random histories do not exercise both verdicts", illegal, checks)
	}
	t.Logf("%d checks, %d illegal, %d differ", checks, illegal, differ)
}

// Cutting at every quiescent point and checking each segment from the state
// worked out at its start says what the search of the whole (reduced)
// history says, on every model: on random histories, and on long
// workload-like ones (leases that lapse at their deadline with their
// holder paused, timed out or crashed; a lock that drops keys early;
// reentrant holders). (The unreduced search is the reference for the
// reduction above; on histories this long, full of unknown acquires that
// return at +inf, it does not finish.)
func TestSegmentsKeepTheVerdict(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	differ, illegal, cut, inHold, checks, ops := 0, 0, 0, 0, 0, 0
	type drawn struct {
		h    []history.Op
		sems []Semantics
	}
	var hs []drawn
	all := []Semantics{Mutex, Reentrant, Fenced}
	for i := 0; i < 2000; i++ {
		hs = append(hs, drawn{randomHistory(rng, 60, 0.95), all})
	}
	for i := 0; i < 120; i++ {
		reentrant := i%4 == 0
		sems := []Semantics{Mutex, Fenced}
		if reentrant {
			sems = []Semantics{Reentrant}
		}
		hs = append(hs, drawn{genWorkload(rng, 5, 60, i%2 == 0, reentrant), sems})
	}
	for _, d := range hs {
		h := d.h
		ops += len(h)
		for _, s := range d.sems {
			checks++
			whole := porcupine.CheckOperationsTimeout(Model(s), MutexOperations(h), 10*time.Second)
			pops := MutexOperations(h)
			called := map[[2]int64]int64{}
			for _, o := range pops {
				called[[2]int64{int64(o.ClientId), o.Return}] = o.Call
			}
			segs := segmentsOf(s, pops, 1, nil)
			got, _ := checkSegments(s, segs, 10*time.Second)
			if whole != got {
				differ++
				if differ < 4 {
					t.Errorf("%s: whole search %v, %d segments %v, on %+v", s, whole, len(segs), got, h)
				}
			}
			if whole == porcupine.Illegal {
				illegal++
			}
			if len(segs) > 2 {
				cut++
			}
			for _, sg := range segs[1:] {
				for _, o := range sg.ops {
					if called[[2]int64{int64(o.ClientId), o.Return}] < sg.from {
						inHold++ // an acquire in flight moved across the cut
						break
					}
				}
			}
		}
	}
	if illegal < checks/10 || illegal > checks*9/10 || cut < checks/2 || inHold < checks/30 {
		t.Fatalf("%d of %d checks illegal, %d cut in three or more, %d with an acquire in flight moved across a cut: "+
			"the random histories do not exercise both verdicts and both kinds of cut", illegal, checks, cut, inHold)
	}
	t.Logf("%d checks of %d histories (%d ops), %d illegal, %d cut in three or more segments, %d cut with an acquire in flight, %d differ",
		checks, len(hs), ops, illegal, cut, inHold, differ)
}
