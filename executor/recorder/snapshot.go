package recorder

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
)

// maxSnapshot bounds a snapshot's text; a longer one is cut and flagged.
const maxSnapshot = 256 << 10

// refs gives page elements stable refs (@e1, @e2 …) for the whole
// recording, so a receipt's resolved target and the snapshots name an
// element the same way. It also keeps the last interactive view, for the
// snapshot delta a receipt carries.
type refs struct {
	mu     sync.Mutex
	byNode map[cdp.BackendNodeID]string
	next   int
	before string // the interactive view before the current step
	after  string
}

func newRefs() *refs { return &refs{byNode: map[cdp.BackendNodeID]string{}} }

func (r *refs) ref(id cdp.BackendNodeID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref, ok := r.byNode[id]; ok {
		return ref
	}
	r.next++
	ref := "@e" + strconv.Itoa(r.next)
	r.byNode[id] = ref
	return ref
}

func (r *refs) saw(when, view string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if when == "before" {
		r.before, r.after = view, ""
	} else {
		r.after = view
	}
}

// delta is the interactive view's change over the step: its lines gone
// ("- …") and its lines new ("+ …"), in order.
func (r *refs) delta() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.after == "" || r.before == r.after {
		return ""
	}
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[strings.TrimSpace(l)]++
		}
		return m
	}
	was, now := count(r.before), count(r.after)
	var b strings.Builder
	for _, l := range strings.Split(r.before, "\n") {
		if t := strings.TrimSpace(l); now[t] > 0 {
			now[t]--
		} else if t != "" {
			b.WriteString("- " + t + "\n")
		}
	}
	for _, l := range strings.Split(r.after, "\n") {
		if t := strings.TrimSpace(l); was[t] > 0 {
			was[t]--
		} else if t != "" {
			b.WriteString("+ " + t + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// actionable roles get a line and a ref in the interactive view.
var actionableRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "menuitem": true, "menuitemcheckbox": true, "menuitemradio": true,
	"tab": true, "switch": true, "slider": true, "spinbutton": true, "treeitem": true, "option": true,
}

// contextRoles get a line without a ref: they say where an element is.
var contextRoles = map[string]bool{
	"main": true, "navigation": true, "banner": true, "contentinfo": true, "complementary": true,
	"form": true, "dialog": true, "alertdialog": true, "heading": true, "alert": true, "status": true,
	"region": true, "search": true,
}

// valued roles show their value.
var valuedRoles = map[string]bool{"textbox": true, "searchbox": true, "combobox": true, "spinbutton": true, "slider": true}

// snapshots sends the interactive and content views of the page.
func (s *session) snapshots(when string) { s.snapshotsAt(when, -1) }

// snapshotsAt sends them at step (the current step when step < 0): an
// attached recording writes a step's after views once the next step began.
func (s *session) snapshotsAt(when string, step int) { s.sendViews(s.views(), when, step) }

// views are the page's interactive and content views as read at ts; a view
// that could not be read is nil.
type views struct {
	ts                   time.Time
	origin               string
	interactive, content *string
}

func (s *session) views() views {
	v := views{ts: time.Now()}
	if u, err := url.Parse(s.currentURL()); err == nil && u.Host != "" {
		v.origin = u.Scheme + "://" + u.Host
	}
	if text, err := s.interactiveView(); err == nil {
		v.interactive = &text
	}
	if text, err := evaluate[string](s.ctx, `document.body ? document.body.innerText : ""`); err == nil {
		text = tidyText(text)
		v.content = &text
	}
	return v
}

// sendViews sends views read earlier as the snapshots of step at when.
func (s *session) sendViews(v views, when string, step int) {
	if v.interactive != nil {
		s.refs.saw(when, *v.interactive)
		s.sendSnapshot(v.ts, step, "interactive", when, v.origin, *v.interactive)
	}
	if v.content != nil {
		s.sendSnapshot(v.ts, step, "content", when, v.origin, *v.content)
	}
}

func (s *session) sendSnapshot(ts time.Time, step int, view, when, origin, text string) {
	snap := event.Snapshot{View: view, When: when, Origin: origin, Nonce: nonce(), Text: text}
	if len(snap.Text) > maxSnapshot {
		cut := maxSnapshot
		for cut > 0 && !isRuneStart(snap.Text[cut]) {
			cut--
		}
		snap.Text, snap.Truncated = snap.Text[:cut], true
	}
	s.st.emitAt(event.KindSnapshot, ts, step, snap)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// tidyText trims each line and collapses runs of blank lines.
func tidyText(s string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// nonce is a content-boundary nonce: a reader (a model, say) can tell the
// page's text from the frame around it, which a page cannot forge.
func nonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// interactiveView renders the accessibility tree: one line per actionable
// element (role, name, state, ref), under the landmarks and headings that
// place it. Values of masked fields are never shown.
func (s *session) interactiveView() (string, error) {
	res, err := chromedp.Call(s.ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return "", err
	}
	masked := s.maskedNodes()
	byID := make(map[accessibility.NodeID]*accessibility.Node, len(res.Nodes))
	for _, n := range res.Nodes {
		byID[n.NodeID] = n
	}
	var root *accessibility.Node
	for _, n := range res.Nodes {
		if n.ParentID == "" {
			root = n
			break
		}
	}
	if root == nil {
		return "", nil
	}
	var b strings.Builder
	var walk func(n *accessibility.Node, depth int)
	walk = func(n *accessibility.Node, depth int) {
		role := axString(n.Role)
		next := depth
		if !n.Ignored && (actionableRoles[role] || contextRoles[role]) && !hiddenOption(n, byID) {
			name := normalizeSpace(axString(n.Name))
			if role == "alert" || role == "status" {
				if name == "" {
					name = axText(n, byID, 200)
				}
				if name == "" {
					goto children // an empty live region says nothing
				}
			}
			b.WriteString(strings.Repeat(" ", depth))
			b.WriteString(role)
			if name != "" {
				b.WriteString(" " + strconv.Quote(name))
			}
			for _, st := range axStates(n) {
				b.WriteString(" " + st)
			}
			if valuedRoles[role] {
				if v := axString(n.Value); v != "" {
					if masked[n.BackendDOMNodeID] {
						v = "[masked]"
					}
					b.WriteString(" value=" + strconv.Quote(v))
				}
			}
			if actionableRoles[role] && n.BackendDOMNodeID != 0 {
				b.WriteString(" " + s.refs.ref(n.BackendDOMNodeID))
			}
			b.WriteString("\n")
			next = depth + 1
		}
	children:
		for _, c := range n.ChildIDs {
			if cn := byID[c]; cn != nil {
				walk(cn, next)
			}
		}
	}
	walk(root, 0)
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// hiddenOption is an option of a closed select's popup: the combobox line
// already shows the chosen value.
func hiddenOption(n *accessibility.Node, byID map[accessibility.NodeID]*accessibility.Node) bool {
	if axString(n.Role) != "option" {
		return false
	}
	for p := byID[n.ParentID]; p != nil; p = byID[p.ParentID] {
		switch axString(p.Role) {
		case "MenuListPopup", "combobox":
			return true
		case "listbox":
			return false
		}
	}
	return false
}

// axText is the text of n's descendants, at most max bytes.
func axText(n *accessibility.Node, byID map[accessibility.NodeID]*accessibility.Node, max int) string {
	var parts []string
	size := 0
	var walk func(n *accessibility.Node)
	walk = func(n *accessibility.Node) {
		if size > max {
			return
		}
		if axString(n.Role) == "StaticText" {
			if t := strings.TrimSpace(axString(n.Name)); t != "" {
				parts = append(parts, t)
				size += len(t)
			}
			return
		}
		for _, c := range n.ChildIDs {
			if cn := byID[c]; cn != nil {
				walk(cn)
			}
		}
	}
	walk(n)
	t := strings.Join(parts, " ")
	if len(t) > max {
		t = t[:max] + "…"
	}
	return t
}

// axStates lists a node's states worth showing, in a fixed order.
func axStates(n *accessibility.Node) []string {
	var out []string
	props := map[string]string{}
	for _, p := range n.Properties {
		if p.Value != nil {
			props[string(p.Name)] = axString(p.Value)
		}
	}
	flag := func(name, word string) {
		if props[name] == "true" {
			out = append(out, word)
		}
	}
	if lvl := props["level"]; lvl != "" && axString(n.Role) == "heading" {
		out = append(out, "level="+lvl)
	}
	switch props["checked"] {
	case "true":
		out = append(out, "checked")
	case "mixed":
		out = append(out, "mixed")
	}
	switch props["pressed"] {
	case "true":
		out = append(out, "pressed")
	}
	if e, ok := props["expanded"]; ok {
		if e == "true" {
			out = append(out, "expanded")
		} else {
			out = append(out, "collapsed")
		}
	}
	flag("selected", "selected")
	flag("disabled", "disabled")
	flag("readonly", "readonly")
	flag("required", "required")
	flag("invalid", "invalid")
	flag("busy", "busy")
	flag("focused", "focused")
	return out
}

// axString is an AX value as text: a string as is, other JSON as written.
func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal([]byte(v.Value), &s) == nil {
		return s
	}
	return strings.Trim(string(v.Value), `"`)
}

// maskedNodes lists the backend ids of the page's masked elements and
// their descendants, from the page helper (the plan's mask rules).
func (s *session) maskedNodes() map[cdp.BackendNodeID]bool {
	out := map[cdp.BackendNodeID]bool{}
	res, err := chromedp.Call(s.ctx, cdpruntime.Evaluate, inWorld(s.ctx, cdpruntime.EvaluateParams{
		Expression: `window.__flightrec ? window.__flightrec.maskedElements() : []`, ObjectGroup: "flightrec-mask"}))
	if err != nil || res.Result == nil || res.Result.ObjectID == "" {
		return out
	}
	defer chromedp.Call(s.ctx, cdpruntime.ReleaseObjectGroup, cdpruntime.ReleaseObjectGroupParams{ObjectGroup: "flightrec-mask"})
	props, err := chromedp.Call(s.ctx, cdpruntime.GetProperties, cdpruntime.GetPropertiesParams{
		ObjectID: res.Result.ObjectID, OwnProperties: ptr(true)})
	if err != nil {
		return out
	}
	for _, p := range props.Result {
		if p.Value == nil || p.Value.ObjectID == "" {
			continue
		}
		if _, err := strconv.Atoi(p.Name); err != nil {
			continue
		}
		d, err := chromedp.Call(s.ctx, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: p.Value.ObjectID, Depth: ptr(int64(-1))})
		if err != nil || d.Node == nil {
			continue
		}
		var mark func(n *cdp.Node)
		mark = func(n *cdp.Node) {
			out[n.BackendNodeID] = true
			for _, c := range n.Children {
				mark(c)
			}
		}
		mark(d.Node)
	}
	return out
}
