package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/fault"
	"github.com/locktorture/locktorture/nemesis"
)

// everyAction is every action once, by the name it goes by.
func everyAction() []ActionKind {
	var out []ActionKind
	for _, name := range ActionNames() {
		out = append(out, actions[name])
	}
	return out
}

// A fault kind is one entry: every op of package fault's table that
// carries out a fault is recorded by some action a plan can name, and
// every op an action says it records is in the table.
func TestEveryFaultOpHasAnAction(t *testing.T) {
	by := map[fault.Op][]string{}
	for _, k := range everyAction() {
		for _, op := range k.Ops {
			if _, ok := fault.Lookup(op); !ok {
				t.Errorf("%s records %q, which is no op of package fault's table", k.Name, op)
			}
			by[op] = append(by[op], k.Name)
		}
	}
	for _, op := range fault.Ops() {
		s, _ := fault.Lookup(op)
		if s.Shape == fault.End || s.Shape == fault.Note {
			continue
		}
		if len(by[op]) == 0 {
			t.Errorf("%s (%s) is a fault no action records: give it an entry in the faults_*.go of its family", op, s.Kind)
		}
	}
}

// Every kind of fault is drawn by random exploration, or every action
// that carries it out says in one line why random does not draw it; an
// action whose kinds random all draws has no reason to give.
func TestEveryKindIsDrawnOrSaysWhyNot(t *testing.T) {
	drawn := map[fault.Kind]bool{}
	for _, d := range randomDraws() {
		k, ok := fault.KindOf(d.op)
		if !ok {
			t.Errorf("a draw of rank %d records %s, which carries out no kind of fault", d.rank, d.op)
		}
		drawn[k] = true
	}
	carried := map[fault.Kind][]string{}
	for _, a := range everyAction() {
		var missing []fault.Kind
		for _, op := range a.Ops {
			if k, ok := fault.KindOf(op); ok {
				carried[k] = append(carried[k], a.Name)
				if !drawn[k] && !slices.Contains(missing, k) {
					missing = append(missing, k)
				}
			}
		}
		switch {
		case len(missing) > 0 && strings.TrimSpace(a.undrawn) == "":
			t.Errorf("%s carries out %v, which random never draws, and does not say why (undrawn)", a.Name, missing)
		case len(missing) == 0 && a.undrawn != "":
			t.Errorf("%s says why random does not draw it (%q), but random draws every kind it carries out", a.Name, a.undrawn)
		case strings.Contains(a.undrawn, "\n"):
			t.Errorf("%s: undrawn is one line", a.Name)
		}
	}
	for _, k := range fault.Kinds {
		if len(carried[k]) == 0 {
			t.Errorf("no action carries out %s", k)
		}
	}
}

// Each draw is its own action's, records an op that action records, and
// draws an action that passes a file's checks; a fault that lasts until
// its span ends has an undo. Ranks are one each: they order the list every
// seed's schedule is drawn from.
func TestDrawsAreTheirActions(t *testing.T) {
	e := &Env{Nodes: []string{"n1", "n2", "n3"}, Clients: []string{"client-0", "client-1"}}
	ranks := map[int]string{}
	for _, k := range everyAction() {
		for _, d := range k.draws {
			if other, twice := ranks[d.rank]; twice {
				t.Errorf("%s and %s both draw at rank %d", other, k.Name, d.rank)
			}
			ranks[d.rank] = k.Name
			if !slices.Contains(k.Ops, d.op) {
				t.Errorf("%s draws %s, which it does not record", k.Name, d.op)
			}
			if d.only != nil && !d.only(e) {
				continue
			}
			a := d.action(e, rand.New(rand.NewPCG(1, 2)))
			if got, _ := LookupAction(a.Do); got.Name != k.Name || a.Do != k.Name {
				t.Errorf("%s's draw of rank %d draws %q: want its own action, by its name", k.Name, d.rank, a.Do)
			}
			if err := checkAction(fmt.Sprintf("draw[%d]", d.rank), a, nil, false); err != nil {
				t.Errorf("%s's draw of rank %d: %v", k.Name, d.rank, err)
			}
			if d.lasts && k.Undo == nil {
				t.Errorf("%s's draw of rank %d lasts until its span ends, but %s has no undo", k.Name, d.rank, k.Name)
			}
		}
	}
	if len(randomFaults(e)) != len(ranks) {
		t.Errorf("three nodes draw from %d faults, want all %d draws", len(randomFaults(e)), len(ranks))
	}
}

// An action that alone records its one op is named as that op.
func TestActionsAreNamedAsTheirOps(t *testing.T) {
	recordedBy := map[fault.Op]int{}
	for _, k := range everyAction() {
		for _, op := range k.Ops {
			recordedBy[op]++
		}
	}
	for _, k := range everyAction() {
		if len(k.Ops) == 1 && recordedBy[k.Ops[0]] == 1 && k.Name != string(k.Ops[0]) {
			t.Errorf("%s alone records %s: name it so", k.Name, k.Ops[0])
		}
	}
}

// The names actions had before they were named as their ops still read,
// as the same action, wherever a plan names one (a user's scenario file,
// a stored run's scenario.json); -list shows the new name, its help the
// old one.
func TestOldActionNamesStillRead(t *testing.T) {
	renamed := map[string]string{
		"pause-node": "node-pause", "resume-node": "node-resume", "bump-clock": "clock-bump", "skew-client": "clock-skew",
		"pause-client": "pause", "fail-saves": "save-fail", "mend-saves": "save-mend",
	}
	names := ActionNames()
	for old, now := range renamed {
		k, ok := LookupAction(old)
		switch {
		case !ok:
			t.Errorf("%s no longer reads", old)
		case k.Name != now:
			t.Errorf("%s reads as %s, want %s", old, k.Name, now)
		case slices.Contains(names, old) || !slices.Contains(names, now):
			t.Errorf("-list names %v: want %s, not %s", names, now, old)
		case !strings.Contains(k.Help, old):
			t.Errorf("%s's help does not say %s still reads: %q", now, old, k.Help)
		}
	}
	// Old names in a plan pass its checks, undo as before, and stay as
	// written (a story prints as it was told).
	p := Plan{
		{At: TTLs(1), Until: TTLs(2), Action: Action{Do: "pause-node", Node: "n1"}},
		{At: TTLs(1), Until: TTLs(2), Action: Action{Do: "fail-saves", Node: "n1"}},
		{At: TTLs(1), Until: TTLs(2), Action: Action{Do: "bump-clock", Node: "n1", By: TTLs(2)}},
		{At: TTLs(1), Until: TTLs(2), Action: Action{Do: "skew-client", Client: "0", By: TTLs(2)}},
		{At: TTLs(3), Action: Action{Do: "pause-client", Client: "0", For: TTLs(2)}},
		{At: TTLs(3), Action: Action{Do: "arm", Trap: &Trap{Point: "before-write", Client: "any", Pause: TTLs(1),
			Wake: []Action{{Do: "mend-saves", Node: "n1", Delay: TTLs(1)}, {Do: "resume-node", Node: "n1"}}}}},
	}
	if err := p.Check(nil); err != nil {
		t.Fatalf("a plan of old names: %v", err)
	}
	if got := actions["pause-node"].Undo(p[0].Action); got.Do != "node-resume" {
		t.Errorf("pause-node undoes with %q, want node-resume", got.Do)
	}
	if p[0].Do != "pause-node" {
		t.Errorf("checking a plan renamed its steps")
	}
}

// A run that ends while leader-failover waits for an election says so in
// words: the kill-leader deed runs as a trap's Then, under its op's
// context, and the gate kept the bare context error as the run's error
// ("context canceled", a make run's leader-failover / curator whose
// ensemble took 5 s to elect beside other pairs). It still wraps the
// context's error, so a schedule's step run under the context that ended
// is cut short by it, as before (nemesis.CutShort).
func TestLeaderOfSaysTheRunEndedBeforeAnElection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := leaderOf(ctx, &Env{}, "n3", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "before a lock node other than n3 said it leads") {
		t.Fatalf("got %v: want the run's end said in words", err)
	}
	if nemesis.CutShort(ctx, err) != nil {
		t.Fatalf("a step's wait cut short by the run's end is an error: %v", err)
	}
}

// A trap's actions run under its op's context, which the run's end need
// not have ended: one that fails because the schedule's context ended (a
// restart's or an election's wait) is cut short as a step is, not the
// run's error; one that fails of itself still is.
func TestATrapsActionsAreCutShortByTheRunsEnd(t *testing.T) {
	waits := ActionKind{Name: "test-wait", compile: simple("wait for the run's end", func(c *compiler) error {
		<-c.background().Done()
		return fmt.Errorf("waited: %w", c.background().Err())
	})}
	fails := ActionKind{Name: "test-fail", compile: simple("fail", func(*compiler) error { return errors.New("no such node") })}
	actions[waits.Name], actions[fails.Name] = waits, fails
	defer delete(actions, waits.Name)
	defer delete(actions, fails.Name)
	run, end := context.WithCancel(context.Background())
	c := &compiler{e: &Env{Clients: []string{"c0", "c1"}}, bg: run}
	trap := func(do string) nemesis.Trap {
		set, _, err := c.trap("t", &Trap{Point: "p", Client: "0", Then: []Action{{Do: do}}, Wake: []Action{{Do: do}}})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := set(0)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	end()
	op := context.Background() // the caught op's, not ended
	w := trap(waits.Name)
	if err := w.Then(op, 0, 0); err != nil {
		t.Errorf("then: %v, want the run's end to cut it short", err)
	}
	if err := w.After(op, 0, 0); err != nil {
		t.Errorf("wake: %v, want the run's end to cut it short", err)
	}
	if err := trap(fails.Name).Then(op, 0, 0); err == nil {
		t.Error("then: an action's own failure must stay the run's error")
	}
}

// restart-ensemble starts the others so that the ensemble serves when
// asked, by how long the first member took to answer: later on a fast
// machine, and at once where the first has not answered by the time that
// would leave the others (the start is continuous there); and it refuses
// a time to serve shorter than an election, or a lone lock node.
func TestRestartEnsembleIsPacedByTheFirstMembersStart(t *testing.T) {
	const ms = time.Millisecond
	serve := 3600 * ms
	if got := pacedLatest(serve); got != 933333333 {
		t.Errorf("to serve at %s, the others wait for the first until %s, want 933.33ms", serve, got)
	}
	for _, tc := range []struct{ took, want time.Duration }{
		{250 * ms, 2300 * ms},
		{500 * ms, 1800 * ms},
		{900 * ms, 1000 * ms},
		{950 * ms, pacedLatest(serve)},
		{3000 * ms, pacedLatest(serve)},
	} {
		if got := pacedStart(tc.took, serve); got != tc.want {
			t.Errorf("first answered after %s, to serve at %s: the others start at %s, want %s", tc.took, serve, got, tc.want)
		}
	}
	c := &compiler{e: &Env{TTL: time.Second, Nodes: []string{"n1", "n2", "n3"}}}
	if _, _, err := c.action("p", Action{Do: "restart-ensemble", For: TTLs(0.5)}); err == nil || !strings.Contains(err.Error(), "for must be longer") {
		t.Errorf("to serve sooner than an election: %v, want a refusal", err)
	}
	c.e.Nodes = c.e.Nodes[:1]
	if _, _, err := c.action("p", Action{Do: "restart-ensemble", For: TTLs(1.2)}); err == nil || !strings.Contains(err.Error(), "two lock nodes") {
		t.Errorf("one lock node: %v, want a refusal", err)
	}
}
