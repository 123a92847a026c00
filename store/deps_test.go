package store

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestSubpackageImports: the store's subpackages depend one way — layout
// and blobs/jpegdelta on nothing of ours, blobs on layout and jpegdelta,
// log on blobs, bundle on log — and
// none on the facade, so each can be used (and an object-store backend
// written) without the rest.
func TestSubpackageImports(t *testing.T) {
	const mod = "github.com/flightrec/flightrec/"
	allowed := map[string][]string{
		"layout":          {},
		"blobs/jpegdelta": {},
		"blobs":           {"store/layout", "store/blobs/jpegdelta"},
		"log":             {"event", "store/blobs", "store/layout"},
		"bundle":          {"event", "store/blobs", "store/layout", "store/log"},
	}
	for pkg, may := range allowed {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", pkg, err)
		}
		got := map[string]bool{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if rest, ok := strings.CutPrefix(p, mod); ok {
					got[rest] = true
				}
			}
		}
		var list []string
		for p := range got {
			list = append(list, p)
			if !slices.Contains(may, p) {
				t.Errorf("store/%s imports %s; it may import only %v", pkg, p, may)
			}
		}
		sort.Strings(list)
		t.Logf("store/%s imports %v", pkg, list)
	}
}
