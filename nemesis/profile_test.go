package nemesis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/locktorture/locktorture/history"
)

// The profile keeps what a lock sends op by op, in order, with its
// retries, and leaves out what is not the lock's: a connection's set-up,
// the EVAL that loads a script, and what fewer than the share of ops send.
func TestProfileListsTheCommandsOfEachOp(t *testing.T) {
	g := NewGate(history.NewRecorder(nil, 0))
	script := "return redis.call('del', KEYS[1])"
	sum := sha1.Sum([]byte(script))
	sha := hex.EncodeToString(sum[:])
	op := func(f string, cmds ...[]string) {
		g.Begin(context.Background(), 0, 0, f)
		at := g.Sending(0, 0, cmds)
		for _, i := range at {
			if err := g.Boundary(context.Background(), 0, 0, i, true, true); err != nil {
				t.Fatal(err)
			}
		}
		g.End(0, 0)
	}
	set := []string{"set", "lock", "tok", "px", "500", "nx"}
	evalsha := []string{"evalsha", sha, "1", "lock"}
	for i := 0; i < 40; i++ {
		switch {
		case i == 0: // the process's first acquire: one-time work, left out
			op(history.Acquire, []string{"info", "replication"}, set)
		case i == 5 || i == 9 || i == 13: // connections the pool adds later say HELLO
			op(history.Acquire, []string{"hello", "3"}, set)
		case i == 7: // rarer than one op in twenty
			op(history.Acquire, set, []string{"get", "lock"})
		case i%2 == 0:
			op(history.Acquire, set, set, set) // retried twice: the third is no new place
		default:
			op(history.Acquire, set)
		}
		// Each way of loading a script three times, more than one op in
		// twenty: only the rule that knows a loading leaves it out.
		switch i {
		case 3, 6, 11: // go-redis loads the script with an EVAL
			op(history.Release, evalsha, []string{"eval", script, "1", "lock"})
		case 4, 8, 12: // redis-py with SCRIPT LOAD, then the EVALSHA again
			op(history.Release, evalsha, []string{"SCRIPT LOAD", script}, evalsha)
		default:
			op(history.Release, evalsha)
		}
		if i < 3 {
			g.Sending(0, 0, [][]string{{"pexpire", "lock", "500"}}) // between ops: a renewal
		}
	}
	if got := g.Profile()[history.Acquire].Ops; got != 39 {
		t.Errorf("%d acquires profiled, want 39: the first is left out", got)
	}
	p := g.Profile()
	names := func(bs []Boundary) (out []string) {
		for _, b := range bs {
			out = append(out, b.String())
		}
		return out
	}
	for kind, want := range map[string][]string{
		history.Acquire: {"acquire before SET NX#1", "acquire before SET NX#2"},
		history.Release: {"release before EVALSHA " + sha + "#1"},
		Renewal:         {"renewal before PEXPIRE#1"},
	} {
		if got := names(p.Commands(kind, 0.05)); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", kind, got, want)
		}
	}
	for _, s := range []string{"release before EVALSHA " + sha + "#1", "acquire after SET NX#2", "renewal before PEXPIRE#1"} {
		b, err := ParseBoundary(s)
		if err != nil || b.String() != s {
			t.Errorf("%q read back as %q (%v)", s, b, err)
		}
	}
	for _, s := range []string{"", "release", "take before DEL#1", "release during DEL#1", "release before DEL", "release before DEL#3", "release before #1"} {
		if b, err := ParseBoundary(s); err == nil {
			t.Errorf("%q read as %v, want an error", s, b)
		}
	}
}
