package history

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A client records its ops while the file's writer is stuck: recording
// never waits on the disk. Close then writes every op, in order.
func TestRecordingNeverWaitsOnTheFile(t *testing.T) {
	// A pipe nobody reads yet: every write to it waits, as on a disk the
	// kernel throttles.
	pr, pw := io.Pipe()
	r := NewRecorder(pw, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			r.Complete(r.Invoke(i%2, Acquire, "L", nil), OK, &Value{Token: "t", Fence: int64(i + 1)}, nil)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("recording waited on a stuck writer")
	}
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(pr)
		read <- b
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	ops, err := Load(bytes.NewReader(<-read))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 200 {
		t.Fatalf("%d ops on disk after Close, want 200", len(ops))
	}
	for i, op := range ops {
		if op.Index != int64(i) || (i > 0 && op.Time < ops[i-1].Time) {
			t.Fatalf("op %d on disk out of order: %+v", i, op)
		}
	}
	if ops[199].Type != OK || ops[199].Value.Fence != 100 {
		t.Fatalf("round trip lost something: %+v", ops[199])
	}
	if p := r.NewProcess(); p != 2 {
		t.Fatalf("first new process = %d, want 2", p)
	}
}

// Attempts counts what a story's traffic floor counts: acquires
// answered, ok or fail; not one whose outcome is unknown, nor releases.
func TestAttemptsCountsAnsweredAcquires(t *testing.T) {
	r := NewRecorder(nil, 2)
	for _, c := range []struct {
		f    string
		t    Type
		want int
	}{{Acquire, OK, 1}, {Acquire, Fail, 2}, {Acquire, Info, 2}, {Release, OK, 2}, {Release, Fail, 2}} {
		r.Complete(r.Invoke(0, c.f, "L", nil), c.t, nil, nil)
		if got := r.Attempts(); got != c.want {
			t.Fatalf("after %s %s: %d attempts, want %d", c.f, c.t, got, c.want)
		}
	}
}

func TestRecorderIsSafeForConcurrentClients(t *testing.T) {
	r := NewRecorder(nil, 8)
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r.Complete(r.Invoke(p, Read, "R", nil), OK, nil, nil)
			}
		}()
	}
	wg.Wait()
	ops := r.Ops()
	for i, op := range ops {
		if op.Index != int64(i) || (i > 0 && op.Time < ops[i-1].Time) {
			t.Fatalf("op %d out of order: %+v", i, op)
		}
	}
	if got := len(Pairs(ops)); got != 800 {
		t.Fatalf("pairs = %d, want 800", got)
	}
}

func TestLoadToleratesATornLastLine(t *testing.T) {
	in := `{"index":0,"process":0,"type":"invoke","f":"acquire","time":1}
{"index":1,"process":0,"type":"ok","f":"acq`
	ops, err := Load(strings.NewReader(in))
	if !errors.Is(err, ErrTruncated) || len(ops) != 1 {
		t.Fatalf("want 1 op and ErrTruncated, got %d, %v", len(ops), err)
	}
}

func TestLoadRejectsCorruptionInTheMiddle(t *testing.T) {
	in := "{\"index\":0}\nnot json\n{\"index\":2}\n"
	if _, err := Load(strings.NewReader(in)); err == nil || errors.Is(err, ErrTruncated) {
		t.Fatalf("want a line error, got %v", err)
	}
}

func TestPairsLeavesUnfinishedInvokesOpen(t *testing.T) {
	ops := []Op{{Process: 0, Type: Invoke, F: Acquire}, {Process: 1, Type: Invoke, F: Acquire}, {Process: 0, Type: OK, F: Acquire}}
	p := Pairs(ops)
	if len(p) != 2 || p[0].Completion == nil || p[1].Completion != nil {
		t.Fatalf("bad pairs %+v", p)
	}
}

// A recorder that forgets keeps writing every op to its file, counts them,
// and still knows each process's lease deadline, holding none of them.
func TestForgettingRecorderWritesEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := Create(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	r.Complete(r.Invoke(0, Acquire, "L", nil), OK, &Value{Deadline: 7}, nil)
	r.Forget()
	r.Complete(r.Invoke(1, Acquire, "L", nil), OK, &Value{Deadline: 9}, nil)
	r.Invoke(0, Release, "L", nil)
	if n, _ := r.Summary(); n != 5 || len(r.Ops()) != 2 {
		t.Fatalf("summary %d ops, %d kept; want 5 recorded, the 2 before Forget kept", n, len(r.Ops()))
	}
	if r.Deadline(0) != 0 || r.Deadline(1) != 9 {
		t.Fatalf("deadlines %d and %d, want 0 (released) and 9", r.Deadline(0), r.Deadline(1))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := LoadFile(path)
	if err != nil || len(ops) != 5 || ops[4].Index != 4 {
		t.Fatalf("the file holds %d ops (%v), want all 5 in order", len(ops), err)
	}
}

// The nemesis's actions overlap: each completion goes with the earliest
// invocation in flight of the same action on the same target, not with
// whichever the nemesis invoked last.
func TestPairsMatchOverlappingNemesisActions(t *testing.T) {
	n1, n2 := &Value{Target: "n1"}, &Value{Target: "n2"}
	ops := []Op{
		{Process: NemesisProcess, Type: Invoke, F: "restart", Value: n1, Time: 1},
		{Process: NemesisProcess, Type: Invoke, F: "kill", Value: n2, Time: 2},
		{Process: NemesisProcess, Type: OK, F: "kill", Value: n2, Time: 3},
		{Process: NemesisProcess, Type: Invoke, F: "restart", Value: n1, Time: 4},
		{Process: NemesisProcess, Type: OK, F: "restart", Value: n1, Time: 5},
		{Process: NemesisProcess, Type: OK, F: "restart", Value: n1, Time: 6},
	}
	// An eviction says what it did in its completion's target; its site
	// is the invocation's.
	site := &Site{Node: "n1"}
	ops = append(ops, Op{Process: NemesisProcess, Type: Invoke, F: "evict", Value: &Value{Target: "n1", Site: site}, Time: 7},
		Op{Process: NemesisProcess, Type: OK, F: "evict", Value: &Value{Target: "n1 (3 keys written, 1 evicted)", Site: site}, Time: 8})
	p := Pairs(ops)
	got := map[int64]int64{}
	for _, x := range p {
		if x.Completion == nil {
			t.Fatalf("invocation at %d left open: %+v", x.Invoke.Time, p)
		}
		got[x.Invoke.Time] = x.Completion.Time
	}
	if want := map[int64]int64{1: 5, 2: 3, 4: 6, 7: 8}; !maps.Equal(got, want) {
		t.Fatalf("pairs by invocation → completion time: %v, want %v", got, want)
	}
}

// Each hands over what Load returns, op by op, with Load's errors.
func TestEachReadsWhatLoadReads(t *testing.T) {
	in := "{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"acquire\",\"time\":1}\n\n{\"index\":1,\"process\":0,\"type\":\"ok\",\"f\":\"acquire\",\"time\":2}\n{\"index\":2,\"pro"
	var seen []int64
	err := Each(strings.NewReader(in), func(op Op) { seen = append(seen, op.Index) })
	if !errors.Is(err, ErrTruncated) || len(seen) != 2 || seen[1] != 1 {
		t.Fatalf("want ops 0 and 1, then ErrTruncated; got %v, %v", seen, err)
	}
	if err := Each(strings.NewReader("{\"index\":0}\nnot json\n{\"index\":2}\n"), func(Op) {}); err == nil || errors.Is(err, ErrTruncated) {
		t.Fatalf("want a line error, got %v", err)
	}
}

// BenchmarkEachMillion reads a compressed million-op history as a stream,
// as checking a stored hour does before any checker runs: the figure per
// op, times 17M, is what reading an hour's file costs.
//
//	go test -run '^$' -bench EachMillion -benchtime 1x ./history/
func BenchmarkEachMillion(b *testing.B) {
	path := filepath.Join(b.TempDir(), "history.jsonl")
	r, err := Create(path, 16)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 250_000; i++ {
		p := i % 16
		r.Complete(r.Invoke(p, Acquire, "L", nil), OK, &Value{Token: "t1234567", Fence: int64(i), Deadline: 123456789012}, nil)
		r.Complete(r.Invoke(p, Write, "R", &Value{Reg: Int64(int64(i))}), OK, nil, nil)
	}
	if err := errors.Join(r.Close(), Compress(path)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := Each(f, func(Op) { n++ }); err != nil || n != 1_000_000 {
			b.Fatalf("%d ops, %v", n, err)
		}
		f.Close()
	}
}

// A compressed history loads as the plain one did, by either name, and
// the plain file is gone.
func TestCompressKeepsEveryOp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := Create(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		r.Complete(r.Invoke(0, Acquire, "L", nil), Fail, nil, errors.New("taken"))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	plain, _ := os.Stat(path)
	if err := Compress(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("plain history still there: %v", err)
	}
	gz, _ := os.Stat(path + ".gz")
	if gz.Size()*5 > plain.Size() {
		t.Errorf("compressed %d → %d bytes: want at least 5×", plain.Size(), gz.Size())
	}
	for _, name := range []string{path, path + ".gz"} {
		ops, err := LoadFile(name)
		if err != nil || len(ops) != 2000 || ops[1999].Error != "taken" {
			t.Fatalf("LoadFile(%s): %d ops, %v", name, len(ops), err)
		}
	}
}

// A site goes to disk in lower_snake fields, leaving out what it does not
// name, and comes back whole: client 0 stays client 0, no client stays
// none.
func TestSiteRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, 0)
	at := &Site{Client: IDOf(0), Process: IDOf(7), Command: "get", Reply: true, In: Release}
	r.Add(Op{Process: NemesisProcess, Type: OK, F: "pause", Value: &Value{Target: "process 7 at …", Site: at}})
	cut := &Site{Cut: map[string][]string{"c0": {"n4", "n5"}}}
	r.Add(Op{Process: NemesisProcess, Type: OK, F: "partition-start", Value: &Value{Site: cut}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(buf.String(), "\n", 2)[0]
	if want := `"site":{"client":0,"process":7,"command":"get","reply":true,"in":"release"}`; !strings.Contains(line, want) {
		t.Fatalf("site on disk: %s, want %s", line, want)
	}
	ops, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got := ops[0].Site()
	if c, ok := got.Client.Int(); !ok || c != 0 || got.Process != IDOf(7) || got.Command != "get" || !got.Reply || got.In != Release {
		t.Fatalf("site came back as %+v", got)
	}
	if c := ops[1].Site(); !c.Client.IsZero() || !c.Process.IsZero() || len(c.Cut["c0"]) != 2 {
		t.Fatalf("a site without a client came back as %+v", c)
	}
}

// A history recorded before sites loads, its ops with empty sites.
func TestOldHistoryHasEmptySites(t *testing.T) {
	in := `{"index":0,"process":-1,"type":"ok","f":"kill","value":{"target":"n3"},"time":1}
{"index":1,"process":0,"type":"ok","f":"acquire","time":2}`
	ops, err := Load(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if ops[0].Value.Site != nil || ops[0].Site().Node != "" || ops[1].Site().Client.String() != "none" {
		t.Fatalf("old ops: %+v", ops)
	}
}

// Grants names every key an acquire was tried on, with when one last
// succeeded: 0 for a key nobody has taken yet.
func TestGrantsSaysWhenEachKeyTriedWasLastTaken(t *testing.T) {
	r := NewRecorder(nil, 0)
	a := r.Invoke(0, Acquire, "a", nil)
	r.Invoke(1, Acquire, "b", nil)
	ok := r.Complete(a, OK, nil, nil)
	g := r.Grants()
	if len(g) != 2 || g["a"] != ok.Time || g["b"] != 0 {
		t.Fatalf("Grants = %v; want a at %d, b never", g, ok.Time)
	}
}
