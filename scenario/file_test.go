package scenario

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Every story told in the catalogue is data: it prints as a file, and the
// file reads back as the same story, so a run from it is the same run. The
// explorations, whose schedules are drawn as they run, are the only ones
// told in code.
func TestEveryStoryPrintsAndReadsBackTheSame(t *testing.T) {
	printed := 0
	for _, name := range Names() {
		s, _ := Lookup(name)
		if s.Exploration || s.Probed {
			if err := s.Print(&bytes.Buffer{}); s.Plan == nil && err == nil {
				t.Errorf("%s: a schedule drawn as the run goes printed as a file", name)
			}
			continue
		}
		if s.Plan == nil || s.Schedule != nil {
			t.Errorf("%s: a told story's schedule must be a Plan, with no Schedule in code", name)
			continue
		}
		var b bytes.Buffer
		if err := s.Print(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := Parse(b.Bytes())
		if err != nil {
			t.Fatalf("%s: its own print does not read back: %v\n%s", name, err, b.String())
		}
		// A file holds the expectations the rules gave, not the rules.
		s.Rules = nil
		if !reflect.DeepEqual(back, s) {
			t.Errorf("%s: read back as another story:\n%#v\nwant\n%#v", name, back, s)
		}
		var again bytes.Buffer
		if err := back.Print(&again); err != nil || again.String() != b.String() {
			t.Errorf("%s: printed twice, two files (%v)", name, err)
		}
		printed++
	}
	if printed < 25 {
		t.Fatalf("printed %d stories: the catalogue holds more", printed)
	}
}

// A bad file gets one line naming the field at fault and the problem.
func TestBadScenarioFilesNameTheField(t *testing.T) {
	s, _ := Lookup("paused-holder")
	var b bytes.Buffer
	if err := s.Print(&b); err != nil {
		t.Fatal(err)
	}
	good := b.String()
	// edit changes the printed story through its JSON: a map, so a case
	// says only what it breaks.
	edit := func(change func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(good), &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	firstStep := func(m map[string]any) map[string]any { return m["schedule"].([]any)[0].(map[string]any) }
	cases := []struct{ name, file, field string }{
		{"empty", ``, "empty"},
		{"syntax", "{\n\"name\": \"x\",,\n}", "line 2"},
		{"unknown field", edit(func(m map[string]any) { m["colour"] = "red" }), "colour: no such field"},
		{"type", edit(func(m map[string]any) { m["clients"] = "five" }), "clients"},
		{"ttl", edit(func(m map[string]any) { m["ttl"] = "soon" }), "ttl"},
		{"restart share", edit(func(m map[string]any) { m["restart_share"] = 1.5 }), "restart_share"},
		{"expiry share", edit(func(m map[string]any) { m["expiry_share"] = -0.25 }), "expiry_share"},
		{"name", edit(func(m map[string]any) { m["name"] = "Paused Holder" }), "name"},
		{"no story", edit(func(m map[string]any) { delete(m, "story") }), "story"},
		{"no lock", edit(func(m map[string]any) {
			m["expect"].(map[string]any)["no-such-lock"] = map[string]any{"outcome": "safe", "why": "x"}
		}), "expect.no-such-lock"},
		{"outcome", edit(func(m map[string]any) { m["expect"].(map[string]any)["set-nx-px"].(map[string]any)["outcome"] = "fine" }), "expect.set-nx-px.outcome"},
		{"requires", edit(func(m map[string]any) { m["requires"] = []any{map[string]any{"op": "boom"}} }), "requires[0].op"},
		{"action", edit(func(m map[string]any) { firstStep(m)["do"] = "explode" }), "schedule[0].do"},
		{"param", edit(func(m map[string]any) { firstStep(m)["trap"].(map[string]any)["pause"] = "$length" }), "schedule[0].trap.pause"},
		{"number", edit(func(m map[string]any) { firstStep(m)["at"] = "soon" }), "schedule.at: \"soon\": want a number of TTLs"},
		{"below zero", edit(func(m map[string]any) { firstStep(m)["at"] = -1 }), "schedule[0].at"},
		{"caught outside a trap", edit(func(m map[string]any) { firstStep(m)["trap"].(map[string]any)["client"] = "caught" }), "schedule[0].trap.client"},
		{"two places", edit(func(m map[string]any) {
			firstStep(m)["trap"].(map[string]any)["command"] = map[string]any{"in": "release"}
		}), "schedule[0].trap"},
		{"missing argument", edit(func(m map[string]any) { m["schedule"] = []any{map[string]any{"at": 1, "do": "kill"}} }), "schedule[0].node"},
		{"argument not taken", edit(func(m map[string]any) { m["schedule"] = []any{map[string]any{"at": 1, "do": "heal", "node": "n1"}} }), "schedule[0].node"},
		{"nested", edit(func(m map[string]any) {
			firstStep(m)["trap"].(map[string]any)["then"] = []any{map[string]any{"do": "partition", "cuts": []any{map[string]any{"from": "clients", "nodes": []any{"all"}}}}}
		}), "schedule[0].trap.then[0].cuts[0].from"},
		{"sentinel alone", edit(func(m map[string]any) { m["topology"] = map[string]any{"sentinel": true} }), "topology.sentinel"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.file))
		if err == nil {
			t.Errorf("%s: read without error", c.name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.field) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q: want one line naming %q", c.name, msg, c.field)
		}
	}
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("the story itself: %v", err)
	}
}

// The lateness meter asks a lock node only where no step touches its
// process: a pause of the holder alone does not, nor a jump of the node's
// clock; a crash of the server does, and so does a kill hidden in a
// trap's then.
func TestPlanTouchesNodes(t *testing.T) {
	for name, want := range map[string]bool{"paused-holder": false, "baseline": false, "server-crash": true, "redlock-crash-restart": true, "server-clock-jump": false} {
		s, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Plan.TouchesNodes(); got != want {
			t.Errorf("%s: TouchesNodes %v, want %v", name, got, want)
		}
	}
	trapped := Plan{{Action: Action{Do: "arm", Trap: &Trap{Point: "before-write", Client: "any", Then: []Action{{Do: "kill", Node: "n1"}}}}}}
	if !trapped.TouchesNodes() {
		t.Error("a kill in a trap's then: TouchesNodes false")
	}
	if (Plan{{Action: Action{Do: "evict", Node: "store"}}}).TouchesNodes() {
		t.Error("an action on the store touches no lock node")
	}
}
