package locktest

import (
	"testing"

	"github.com/locktorture/locktorture/cluster"
	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/internal/prereq"
	"github.com/locktorture/locktorture/scenario"
)

// requireMachine stops t, before any story starts, with one line naming
// what the machine lacks for the stories named (and o.Told) and the
// command that installs it. It fails rather than skips: a CI job whose
// machine lost its Redis must not pass with every story unrun.
func requireMachine(t testing.TB, o engine.Options, names ...string) {
	t.Helper()
	if err := missing(o, names...); err != nil {
		t.Fatalf("locktest: %v", err)
	}
}

// missing is the first piece the stories need that the machine lacks, as
// a *prereq.Missing, or nil. On local processes every story needs
// redis-server (o.Server, when set) and a story with faked node clocks
// needs libfaketime and the libc-allocator redis-server; the docker
// backend's containers carry their own.
func missing(o engine.Options, names ...string) error {
	if o.Backend != "" && o.Backend != cluster.Local {
		return nil
	}
	need := []prereq.Piece{prereq.Command(o.Server)}
	clock := o.Told != nil && o.Told.Topology.Clock
	for _, n := range names {
		if s, err := scenario.Lookup(n); err == nil && s.Topology.Clock {
			clock = true
		}
	}
	if clock {
		need = append(need, prereq.Libfaketime, prereq.FaketimeServer)
	}
	for _, p := range need {
		if err := prereq.Check(p); err != nil {
			return err
		}
	}
	return nil
}
