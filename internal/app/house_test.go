package app

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDesignPackageTable holds docs/design.md's package table to the
// tree: every package `go list ./...` names has a row, and every row names
// a package that exists. A newcomer reads the table first; a stale row
// sends them to a room that is gone.
func TestDesignPackageTable(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/flightrec/flightrec/"
	var listed []string
	for _, p := range strings.Fields(string(out)) {
		listed = append(listed, strings.TrimPrefix(p, module))
	}
	rows := designPackageRows(t, filepath.Join(root, "docs", "design.md"))
	for _, p := range listed {
		if !slices.Contains(rows, p) {
			t.Errorf("package %s has no row in docs/design.md's package table", p)
		}
	}
	for _, r := range rows {
		if !slices.Contains(listed, r) {
			t.Errorf("docs/design.md's package table names %s, which go list ./... does not list", r)
		}
	}
}

// TestDesignStandsAlone: the spec ships with the code, so it links to
// nothing outside the repository.
func TestDesignStandsAlone(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile("\\.\\./shared|\\]\\(\\.\\./\\.\\.").Find(b); m != nil {
		t.Errorf("docs/design.md points outside the repository (%q)", m)
	}
}

// designPackageRows reads the first column of the table under
// "## Packages": rows look like "| `store/blobs` | … |".
func designPackageRows(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var rows []string
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = line == "## Packages"
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			rows = append(rows, m[1])
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/design.md has no package table under ## Packages")
	}
	return rows
}

func repoRoot(t *testing.T) string {
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s", dir)
	}
	return dir
}
