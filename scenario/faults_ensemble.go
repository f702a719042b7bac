package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
)

// ensembleActions are the faults of a whole ensemble at once.
var ensembleActions = []ActionKind{
	{Name: "restart-ensemble", Ops: ops(fault.Restart), Needs: []string{"for"},
		Help: "start every lock node again (each killed before it), the first at once and the others so that the ensemble serves about for TTLs later, " +
			"by how long the first took to listen on its port",
		compile: compileRestartEnsemble},
}

// compileRestartEnsemble compiles restart-ensemble. An ensemble restarted
// whole serves a start and an election after its members are started,
// which takes under a second on a fast machine and 5 s beside two busy
// loops; a story that needs the ensemble back within a window of its own
// (ensemble-restart: after the clients' sessions are declared lost,
// before their retries give up) cannot hit it with a fixed delay on
// every machine. So the first member starts at once, and how long it
// takes to listen on its port, on the machine as it is, times the others
// (pacedStart).
func compileRestartEnsemble(c *compiler, path string, a Action) (deed, string, error) {
	serve := a.For.in(c.e)
	if serve <= electionAllowance {
		return nil, "", &fieldError{path + ".for", fmt.Sprintf("an ensemble takes %s to elect once its members listen: for must be longer", electionAllowance)}
	}
	if len(c.e.Nodes) < 2 {
		return nil, "", &fieldError{path, "restart-ensemble needs an ensemble of two lock nodes or more"}
	}
	return func(context.Context, int) error {
		began := time.Now()
		c.aside(func(bg context.Context) { c.e.Gate.Fail(bg, c.restartEnsemble(bg, began, serve)) })
		return nil
	}, fmt.Sprintf("restart %s at once and the others to serve %s later", c.e.Nodes[0], serve), nil
}

// restartEnsemble starts the first lock node, waits until it listens or
// pacedLatest has passed since began, and starts the others at the time
// pacedStart picks (at once if the first failed to start); it returns
// once every member's start has ended, with the first error the run's
// end did not cause, if any.
func (c *compiler) restartEnsemble(ctx context.Context, began time.Time, serve time.Duration) error {
	first, rest := c.e.Nodes[0], c.e.Nodes[1:]
	type start struct {
		served <-chan error
		err    error
	}
	up := make(chan start, 1)
	go func() {
		served, err := c.e.Nemesis.RestartMember(ctx, first)
		up <- start{served, err}
	}()
	var firstUp *start
	select {
	case s := <-up:
		firstUp = &s
	case <-time.After(pacedLatest(serve) - time.Since(began)):
	}
	at := pacedStart(time.Since(began), serve)
	if firstUp != nil && firstUp.err != nil {
		at = 0
	}
	errs := make(chan error, len(rest))
	for _, node := range rest {
		go func() { errs <- c.e.Nemesis.RestartNode(ctx, node, max(0, at-time.Since(began))) }()
	}
	if firstUp == nil {
		s := <-up
		firstUp = &s
	}
	err := firstUp.err
	if err == nil {
		err = <-firstUp.served
	}
	for range rest {
		if e := <-errs; err == nil || nemesis.CutShort(ctx, err) == nil && e != nil {
			err = e
		}
	}
	return err
}

// pacedStart is when, after the first member's start began, the others
// start: took is how long the first took to listen. Two members starting
// together take about twice that to listen (a JVM's start; theirs share
// the cores), and then load their data, elect and sync, which took 0.65
// to 0.9 s more here, idle or beside two busy loops (electionAllowance).
// So they start that long before the ensemble is to serve; where the
// first has not listened by the time that would give (pacedLatest), the
// machine is slow, and they start then.
func pacedStart(took, serve time.Duration) time.Duration {
	return max(serve-2*took-electionAllowance, min(took, pacedLatest(serve)))
}

// pacedLatest is how long the others wait for the first member to
// listen: a first that listens then gets the others started at once, so
// the ensemble serves on time only if they are as quick as it was.
func pacedLatest(serve time.Duration) time.Duration {
	return (serve - electionAllowance) / 3
}

// electionAllowance is how long, after two members of an ensemble
// listen, it takes them and the first to load, elect a leader and sync.
const electionAllowance = 800 * time.Millisecond
