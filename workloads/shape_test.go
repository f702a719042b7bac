package workloads_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

func TestParseDist(t *testing.T) {
	for in, want := range map[string]workloads.Dist{
		"200ms":        workloads.FixedDist(200 * time.Millisecond),
		"0":            workloads.FixedDist(0),
		"80ms..300ms":  workloads.UniformDist(80*time.Millisecond, 300*time.Millisecond),
		" exp:1.5s ":   workloads.ExpDist(1500 * time.Millisecond),
		"1s..1s":       workloads.UniformDist(time.Second, time.Second),
		"0..4ms":       workloads.UniformDist(0, 4*time.Millisecond),
		"250ms..500ms": workloads.UniformDist(250*time.Millisecond, 500*time.Millisecond),
	} {
		got, err := workloads.ParseDist(in)
		if err != nil || got != want {
			t.Errorf("ParseDist(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := workloads.ParseDist(got.String()); err != nil || back != got {
			t.Errorf("%q does not read back: %v, %v", got.String(), back, err)
		}
	}
	for in, says := range map[string]string{
		"300ms..80ms": "upside down",
		"exp:0s":      "positive mean",
		"exp:":        "missing",
		"exp:-1s":     "negative",
		"-5ms":        "negative",
		"fast":        "not a length",
		"":            "missing",
		"1s..":        "missing",
		"2h":          "longer than",
	} {
		_, err := workloads.ParseDist(in)
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseDist(%q) = %v; want one line saying %q", in, err, says)
		}
	}
}

// Draws stay in their range, and an exponential's mean is its mean.
func TestDistDraws(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	u := workloads.UniformDist(80*time.Millisecond, 300*time.Millisecond)
	var sum time.Duration
	e := workloads.ExpDist(200 * time.Millisecond)
	for range 20000 {
		if d := u.Draw(r); d < u.Min || d > u.Max {
			t.Fatalf("uniform draw %s outside %s", d, u)
		}
		sum += e.Draw(r)
	}
	if mean := sum / 20000; mean < 190*time.Millisecond || mean > 210*time.Millisecond {
		t.Fatalf("exponential's draws average %s, want about 200ms", mean)
	}
}

func TestShapeCheck(t *testing.T) {
	for _, bad := range []workloads.Shape{{Keys: 17}, {Keys: -1}, {Hold: workloads.Dist{Kind: "normal"}},
		{Think: workloads.Dist{Kind: workloads.Exponential}}, {Hold: workloads.UniformDist(time.Second, time.Millisecond)}} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v passed Check", bad)
		}
	}
	if err := (workloads.Shape{Keys: 16, Hold: workloads.ExpDist(time.Second)}).Check(); err != nil {
		t.Fatal(err)
	}
}

// A run whose critical section is uniform between 40 and 90 ms works
// that long in each cycle: no gap from a read's return to the write's
// call is shorter than the range, and the gaps spread across it, not all
// at one end. A loaded machine only lengthens a gap (make test's matrix
// beside it stretched one to 149 ms, and the middle one to 95 ms at
// aefbd95), so the top is asserted of the middle gap with half the
// range's width to spare: a hold drawn twice would put it near 130 ms.
// That each draw stays in the range is TestDistDraws', without a clock.
func TestUniformCriticalSection(t *testing.T) {
	lockNode, storeNode := lockAndStore(t)
	lo, hi := 40*time.Millisecond, 90*time.Millisecond
	rec := history.NewRecorder(nil, 3)
	o := workloads.Options{Hold: workloads.UniformDist(lo, hi), Seed: 3, Gate: nemesis.NewGate(rec)}
	for range 3 {
		o.Clients = append(o.Clients, workloads.Client{Clock: locks.SystemClock{}, Open: func(int) (workloads.Process, error) {
			return openProcess(lockNode, storeNode, "set-nx-px", locks.Config{Wait: time.Second}, nil)
		}})
	}
	ops := runFor(t, rec, o, 2*time.Second)
	gaps := workGaps(ops)
	if len(gaps) < 10 {
		t.Fatalf("only %d cycles in 2s", len(gaps))
	}
	if mid := slices.Sorted(slices.Values(gaps))[len(gaps)/2]; mid > hi+(hi-lo)/2 {
		t.Fatalf("the middle critical section worked %s, far above %s..%s", mid, lo, hi)
	}
	var low, high int
	for _, g := range gaps {
		if g < lo {
			t.Fatalf("a critical section worked %s, under %s..%s", g, lo, hi)
		}
		if g < (lo+hi)/2 {
			low++
		} else {
			high++
		}
	}
	if low == 0 || high == 0 {
		t.Fatalf("%d cycles below the middle and %d above: the draws do not spread", low, high)
	}
}

// A pause of the client in its critical section lengthens the work by
// as much, as a GC pause would: a sleep that ran on would hide it.
func TestPauseLengthensTheWork(t *testing.T) {
	lockNode, storeNode := lockAndStore(t)
	rec := history.NewRecorder(nil, 1)
	gate := nemesis.NewGate(rec)
	o := workloads.Options{Hold: workloads.FixedDist(300 * time.Millisecond), Gate: gate,
		Clients: []workloads.Client{{Clock: locks.SystemClock{}, Open: func(int) (workloads.Process, error) {
			return openProcess(lockNode, storeNode, "set-nx-px", locks.Config{}, nil)
		}}}}
	time.AfterFunc(400*time.Millisecond, func() { gate.PauseClient(0, 400*time.Millisecond) })
	gaps := workGaps(runFor(t, rec, o, 1500*time.Millisecond))
	longest := time.Duration(0)
	for _, g := range gaps {
		longest = max(longest, g)
	}
	if longest < 650*time.Millisecond {
		t.Fatalf("the longest critical section worked %s: a 400ms pause in a 300ms one should make it about 700ms (gaps %v)", longest, gaps)
	}
}

// Clients on several keys contend key by key, each key guarding its own
// register, and the checkers judge each key on its own: a lock that locks
// nothing on one key (lock-2) shows double holders and lost updates there
// and nowhere else.
func TestSeveralKeysJudgedKeyByKey(t *testing.T) {
	lockNode, storeNode := lockAndStore(t)
	rec := history.NewRecorder(nil, 4)
	o := workloads.Options{Keys: workloads.KeysOf(3), Hold: workloads.FixedDist(5 * time.Millisecond), Seed: 9, Gate: nemesis.NewGate(rec)}
	for range 4 {
		o.Clients = append(o.Clients, workloads.Client{Clock: locks.SystemClock{}, Open: func(int) (workloads.Process, error) {
			p, err := openProcess(lockNode, storeNode, "set-nx-px", locks.Config{Wait: time.Second}, nil)
			p.Lock = leakyOn{p.Lock, "lock-2"}
			return p, err
		}})
	}
	ops := runFor(t, rec, o, 1500*time.Millisecond)
	seen := map[string]int{}
	for _, op := range ops {
		if op.F == history.Acquire && op.Type == history.OK {
			seen[op.Key]++
		}
	}
	for _, k := range workloads.KeysOf(3) {
		if seen[k.Lock] < 5 {
			t.Fatalf("key %s was taken %d times: %v", k.Lock, seen[k.Lock], seen)
		}
	}
	iv := checker.Intervals{}.Check(ops)
	if iv.Valid != checker.Invalid || iv.Details.Episodes == 0 {
		t.Fatalf("no double holder found on lock-2: %+v", iv.Details)
	}
	for _, a := range iv.Anomalies {
		if a.Key != "lock-2" {
			t.Fatalf("a double holder on %s, which the lock guards: %s", a.Key, a.Text)
		}
	}
	res := checker.Resource{}.Check(ops)
	for _, a := range res.Anomalies {
		if a.Key != "register-2" {
			t.Fatalf("the register %s, whose key the lock guards, was corrupted: %s", a.Key, a.Text)
		}
	}
	if res.Details.LostUpdates == 0 {
		t.Fatal("no lost update on register-2, which nothing guards")
	}
}

// leakyOn is a lock that grants key at once without taking it, as a
// broken lock would, and is the real lock on every other key.
type leakyOn struct {
	locks.Lock
	key string
}

func (l leakyOn) Acquire(ctx context.Context, key string) (locks.Lease, error) {
	if key == l.key {
		return locks.Lease{Key: key, Token: "leak"}, nil
	}
	return l.Lock.Acquire(ctx, key)
}

func (l leakyOn) Release(ctx context.Context, lease locks.Lease) error {
	if lease.Key == l.key {
		return nil
	}
	return l.Lock.Release(ctx, lease)
}

// runFor runs o's clients for d and returns the history.
func runFor(t *testing.T, rec *history.Recorder, o workloads.Options, d time.Duration) []history.Op {
	t.Helper()
	clients, err := workloads.Open(rec, o)
	if err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := clients.Run(stop, context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.Ops()
}

// workGaps are, cycle by cycle, the time from a read's return to the
// write's call of the same process: the critical section's work.
func workGaps(ops []history.Op) []time.Duration {
	read := map[int]int64{}
	var out []time.Duration
	for _, op := range ops {
		switch {
		case op.F == history.Read && op.Type == history.OK:
			read[op.Process] = op.Time
		case op.F == history.Write && op.Type == history.Invoke:
			if at, ok := read[op.Process]; ok {
				out = append(out, time.Duration(op.Time-at))
				delete(read, op.Process)
			}
		}
	}
	return out
}
