package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktorture/locktorture/verdict"
)

// A run that did not match keeps commands.tsv, its locks' commands with
// their ops and replies; a matched run keeps none.
func TestARunThatDidNotMatchKeepsItsCommands(t *testing.T) {
	ctx := context.Background()
	o := Options{Scenario: "baseline", Lock: "set-nx-px", Seed: 7, Out: t.TempDir(), TimeLimit: time.Second}
	matched, err := RunUnstarved(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !matched.Matched || matched.CommandLog != "" {
		t.Fatalf("baseline / set-nx-px: %s, command log %q: want safe and none", matched.Outcome, matched.CommandLog)
	}
	if _, err := os.Stat(filepath.Join(matched.Dir, commandLogFile)); !os.IsNotExist(err) {
		t.Errorf("a run that matched left %s: %v", commandLogFile, err)
	}
	o.Expect = &verdict.Expectation{Outcome: verdict.Unsafe}
	missed, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if missed.Matched || missed.CommandLog != commandLogFile {
		t.Fatalf("a run that did not match: matched %v, command log %q", missed.Matched, missed.CommandLog)
	}
	b, err := os.ReadFile(filepath.Join(missed.Dir, commandLogFile))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"\tacquire\tSET NX\t", "\trelease\tEVALSHA "} {
		if !strings.Contains(text, want) {
			t.Errorf("%s has no %q line:\n%.2000s", commandLogFile, want, text)
		}
	}
}
