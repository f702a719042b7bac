package nemesis_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// done is the nemesis ops of rec that completed ok, in order.
func done(rec *history.Recorder) []history.Op {
	var out []history.Op
	for _, op := range rec.Ops() {
		if op.Process == history.NemesisProcess && op.Type == history.OK {
			out = append(out, op)
		}
	}
	return out
}

// inTable fails t for every op the nemesis recorded that the fault table
// does not know, or that has no site.
func inTable(t *testing.T, ops []history.Op) {
	t.Helper()
	for _, op := range ops {
		if _, ok := fault.Lookup(fault.Op(op.F)); !ok {
			t.Errorf("%s is recorded but not in the fault table", op.F)
		}
		if op.Value == nil || op.Value.Site == nil {
			t.Errorf("%s %q is recorded without a site", op.F, op.Value.Target)
		}
	}
}

// The gate records where it caught a process as a site: the client, the
// process, and its point or its command boundary; a pause's resume has
// the pause's site, and stories' evidence finds them by these fields.
func TestGateRecordsSites(t *testing.T) {
	rec := history.NewRecorder(nil, 0)
	g := nemesis.NewGate(rec)
	ms := time.Millisecond
	g.Arm(nemesis.Trap{Point: "before-write", Client: nemesis.AnyClient, Pause: 5 * ms})
	_ = g.At(ctx, 0, 5, "before-write")
	g.Arm(nemesis.Trap{Point: "before-release", Client: nemesis.AnyClient, Pause: 5 * ms, Stall: true})
	_ = g.At(ctx, 0, 5, "before-release")
	g.Begin(context.Background(), 1, 6, history.Release)
	at := g.Sending(1, 6, [][]string{{"GET", "lock"}})
	g.Arm(nemesis.Trap{Command: &nemesis.Command{In: history.Release, Nth: 1, Reply: true}, Client: nemesis.AnyClient, Pause: 5 * ms})
	_ = g.Boundary(ctx, 1, 6, at[0], true, true)
	g.Begin(context.Background(), 2, 7, history.Acquire)
	if err := g.CrashWaiter(0, 0).Do(ctx); err != nil {
		t.Fatal(err)
	}
	g.Arm(nemesis.Trap{Point: "user-point", Client: 3, Crash: true})
	_ = g.At(ctx, 3, 8, "user-point")
	g.PauseClient(4, 5*ms)
	waitRecorded(t, rec, string(fault.Resume), 4)

	ops := done(rec)
	inTable(t, ops)
	client := func(c, p int, s history.Site) history.Site {
		s.Client, s.Process = history.IDOf(c), history.IDOf(p)
		return s
	}
	atWrite := client(0, 5, history.Site{Point: "before-write"})
	atRelease := client(0, 5, history.Site{Point: "before-release"})
	atReply := client(1, 6, history.Site{Command: "get", Reply: true, In: history.Release})
	want := []struct {
		f    fault.Op
		site history.Site
	}{
		{fault.Pause, atWrite}, {fault.Resume, atWrite},
		{fault.Stall, atRelease}, {fault.Resume, atRelease},
		{fault.Pause, atReply}, {fault.Resume, atReply},
		{fault.Crash, client(2, 7, history.Site{In: history.Acquire, Waiting: true})},
		{fault.Crash, client(3, 8, history.Site{Point: "user-point"})},
		{fault.Pause, history.Site{Client: history.IDOf(4)}}, {fault.Resume, history.Site{Client: history.IDOf(4)}},
	}
	if len(ops) != len(want) {
		t.Fatalf("recorded %d nemesis ops, want %d: %+v", len(ops), len(want), ops)
	}
	for i, w := range want {
		if fault.Op(ops[i].F) != w.f || !reflect.DeepEqual(ops[i].Site(), w.site) {
			t.Errorf("op %d: %s at %+v, want %s at %+v", i, ops[i].F, ops[i].Site(), w.f, w.site)
		}
	}
	for _, e := range []fault.Evidence{
		{Op: fault.Pause, Point: "before-write"}, {Op: fault.Stall, Point: "before-release"},
		{Op: fault.Pause, In: history.Release}, {Op: fault.Pause, Reply: true},
		{Op: fault.Crash, In: history.Acquire, Waiting: true}, {Op: fault.Crash, Point: "user-point"},
	} {
		if e.First(ops) == nil {
			t.Errorf("no op is evidence %s", e)
		}
	}
}

// The nemesis records the node, the link or the grudge it acted on.
func TestNemesisRecordsSites(t *testing.T) {
	e := newEnv(t, names("n1")...)
	ms := time.Millisecond
	// No link is delayed yet: removing a delay is no fault's end.
	e.must(e.nem.Latency("c1", "n1", 0, 0))
	e.must(e.nem.Latency("", "n1", 0, 0))
	e.must(e.nem.Partition(nemesis.Grudge{"c1": {"n1"}}))
	e.must(e.nem.CutDirection("c2", "n1", "upstream"))
	e.must(e.nem.Heal())
	e.must(e.nem.LatencyDirection("c1", "n1", "downstream", 10*ms, 0))
	e.must(e.nem.Latency("c1", "n1", 0, 0))
	e.must(e.nem.Latency("", "n1", 10*ms, 0))
	e.must(e.nem.PauseNode("n1"))
	e.must(e.nem.ResumeNode("n1"))
	e.must(e.nem.KillNode("n1"))
	e.must(e.nem.RestartNode(context.Background(), "n1", 0))
	e.must(e.nem.SkewClient(&nemesis.ClientClock{Name: "c3"}, time.Second))
	ops := done(e.rec)
	inTable(t, ops)
	n1 := history.Site{Node: "n1"}
	want := []struct {
		f    fault.Op
		site history.Site
	}{
		{fault.PartitionStart, history.Site{Cut: map[string][]string{"c1": {"n1"}}}},
		{fault.PartitionStart, history.Site{Peer: "c2", Node: "n1", Direction: "upstream"}},
		{fault.PartitionEnd, history.Site{All: true}},
		{fault.LatencyStart, history.Site{Peer: "c1", Node: "n1", Direction: "downstream"}},
		{fault.LatencyEnd, history.Site{Peer: "c1", Node: "n1"}},
		{fault.LatencyStart, n1},
		{fault.PauseNode, n1}, {fault.ResumeNode, n1},
		{fault.Kill, n1}, {fault.Restart, n1},
		{fault.ClockSkew, history.Site{Peer: "c3"}},
	}
	if len(ops) != len(want) {
		t.Fatalf("recorded %d nemesis ops, want %d: %+v", len(ops), len(want), ops)
	}
	for i, w := range want {
		if fault.Op(ops[i].F) != w.f || !reflect.DeepEqual(ops[i].Site(), w.site) {
			t.Errorf("op %d: %s at %+v, want %s at %+v", i, ops[i].F, ops[i].Site(), w.f, w.site)
		}
	}
}
