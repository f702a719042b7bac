// Command docs rewrites the documentation's generated tables from the
// code: every file under docs/generated, and the comparison grid in
// README.md. Run it from anywhere inside the repository:
//
//	go run ./cmd/docs
//
// It removes a file under docs/generated that it no longer writes, and
// prints one line per file it changed.
package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/locktorture/locktorture/internal/docgen"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	root, err := docgen.Root()
	if err != nil {
		return err
	}
	files, err := docgen.Generate()
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := write(root, filepath.Join("docs", filepath.FromSlash(name)), files[name]); err != nil {
			return err
		}
	}
	// A file under docs/generated that Generate no longer writes goes.
	dir := filepath.Join(root, filepath.FromSlash(docgen.Dir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := filepath.ToSlash(filepath.Join("generated", e.Name()))
		if _, ok := files[name]; !ok && !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
			fmt.Println("removed", filepath.Join(docgen.Dir, e.Name()))
		}
	}
	old, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return err
	}
	block, err := docgen.ReadmeComparison()
	if err != nil {
		return err
	}
	spliced, err := docgen.Splice(old, block)
	if err != nil {
		return err
	}
	return write(root, "README.md", spliced)
}

// write puts content at name under root, and says so, when it differs
// from what is there.
func write(root, name string, content []byte) error {
	path := filepath.Join(root, name)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", name)
	return nil
}
