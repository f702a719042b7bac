package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
)

// contended builds a valid history of n lock cycles by 5 processes: the
// holder reads, writes and releases while the others' acquires wait and
// mostly fail, the shape a baseline run records (about 12 ops a cycle).
func contended(n int) []history.Op {
	var x h
	t := int64(0)
	for i := 0; i < n; i++ {
		p := i % 5
		w := (i + 1) % 5
		x.add(w, history.Invoke, history.Acquire, "L", nil, t, "")
		x.add(p, history.Invoke, history.Acquire, "L", nil, t+1, "")
		x.add(p, history.OK, history.Acquire, "L", &history.Value{Fence: int64(i + 1)}, t+2, "")
		x.add(p, history.Invoke, history.Read, "R", nil, t+3, "")
		x.add(p, history.OK, history.Read, "R", reg(int64(i)), t+4, "")
		x.add(p, history.Invoke, history.Write, "R", reg(int64(i+1)), t+5, "")
		x.add(p, history.OK, history.Write, "R", nil, t+6, "")
		x.add(p, history.Invoke, history.Release, "L", nil, t+7, "")
		x.add(p, history.OK, history.Release, "L", nil, t+8, "")
		x.add(w, history.Fail, history.Acquire, "L", nil, t+9, "taken")
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
		name := c.Name()
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
