package report_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/verdict"
)

// longRun is a million-op history of five clients taking turns on one key
// over 100 s, each holder reading and writing the register, with a pause
// of one of them in the middle: the shape and length of a long baseline.
func longRun() []history.Op { return turns(100_000) }

// turns is a history of cycles turns of five clients on one key, ten ops
// a turn a millisecond apart, with a pause of one of them in the middle.
func turns(cycles int) []history.Op {
	ops := make([]history.Op, 0, 10*cycles+2)
	add := func(p int, t history.Type, f, key string, v *history.Value, at int64) {
		ops = append(ops, history.Op{Index: int64(len(ops)), Process: p, Type: t, F: f, Key: key, Value: v, Time: at})
	}
	const step = int64(time.Millisecond) / 10
	for i := 0; i < cycles; i++ {
		t := int64(i) * 10 * step
		p, w := i%5, (i+1)%5
		if i == cycles/2 {
			add(history.NemesisProcess, history.Info, string(fault.Pause), "", &history.Value{Target: "process 3"}, t)
		}
		if i == cycles/2+1000 {
			add(history.NemesisProcess, history.Info, string(fault.Resume), "", &history.Value{Target: "process 3"}, t)
		}
		add(w, history.Invoke, history.Acquire, "lock", nil, t)
		add(p, history.Invoke, history.Acquire, "lock", nil, t+step)
		add(p, history.OK, history.Acquire, "lock", &history.Value{Deadline: t + 5000*step}, t+2*step)
		add(p, history.Invoke, history.Read, "register", nil, t+3*step)
		add(p, history.OK, history.Read, "register", &history.Value{Reg: history.Int64(int64(i))}, t+4*step)
		add(p, history.Invoke, history.Write, "register", &history.Value{Reg: history.Int64(int64(i + 1))}, t+5*step)
		add(p, history.OK, history.Write, "register", nil, t+6*step)
		add(p, history.Invoke, history.Release, "lock", nil, t+7*step)
		add(p, history.OK, history.Release, "lock", nil, t+8*step)
		add(w, history.Fail, history.Acquire, "lock", nil, t+9*step)
	}
	return ops
}

// BenchmarkReportMillionOps writes the whole report of a million-op run:
// results.json, the timeline window, every chart as PNG and SVG, the page.
// Target: under 3 s, and files of a size that does not grow with the run
// (reported as MB/run).
//
//	go test -run '^$' -bench ReportMillionOps -benchtime 1x ./report/
func BenchmarkReportMillionOps(b *testing.B) { benchmarkReport(b, longRun()) }

// BenchmarkReportMatrixRun writes the report of a run the size of a
// matrix's pair (7,000 ops: five clients over a few seconds), which a
// matrix writes 520 times while other pairs run beside it. Its cost is
// the charts' fixed cost (drawing and encoding four PNGs), not the ops.
//
//	go test -run '^$' -bench ReportMatrixRun ./report/
func BenchmarkReportMatrixRun(b *testing.B) { benchmarkReport(b, turns(700)) }

func benchmarkReport(b *testing.B, ops []history.Op) {
	var verdicts []checker.Verdict
	for _, c := range []checker.Checker{checker.Intervals{}, checker.Linearizable{}, checker.Promise{}, checker.Resource{}} {
		verdicts = append(verdicts, c.Check(ops))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		r := &engine.Result{Scenario: "baseline", Lock: "set-nx-px", Dir: dir, Ops: ops,
			Judgement: verdict.Judgement{Verdicts: verdicts, Outcome: verdict.Sum(verdicts)}}
		if err := report.Write(r); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		var size int64
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
				size += fi.Size()
				if fi.Size() > 5<<20 {
					b.Errorf("%s is %.1f MB: a report file must not grow with the run", e.Name(), float64(fi.Size())/(1<<20))
				}
			}
		}
		b.ReportMetric(float64(size)/(1<<20), "MB/run")
		b.StartTimer()
	}
}
