package scenario

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// updateRandomGolden rewrites testdata/random_plans.jsonl from the code as
// it is. Only a change meant to give every seed another schedule may use
// it: random runs are replayed from their seed, and a run stored before
// the change is told again by what its seed draws.
var updateRandomGolden = flag.Bool("update-random-golden", false, "rewrite testdata/random_plans.jsonl (every seed's random schedule changes)")

// randomGolden is the file of plans the random story drew for a spread of
// seeds, node and client counts, leases and time limits.
const randomGolden = "testdata/random_plans.jsonl"

// randomCase is one line of the golden file: a run's shape and the plan
// its seed draws.
type randomCase struct {
	Case string          `json:"case"`
	Plan json.RawMessage `json:"plan"`
}

// randomCases are the runs whose plans the golden file pins: one and two
// nodes (no partition shapes), three and five (every shape), one client
// and several, the default and a short time limit.
func randomCases() []*Env {
	var out []*Env
	for _, seed := range []int64{1, 2, 3, 4, 5, 6, 7, 12, 42, 7777} {
		for _, nodes := range []int{1, 2, 3, 5} {
			for _, clients := range []int{1, 2, 5} {
				for _, lim := range []struct{ ttl, limit time.Duration }{{500 * time.Millisecond, 15 * time.Second}, {500 * time.Millisecond, 10 * time.Second}, {time.Second, 30 * time.Second}} {
					e := &Env{TTL: lim.ttl, TimeLimit: lim.limit, Seed: seed}
					for i := range nodes {
						e.Nodes = append(e.Nodes, fmt.Sprintf("n%d", i+1))
					}
					for i := range clients {
						e.Clients = append(e.Clients, fmt.Sprintf("client-%d", i))
					}
					out = append(out, e)
				}
			}
		}
	}
	return out
}

func randomCaseName(e *Env) string {
	return fmt.Sprintf("seed=%d nodes=%d clients=%d ttl=%s limit=%s", e.Seed, len(e.Nodes), len(e.Clients), e.TTL, e.TimeLimit)
}

// canonicalPlan writes p as JSON with every action named by the name it
// goes by now: the golden file was drawn when pause-node and pause-client
// were the names of node-pause and pause, and a plan is the same schedule
// whichever of its names it uses.
func canonicalPlan(t *testing.T, p Plan) []byte {
	t.Helper()
	p = slices.Clone(p)
	for i := range p {
		p[i].Action = canonicalAction(t, p[i].Action)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonicalAction is a with its action, and those it holds, named as
// they are now.
func canonicalAction(t *testing.T, a Action) Action {
	t.Helper()
	k, ok := LookupAction(a.Do)
	if !ok {
		t.Fatalf("%q is no action", a.Do)
	}
	a.Do = k.Name
	a.Then = canonicalActions(t, a.Then)
	if a.Trap != nil {
		tr := *a.Trap
		tr.Then, tr.Wake = canonicalActions(t, tr.Then), canonicalActions(t, tr.Wake)
		a.Trap = &tr
	}
	return a
}

func canonicalActions(t *testing.T, as []Action) []Action {
	var out []Action
	for _, a := range as {
		out = append(out, canonicalAction(t, a))
	}
	return out
}

// A seed draws the schedule it drew when the golden file was written:
// the same steps, in the same order, at the same times, on the same
// targets. Random runs are replayed from their seed and stored runs judged
// again, so the draws' order and what each picks from the seed's stream
// must not move.
func TestRandomPlansAreTheSeedsAsBefore(t *testing.T) {
	cases := randomCases()
	if *updateRandomGolden {
		writeRandomGolden(t, cases)
		return
	}
	want := readRandomGolden(t)
	if len(want) != len(cases) {
		t.Fatalf("the golden file holds %d plans, the test draws %d", len(want), len(cases))
	}
	steps, drawn := 0, map[string]bool{}
	for _, e := range cases {
		name := randomCaseName(e)
		p, err := randomPlan(e)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		steps += len(p)
		for _, st := range p {
			drawn[st.Do] = true
		}
		if got := canonicalPlan(t, p); !bytes.Equal(got, want[name]) {
			t.Errorf("%s draws another plan:\n got %s\nwant %s", name, got, want[name])
		}
	}
	// Every kind of step random draws is among them, the final heal too.
	if steps < 5*len(cases) || len(drawn) < 7 {
		t.Fatalf("%d steps in %d plans, of %d actions (%v): too few to pin the draws", steps, len(cases), len(drawn), drawn)
	}
}

// writeRandomGolden writes the plans cases draw now as the golden file.
func writeRandomGolden(t *testing.T, cases []*Env) {
	var b bytes.Buffer
	for _, e := range cases {
		p, err := randomPlan(e)
		if err != nil {
			t.Fatalf("%s: %v", randomCaseName(e), err)
		}
		line, err := json.Marshal(randomCase{Case: randomCaseName(e), Plan: canonicalPlan(t, p)})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.FromSlash(randomGolden), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readRandomGolden is the golden file's plans by case, each as
// canonicalPlan writes it.
func readRandomGolden(t *testing.T) map[string][]byte {
	f, err := os.Open(filepath.FromSlash(randomGolden))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c randomCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		var p Plan
		if err := json.Unmarshal(c.Plan, &p); err != nil {
			t.Fatalf("%s: %v", c.Case, err)
		}
		out[c.Case] = canonicalPlan(t, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
