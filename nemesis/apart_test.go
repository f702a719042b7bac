package nemesis_test

import (
	"errors"
	"testing"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
)

// A command a worker's other thread sends while an op runs (tooz's heart
// renewing a lock during a release) is not the op's: a trap that names the
// op neither springs on it nor counts it, so the release's own first
// EVALSHA takes the trap. A trap that names no op (a renewal's) still can.
func TestCommandsSentApartAreNotTheOps(t *testing.T) {
	g := nemesis.NewGate(history.NewRecorder(nil, 0))
	g.Arm(nemesis.Trap{Client: nemesis.AnyClient, Command: &nemesis.Command{In: history.Release, Match: "EVALSHA", Nth: 1}, Crash: true})
	g.Begin(ctx, 0, 1, history.Release)
	beat := g.SendingApart(0, 1, [][]string{{"EVALSHA", "extend", "1", "lock", "500"}})
	if err := g.Boundary(ctx, 0, 1, beat[0], false, false); err != nil {
		t.Fatalf("the heart's renewal took the release's trap: %v", err)
	}
	release := g.Sending(0, 1, [][]string{{"EVALSHA", "unlock", "1", "lock", "token"}})
	if err := g.Boundary(ctx, 0, 1, release[0], false, false); !errors.Is(err, nemesis.ErrCrashed) {
		t.Fatalf("the release's own first EVALSHA, after the renewal sent apart: %v, want the trap's crash", err)
	}
	if p := g.Profile()[nemesis.Renewal]; p != nil {
		t.Fatalf("the op has not ended, yet the profile has renewals: %+v", p)
	}

	g.Arm(nemesis.Trap{Client: nemesis.AnyClient, Command: &nemesis.Command{Match: "EVALSHA"}, Crash: true})
	g.Begin(ctx, 2, 3, history.Acquire)
	beat = g.SendingApart(2, 3, [][]string{{"EVALSHA", "extend", "1", "lock", "500"}})
	if err := g.Boundary(ctx, 2, 3, beat[0], false, false); !errors.Is(err, nemesis.ErrCrashed) {
		t.Fatalf("a renewal's trap, which names no op, on a command sent apart: %v, want its crash", err)
	}
	g.End(2, 3)
	if p := g.Profile()[nemesis.Renewal]; p == nil {
		t.Fatal("the command sent apart during the acquire is not learnt as a renewal")
	}
}
