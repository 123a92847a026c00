package layout

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// docListing is the first column of the code block under docs/design.md's
// "## Storage layout".
func docListing(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Storage layout\n")
	if !ok {
		t.Fatal("docs/design.md has no \"## Storage layout\" section")
	}
	_, block, ok := strings.Cut(sec, "```\n")
	if !ok {
		t.Fatal("§ Storage layout has no code block")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("§ Storage layout's code block is not closed")
	}
	var paths []string
	for _, line := range strings.Split(block, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			paths = append(paths, f[0])
		}
	}
	return paths
}

// TestDocsListLayout: docs/design.md § Storage layout lists exactly the
// paths the layout names, in its order.
func TestDocsListLayout(t *testing.T) {
	doc, code := docListing(t), Listing()
	if !reflect.DeepEqual(doc, code) {
		t.Errorf("docs/design.md § Storage layout disagrees with layout.Listing():\n%s", diff(doc, code))
	}
}

func diff(doc, code []string) string {
	in := func(s string, l []string) bool {
		for _, x := range l {
			if x == s {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for _, s := range doc {
		if !in(s, code) {
			b.WriteString("  only in the docs: " + s + "\n")
		}
	}
	for _, s := range code {
		if !in(s, doc) {
			b.WriteString("  only in the code: " + s + "\n")
		}
	}
	if b.Len() == 0 {
		b.WriteString("  same paths, different order\n  docs: " + strings.Join(doc, " ") + "\n  code: " + strings.Join(code, " ") + "\n")
	}
	return b.String()
}

// TestListingCoversEveryMethod: every path a Layout or BlobTree method
// returns has its line in Listing, so a path added to the layout cannot be
// left out of the listing (and so of the docs).
func TestListingCoversEveryMethod(t *testing.T) {
	var patterns []*regexp.Regexp
	wild := regexp.MustCompile(`<[a-z]+>|NNNNNNNN|FROM|TO|TIME|\\\*`)
	for _, p := range Listing() {
		re := wild.ReplaceAllString(regexp.QuoteMeta(strings.TrimSuffix(p, "/")), `[^/]+`)
		patterns = append(patterns, regexp.MustCompile("^"+re+"$"))
	}
	matched := func(p string) bool {
		p = filepath.ToSlash(p)
		for _, re := range patterns {
			if re.MatchString(p) {
				return true
			}
		}
		return false
	}
	n := 0
	for _, v := range []reflect.Value{reflect.ValueOf(Of("DATA")), reflect.ValueOf(Of("DATA").Blobs())} {
		for i := 0; i < v.NumMethod(); i++ {
			m, name := v.Method(i), v.Type().Method(i).Name
			var args []reflect.Value
			for j := 0; j < m.Type().NumIn(); j++ {
				switch k := m.Type().In(j).Kind(); k {
				case reflect.String:
					args = append(args, reflect.ValueOf("gsample")) // a group id starts with g
				case reflect.Int:
					args = append(args, reflect.ValueOf(7))
				case reflect.Int64:
					args = append(args, reflect.ValueOf(int64(42)))
				default:
					t.Fatalf("%s takes a %s: teach this test a sample", name, k)
				}
			}
			out := m.Call(args)[0]
			p := out.String()
			if bt, ok := out.Interface().(BlobTree); ok {
				p = bt.Dir
			}
			if !strings.HasPrefix(filepath.ToSlash(p), "DATA/") {
				t.Errorf("%s = %q: not under the data directory", name, p)
			}
			if !matched(p) {
				t.Errorf("%s = %q: no line of Listing() matches it", name, p)
			}
			n++
		}
	}
	if n < 30 {
		t.Fatalf("only %d methods checked", n)
	}
}

// TestOrdinals: names parse back to the numbers that made them, and
// nothing else parses.
func TestOrdinals(t *testing.T) {
	if n, ok := SegmentOrdinal(SegmentName(42)); !ok || n != 42 {
		t.Errorf("SegmentOrdinal(SegmentName(42)) = %d, %v", n, ok)
	}
	if n, ok := PackOrdinal(filepath.Base(Of("D").Blobs().PackIndex(9)), ".idx"); !ok || n != 9 {
		t.Errorf("PackOrdinal(idx 9) = %d, %v", n, ok)
	}
	for _, bad := range []string{"00000000.seg", "0000001.seg", "+0000001.seg", "0000000a.seg", "00000001.seg.tmp", ".tmp-00000001.seg", "00000001.pack"} {
		if _, ok := SegmentOrdinal(bad); ok {
			t.Errorf("SegmentOrdinal(%q) ok", bad)
		}
	}
}
