package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/locktorture/locktorture/engine"
	"github.com/locktorture/locktorture/verdict"
)

// Rejudged is one stored run judged again.
type Rejudged struct {
	Dir, Scenario, Lock string
	// Before and After are the outcome stored and the one judged now;
	// WasMatched and Matched whether each met the expectation.
	Before, After       verdict.Outcome
	WasMatched, Matched bool
	// Finding and Explained are what the verdict now says of the lock's
	// promise, as an exploration lists its boundary runs.
	Finding, Explained string
	// Err says why the run could not be judged again (a story or lock of
	// a user's own, a history from before sites); it is left as it was.
	Err error
	// entry is the run as the summary lists it, judged again.
	entry Entry
}

// Changed says whether the run's verdict is not what it was.
func (r Rejudged) Changed() bool {
	return r.Err == nil && (r.Before != r.After || r.WasMatched != r.Matched)
}

// Check judges every run stored under root (one run's directory, or a
// results tree) again with today's checkers, from its history alone, and
// rewrites what the verdict shows: its results.json, timeline and charts,
// the summary.json entries that point at it, and the index. No process is
// started. A run that cannot be judged again is left as it was and
// reported with its reason.
func Check(root string) ([]Rejudged, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if _, err := os.Stat(filepath.Join(path, "results.json")); err == nil {
			dirs = append(dirs, path)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s holds no stored run (no results.json)", root)
	}
	var out []Rejudged
	for _, dir := range dirs {
		out = append(out, rejudge(dir))
	}
	if err := reviseSummary(root, out); err != nil {
		return out, err
	}
	if len(dirs) == 1 && dirs[0] == root {
		return out, nil // one run: its own page is its index
	}
	return out, WriteIndex(root)
}

// rejudge judges the run in dir again and rewrites its files.
func rejudge(dir string) Rejudged {
	r := Rejudged{Dir: dir}
	res, err := engine.Load(dir)
	if err != nil {
		r.Err = err
		return r
	}
	r.Scenario, r.Lock, r.Before, r.WasMatched = res.Scenario, res.Lock, res.Outcome, res.Matched
	if res.Outcome == verdict.Interrupted {
		r.Err = errors.New("interrupted before it was judged")
		return r
	}
	if r.Err = engine.Rejudge(res); r.Err != nil {
		return r
	}
	r.After, r.Matched, r.Finding, r.Explained = res.Outcome, res.Matched, res.Finding, res.Explained
	r.entry = EntryOf(res.Scenario, res.Lock, res, nil)
	r.Err = Write(res)
	return r
}

// Tail is how a file that lists runs (a summary, an exploration's
// coverage) knows a run: they name a run by the path it was run under,
// which a results tree moved or copied since no longer has, but its last
// three parts (story, lock, time) stay.
func Tail(dir string) string {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(dir)), "/")
	return strings.Join(parts[max(0, len(parts)-3):], "/")
}

// ByTail is the runs judged again, keyed by Tail; a run that could not be
// is left out, as it was left as it was.
func ByTail(runs []Rejudged) map[string]Rejudged {
	by := map[string]Rejudged{}
	for _, r := range runs {
		if r.Err == nil {
			by[Tail(r.Dir)] = r
		}
	}
	return by
}

// reviseSummary points root's summary.json, if it has one, at the runs'
// new verdicts.
func reviseSummary(root string, runs []Rejudged) error {
	path := filepath.Join(root, "summary.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var m Matrix
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	byTail := ByTail(runs)
	for i, e := range m.Entries {
		r, ok := byTail[Tail(e.Dir)]
		if e.Dir == "" || !ok {
			continue
		}
		ne := r.entry
		ne.Scenario, ne.Lock, ne.Dir = e.Scenario, e.Lock, e.Dir
		m.Entries[i] = ne
	}
	return WriteSummary(root, m)
}
