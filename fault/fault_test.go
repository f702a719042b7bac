package fault

import (
	"slices"
	"testing"

	"github.com/locktorture/locktorture/history"
)

// Every op in the table says what a person calls it and how it lasts, and
// the ends it names are ops of the table that end nothing but one kind.
func TestTableIsWhole(t *testing.T) {
	seen := map[Op]bool{}
	for _, op := range Ops() {
		s, ok := Lookup(op)
		switch {
		case !ok:
			t.Fatalf("%s is listed but not looked up", op)
		case seen[op]:
			t.Errorf("%s is in the table twice", op)
		case s.Label == "":
			t.Errorf("%s has no label", op)
		case s.Shape == "":
			t.Errorf("%s has no shape", op)
		}
		seen[op] = true
		lasts := s.Shape == Interval || s.Shape == Span || s.Shape == Offset
		if (s.Kind != "") != (lasts || s.Shape == Instant) {
			t.Errorf("%s (%s) has kind %q: a fault has a kind, an end or a note has none", op, s.Shape, s.Kind)
		}
		if s.End != "" && !lasts {
			t.Errorf("%s is %s and cannot have an end (%s)", op, s.Shape, s.End)
		}
		if (s.Shape == Interval || s.Shape == Span) && s.End == "" {
			t.Errorf("%s is %s and needs an end", op, s.Shape)
		}
		if len(s.AlsoEnds) > 0 && s.Shape != End {
			t.Errorf("%s ends %v but is no end", op, s.AlsoEnds)
		}
	}
	for _, op := range Ops() {
		s, _ := Lookup(op)
		if s.End != "" {
			if e, ok := Lookup(s.End); !ok || e.Shape != End {
				t.Errorf("%s ends with %s, which is not an end op of the table", op, s.End)
			}
		}
		if s.Shape != End {
			if got := EndedBy(op); len(got) != 0 {
				t.Errorf("%s is no end but ends %v", op, got)
			}
			continue
		}
		// An end op ends one kind of fault: resume ends a pause or a
		// stall, restart a kill or a power loss, each pair one kind.
		kinds := map[Kind]bool{}
		for _, o := range Ops() {
			if o2, _ := Lookup(o); o2.End == op {
				kinds[o2.Kind] = true
			}
		}
		if len(kinds) != 1 {
			t.Errorf("%s ends %d kinds of fault (%v), want exactly one", op, len(kinds), kinds)
		}
		for _, also := range s.AlsoEnds {
			if a, ok := Lookup(also); !ok || a.End == "" {
				t.Errorf("%s also ends %s, which is no fault with an end", op, also)
			}
		}
	}
	if _, ok := Lookup("no-such-op"); ok {
		t.Error("an op the table does not know was looked up")
	}
}

// What ends what, spelt out: a change here changes how reports pair
// faults, and must be meant.
func TestEndedBy(t *testing.T) {
	want := map[Op][]Op{
		PartitionEnd:   {PartitionStart, LatencyStart},
		LatencyEnd:     {LatencyStart},
		ResumeNode:     {PauseNode},
		Restart:        {Kill, PowerLoss},
		ClockReset:     {ClockBump},
		ClockStrobeEnd: {ClockStrobeStart},
		Resume:         {Pause, Stall},
		SaveMend:       {SaveFail},
		MigrateEnd:     {MigrateStart},
	}
	for _, op := range Ops() {
		if got := EndedBy(op); !slices.Equal(got, want[op]) {
			t.Errorf("EndedBy(%s) = %v, want %v", op, got, want[op])
		}
	}
}

// KindOf gives every op the kind a lock's claims are judged by: the
// random scenario's verdicts depend on this mapping, op for op.
func TestKindOf(t *testing.T) {
	want := map[Op]Kind{
		PartitionStart: Partition, LatencyStart: Latency, PauseNode: NodePause,
		Kill: NodeCrash, PowerLoss: NodeCrash, ClockBump: NodeClock, ClockStrobeStart: NodeClock,
		Pause: ClientPause, Stall: ClientPause, Crash: ClientCrash, ClockSkew: ClientClock, Promote: Failover, Evict: Eviction,
		SaveFail: DiskError, MigrateStart: SlotMigration, Cancel: CallerCancel,
	}
	for _, op := range Ops() {
		k, ok := KindOf(op)
		if w, has := want[op]; k != w || ok != has {
			t.Errorf("KindOf(%s) = %q, %v; want %q, %v", op, k, ok, w, has)
		}
	}
	for _, k := range Kinds {
		found := false
		for _, op := range Ops() {
			found = found || want[op] == k
		}
		if !found {
			t.Errorf("no op carries out kind %s", k)
		}
	}
	if k, ok := KindOf("no-such-op"); ok || k != "" {
		t.Errorf("an unknown op has kind %q", k)
	}
}

func nemesisOp(f Op, typ history.Type, site *history.Site) history.Op {
	return history.Op{Process: history.NemesisProcess, Type: typ, F: string(f), Value: &history.Value{Site: site}}
}

// KindsIn names the kinds the nemesis carried out, in the order of Kinds,
// once each, from completed nemesis ops only.
func TestKindsIn(t *testing.T) {
	ops := []history.Op{
		nemesisOp(Stall, history.OK, nil),
		nemesisOp(Kill, history.OK, nil),
		nemesisOp(Restart, history.OK, nil),
		nemesisOp(PowerLoss, history.OK, nil),
		nemesisOp(Pause, history.OK, nil),
		nemesisOp(Promote, history.Fail, nil),            // failed: not carried out
		nemesisOp(PartitionStart, history.Invoke, nil),   // invoked only
		{Process: 3, Type: history.OK, F: string(Crash)}, // a client's own crash op
	}
	if got, want := KindsIn(ops), []Kind{NodeCrash, ClientPause}; !slices.Equal(got, want) {
		t.Fatalf("KindsIn = %v, want %v", got, want)
	}
}

// Every story's evidence, said in fields, matches the op the nemesis
// records for it and nothing near it.
func TestEvidenceMatchesSites(t *testing.T) {
	at := func(client, process int, s history.Site) *history.Site {
		s.Client, s.Process = history.IDOf(client), history.IDOf(process)
		return &s
	}
	pauseAtPoint := nemesisOp(Pause, history.OK, at(0, 2, history.Site{Point: "before-write"}))
	pauseInRelease := nemesisOp(Pause, history.OK, at(1, 3, history.Site{Command: "get", Reply: true, In: history.Release}))
	pauseBeforeSend := nemesisOp(Pause, history.OK, at(1, 3, history.Site{Command: "set", In: history.Acquire}))
	stall := nemesisOp(Stall, history.OK, at(0, 2, history.Site{Point: "before-release"}))
	waiter := nemesisOp(Crash, history.OK, at(2, 9, history.Site{In: history.Acquire, Waiting: true}))
	kill := nemesisOp(Kill, history.OK, &history.Site{Node: "n3"})
	slow := nemesisOp(LatencyStart, history.OK, &history.Site{Peer: "c0", Node: "store", Direction: "upstream"})
	bump := nemesisOp(ClockBump, history.OK, &history.Site{Node: "n3"})
	heal := nemesisOp(PartitionEnd, history.OK, &history.Site{All: true})
	failed := nemesisOp(Kill, history.Fail, &history.Site{Node: "n3"})
	old := history.Op{Process: history.NemesisProcess, Type: history.OK, F: "kill", Value: &history.Value{Target: "n3"}}
	all := []history.Op{pauseAtPoint, pauseInRelease, pauseBeforeSend, stall, waiter, kill, slow, bump, heal, failed, old}
	cases := []struct {
		e    Evidence
		want []history.Op
	}{
		{Evidence{Op: Pause, Point: "before-write"}, []history.Op{pauseAtPoint}},
		{Evidence{Op: Pause, In: history.Release}, []history.Op{pauseInRelease}},
		{Evidence{Op: Pause, Reply: true}, []history.Op{pauseInRelease}},
		{Evidence{Op: Pause}, []history.Op{pauseAtPoint, pauseInRelease, pauseBeforeSend}},
		{Evidence{Op: Stall, Point: "before-release"}, []history.Op{stall}},
		{Evidence{Op: Stall, Point: "before-write"}, nil},
		{Evidence{Op: Crash, In: history.Acquire, Waiting: true}, []history.Op{waiter}},
		{Evidence{Op: Kill, Node: "n3"}, []history.Op{kill}},
		{Evidence{Op: Kill}, []history.Op{kill, old}},
		{Evidence{Op: LatencyStart, Node: "store"}, []history.Op{slow}},
		{Evidence{Op: LatencyStart, Peer: "c1", Node: "store"}, nil},
		{Evidence{Op: ClockBump, Node: "n3"}, []history.Op{bump}},
		{Evidence{Op: PartitionEnd}, []history.Op{heal}},
	}
	for _, c := range cases {
		var got []history.Op
		for _, op := range all {
			if c.e.Matches(op) {
				got = append(got, op)
			}
		}
		if !slices.EqualFunc(got, c.want, func(a, b history.Op) bool { return a.F == b.F && a.Value == b.Value }) {
			t.Errorf("%s matched %d ops, want %d", c.e, len(got), len(c.want))
		}
		if first := c.e.First(all); (first == nil) != (len(c.want) == 0) || first != nil && first.Value != c.want[0].Value {
			t.Errorf("%s: First found %v", c.e, first)
		}
	}
}

func TestEvidenceSaysWhatItAsks(t *testing.T) {
	for e, want := range map[Evidence]string{
		{Op: Crash}:                                     "crash",
		{Op: Pause, Point: "before-write"}:              "pause at before-write",
		{Op: Pause, In: history.Release}:                "pause in release",
		{Op: Pause, Reply: true}:                        "pause at a reply",
		{Op: Crash, In: history.Acquire, Waiting: true}: "crash waiting in acquire",
		{Op: LatencyStart, Peer: "c0", Node: "store"}:   "latency-start of c0 on store",
		{Op: Kill, Node: "n3"}:                          "kill on n3",
	} {
		if got := e.String(); got != want {
			t.Errorf("%#v says %q, want %q", e, got, want)
		}
	}
}

// Settled: a run's faults are over only once each has its end, at its
// own place or by an end on every place; a clock stays off until put back.
func TestSettledWaitsForEveryFaultsEnd(t *testing.T) {
	at := func(ns int64, op Op, site history.Site, d int64) history.Op {
		return history.Op{Process: history.NemesisProcess, Type: history.OK, F: string(op), Time: ns,
			Value: &history.Value{Site: &site, Duration: d}}
	}
	n1, n2 := history.Site{Node: "n1"}, history.Site{Node: "n2"}
	client := history.Op{Process: 0, Type: history.OK, F: history.Acquire, Time: 90}
	for _, c := range []struct {
		name    string
		ops     []history.Op
		last    int64
		settled bool
	}{
		{"none", []history.Op{client}, 0, true},
		{"a crash is over as it happens", []history.Op{at(5, Crash, history.Site{}, 0), client}, 5, true},
		{"a partition on", []history.Op{at(5, PartitionStart, n1, 0), client}, 5, false},
		{"a partition healed", []history.Op{at(5, PartitionStart, n1, 0), at(9, PartitionEnd, n1, 0)}, 9, true},
		{"healed elsewhere", []history.Op{at(5, PartitionStart, n1, 0), at(9, PartitionEnd, n2, 0)}, 9, false},
		{"a heal of every link ends delays", []history.Op{at(5, LatencyStart, n1, 0), at(6, LatencyStart, n2, 0),
			at(9, PartitionEnd, history.Site{All: true}, 0)}, 9, true},
		{"a pause until its resume", []history.Op{at(5, Pause, n1, 100)}, 5, false},
		{"a pause resumed", []history.Op{at(5, Pause, n1, 100), at(105, Resume, n1, 0)}, 105, true},
		{"a clock off", []history.Op{at(5, ClockSkew, n1, 3e9)}, 5, false},
		{"a clock put back", []history.Op{at(5, ClockSkew, n1, 3e9), at(8, ClockSkew, n1, 0)}, 8, true},
		{"a bump reset", []history.Op{at(5, ClockBump, n1, 3e9), at(8, ClockReset, n1, 0)}, 8, true},
		{"a note is no fault", []history.Op{at(5, Crash, n1, 0), at(7, Starved, n1, 0)}, 5, true},
	} {
		last, settled := Settled(c.ops)
		if last != c.last || settled != c.settled {
			t.Errorf("%s: Settled = %d, %v; want %d, %v", c.name, last, settled, c.last, c.settled)
		}
	}
}
