package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/locktorture/locktorture/scenario"
)

// printScenario writes the built-in story name as a scenario file: exit 0,
// or 2 with one line when there is no such story or it has no file form.
func printScenario(name string, stdout, stderr io.Writer) int {
	s, err := scenario.Lookup(name)
	if err == nil {
		err = s.Print(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "run: -print-scenario: %v\n", err)
		return 2
	}
	return 0
}

// readStories reads and checks scenario files: the stories by name, and
// their names in the order given (a -scenario list). The error is one
// line naming the file, and the field at fault.
func readStories(files []string) (map[string]*scenario.Scenario, string, error) {
	told := map[string]*scenario.Scenario{}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, "", err
		}
		s, err := scenario.Parse(data)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", f, err)
		}
		if told[s.Name] != nil {
			return nil, "", fmt.Errorf("%s: a story named %s is in an earlier file too", f, s.Name)
		}
		told[s.Name] = &s
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return nil, "", fmt.Errorf("names no file")
	}
	return told, strings.Join(names, ","), nil
}
