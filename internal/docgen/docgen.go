// Package docgen writes the documentation's tables that restate the code:
// the stories and what each expects of each lock, the registered locks,
// the server kinds, the comparison grid of locks × stories, and the
// packages. They are
// generated, never written by hand, so they cannot drift from the code:
// TestGeneratedDocsAreCurrent fails when a committed copy differs from
// what Generate would write, and names the command that rewrites it.
//
// Generate starts nothing: it reads the registries (locks, scenario,
// cluster) and the packages' doc comments, and formats them.
package docgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/locktorture/locktorture/locks/library"
	"github.com/locktorture/locktorture/locks/services"
)

// Command rewrites every generated file; a file's header and a failing
// test name it.
const Command = "go run ./cmd/docs"

// Dir is where the generated files go, under the repository's root.
const Dir = "docs/generated"

// header is the first line of every generated file.
func header() string {
	return "_Generated from the code by `" + Command + "`: do not edit; change the code and run it again._\n\n"
}

// generators are the generated files, by name under Dir.
var generators = map[string]func() (string, error){
	"stories.md":    stories,
	"locks.md":      lockTable,
	"servers.md":    servers,
	"comparison.md": comparison,
	"packages.md":   packages,
}

// Generate returns every generated file's content, by its name under
// docs/ ("generated/stories.md").
func Generate() (map[string][]byte, error) {
	register()
	out := map[string][]byte{}
	for name, gen := range generators {
		body, err := gen()
		if err != nil {
			return nil, fmt.Errorf("docgen: %s: %w", name, err)
		}
		out[filepath.ToSlash(filepath.Join(strings.TrimPrefix(Dir, "docs/"), name))] = []byte(header() + body)
	}
	return out, nil
}

// register puts the installed libraries' and the lock services' locks in
// the registry beside the built-ins, as cmd/run does before anything else
// (cmd/run/register.go): the docs describe what make run runs.
func register() {
	library.Register()
	services.Register()
}

// Root finds the repository's root: the nearest directory at or above the
// working directory whose go.mod declares this module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/locktorture/locktorture\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("docgen: not inside the locktorture module (no go.mod declaring github.com/locktorture/locktorture above the working directory)")
		}
		dir = parent
	}
}

// The README holds the comparison grid between these two lines, so the
// page a newcomer opens shows it; Splice rewrites what is between them.
const (
	BeginComparison = "<!-- BEGIN generated comparison: " + Command + " rewrites it; do not edit -->"
	EndComparison   = "<!-- END generated comparison -->"
)

// ReadmeComparison is what the README holds between BeginComparison and
// EndComparison: the grid of generated/comparison.md without its header.
func ReadmeComparison() (string, error) {
	register()
	return comparisonGrid()
}

// Splice returns readme with block between BeginComparison and
// EndComparison, or an error when the README has not exactly one pair of
// them.
func Splice(readme []byte, block string) ([]byte, error) {
	s := string(readme)
	if strings.Count(s, BeginComparison) != 1 || strings.Count(s, EndComparison) != 1 {
		return nil, fmt.Errorf("docgen: README.md must hold the lines %q and %q once each", BeginComparison, EndComparison)
	}
	begin := strings.Index(s, BeginComparison) + len(BeginComparison)
	end := strings.Index(s, EndComparison)
	if end < begin {
		return nil, fmt.Errorf("docgen: README.md has %q before %q", EndComparison, BeginComparison)
	}
	return []byte(s[:begin] + "\n" + block + s[end:]), nil
}

// cell makes text fit a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// code is s as inline code.
func code(s string) string { return "`" + s + "`" }

// codes is each of names as inline code, comma-separated.
func codes(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = code(n)
	}
	return strings.Join(out, ", ")
}

// yes is a boolean column's cell.
func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

// row is a Markdown table row.
func row(cells ...string) string {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// headerRow is a Markdown table's header and rule.
func headerRow(cols ...string) string {
	return "| " + strings.Join(cols, " | ") + " |\n|" + strings.Repeat("---|", len(cols)) + "\n"
}
