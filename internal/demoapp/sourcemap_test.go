package demoapp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/executor/sourcemap"
)

func readStatic(t *testing.T, name string) string {
	t.Helper()
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// find is the 0-based line and column of the first match of pattern in
// text, or -1, -1. A \K in pattern marks where the match of interest
// starts: what comes before it must match but is not the place.
func find(text, pattern string) (line, col int) {
	pre, post, ok := strings.Cut(pattern, `\K`)
	if !ok {
		pre, post = "", pattern
	}
	loc := regexp.MustCompile(pre + `(` + post + `)`).FindStringSubmatchIndex(text)
	if loc == nil {
		return -1, -1
	}
	before := text[:loc[2]]
	return strings.Count(before, "\n"), loc[2] - (strings.LastIndex(before, "\n") + 1)
}

// The minified bundle's source map maps code in app.min.js back to the
// lines of static/src/app.js that hold it, found by searching both texts.
func TestSourceMapMapsBundleToSource(t *testing.T) {
	bundle, src := readStatic(t, "app.min.js"), readStatic(t, "src/app.js")
	const mapURL = "http://127.0.0.1:8080/static/app.min.js.map"
	m, err := sourcemap.Parse([]byte(readStatic(t, "app.min.js.map")), mapURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		min, src string // regular expressions: where in each file
		wantName string // the original name there, if renamed
	}{
		// The console error a failed checkout logs, and the named
		// function it is logged from (its name survives minification).
		{"console.error", `console\.error\("checkout failed: "\+`, `console\.error\("checkout failed: " \+ code\)`, ""},
		{"checkoutFailed", `function checkoutFailed\(`, `function checkoutFailed\(`, ""},
		{"checkoutFailed's parameter", `function checkoutFailed\(\K\w`, `function checkoutFailed\(\Kcode`, "code"},
		{"the call of checkoutFailed", `\bcheckoutFailed\(\w+\.data\.error`, `\bcheckoutFailed\(r\.data\.error`, ""},
		{"api's fetch", `await fetch\(`, `await fetch\(`, ""},
		{"signin's form", `function signin\(\K\w`, `function signin\(\Kform`, "form"},
	} {
		lineMin, colMin := find(bundle, c.min)
		lineSrc, colSrc := find(src, c.src)
		if lineMin < 0 || lineSrc < 0 {
			t.Errorf("%s: not found in app.min.js (%d) or src/app.js (%d)", c.name, lineMin, lineSrc)
			continue
		}
		p, ok := m.Lookup(lineMin, colMin)
		want := sourcemap.Position{Source: "http://127.0.0.1:8080/static/src/app.js", Line: lineSrc, Column: colSrc, Name: c.wantName}
		if !ok || p != want {
			t.Errorf("%s: app.min.js %d:%d maps to %+v, %v; want %+v", c.name, lineMin, colMin, p, ok, want)
		}
	}
	if lineMin, _ := find(bundle, `function checkoutFailed\(`); lineMin < 0 {
		t.Error("app.min.js has no function named checkoutFailed: the console error's frame would be nameless")
	}
}

// The generated files are those of the source as it is: the map embeds
// the source it was built from, which must be static/src/app.js.
func TestBundleIsUpToDate(t *testing.T) {
	var raw struct {
		Sources        []string `json:"sources"`
		SourcesContent []string `json:"sourcesContent"`
	}
	if err := json.Unmarshal([]byte(readStatic(t, "app.min.js.map")), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Sources) != 1 || raw.Sources[0] != "src/app.js" {
		t.Errorf("sources %q, want [src/app.js]", raw.Sources)
	}
	if len(raw.SourcesContent) != 1 || raw.SourcesContent[0] != readStatic(t, "src/app.js") {
		t.Error("app.min.js.map was built from another static/src/app.js: run go generate ./internal/demoapp/")
	}
}

// Over HTTP, as a recorder would: the script names its map, the map loads
// through a Resolver, and the mapped frame's URL serves the source.
func TestSourceMapOverHTTP(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{}))
	defer srv.Close()
	bundle := readStatic(t, "app.min.js")
	ref := regexp.MustCompile(`//# sourceMappingURL=(\S+)\s*$`).FindStringSubmatch(bundle)
	if ref == nil {
		t.Fatal("app.min.js names no source map")
	}
	line, col := find(bundle, `console\.error\("checkout failed`)
	r := sourcemap.Resolver{Client: srv.Client()}
	f, err := r.MapFrame(context.Background(),
		sourcemap.Frame{Function: "checkoutFailed", URL: srv.URL + "/static/app.min.js", Line: line, Column: col}, ref[1])
	if err != nil {
		t.Fatal(err)
	}
	src := readStatic(t, "src/app.js")
	wantLine, wantCol := find(src, `console\.error\("checkout failed: " \+ code\)`)
	if f != (sourcemap.Frame{Function: "checkoutFailed", URL: srv.URL + "/static/src/app.js", Line: wantLine, Column: wantCol}) {
		t.Errorf("mapped frame %+v; want src/app.js %d:%d", f, wantLine, wantCol)
	}
	res, err := srv.Client().Get(f.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != src {
		t.Errorf("GET %s: %d, %d bytes", f.URL, res.StatusCode, len(body))
	}
}
