package importer

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Playwright frame snapshot is the frame's DOM as nested JSON arrays: a
// string is a text node, [name, {attrs}, child…] an element, and [[n, i]]
// a reference to node i (counted in post-order over the nodes that are not
// references) of the snapshot n places earlier in the same frame's list:
// an unchanged subtree is written once and referred to afterwards.

// maxSnapshotText bounds the text kept of one snapshot; longer text is cut
// and the snapshot flagged truncated.
const maxSnapshotText = 256 << 10

// maxSnapshotVisits bounds the nodes visited rendering one snapshot, so
// that references nested in references cannot make the work explode.
const maxSnapshotVisits = 2_000_000

// pwFrameSnapshots is one frame's snapshots in trace order: what
// references count back through.
type pwFrameSnapshots struct {
	raw    []json.RawMessage // html of each snapshot
	parsed []any             // decoded html, nil until needed
	post   [][]any           // post-order nodes, nil until needed
}

func (f *pwFrameSnapshots) add(html json.RawMessage) int {
	f.raw = append(f.raw, html)
	f.parsed = append(f.parsed, nil)
	f.post = append(f.post, nil)
	return len(f.raw) - 1
}

func (f *pwFrameSnapshots) root(i int) any {
	if f.parsed[i] == nil {
		var v any
		if json.Unmarshal(f.raw[i], &v) != nil || v == nil {
			v = []any{} // checked valid JSON when read: unreachable
		}
		f.parsed[i] = v
		f.raw[i] = nil
	}
	return f.parsed[i]
}

// nodes is snapshot i's post-order list of nodes that are not references.
func (f *pwFrameSnapshots) nodes(i int) []any {
	if f.post[i] == nil {
		out := []any{}
		var visit func(n any, depth int)
		visit = func(n any, depth int) {
			if depth > 10_000 {
				return
			}
			switch x := n.(type) {
			case string:
				out = append(out, x)
			case []any:
				name, _, kids, ok := snapElement(x)
				if !ok || name == "" {
					return // a reference or not a node: not counted
				}
				for _, k := range kids {
					visit(k, depth+1)
				}
				out = append(out, x)
			}
		}
		visit(f.root(i), 0)
		f.post[i] = out
	}
	return f.post[i]
}

// snapElement splits an element node; ok is false for anything else.
func snapElement(x []any) (name string, attrs map[string]any, kids []any, ok bool) {
	if len(x) == 0 {
		return "", nil, nil, false
	}
	name, ok = x[0].(string)
	if !ok {
		return "", nil, nil, false
	}
	if len(x) > 1 {
		attrs, _ = x[1].(map[string]any)
		kids = x[2:]
	}
	return name, attrs, kids, true
}

// snapRef reads a reference node [[n, i]].
func snapRef(x []any) (back, index int, ok bool) {
	if len(x) != 1 {
		return 0, 0, false
	}
	p, isArr := x[0].([]any)
	if !isArr || len(p) != 2 {
		return 0, 0, false
	}
	a, ok1 := p[0].(float64)
	b, ok2 := p[1].(float64)
	if !ok1 || !ok2 || a != float64(int(a)) || b != float64(int(b)) {
		return 0, 0, false
	}
	return int(a), int(b), true
}

// Elements whose content is not visible text.
var snapSkipped = map[string]bool{
	"SCRIPT": true, "STYLE": true, "NOSCRIPT": true, "X-NOSCRIPT": true, "HEAD": true,
	"TITLE": true, "META": true, "LINK": true, "BASE": true, "IFRAME": true, "FRAME": true,
	"OBJECT": true, "EMBED": true, "CANVAS": true, "AUDIO": true, "VIDEO": true,
}

// Elements that start and end a line of text.
var snapBlocks = map[string]bool{
	"ADDRESS": true, "ARTICLE": true, "ASIDE": true, "BLOCKQUOTE": true, "BODY": true, "BUTTON": true,
	"CAPTION": true, "DD": true, "DETAILS": true, "DIALOG": true, "DIV": true, "DL": true, "DT": true,
	"FIELDSET": true, "FIGCAPTION": true, "FIGURE": true, "FOOTER": true, "FORM": true,
	"H1": true, "H2": true, "H3": true, "H4": true, "H5": true, "H6": true, "HEADER": true, "HR": true,
	"LABEL": true, "LEGEND": true, "LI": true, "MAIN": true, "NAV": true, "OL": true, "OPTION": true,
	"OUTPUT": true, "P": true, "PRE": true, "SECTION": true, "SELECT": true, "SUMMARY": true,
	"TABLE": true, "TD": true, "TH": true, "TR": true, "UL": true,
}

// snapshotText renders snapshot i of f as the page's visible text: text
// nodes in document order, one line per block element, whitespace
// collapsed, without script, style, head, hidden elements, unselected
// options or input values (a typed value is an attribute, not text).
func snapshotText(f *pwFrameSnapshots, i int) (text string, truncated bool) {
	tb := &snapText{visits: maxSnapshotVisits}
	tb.walk(f, f.root(i), i, 0)
	return tb.b.String(), tb.truncated
}

type snapText struct {
	b                  strings.Builder
	space, line        bool // a space or a line break is due before more text
	visits             int
	truncated, stopped bool
}

func (t *snapText) block() {
	if t.b.Len() > 0 {
		t.line = true
	}
	t.space = false
}

func (t *snapText) text(s string) {
	for _, r := range s {
		if t.stopped {
			return
		}
		if unicode.IsSpace(r) || r == '\u200b' {
			if t.b.Len() > 0 && !t.line {
				t.space = true
			}
			continue
		}
		if t.line {
			t.b.WriteByte('\n')
		} else if t.space {
			t.b.WriteByte(' ')
		}
		t.line, t.space = false, false
		if t.b.Len()+utf8.RuneLen(r) > maxSnapshotText {
			t.truncated, t.stopped = true, true
			return
		}
		t.b.WriteRune(r)
	}
}

func (t *snapText) walk(f *pwFrameSnapshots, n any, at, depth int) {
	if t.stopped {
		return
	}
	if t.visits--; t.visits < 0 || depth > 10_000 {
		t.truncated, t.stopped = true, true
		return
	}
	switch x := n.(type) {
	case string:
		t.text(x)
	case []any:
		if back, idx, ok := snapRef(x); ok {
			// Only earlier snapshots: a reference never points forward or
			// at its own snapshot, so resolution always ends.
			if back < 1 || back > at {
				return
			}
			nodes := f.nodes(at - back)
			if idx >= 0 && idx < len(nodes) {
				t.walk(f, nodes[idx], at-back, depth+1)
			}
			return
		}
		name, attrs, kids, ok := snapElement(x)
		if !ok {
			return
		}
		up := strings.ToUpper(name)
		if snapSkipped[up] || attrs["hidden"] != nil {
			return
		}
		if up == "TEMPLATE" && attrs["__playwright_shadow_root_"] == nil {
			return // a template's content is inert; a shadow root's is shown
		}
		if up == "OPTION" && attrs["selected"] == nil && attrs["__playwright_selected_"] != "true" {
			return
		}
		if up == "BR" {
			t.block()
			return
		}
		blk := snapBlocks[up]
		if blk {
			t.block()
		}
		for _, k := range kids {
			t.walk(f, k, at, depth+1)
		}
		if blk {
			t.block()
		}
	}
}
