package docgen

import (
	"fmt"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// module is this repository's module path.
const module = "github.com/locktorture/locktorture"

// packages is generated/packages.md: every package of the module with the
// first sentence of its doc comment. It reads the source under the
// repository's root (Root), not the build: a package's doc comment is the
// one place that says what the package is for.
func packages() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	type pkg struct{ path, name, synopsis string }
	var pkgs []pkg
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := d.Name()
		if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "results" || base == "docs") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
			return filepath.SkipDir // a module of its own (examples/joblock)
		}
		name, text, err := packageDoc(path)
		if err != nil || name == "" {
			return err
		}
		pkgs = append(pkgs, pkg{rel, name, (&doc.Package{}).Synopsis(text)})
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].path < pkgs[j].path })
	var b strings.Builder
	b.WriteString("# The packages\n\n")
	fmt.Fprintf(&b, "Every package of the module `%s`, with the first sentence of its doc comment (`go doc` says the rest). "+
		"How they work together: [architecture](../architecture.md).\n\n", module)
	b.WriteString(headerRow("package", "what it is"))
	for _, p := range pkgs {
		what := p.synopsis
		if p.name == "main" {
			what = "(command) " + what
		}
		b.WriteString(row(code(p.path+"/"), what))
	}
	return b.String(), nil
}

// packageDoc is the package name and doc comment of the Go files in dir
// (not its tests), or no name when it holds none.
func packageDoc(dir string) (name, text string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", "", err
	}
	sort.Strings(files)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "", "", err
		}
		name = file.Name.Name
		if file.Doc != nil && text == "" {
			text = file.Doc.Text()
		}
	}
	return name, text, nil
}
