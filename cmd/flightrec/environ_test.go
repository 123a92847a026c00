package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// envReaders are the functions that read the process's environment.
var envReaders = map[string]map[string]bool{
	"os":      {"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true},
	"syscall": {"Getenv": true, "Environ": true},
}

// envReads lists the calls to envReaders in one Go file, as file:line.
func envReads(t *testing.T, fset *token.FileSet, path string) (pkg string, reads []string) {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	// The file's names for os and syscall (an import may rename them).
	local := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if envReaders[p] == nil {
			continue
		}
		name := p
		if im.Name != nil {
			name = im.Name.Name
		}
		local[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && envReaders[local[id.Name]][sel.Sel.Name] {
			reads = append(reads, fset.Position(sel.Pos()).String())
		}
		return true
	})
	return f.Name.Name, reads
}

// TestOnlyCommandsReadTheEnvironment: configuration comes from flags with
// FLIGHTREC_* fallbacks, which cmd reads (flags.go); a library package
// gets what it needs in its config, so no package but a main one (and
// internal/testenv, which finds the tools tests run) reads the
// environment, and tests may.
func TestOnlyCommandsReadTheEnvironment(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	files, mains := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") ||
				rel == filepath.Join("internal", "testenv") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		pkg, reads := envReads(t, fset, path)
		if pkg == "main" {
			mains += len(reads)
			return nil
		}
		bad = append(bad, reads...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The scan sees the module, and finds the reads that are allowed
	// (flags.go's), so it would find the others.
	if files < 100 || mains == 0 {
		t.Fatalf("scanned %d files, %d environment reads in main packages: the walk missed the module", files, mains)
	}
	for _, b := range bad {
		t.Errorf("%s: a library package reads the environment; pass the value in its config from cmd (flags.go)", b)
	}
}
