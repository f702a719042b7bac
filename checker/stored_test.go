package checker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/locktorture/locktorture/checker"
	"github.com/locktorture/locktorture/history"
	"github.com/locktorture/locktorture/locks"
)

// The segmented search says what porcupine says of the whole history, on
// every history a matrix kept: LOCKTORTURE_HISTORIES names a results
// directory (go run ./cmd/run -scenario all writes one). Skipped without
// it: a matrix takes minutes, and the random histories of
// TestSegmentsKeepTheVerdict run every time.
//
//	LOCKTORTURE_HISTORIES=$PWD/results go test -run Stored -v ./checker/
func TestStoredHistoriesKeepTheVerdict(t *testing.T) {
	root := os.Getenv("LOCKTORTURE_HISTORIES")
	if root == "" {
		t.Skip("set LOCKTORTURE_HISTORIES to a results directory")
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "history.jsonl.gz"))
	if len(files) == 0 {
		t.Fatalf("no histories under %s", root)
	}
	same, wholeUnknown := 0, 0
	for _, f := range files {
		ops, err := history.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ Lock string }
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(f), "results.json")); err == nil {
			_ = json.Unmarshal(b, &res)
		}
		sem := checker.Mutex
		if info, err := locks.Lookup(res.Lock); err == nil && info.Fenced {
			sem = checker.Fenced
		} else if err == nil && info.Reentrant {
			sem = checker.Reentrant
		}
		got := checker.Linearizable{Semantics: sem, Timeout: time.Minute}.Check(ops).Valid
		whole := porcupine.CheckOperationsTimeout(checker.Model(sem), checker.MutexOperations(ops), time.Minute)
		want := map[porcupine.CheckResult]checker.Validity{porcupine.Ok: checker.Valid, porcupine.Illegal: checker.Invalid}[whole]
		switch {
		case whole == porcupine.Unknown:
			wholeUnknown++
		case got != want:
			t.Errorf("%s: segments say %v, the whole search %v", f, got, whole)
		default:
			same++
		}
	}
	t.Logf("%d histories: %d the same verdict, %d where the whole search did not finish in a minute", len(files), same, wholeUnknown)
}
