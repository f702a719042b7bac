package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/scenario"
	"github.com/locktorture/locktorture/verdict"
)

// Entry is one (scenario, lock) pair of a matrix run.
type Entry struct {
	Scenario     string              `json:"scenario"`
	Lock         string              `json:"lock"`
	Expected     verdict.Expectation `json:"expected"`
	Outcome      verdict.Outcome     `json:"outcome"`
	Observations []string            `json:"observations"`
	Matched      bool                `json:"matched"`
	// Dir is the run directory (empty when the run could not be made).
	Dir string `json:"dir,omitempty"`
	// Error says why the run could not be carried out.
	Error string `json:"error,omitempty"`
	// Starved says why the run's timing was not evidence (its Outcome is
	// then verdict.Starved): the machine, not the lock, is what a reader
	// of the matrix must look at.
	Starved string `json:"starved,omitempty"`
	// Vacuous says why the story did not happen (engine.Result.Vacuous;
	// its Outcome is verdict.Vacuous, or Starved where the run also ran
	// late): a matrix that reaches a reader only as printed text (a CI
	// log) must say which fault or traffic was missing.
	Vacuous string `json:"vacuous,omitempty"`
	// Late says how late a fault-free run ran that kept its passing
	// verdict (engine.Result.Late), so a reader can count the verdicts
	// judged on a late machine.
	Late string `json:"late,omitempty"`
}

// EntryOf summarises a run; err is the error Run returned, if any.
func EntryOf(scen, lock string, r *engine.Result, err error) Entry {
	e := Entry{Scenario: scen, Lock: lock}
	if s, lerr := scenario.Lookup(scen); lerr == nil {
		e.Expected = s.Expect[lock]
	}
	if r != nil {
		e.Outcome, e.Observations, e.Matched, e.Dir, e.Starved, e.Vacuous = r.Outcome, r.Observations, r.Matched, r.Dir, r.Starved, r.Vacuous
		if r.Starved == "" {
			e.Late = r.Late
		}
	}
	if err != nil {
		e.Error, e.Matched = err.Error(), false
		if e.Outcome == "" {
			e.Outcome = verdict.Errored
		}
	}
	return e
}

// Matrix is results/summary.json: every pair of the last matrix run.
type Matrix struct {
	Started time.Time `json:"started"`
	Seed    int64     `json:"seed"`
	// Shard is "i/n" for one slice of a matrix, empty for the whole one.
	Shard   string `json:"shard,omitempty"`
	Matched int    `json:"matched"`
	Total   int    `json:"total"`
	// Starved counts the runs that did not match because the machine ran
	// too late to judge them: a matrix short of matches for that wants a
	// quieter machine, not a fix.
	Starved int `json:"starved,omitempty"`
	// Late counts the runs that ran late and kept their verdict: a
	// fault-free pass, or a run whose lock's server alone was slow
	// (lateness.Server starves no violation, nor a pass before any fault).
	Late    int     `json:"late,omitempty"`
	Entries []Entry `json:"entries"`
}

// Count sets Total, Matched, Starved and Late from the entries.
func (m *Matrix) Count() {
	m.Total, m.Matched, m.Starved, m.Late = len(m.Entries), 0, 0, 0
	for _, e := range m.Entries {
		if e.Late != "" {
			m.Late++
		}
		if e.Matched {
			m.Matched++
		}
		if e.Outcome == verdict.Starved {
			m.Starved++
		}
	}
}

// WriteSummary writes summary.json, matrix.md (the grid) and
// comparison.md (the comparison of services, for the README) into dir.
func WriteSummary(dir string, s Matrix) error {
	s.Count()
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
	for name, write := range map[string]func(io.Writer, []Entry){"matrix.md": MatrixMarkdown, "comparison.md": ComparisonMarkdown} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		write(f, s.Entries)
		if err := f.Close(); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// Merge joins the shards' results in dirs into out: each shard's run
// directories are copied under out, its entries pointed at the copies, and
// the joined matrix written as out's summary. Every shard of the set must
// be there exactly once.
func Merge(dirs []string, out string) (Matrix, error) {
	var m Matrix
	seen := map[string]bool{}
	n := 0
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			return m, fmt.Errorf("%s: no summary.json (was it run with -scenario all -shard i/n?)", dir)
		}
		var s Matrix
		if err := json.Unmarshal(b, &s); err != nil {
			return m, fmt.Errorf("%s/summary.json: %v", dir, err)
		}
		_, of, ok := strings.Cut(s.Shard, "/")
		if !ok {
			return m, fmt.Errorf("%s holds a whole matrix, not a shard", dir)
		}
		k, _ := strconv.Atoi(of)
		if n != 0 && k != n {
			return m, fmt.Errorf("%s is shard %s, but another is of %d", dir, s.Shard, n)
		}
		n = k
		if seen[s.Shard] {
			return m, fmt.Errorf("shard %s given twice", s.Shard)
		}
		seen[s.Shard] = true
		if m.Started.IsZero() || s.Started.Before(m.Started) {
			m.Started, m.Seed = s.Started, s.Seed
		}
		for _, e := range s.Entries {
			if e.Dir != "" {
				if e.Dir, err = CopyRun(dir, e.Dir, out); err != nil {
					return m, err
				}
			}
			m.Entries = append(m.Entries, e)
		}
	}
	if len(seen) != n {
		var missing []string
		for i := 1; i <= n; i++ {
			if k := fmt.Sprintf("%d/%d", i, n); !seen[k] {
				missing = append(missing, k)
			}
		}
		return m, fmt.Errorf("shard(s) %s missing", strings.Join(missing, ", "))
	}
	sort.SliceStable(m.Entries, func(i, j int) bool {
		a, b := m.Entries[i], m.Entries[j]
		return a.Scenario < b.Scenario || a.Scenario == b.Scenario && a.Lock < b.Lock
	})
	m.Count()
	return m, WriteSummary(out, m)
}

// CopyRun copies a shard's run, named run where it was run, from the
// shard's results in shard to the same place under out, and returns where
// it now is: a merge's links must resolve under its own -out, whichever
// machine or directory each shard ran in.
func CopyRun(shard, run, out string) (string, error) {
	rel, err := filepath.Rel(shard, run)
	if err != nil || strings.HasPrefix(rel, "..") {
		// Run from another working directory: the run sits under the
		// shard's dir at its last three parts.
		rel = filepath.FromSlash(Tail(run))
	}
	dst := filepath.Join(out, rel)
	return dst, copyDir(filepath.Join(shard, rel), dst)
}

// copyDir copies a run directory, its subdirectories too (the servers'
// logs a run that did not match keeps).
func copyDir(src, dst string) error {
	if filepath.Clean(src) == filepath.Clean(dst) {
		return nil
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := copyDir(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// MatrixTable prints one line per pair: expected, observed, matched (or
// starved, and why; or matched although late, and how late).
func MatrixTable(w io.Writer, entries []Entry) {
	fmt.Fprintf(w, "%-30s %-19s %-50s %-12s %s\n", "SCENARIO", "LOCK", "EXPECTED", "OBSERVED", "MATCHED")
	for _, e := range entries {
		mark := "ok"
		switch {
		case e.Outcome == verdict.Starved:
			// Not the lock's mismatch: the run was not judged.
			mark = "STARVED"
			if e.Starved != "" {
				mark += ": " + e.Starved
			}
		case !e.Matched:
			mark = "MISMATCH"
			if e.Error != "" {
				mark += ": " + e.Error
			} else if e.Outcome == verdict.Vacuous && e.Vacuous != "" {
				mark += ": " + e.Vacuous
			}
		case e.Late != "":
			mark = "ok, late: " + e.Late
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
				row = append(row, string(c.Outcome))
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
