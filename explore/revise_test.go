package explore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/nemesis"
	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// An exploration stored before a checker fix lists what its runs showed
// then; judged again, the coverage shows what they show now, found by the
// runs' last three parts though the tree has moved since.
func TestReviseRewritesTheCoverageWithTheRunsNewVerdicts(t *testing.T) {
	root := t.TempDir()
	at := func(cmd string) scenario.Probe {
		return scenario.Probe{At: nemesis.Boundary{In: history.Release, Command: cmd, Nth: 1}}
	}
	stored := Coverage{Lock: "mine", Dir: "/elsewhere/boundaries/mine/T0", Kinds: []Kind{{Op: history.Release, Ops: 3, Commands: []string{"GET", "DEL"},
		Runs: []Run{
			{Probe: at("GET"), Dir: "/elsewhere/boundary/mine/T1", Reached: true, Outcome: verdict.Safe},
			{Probe: at("DEL"), Dir: "/elsewhere/boundary/mine/T2", Reached: true, Outcome: verdict.Safe},
		}}}}
	stored.Dir = filepath.Join(root, "boundaries", "mine", "T0")
	if err := stored.write(); err != nil {
		t.Fatal(err)
	}
	runs := []report.Rejudged{
		{Dir: filepath.Join(root, "boundary", "mine", "T2"), Before: verdict.Safe, After: verdict.LockUnsafe, Finding: "deleted another holder's key"},
		// Not judged again: the run keeps what it had.
		{Dir: filepath.Join(root, "boundary", "mine", "T1"), After: verdict.LockUnsafe, Finding: "never", Err: os.ErrNotExist},
	}
	n, err := Revise(root, runs)
	if err != nil || n != 1 {
		t.Fatalf("revised %d, %v; want 1", n, err)
	}
	b, err := os.ReadFile(filepath.Join(stored.Dir, "coverage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var now Coverage
	if err := json.Unmarshal(b, &now); err != nil {
		t.Fatal(err)
	}
	got := now.Kinds[0].Runs
	if got[0].Outcome != verdict.Safe || got[0].Finding != "" {
		t.Errorf("the run not judged again changed: %+v", got[0])
	}
	if got[1].Outcome != verdict.LockUnsafe || got[1].Finding != "deleted another holder's key" {
		t.Errorf("the run judged again: %+v", got[1])
	}
	if now.Dir != stored.Dir {
		t.Errorf("the coverage names %s, where it is now %s", now.Dir, stored.Dir)
	}
	txt, err := os.ReadFile(filepath.Join(stored.Dir, "coverage.txt"))
	if err != nil || !strings.Contains(string(txt), "1 finding(s): pause release before DEL#1") {
		t.Errorf("coverage.txt does not list the finding (%v):\n%s", err, txt)
	}
}
