package executor_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/flightrec/flightrec/"

// pkg is what the import rules read of `go list -json`.
type pkg struct {
	ImportPath string
	Standard   bool
	DepOnly    bool
	Imports    []string
}

// graph lists patterns and everything they depend on, as the go command
// sees it (build constraints of this platform; tests excluded: the rules
// are about what an executor's binary holds, and tests may start a server).
func graph(t *testing.T, patterns ...string) map[string]*pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the import rules read the graph with the go command, which is not on $PATH: %v", err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(goBin, append([]string{"list", "-deps", "-json"}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errOut.String())
	}
	g := map[string]*pkg{}
	dec := json.NewDecoder(&out)
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		g[p.ImportPath] = p
	}
	return g
}

// roots are the packages the patterns named (not pulled in as deps).
func roots(g map[string]*pkg) []string {
	var r []string
	for path, p := range g {
		if !p.DepOnly {
			r = append(r, path)
		}
	}
	sort.Strings(r)
	return r
}

// chain returns the import path from root to the first package that bad
// accepts, breadth first, so the message shows the shortest way in.
func chain(g map[string]*pkg, root string, bad func(string) bool) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != root && bad(cur) {
			var c []string
			for p := cur; p != ""; p = prev[p] {
				c = append([]string{strings.TrimPrefix(p, module)}, c...)
			}
			return c
		}
		if p := g[cur]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return nil
}

// serverSide reports whether an executor may not depend on path: any
// package of ours other than event, wire, the span parser event reads
// with, and the wing itself; and OPA.
func serverSide(path string) bool {
	if strings.HasPrefix(path, "github.com/open-policy-agent/") {
		return true
	}
	own, ok := strings.CutPrefix(path, module)
	if !ok {
		return false
	}
	return own != "event" && own != "wire" && own != "internal/jsonspan" && own != "executor" && !strings.HasPrefix(own, "executor/")
}

func TestExecutorImportsOnlyTheContract(t *testing.T) {
	g := graph(t, "./...")
	rs := roots(g)
	// Guard against a vacuous pass: the graph must hold the wing and what
	// it is known to use.
	for _, want := range []string{module + "executor/client", module + "executor/recorder", module + "executor/importer",
		module + "wire", module + "event", "github.com/chromedp/chromedp"} {
		if g[want] == nil {
			t.Fatalf("go list ./... from executor/ did not reach %s; the graph is not what this test expects (roots %v)", want, rs)
		}
	}
	for _, r := range rs {
		if c := chain(g, r, serverSide); c != nil {
			t.Errorf("%s depends on %s (%s): executors import only event, wire, each other and outside libraries (never the server or OPA); move what it needs into wire (shared by the server) or the executor",
				strings.TrimPrefix(r, module), c[len(c)-1], strings.Join(c, " → "))
		}
	}
}

// TestWireImportsOnlyEvent: wire is what a third-party executor compiles
// against, so it carries nothing beyond event and the standard library,
// and event nothing beyond the standard library and internal/jsonspan (the
// one span parser, itself standard library only).
func TestWireImportsOnlyEvent(t *testing.T) {
	g := graph(t, module+"wire", module+"event", module+"internal/jsonspan")
	for _, c := range []struct {
		root string
		may  map[string]bool
	}{
		{module + "wire", map[string]bool{module + "event": true, module + "internal/jsonspan": true}},
		{module + "event", map[string]bool{module + "internal/jsonspan": true}},
		{module + "internal/jsonspan", map[string]bool{}},
	} {
		if g[c.root] == nil {
			t.Fatalf("go list did not list %s", c.root)
		}
		bad := func(path string) bool {
			if path == "C" { // cgo's pseudo-package, imported by net and os/user
				return false
			}
			p := g[path]
			return (p == nil || !p.Standard) && !c.may[path]
		}
		if ch := chain(g, c.root, bad); ch != nil {
			t.Errorf("%s depends on %s (%s): it may import only the standard library and %v",
				strings.TrimPrefix(c.root, module), ch[len(ch)-1], strings.Join(ch, " → "), keys(c.may))
		}
	}
}

func keys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, strings.TrimPrefix(s, module))
	}
	sort.Strings(k)
	return k
}
