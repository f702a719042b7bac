package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A built-in story printed as a file, changed, runs from the file: the run
// is told the file's story, not the catalogue's, and -check judges it
// again by the story it was told. Here the change asks for a kill that
// never happens, so the run is vacuous where the built-in's would match;
// judged by the catalogue's story, -check would change its verdict. A
// vacuous first run runs again alone, as a starved one does.
func TestScenarioFileRunsTheStoryItHolds(t *testing.T) {
	var printed, errb bytes.Buffer
	if code := run(context.Background(), []string{"-print-scenario", "paused-holder"}, &printed, &errb); code != 0 {
		t.Fatalf("-print-scenario: exit %d: %s", code, errb.String())
	}
	var m map[string]any
	if err := json.Unmarshal(printed.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	m["requires"] = append(m["requires"].([]any), map[string]any{"op": "kill"})
	b, _ := json.Marshal(m)
	dir := t.TempDir()
	file := filepath.Join(dir, "story.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	var stdout bytes.Buffer
	code := run(context.Background(), []string{"-scenario-file", file, "-lock", "set-nx-px", "-time-limit", "2.5s", "-out", out}, &stdout, &errb)
	if code != 1 || !strings.Contains(stdout.String(), "vacuous") {
		t.Fatalf("exit %d, want 1 and a vacuous run:\n%s%s", code, stdout.String(), errb.String())
	}
	// A vacuous first run runs once more, alone, and both stay in -out.
	if !strings.Contains(stdout.String(), "1 starved or vacuous run(s) ran again") {
		t.Fatalf("the vacuous run did not run again alone:\n%s", stdout.String())
	}
	stdout.Reset()
	run(context.Background(), []string{"-check", out}, &stdout, &errb)
	if !strings.Contains(stdout.String(), "judged 2 stored run(s) again: 0 changed") {
		t.Fatalf("-check judged the run by another story:\n%s", stdout.String())
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, bytes.Replace(printed.Bytes(), []byte(`"do": "arm"`), []byte(`"do": "explode"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run(context.Background(), []string{"-scenario-file", bad, "-out", out}, &bytes.Buffer{}, &errb); code != 2 ||
		strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "schedule[0].do") {
		t.Fatalf("exit %d, stderr %q: want 2 and one line naming schedule[0].do", code, errb.String())
	}
}
