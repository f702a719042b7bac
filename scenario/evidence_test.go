package scenario

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
)

// ops builds a history: n completed acquires every step from start, and the
// nemesis ops given.
func acquires(start, step int64, n int, typ history.Type) []history.Op {
	var out []history.Op
	for i := 0; i < n; i++ {
		t := start + int64(i)*step
		out = append(out, history.Op{Process: i % 3, Type: history.Invoke, F: history.Acquire, Key: "lock", Time: t},
			history.Op{Process: i % 3, Type: typ, F: history.Acquire, Key: "lock", Time: t + 1})
	}
	return out
}

func nemesisOp(f, target string, at, dur int64, typ history.Type) history.Op {
	return history.Op{Process: history.NemesisProcess, Type: typ, F: f, Time: at, Value: &history.Value{Target: target, Duration: dur}}
}

func TestVacuity(t *testing.T) {
	s := Scenario{Name: "k1", Requires: []Evidence{{F: "pause", Target: "before-write"}, {F: "partition-end"}}}
	// Attempts that completed before (ok), during and after (failed) the pause.
	busy := func(more ...history.Op) []history.Op {
		return append(append(acquires(0, 10, 70, history.OK), acquires(700, 10, 80, history.Fail)...), more...)
	}
	pause := nemesisOp("pause", "process 2 at before-write", 500, 400, history.OK)
	healed := nemesisOp("partition-end", "all links", 2000, 0, history.OK)
	cases := []struct {
		name string
		ops  []history.Op
		want string // "" or a part of the reason
	}{
		{"every fault, traffic all round", busy(pause, healed), ""},
		{"the pause never happened", busy(healed), "never happened: pause"},
		{"a pause elsewhere is not this story's", busy(nemesisOp("pause", "process 2 at before-release", 500, 400, history.OK), healed), "never happened: pause"},
		{"a pause that failed is no evidence", busy(nemesisOp("pause", "process 2 at before-write", 500, 400, history.Fail), healed), "never happened: pause"},
		{"the partition was never healed", busy(pause), "never happened: partition-end"},
		{"nobody worked before the fault", append(acquires(600, 10, 40, history.OK), nemesisOp("pause", "before-write", 100, 400, history.OK), healed), "before"},
		{"nobody worked while it lasted", append(acquires(0, 10, 20, history.OK), nemesisOp("pause", "before-write", 1000, 400, history.OK), healed), "during"},
		{"nobody worked after it", append(acquires(0, 10, 115, history.OK), nemesisOp("pause", "before-write", 1000, 130, history.OK), healed), "after"},
	}
	for _, c := range cases {
		got := vacuity(s, c.ops)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: vacuity %q, want %q", c.name, got, c.want)
		}
	}
	if got := vacuity(Scenario{Name: "baseline"}, nil); got != "" {
		t.Errorf("a story with no fault is never vacuous, got %q", got)
	}
}

// A vacuous outcome matches no expectation, whatever the checkers said.
func TestVacuousMatchesNothing(t *testing.T) {
	for _, o := range []string{Safe, Unsafe, LockUnsafe, Deadlock, Unfair, Vacuous} {
		if Matches(Expectation{Outcome: o}, Vacuous, nil) {
			t.Errorf("vacuous matched %s", o)
		}
	}
}

// End to end: a lock that sends no command in its release never meets
// paused-release's trap, and the run says so instead of calling it safe.
func TestAStoryThatDidNotHappenIsVacuous(t *testing.T) {
	res, err := Run(context.Background(), Options{Scenario: "paused-release", Lock: "mutex",
		Expect: &Expectation{Outcome: Safe}, TimeLimit: 2 * time.Second, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// A starved run is judged vacuous too (starved only takes its place
	// as the outcome).
	if res.Outcome != Vacuous && res.Outcome != Starved || res.Matched || !strings.Contains(res.Vacuous, "in release") {
		t.Fatalf("outcome %s (matched %v), vacuous %q; want vacuous naming the pause in release", res.Outcome, res.Matched, res.Vacuous)
	}
}

// pointLock is a user's lock that offers a named point of its own between
// taking the key and returning, where no command marks the place.
type pointLock struct {
	locks.Lock
	cfg locks.Config
}

func (l pointLock) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	lease, err := l.Lock.Acquire(ctx, key)
	if err == nil && l.cfg.Point != nil {
		if perr := l.cfg.Point(ctx, "user-point"); perr != nil {
			return locks.Lease{}, fmt.Errorf("%w: %v", locks.ErrUnknown, perr)
		}
	}
	return lease, err
}

// A lock's own named point (Config.Point) is wired through a run: a trap
// armed there springs on a user's lock, and its action is in the history.
func TestAUserLocksOwnPointCanBeTrapped(t *testing.T) {
	add(Scenario{Name: "test-user-point", Story: "a crash at a user lock's own point", TimeLimitTTLs: 3,
		Expect:   expect("user", Expectation{Outcome: Safe, Why: "test"}),
		Requires: []Evidence{{F: "crash", Target: "user-point"}},
		Schedule: func(e *Env) (nemesis.Schedule, error) {
			return nemesis.Schedule{e.Gate.ArmStep(e.TTL, nemesis.Trap{Point: "user-point", Client: nemesis.AnyClient, Crash: true})}, nil
		}})
	defer delete(catalogue, "test-user-point")
	user := &locks.Info{Name: "user", New: func(c locks.Config) locks.Lock {
		l, _ := locks.New("set-nx-px", c)
		return pointLock{Lock: l, cfg: c}
	}}
	res, err := RunUnstarved(context.Background(), Options{Scenario: "test-user-point", Lock: "user", Custom: user, Out: t.TempDir()}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Vacuous != "" || !res.Matched {
		t.Fatalf("outcome %s, vacuous %q: the trap at the lock's own point did not spring", res.Outcome, res.Vacuous)
	}
	crashed := false
	for _, op := range res.Ops {
		crashed = crashed || op.F == history.Acquire && op.Type == history.Info && strings.Contains(op.Error, "crash")
	}
	if !crashed {
		t.Fatal("the process that died at the point must have its acquire recorded as info")
	}
}
