package docgen

import (
	"strings"

	"github.com/locktorture/locktorture/report"
	"github.com/locktorture/locktorture/scenario"
)

// comparison is generated/comparison.md: locks down, stories across, each
// cell the outcome the story expects of the lock.
func comparison() (string, error) {
	grid, err := comparisonGrid()
	if err != nil {
		return "", err
	}
	return "# Which lock keeps the resource safe under which fault\n\n" +
		"What every story expects of every lock it judges (`scenario.Scenario.Expect`), laid out as a matrix lays out " +
		"what it observed (`results/comparison.md`, and in colour in `results/index.html`): locks down, grouped by the service " +
		"they run on, stories across, each cell coloured by what becomes of the protected resource. A matrix in which every " +
		"pair matched writes exactly this table. Each cell's observations and why: [stories](stories.md).\n\n" + grid, nil
}

// comparisonGrid is the table and its legend, as report.ComparisonMarkdown
// writes a matrix whose every pair showed what its story expects: each
// (story, lock) pair's expectation as the story's rules resolved it.
func comparisonGrid() (string, error) {
	var entries []report.Entry
	for _, name := range scenario.Names() {
		s, err := scenario.Lookup(name)
		if err != nil {
			return "", err
		}
		if s.Exploration {
			continue
		}
		for _, l := range s.Locks() {
			e := s.Expect[l]
			entries = append(entries, report.Entry{Scenario: s.Name, Lock: l, Expected: e, Outcome: e.Outcome, Matched: true})
		}
	}
	var b strings.Builder
	report.ComparisonMarkdown(&b, entries)
	return b.String(), nil
}
