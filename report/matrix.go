package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/locktorture/locktorture/scenario"
)

// Entry is one (scenario, lock) pair of a matrix run.
type Entry struct {
	Scenario     string               `json:"scenario"`
	Lock         string               `json:"lock"`
	Expected     scenario.Expectation `json:"expected"`
	Outcome      string               `json:"outcome"`
	Observations []string             `json:"observations"`
	Matched      bool                 `json:"matched"`
	// Dir is the run directory (empty when the run could not be made).
	Dir string `json:"dir,omitempty"`
	// Error says why the run could not be carried out.
	Error string `json:"error,omitempty"`
}

// EntryOf summarises a run; err is the error Run returned, if any.
func EntryOf(scen, lock string, r *scenario.Result, err error) Entry {
	e := Entry{Scenario: scen, Lock: lock}
	if s, lerr := scenario.Lookup(scen); lerr == nil {
		e.Expected = s.Expect[lock]
	}
	if r != nil {
		e.Outcome, e.Observations, e.Matched, e.Dir = r.Outcome, r.Observations, r.Matched, r.Dir
	}
	if err != nil {
		e.Error, e.Matched = err.Error(), false
		if e.Outcome == "" {
			e.Outcome = "error"
		}
	}
	return e
}

// Matrix is results/summary.json: every pair of the last matrix run.
type Matrix struct {
	Started time.Time `json:"started"`
	Seed    int64     `json:"seed"`
	Matched int       `json:"matched"`
	Total   int       `json:"total"`
	Entries []Entry   `json:"entries"`
}

// WriteSummary writes summary.json and matrix.md into dir.
func WriteSummary(dir string, s Matrix) error {
	s.Total, s.Matched = len(s.Entries), 0
	for _, e := range s.Entries {
		if e.Matched {
			s.Matched++
		}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "matrix.md"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	MatrixMarkdown(f, s.Entries)
	return f.Close()
}

// MatrixTable prints one line per pair: expected, observed, matched.
func MatrixTable(w io.Writer, entries []Entry) {
	fmt.Fprintf(w, "%-30s %-19s %-50s %-12s %s\n", "SCENARIO", "LOCK", "EXPECTED", "OBSERVED", "")
	for _, e := range entries {
		mark := "ok"
		if !e.Matched {
			mark = "MISMATCH"
			if e.Error != "" {
				mark += ": " + e.Error
			}
		}
		fmt.Fprintf(w, "%-30s %-19s %-50s %-12s %s\n", e.Scenario, e.Lock, e.Expected, e.Outcome, mark)
	}
}

// MatrixMarkdown writes the matrix as a grid, scenarios down and locks
// across; each cell is what was observed, marked ✗ when it was not what the
// scenario expects of that lock.
func MatrixMarkdown(w io.Writer, entries []Entry) {
	g := gridOf(entries, "")
	fmt.Fprintf(w, "| scenario | %s |\n|---|%s\n", strings.Join(g.Locks, " | "), strings.Repeat("---|", len(g.Locks)))
	for _, r := range g.Rows {
		row := []string{"`" + r.Scenario + "`"}
		for _, c := range r.Cells {
			switch {
			case c.Outcome == "":
				row = append(row, "")
			case c.Matched:
				row = append(row, c.Outcome)
			default:
				row = append(row, fmt.Sprintf("%s ✗ (expected %s)", c.Outcome, c.Expected))
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
