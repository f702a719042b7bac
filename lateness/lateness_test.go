package lateness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
)

func TestMeterSeesASlowReply(t *testing.T) {
	const slow = 30 * time.Millisecond
	p := Start(Options{Pings: []Ping{{Do: func(ctx context.Context) error {
		select {
		case <-time.After(slow):
		case <-ctx.Done():
		}
		return nil
	}}}})
	time.Sleep(300 * time.Millisecond)
	samples := p.Stop()
	worst := Worst(samples)
	if worst[Reply] < slow {
		t.Errorf("worst reply %s, want at least the ping's %s", worst[Reply], slow)
	}
	if _, ok := worst[Timer]; !ok {
		t.Errorf("no timer samples in %d samples", len(samples))
	}
	// Windows are kept, not every sample: 300 ms of 2 ms ticks is about
	// six windows of 50 ms, not 150 samples.
	if n := len(samples); n > 30 {
		t.Errorf("%d samples for 300ms: windows are not being merged", n)
	}
}

// nem is a nemesis op at target, which stands for its site too: starts
// and ends pair at their site.
func nem(t int64, f, target string, d time.Duration) history.Op {
	return history.Op{Process: history.NemesisProcess, Type: history.OK, F: f, Time: t,
		Value: &history.Value{Target: target, Duration: int64(d), Site: &history.Site{Node: target}}}
}

func TestFaultsReadRestartsSavesAndPausesFromTheHistory(t *testing.T) {
	ms := int64(time.Millisecond)
	invoke := func(op history.Op) history.Op { op.Type = history.Invoke; return op }
	usual := func(op history.Op, d time.Duration) history.Op { op.Value.Usual = int64(d); return op }
	ops := []history.Op{
		nem(10*ms, "kill", "n1", 0), invoke(nem(10*ms, "restart", "n1", 0)), nem(30*ms, "restart", "n1", 0), // before the clients were ready
		nem(100*ms, "kill", "n3", 0), invoke(nem(100*ms, "restart", "n3", 0)), nem(180*ms, "restart", "n3", 0),
		// A restart after a delay of its own, and one called long after
		// the kill (random keeps a node down for TTLs): each counts only
		// its own start-up.
		nem(200*ms, "kill", "n2", 0), invoke(nem(200*ms, "restart", "n2", 300*time.Millisecond)), nem(560*ms, "restart", "n2", 300*time.Millisecond),
		nem(570*ms, "kill", "n4", 0), invoke(nem(1500*ms, "restart", "n4", 0)), nem(1530*ms, "restart", "n4", 0),
		nem(600*ms, string(fault.Pause), "process 4 at before-write", 100*time.Millisecond),
		nem(750*ms, string(fault.Resume), "process 4 at before-write", 0),
		// Two stalls at once, ended in the other order: each is resumed
		// at its own place.
		nem(800*ms, string(fault.Stall), "process 1", 100*time.Millisecond),
		nem(820*ms, string(fault.Stall), "process 2", 50*time.Millisecond),
		nem(880*ms, string(fault.Resume), "process 2", 0),
		nem(950*ms, string(fault.Resume), "process 1", 0),
		// A save is timed from its BGSAVE to its end, and one the history
		// ended before (the time limit came) to the history's end: a
		// save-mend still running left its story untold.
		invoke(nem(1000*ms, string(fault.SaveFail), "n5", 0)), nem(1060*ms, string(fault.SaveFail), "n5", 0),
		invoke(nem(1600*ms, string(fault.SaveMend), "n5", 0)),
		// A pause told to go on 250 ms past its 100 ms until another
		// client wrote (nemesis.Trap.Outlast) is late by what is left.
		nem(1700*ms, string(fault.Pause), "process 5 at before-write", 100*time.Millisecond),
		nem(2100*ms, string(fault.Resume), "process 5 at before-write", 250*time.Millisecond),
		// An eviction's fill is timed less its usual (nemesis.Evict).
		usual(invoke(nem(2200*ms, string(fault.Evict), "n1", 0)), 100*time.Millisecond), nem(2740*ms, string(fault.Evict), "n1", 0),
	}
	got := Faults(ops, 50*ms, 2900*ms)
	want := []Sample{
		{At: 100 * ms, Kind: Fault, Late: 80 * ms, What: "restart of n3"},
		{At: 200 * ms, Kind: Fault, Late: 60 * ms, What: "restart of n2"},
		{At: 1500 * ms, Kind: Fault, Late: 30 * ms, What: "restart of n4"},
		{At: 600 * ms, Kind: Pause, Late: 50 * ms, What: "pause of process 4 at before-write"},
		{At: 820 * ms, Kind: Pause, Late: 10 * ms, What: "stall of process 2"},
		{At: 800 * ms, Kind: Pause, Late: 50 * ms, What: "stall of process 1"},
		{At: 1000 * ms, Kind: Fault, Late: 60 * ms, What: "save-fail of n5"},
		{At: 1700 * ms, Kind: Pause, Late: 50 * ms, What: "pause of process 5 at before-write"},
		{At: 2200 * ms, Kind: Fault, Late: 440 * ms, What: "evict of n1"},
		{At: 1600 * ms, Kind: Fault, Late: 1300 * ms, What: "save-mend of n5"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestOverAndUnfitted(t *testing.T) {
	ttl := 500 * time.Millisecond
	ms := int64(time.Millisecond)
	calm := []Sample{{At: 0, Kind: Timer, Late: 5 * ms}, {At: 50 * ms, Kind: Reply, Late: 99 * ms},
		{At: 60 * ms, Kind: Fault, Late: 249 * ms, What: "restart of n3"}}
	if why := Over(calm, LimitsFor(ttl)); why != "" {
		t.Errorf("a run inside every limit was called starved: %s", why)
	}
	late := append(calm, Sample{At: 1500 * ms, Kind: Timer, Late: 180 * ms})
	why := Over(late, LimitsFor(ttl))
	if !strings.Contains(why, "timers ran 180ms late at 1.500s") || strings.Contains(why, "reply") {
		t.Errorf("starved by a late timer: got %q", why)
	}
	slowFault := append(calm, Sample{At: 900 * ms, Kind: Fault, Late: 401 * ms, What: "restart of n3"})
	if why := Over(slowFault, LimitsFor(ttl)); !strings.Contains(why, "restart of n3 ran 401ms late") {
		t.Errorf("starved by a slow restart: got %q", why)
	}
	// A pause resumed 60 ms past its end may have outlived the lease it
	// had to end a tenth of a TTL inside, though a timer may run that late.
	overran := append(calm, Sample{At: 900 * ms, Kind: Pause, Late: 60 * ms, What: "pause of n1"})
	if why := Over(overran, LimitsFor(ttl)); !strings.Contains(why, "the pause of n1 ran 60ms late at 0.900s") || !strings.Contains(why, "a pause's overrun 50ms") {
		t.Errorf("starved by a pause that overran: got %q", why)
	}
	// A lock that bounds its replies at 50 ms is starved by a 60 ms one.
	tight := LimitsFor(ttl)
	tight.Reply = 50 * time.Millisecond
	if why := Over(append(calm[:1:1], Sample{At: 0, Kind: Reply, Late: 60 * ms}), tight); !strings.Contains(why, "reply came 60ms late") {
		t.Errorf("a reply past the lock's own bound: got %q", why)
	}
	unfit := []history.Op{nem(700*ms, string(fault.Starved), "the pause of process 0 could last only 40ms", 0)}
	if why := Unfitted(unfit); !strings.Contains(why, "at 0.700s the pause of process 0 could last only 40ms") {
		t.Errorf("a fault the gate could not fit: got %q", why)
	}
	if why := Unfitted(nil); why != "" {
		t.Errorf("a run with every fault fitted: got %q", why)
	}
}

func TestStopTwiceReturnsTheSameSamples(t *testing.T) {
	p := Start(Options{})
	time.Sleep(120 * time.Millisecond)
	first := p.Stop()
	time.Sleep(60 * time.Millisecond)
	second := p.Stop()
	if len(first) == 0 || len(first) != len(second) {
		t.Fatalf("first Stop gave %d samples, the second %d", len(first), len(second))
	}
}

// A slow node beside a fast one: the fast node's pings open window after
// window, and the slow one's late replies are kept all the same.
func TestMeterSeesASlowNodeBesideAFastOne(t *testing.T) {
	const slow = 60 * time.Millisecond
	wait := func(d time.Duration) func(context.Context) error {
		return func(ctx context.Context) error {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			return nil
		}
	}
	p := Start(Options{Pings: []Ping{{Do: wait(0), Every: 5 * time.Millisecond}, {Do: wait(slow), Every: 100 * time.Millisecond}}})
	time.Sleep(400 * time.Millisecond)
	if worst := Worst(p.Stop()); worst[Reply] < slow {
		t.Errorf("worst reply %s, want the slow node's %s", worst[Reply], slow)
	}
}

// A lock's own server is judged by its own limit, half the TTL: slower
// than the store may be, but not slow enough to end its clients' ops.
func TestServerSamplesHaveTheirOwnLimit(t *testing.T) {
	lim := LimitsFor(500 * time.Millisecond)
	ok := []Sample{{At: 0, Kind: Server, Late: int64(200 * time.Millisecond)}}
	if got := Over(ok, lim); got != "" {
		t.Errorf("a server 200ms late at a 500ms TTL: %q, want within the limit", got)
	}
	late := []Sample{{At: 0, Kind: Server, Late: int64(600 * time.Millisecond)}}
	if got := Over(late, lim); !strings.Contains(got, "the lock's server answered 600ms late") || !strings.Contains(got, "the lock's server 250ms") {
		t.Errorf("a server 600ms late: %q", got)
	}
	if got := Over([]Sample{{Kind: Reply, Late: int64(200 * time.Millisecond)}}, lim); got == "" {
		t.Error("a store 200ms late at a 500ms TTL passed: the server's limit leaked into the replies'")
	}
}

// Share is the worst judged sample over its kind's limit; a worker's
// wait, a figure not a limit, does not count.
func TestShare(t *testing.T) {
	lim := LimitsFor(500 * time.Millisecond) // timers 100ms, faults 250ms
	samples := []Sample{
		{Kind: Timer, Late: int64(30 * time.Millisecond)},
		{Kind: Fault, Late: int64(125 * time.Millisecond)},
		{Kind: Worker, Late: int64(400 * time.Millisecond)},
	}
	if got := Share(samples, lim); got != 0.5 {
		t.Fatalf("share %v, want 0.5 (the fault's 125 of 250 ms)", got)
	}
	if got := Share(nil, lim); got != 0 {
		t.Fatalf("share of no samples %v", got)
	}
}

// A wall clock stepped against the monotonic one is noted and starves the
// run; one within the noise notes nothing.
func TestMeterSeesTheWallClockMove(t *testing.T) {
	stepped := Start(Options{Drift: func() time.Duration { return -time.Millisecond }})
	time.Sleep(20 * time.Millisecond)
	worst := Worst(stepped.Stop())
	if worst[Wall] != time.Millisecond {
		t.Fatalf("worst wall-clock move %s after a step of -1ms, want 1ms", worst[Wall])
	}
	why := Over([]Sample{{At: int64(150 * time.Millisecond), Kind: Wall, Late: int64(worst[Wall])}}, LimitsFor(500*time.Millisecond))
	if !strings.Contains(why, "the machine's wall clock moved") || !strings.Contains(why, "the wall clock 100µs") {
		t.Errorf("a run whose wall clock moved: Over said %q", why)
	}
	still := Start(Options{Drift: func() time.Duration { return WallNoise / 2 }})
	time.Sleep(20 * time.Millisecond)
	if w, ok := Worst(still.Stop())[Wall]; ok {
		t.Errorf("a wall clock within the noise noted a move of %s", w)
	}
}

// A wall clock's move is no load on the machine: it does not narrow a
// matrix, however far it went.
func TestShareLeavesTheWallClockOut(t *testing.T) {
	samples := []Sample{{Kind: Timer, Late: int64(10 * time.Millisecond)}, {Kind: Wall, Late: int64(time.Second)}}
	if got := Share(samples, LimitsFor(500*time.Millisecond)); got != 0.1 {
		t.Errorf("share %v, want 0.1 (the timer's 10 of 100 ms)", got)
	}
}
