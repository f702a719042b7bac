package checker

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/locktorture/locktorture/history"
)

// genOpts shapes a random lock history.
type genOpts struct {
	steps int
	keys  []string // the lock keys
	procs int      // clients; a retired one goes on as a new process
	// reentry lets a holder acquire a key it holds again.
	reentry bool
	// sameTime lets consecutive ops share a timestamp.
	sameTime bool
	// deadlines gives every successful acquire a validity deadline.
	deadlines bool
	// faults brings crashes, unknown outcomes of every kind (each retires
	// its process) and nemesis actions.
	faults bool
	// faithful is how often an acquire that the generator's own lock
	// would refuse fails instead of succeeding: 1, a lock that works (its
	// leases lapse at their deadline, or at a retirement without one);
	// 0, acquires succeed at random.
	faithful float64
}

// genHistory is a history drawn from o, recorded as the workload records
// one: each process runs one op at a time, an unknown outcome retires it,
// ops still in flight at the end have no completion.
func genHistory(rng *rand.Rand, o genOpts) []history.Op {
	var x h
	now := int64(0)
	tick := func() int64 {
		if o.sameTime {
			now += rng.Int64N(3)
		} else {
			now += 1 + rng.Int64N(3)
		}
		return now
	}
	type proc struct {
		id   int
		held map[string]int
		open *history.Op // an invoke awaiting its completion
	}
	procs := make([]*proc, o.procs)
	for i := range procs {
		procs[i] = &proc{id: i, held: map[string]int{}}
	}
	next := o.procs
	// The generator's lock: who has each key, and until when.
	type owner struct {
		p     int
		until int64 // while held by a live process: +inf
	}
	owners := map[string]owner{}
	free := func(k string, p int) bool {
		w, ok := owners[k]
		return !ok || w.p == p || w.until <= now
	}
	retire := func(p *proc) {
		for k := range p.held {
			if w := owners[k]; w.p == p.id {
				owners[k] = owner{p.id, now}
				if d := lapseAt(x, p.id, k); d > now {
					owners[k] = owner{p.id, d}
				}
			}
		}
		*p = proc{id: next, held: map[string]int{}}
		next++
	}
	pick := func(types ...history.Type) history.Type { return types[rng.IntN(len(types))] }
	for step := 0; step < o.steps; step++ {
		if o.faults && rng.IntN(25) == 0 {
			t := tick()
			x.add(history.NemesisProcess, history.Invoke, "partition-start", "", nil, t, "")
			x.add(history.NemesisProcess, history.OK, "partition-start", "", nil, t, "")
			continue
		}
		p := procs[rng.IntN(len(procs))]
		if p.open == nil {
			held := slices.Sorted(maps.Keys(p.held))
			f, key := history.Acquire, o.keys[rng.IntN(len(o.keys))]
			r := rng.IntN(10)
			switch {
			case len(held) > 0 && r < 5:
				f, key = history.Release, held[rng.IntN(len(held))]
			case len(held) > 0 && r < 6 && o.reentry:
				key = held[rng.IntN(len(held))]
			case len(held) > 0 && r < 7:
				// another key, or the same one again (a bug for a mutex)
			case len(held) > 0 && r < 8 && o.faults:
				t := tick()
				x.add(p.id, history.Invoke, "crash", "", nil, t, "")
				x.add(p.id, history.Info, "crash", "", nil, t, "crashed")
				retire(p)
				continue
			case len(held) > 0:
				f, key = history.Read, "R"
			case rng.IntN(15) == 0:
				f = history.Release // of a key it does not hold
			}
			x.add(p.id, history.Invoke, f, key, nil, tick(), "")
			op := x[len(x)-1]
			p.open = &op
			continue
		}
		f, key := p.open.F, p.open.Key
		var typ history.Type
		switch {
		case f == history.Acquire && o.faults:
			typ = pick(history.OK, history.OK, history.Fail, history.Fail, history.Info)
		case f == history.Acquire:
			typ = pick(history.OK, history.Fail)
		case f == history.Release && o.faults:
			typ = pick(history.OK, history.OK, history.OK, history.Fail, history.Info)
		case f == history.Release:
			typ = pick(history.OK, history.OK, history.OK, history.Fail)
		case o.faults:
			typ = pick(history.OK, history.OK, history.OK, history.Info)
		default:
			typ = history.OK
		}
		t := tick()
		if f == history.Acquire && typ == history.OK && !free(key, p.id) && rng.Float64() < o.faithful {
			typ = history.Fail
		}
		var v *history.Value
		if f == history.Acquire && typ == history.OK {
			v = &history.Value{Fence: 1 + rng.Int64N(4)}
			if o.deadlines {
				v.Deadline = t + 1 + rng.Int64N(40)
			}
		}
		x.add(p.id, typ, f, key, v, t, "")
		p.open = nil
		switch {
		case f == history.Acquire && typ == history.OK:
			p.held[key]++
			owners[key] = owner{p.id, math.MaxInt64}
		case f == history.Release && typ != history.Info && p.held[key] > 0:
			if p.held[key]--; p.held[key] == 0 {
				delete(p.held, key)
				if owners[key].p == p.id {
					delete(owners, key)
				}
			}
		}
		if typ == history.Info {
			retire(p)
		}
	}
	return x
}

// lapseAt is the latest deadline of p's current hold of k in x (0: none).
func lapseAt(x h, p int, k string) int64 {
	var d int64
	for i := len(x) - 1; i >= 0; i-- {
		op := x[i]
		if op.Process != p || op.Key != k {
			continue
		}
		if op.F == history.Release && op.Type == history.Invoke {
			break // a release before: the hold began after it
		}
		if op.F == history.Acquire && op.Type == history.OK && op.Value != nil {
			d = max(d, op.Value.Deadline)
		}
	}
	return d
}

// genWrites is a history of reads and writes of registers A and B by a
// few processes, as the workload's critical sections make them: mostly
// increments in turn with rising fences, now and then a stale read, a
// stale fence, a write of unknown outcome or a read that comes back wrong.
func genWrites(rng *rand.Rand, steps int) []history.Op {
	var x h
	now := int64(0)
	tick := func() int64 { now += rng.Int64N(3); return now }
	type proc struct {
		id   int
		open *history.Op
	}
	procs := []*proc{{id: 0}, {id: 1}, {id: 2}}
	next := 3
	regs := map[string]int64{}
	fence := map[string]int64{}
	for step := 0; step < steps; step++ {
		p := procs[rng.IntN(len(procs))]
		key := []string{"A", "B"}[rng.IntN(2)]
		if p.open == nil {
			if rng.IntN(3) == 0 {
				x.add(p.id, history.Invoke, history.Read, key, nil, tick(), "")
			} else {
				val := regs[key] + 1
				if rng.IntN(6) == 0 {
					val = regs[key] // a lost update
				}
				f := fence[key] + 1
				if rng.IntN(6) == 0 {
					f = max(fence[key]-rng.Int64N(2), 0) // stale, or none
				}
				x.add(p.id, history.Invoke, history.Write, key, fenced(val, f), tick(), "")
			}
			op := x[len(x)-1]
			p.open = &op
			continue
		}
		inv := *p.open
		p.open = nil
		switch {
		case rng.IntN(8) == 0:
			x.add(p.id, history.Info, inv.F, inv.Key, nil, tick(), "timeout")
			*p = proc{id: next}
			next++
		case inv.F == history.Read:
			v := regs[inv.Key]
			if rng.IntN(8) == 0 {
				v += rng.Int64N(3) - 1
			}
			x.add(p.id, history.OK, inv.F, inv.Key, reg(v), tick(), "")
		case inv.Value.Fence > 0 && inv.Value.Fence <= fence[inv.Key] && rng.IntN(2) == 0:
			x.add(p.id, history.Fail, inv.F, inv.Key, nil, tick(), ErrStaleFence)
		default:
			regs[inv.Key] = *inv.Value.Reg
			fence[inv.Key] = max(fence[inv.Key], inv.Value.Fence)
			x.add(p.id, history.OK, inv.F, inv.Key, nil, tick(), "")
		}
	}
	return x
}

// soonest is the generated client whose next op is sent first (the first
// of those tied).
func soonest[C any](cs []*C, at func(*C) int64) *C {
	c := cs[0]
	for _, d := range cs[1:] {
		if at(d) < at(c) {
			c = d
		}
	}
	return c
}

// genWorkload is a long history as the register workload records it
// against a lease lock with a TTL: clients loop acquire, read, write,
// release; an acquire waits a little and fails while the key is taken;
// the lease runs out at its deadline (counted from the acquire's call),
// whoever still believes in it. Now and then a holder pauses past its
// lease, an op times out (retiring its process), a client crashes, and,
// with lapseEarly, the lock drops a key before its deadline. With
// reentrant, a holder sometimes enters again (and leaves as often).
func genWorkload(rng *rand.Rand, clients, cycles int, lapseEarly, reentrant bool) []history.Op {
	const ttl = 40
	var x h
	type lockState struct {
		holder  int // -1: free
		entries int
		until   int64
		fence   int64
	}
	lk := lockState{holder: -1}
	type client struct {
		id    int
		at    int64 // when its next op is sent
		stage int   // 0 acquire, 1 re-enter, 2 read, 3 write, 4 release, 5 leave re-entry
		deep  bool  // entered twice
	}
	cs := make([]*client, clients)
	for i := range cs {
		cs[i] = &client{id: i, at: rng.Int64N(5)}
	}
	next := clients
	held := func(c *client, t int64) bool { return lk.holder == c.id && t < lk.until }
	retire := func(c *client, t int64) {
		*c = client{id: next, at: t + 1 + rng.Int64N(5)}
		next++
	}
	// complete records op f of c, sent at t0, as answered at t1 with typ.
	complete := func(c *client, f, key string, typ history.Type, t0, t1 int64, v *history.Value) {
		x.add(c.id, history.Invoke, f, key, nil, t0, "")
		x.add(c.id, typ, f, key, v, t1, "")
	}
	done := 0
	for done < cycles {
		c := soonest(cs, func(c *client) int64 { return c.at })
		t0 := c.at
		t1 := t0 + 1 + rng.Int64N(3)
		if lk.holder != -1 && t1 >= lk.until {
			lk.holder, lk.entries = -1, 0 // the lease ran out
		}
		if lapseEarly && lk.holder != -1 && rng.IntN(60) == 0 {
			lk.holder, lk.entries = -1, 0 // the lock lost the key
		}
		timeout := rng.IntN(40) == 0
		switch c.stage {
		case 0, 1:
			key := "L"
			if timeout {
				complete(c, history.Acquire, key, history.Info, t0, t1+10, nil)
				if rng.IntN(2) == 0 && lk.holder == -1 {
					lk = lockState{holder: c.id, entries: 1, until: t0 + ttl, fence: lk.fence + 1} // it did take the key
				}
				retire(c, t1+10)
				continue
			}
			free := lk.holder == -1 || lk.holder == c.id && c.stage == 1
			if !free {
				t1 += rng.Int64N(10) // waited, in vain
				complete(c, history.Acquire, key, history.Fail, t0, t1, nil)
				c.at = t1 + 1 + rng.Int64N(5)
				continue
			}
			if lk.holder == -1 {
				lk = lockState{holder: c.id, fence: lk.fence + 1}
			}
			lk.entries++
			lk.until = t0 + ttl
			complete(c, history.Acquire, key, history.OK, t0, t1, &history.Value{Fence: lk.fence, Deadline: t0 + ttl})
			c.stage++
			if c.stage == 1 && !(reentrant && rng.IntN(4) == 0) {
				c.stage = 2
			} else if c.stage == 2 {
				c.deep = true
			}
		case 2, 3:
			f := history.Read
			if c.stage == 3 {
				f = history.Write
			}
			if timeout {
				complete(c, f, "R", history.Info, t0, t1+10, nil)
				retire(c, t1+10)
				continue
			}
			if rng.IntN(50) == 0 {
				x.add(c.id, history.Invoke, "crash", "", nil, t0, "")
				x.add(c.id, history.Info, "crash", "", nil, t0, "crashed")
				retire(c, t0)
				continue
			}
			complete(c, f, "R", history.OK, t0, t1, nil)
			c.stage++
			if rng.IntN(25) == 0 {
				t1 += ttl + rng.Int64N(ttl) // paused past its lease
			}
		case 4, 5:
			typ := history.Fail
			if held(c, t0) {
				typ = history.OK
				if lk.entries--; lk.entries == 0 {
					lk.holder = -1
				}
			}
			if timeout {
				typ = history.Info
			}
			complete(c, history.Release, "L", typ, t0, t1, nil)
			if typ == history.Info {
				retire(c, t1)
				continue
			}
			if c.stage == 4 && c.deep {
				c.stage, c.deep = 5, false
			} else {
				c.stage = 0
				done++
			}
		}
		c.at = t1 + rng.Int64N(4)
	}
	return sorted(x)
}
