package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/locktorture/locktorture/scenario"
)

// printMode prints a built-in story as a scenario file, and runs nothing.
var printMode = mode{flag: "print-scenario", does: "prints a built-in story as a scenario file, then exits",
	run: func(_ context.Context, f *flags, stdout, stderr io.Writer) int {
		return printScenario(f.printStory, stdout, stderr)
	}}

// fileMode runs the stories scenario files tell, as the matrix runs the
// catalogue's: the files name the stories, so it takes no -scenario, and
// each story runs as its file tells it, so no -probe, -sweep or -explore.
var fileMode = mode{flag: "scenario-file", does: "names the stories to run",
	takes: slices.Concat(runFlags, []string{"service", "language", "shard", "v", "fresh"}),
	run: func(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
		told, names, err := readStories(split(f.storyFiles))
		if err != nil {
			fmt.Fprintf(stderr, "run: -scenario-file %v\n", err)
			return 2
		}
		f.scenarios = names
		return runMatrix(ctx, f, told, stdout, stderr)
	}}

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
