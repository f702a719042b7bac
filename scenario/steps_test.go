package scenario

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/workloads"
)

// A story's own plan arms its trap held back for the attempts its traffic
// floor needs before its fault (3 by default): a client at the trap's
// point before then passes, the next one after it is caught.
func TestAStorysTrapWaitsForItsTrafficBefore(t *testing.T) {
	ctx := context.Background()
	s, err := Lookup("paused-holder")
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(nil, 0)
	e := &Env{TTL: 100 * time.Millisecond, TimeLimit: time.Second, Gate: nemesis.NewGate(rec), Params: s.ParamsOf(nil),
		Nodes: []string{"n1"}, Clients: []string{"c0", "c1"}}
	sched, _, err := s.Steps(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sched {
		if strings.HasPrefix(st.Name, "pause") {
			_ = st.Do(ctx)
		}
	}
	for i := range s.TrafficOf(e.Params).Floor().Before {
		start := time.Now()
		_ = e.Gate.At(ctx, 0, 0, workloads.BeforeWrite)
		if d := time.Since(start); d >= 50*time.Millisecond {
			t.Fatalf("after %d attempts the holder at before-write waited %v: the trap sprang before the story's traffic", i, d)
		}
		rec.Complete(rec.Invoke(1, history.Acquire, "lock", nil), history.Fail, nil, nil)
	}
	start := time.Now()
	_ = e.Gate.At(ctx, 0, 0, workloads.BeforeWrite)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("with the story's traffic answered the holder passed in %v: the trap did not spring", d)
	}
}
