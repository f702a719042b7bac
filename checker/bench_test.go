package checker

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
)

// contended builds a valid history of n lock cycles by 5 processes: the
// holder reads, writes and releases while the others' acquires wait and
// mostly fail, the shape a baseline run records (about 12 ops a cycle).
func contended(n int) []history.Op { return contendedWith(n, -1) }

// contendedWith is contended with, in cycle bad (if ≥ 0), the waiter's
// acquire succeeding while the holder holds: a double holder for a failing
// history.
func contendedWith(n, bad int) []history.Op {
	x := make(h, 0, 10*n+2)
	t := int64(0)
	for i := 0; i < n; i++ {
		p := i % 5
		w := (i + 1) % 5
		x.add(w, history.Invoke, history.Acquire, "L", nil, t, "")
		x.add(p, history.Invoke, history.Acquire, "L", nil, t+1, "")
		x.add(p, history.OK, history.Acquire, "L", &history.Value{Fence: int64(i + 1)}, t+2, "")
		x.add(p, history.Invoke, history.Read, "R", nil, t+3, "")
		x.add(p, history.OK, history.Read, "R", reg(int64(i)), t+4, "")
		if i == bad {
			x.add(w, history.OK, history.Acquire, "L", &history.Value{Fence: int64(i + 2)}, t+4, "")
		}
		x.add(p, history.Invoke, history.Write, "R", reg(int64(i+1)), t+5, "")
		x.add(p, history.OK, history.Write, "R", nil, t+6, "")
		x.add(p, history.Invoke, history.Release, "L", nil, t+7, "")
		x.add(p, history.OK, history.Release, "L", nil, t+8, "")
		if i == bad {
			x.add(w, history.Invoke, history.Release, "L", nil, t+8, "")
			x.add(w, history.OK, history.Release, "L", nil, t+9, "")
		} else {
			x.add(w, history.Fail, history.Acquire, "L", nil, t+9, "taken")
		}
		t += 10
	}
	return []history.Op(x)
}

// BenchmarkCheckers measures each checker on a 60,000-op history, about
// what a 5-second run with 5 clients records. Target: the whole set well
// under a second, so judging never dominates a run.
//
//	go test -run '^$' -bench Checkers -benchmem ./checker/
func BenchmarkCheckers(b *testing.B) {
	ops := contended(6000)
	for _, c := range []Checker{
		Intervals{}, Linearizable{Timeout: time.Minute}, Linearizable{Semantics: Fenced, Timeout: time.Minute},
		Promise{}, Resource{}, Liveness{Allowance: time.Second}, Fairness{Margin: 20},
	} {
		name := string(c.Name())
		if l, ok := c.(Linearizable); ok && l.Semantics == Fenced {
			name += "-fenced"
		}
		b.Run(fmt.Sprintf("%s/ops=%d", name, len(ops)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if v := c.Check(ops); v.Valid != Valid {
					b.Fatalf("%s: %v %+v", name, v.Valid, v.Anomalies)
				}
			}
		})
	}
}

// BenchmarkMillionOps is the scale target: every checker on a history of a
// million ops on one key, and for the failing one (a double holder near the
// end) the timeline's detailed search too. Target: under 5 s and 500 MB
// peak (the history itself is about 200 MB of it).
//
//	go test -run '^$' -bench MillionOps -benchtime 1x -benchmem ./checker/
func BenchmarkMillionOps(b *testing.B) {
	const cycles = 100_000 // 10 ops each
	for _, bad := range []int{-1, cycles * 9 / 10} {
		ops := contendedWith(cycles, bad)
		name := "valid"
		if bad >= 0 {
			name = "failing"
		}
		b.Run(fmt.Sprintf("%s/ops=%d", name, len(ops)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lin := Linearizable{Timeout: time.Minute}
				for _, c := range []Checker{Intervals{}, lin, Promise{}, Resource{}, Liveness{Allowance: time.Second}, Fairness{Margin: 20}} {
					v := c.Check(ops)
					if (c.Name() == LinearizableName || c.Name() == IntervalsName) && (v.Valid == Valid) != (bad < 0) {
						b.Fatalf("%s: %v on a %s history", c.Name(), v.Valid, name)
					}
					if bad >= 0 && c.Name() == LinearizableName {
						w := lin.Timeline(ops, v.Anomalies[0].Start, 2000)
						if w.From > v.Anomalies[0].Start || w.To < v.Anomalies[0].End {
							b.Fatalf("the timeline window %d–%d misses the anomaly %+v", w.From, w.To, v.Anomalies[0])
						}
					}
				}
			}
		})
	}
}

// observed is n lock cycles of five processes on one key, each with what
// the observer saw of the node: the holder's token as it acquires, and in
// every other cycle the key gone as it releases (in the rest the next
// owner replaces it between two reads, so each of those owner changes asks
// whether a release came between). Another process's try is refused
// meanwhile. With owners, a lease's token is its process's (a
// Redisson-style owner id, "c<p>"), so each token has a fifth of the holds;
// without, every lease has a token of its own.
func observed(n int, owners bool) []history.Op {
	x := make(h, 0, 8*n)
	t := int64(0)
	for i := 0; i < n; i++ {
		p, w := i%5, (i+1)%5
		tok := fmt.Sprint(i)
		if owners {
			tok = fmt.Sprintf("c%d", p)
		}
		x.add(w, history.Invoke, history.Acquire, "L", nil, t, "")
		x.grant(p, tok, t+1000, t+1, t+2).seen("n1", tok, t+1000, t+3)
		x.release(p, tok, t+7, t+8, history.OK)
		if i%2 == 0 {
			x.seen("n1", "", 0, t+9)
		}
		x.add(w, history.Fail, history.Acquire, "L", nil, t+9, "taken")
		t += 10
	}
	return []history.Op(x)
}

// BenchmarkNodeCheckers measures the checkers of what the nodes held on a
// 5-second run's worth of cycles and on an hour's (100,000 cycles, 800,000
// ops): both walk the observations once, so time grows with the history,
// not with its square, whether a token is one lease's or one process's.
// Target: the hour's under a second each.
//
//	go test -run '^$' -bench NodeCheckers -benchtime 1x -benchmem ./checker/
func BenchmarkNodeCheckers(b *testing.B) {
	for _, cycles := range []int{6000, 100_000} {
		for _, owners := range []bool{false, true} {
			ops := observed(cycles, owners)
			tokens := "lease"
			if owners {
				tokens = "owner"
			}
			for _, c := range []Checker{GhostHolds{Bound: 50 * time.Millisecond, Allowance: time.Second, Quorum: 1}, StolenKeys{}} {
				b.Run(fmt.Sprintf("%s/tokens=%s/ops=%d", c.Name(), tokens, len(ops)), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						if v := c.Check(ops); v.Valid != Valid {
							b.Fatalf("%s: %v %+v", c.Name(), v.Valid, v.Anomalies)
						}
					}
				})
			}
		}
	}
}

// soak hands fn a history of about n ops, one at a time, as 16 clients
// record it against a working lease lock in an hour's run (17M ops): each
// waits in its acquire from its last release to its turn, then reads and
// increments the register and releases; the observer sees the holder's
// token on the node and the key gone after each release. With bad ≥ 0, in
// cycle bad the next client's acquire is granted while the holder still
// works (a double holder, its write a lost update).
func soak(n, bad int, fn func(history.Op)) {
	const clients = 16
	const ttl = int64(2 * time.Second)
	idx := int64(0)
	t := int64(0)
	emit := func(p int, typ history.Type, f, key string, v *history.Value) {
		t += 1000
		fn(history.Op{Index: idx, Process: p, Type: typ, F: f, Key: key, Value: v, Time: t})
		idx++
	}
	for p := 0; p < clients; p++ {
		emit(p, history.Invoke, history.Acquire, "L", nil)
	}
	reg := int64(0)
	for i := 0; int(idx) < n; i++ {
		p := i % clients
		tok := fmt.Sprint("t", i)
		emit(p, history.OK, history.Acquire, "L", &history.Value{Token: tok, Fence: int64(i + 1), Deadline: t + ttl})
		emit(history.ObserverProcess, history.OK, history.Observe, "L", &history.Value{Token: tok, Deadline: t + ttl, Target: "n1", Prior: t - 500})
		emit(p, history.Invoke, history.Read, "R", nil)
		emit(p, history.OK, history.Read, "R", &history.Value{Reg: history.Int64(reg)})
		if i == bad {
			q := (i + 1) % clients
			emit(q, history.OK, history.Acquire, "L", &history.Value{Token: "x", Fence: int64(i + 2), Deadline: t + ttl})
			emit(q, history.Invoke, history.Read, "R", nil)
			emit(q, history.OK, history.Read, "R", &history.Value{Reg: history.Int64(reg)})
			emit(q, history.Invoke, history.Write, "R", &history.Value{Reg: history.Int64(reg + 1), Fence: int64(i + 2)})
			emit(q, history.OK, history.Write, "R", nil)
			emit(q, history.Invoke, history.Release, "L", &history.Value{Token: "x"})
			emit(q, history.OK, history.Release, "L", nil)
			emit(q, history.Invoke, history.Acquire, "L", nil)
		}
		reg++
		emit(p, history.Invoke, history.Write, "R", &history.Value{Reg: history.Int64(reg), Fence: int64(i + 1)})
		emit(p, history.OK, history.Write, "R", nil)
		emit(p, history.Invoke, history.Release, "L", &history.Value{Token: tok})
		emit(p, history.OK, history.Release, "L", nil)
		emit(history.ObserverProcess, history.OK, history.Observe, "L", &history.Value{Target: "n1", Prior: t - 500})
		emit(p, history.Invoke, history.Acquire, "L", nil)
	}
}

// peakHeap samples the live heap until stop is closed and returns its
// peak, in bytes.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var m runtime.MemStats
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// BenchmarkStreamHour is §6's soak: an hour of a 16-client run (17M ops)
// judged by every checker an engine run uses, read as a stream. It never
// holds the history: the heap stays at what a segment and the checkers'
// carried state take, whatever the length. A failing hour (a double holder
// near its end) must come out invalid. Target: under a minute, and a peak
// heap of tens of megabytes (the whole history alone would be about
// 3.4 GB).
//
//	go test -run '^$' -bench StreamHour -benchtime 1x ./checker/
func BenchmarkStreamHour(b *testing.B) {
	ops := 17_000_000
	if testing.Short() {
		ops = 2_000_000
	}
	for _, bad := range []int{-1, ops / 14 * 9 / 10} {
		name := "valid"
		if bad >= 0 {
			name = "failing"
		}
		b.Run(fmt.Sprintf("%s/ops=%d", name, ops), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				vs := judgeHour(b, func(add func(history.Op)) error { soak(ops, bad, add); return nil })
				for _, v := range vs {
					// The double holder is seen by the checkers of what
					// clients believed and wrote, not by the node's.
					caught := v.Checker == IntervalsName || v.Checker == LinearizableName || v.Checker == PromiseName || v.Checker == ResourceName
					if want := bad < 0 || !caught; (v.Valid == Valid) != want {
						b.Fatalf("%s: %v on a %s history: %+v", v.Checker, v.Valid, name, v.Anomalies)
					}
				}
			}
		})
	}
}

// BenchmarkStoredHour is the same valid hour judged again from its file,
// as -check judges a stored run: the history is written compressed first
// (not timed), then read op by op (gzip and JSON decoding, about as much
// work as judging) while the checkers judge. Target: under a minute.
//
//	go test -run '^$' -bench StoredHour -benchtime 1x ./checker/
func BenchmarkStoredHour(b *testing.B) {
	ops := 17_000_000
	if testing.Short() {
		ops = 2_000_000
	}
	// Written compressed as it is made, as history.Compress leaves a
	// finished run's file: the plain hour would be about 1.7 GB.
	path := filepath.Join(b.TempDir(), "history.jsonl.gz")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	w := bufio.NewWriter(gz)
	enc := json.NewEncoder(w)
	soak(ops, -1, func(op history.Op) {
		if err == nil {
			err = enc.Encode(op)
		}
	})
	if err = errors.Join(err, w.Flush(), gz.Close(), f.Close()); err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("valid/ops=%d", ops), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := history.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			vs := judgeHour(b, func(add func(history.Op)) error { return history.Each(r, add) })
			r.Close()
			for _, v := range vs {
				if v.Valid != Valid {
					b.Fatalf("%s: %v on a valid history: %+v", v.Checker, v.Valid, v.Anomalies)
				}
			}
		}
	})
}

// judgeHour streams the ops feed hands it through an engine run's
// checkers and returns their verdicts, reporting the peak heap and the
// segments the stream cut: how the soak benchmarks, whatever they read
// the hour from, are measured alike.
func judgeHour(b *testing.B, feed func(add func(history.Op)) error) []Verdict {
	b.Helper()
	runtime.GC()
	stop := make(chan struct{})
	peak := peakHeap(stop)
	s := NewStream(soakCheckers(), 0)
	err := feed(s.Add)
	vs := s.Verdicts()
	close(stop)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(s.Segments()), "segments")
	return vs
}

// soakCheckers are an engine run's checkers at a TTL of 2 s.
func soakCheckers() []Checker {
	return []Checker{Intervals{}, Linearizable{Semantics: Fenced, Timeout: time.Minute}, Promise{}, Resource{},
		Liveness{Allowance: 4 * time.Second}, GhostHolds{Bound: 200 * time.Millisecond, Allowance: 4 * time.Second, Quorum: 1},
		StolenKeys{}, Fairness{Margin: 20 * time.Millisecond}}
}
