package explore

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/locktorture/locktorture/report"
)

// Revise points every exploration stored under root at what its boundary
// runs show now that report.Check has judged them again: each run's
// outcome, finding and explanation, then coverage.txt written anew beside
// its coverage.json. It says how many explorations it rewrote. A run that
// could not be judged again keeps what it had, as Check leaves the run.
func Revise(root string, runs []report.Rejudged) (int, error) {
	byTail := report.ByTail(runs)
	revised := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "coverage.json" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var c Coverage
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for k := range c.Kinds {
			for i := range c.Kinds[k].Runs {
				r := &c.Kinds[k].Runs[i]
				if now, ok := byTail[report.Tail(r.Dir)]; ok && r.Dir != "" {
					r.Outcome, r.Finding, r.Explained = now.After, now.Finding, now.Explained
				}
			}
		}
		// Written where it was found: the tree may have moved since.
		c.Dir = filepath.Dir(path)
		revised++
		return c.write()
	})
	return revised, err
}
