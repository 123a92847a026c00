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

// refs gives page elements stable refs (@e1, @e2 …) for the whole
// recording, so a receipt's resolved target and the snapshots name an
// element the same way. It also keeps the last interactive view, for the
// snapshot delta a receipt carries.
//
// An element of a child frame has a ref of the frame's own, @f1e2 (frame
// f1's second element): a backend node id is unique within a process,
// not across the frames of a page.
type refs struct {
	mu     sync.Mutex
	byNode map[frameNode]string
	next   map[string]int // by frame key ("" is the top document)
	before string         // the interactive view before the current step
	after  string
}

type frameNode struct {
	frame string
	id    cdp.BackendNodeID
}

func newRefs() *refs { return &refs{byNode: map[frameNode]string{}, next: map[string]int{}} }

// ref is the ref of element id of frame ("" for the top document).
func (r *refs) ref(frame string, id cdp.BackendNodeID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := frameNode{frame, id}
	if ref, ok := r.byNode[k]; ok {
		return ref
	}
	r.next[frame]++
	ref := "@" + frame + "e" + strconv.Itoa(r.next[frame])
	r.byNode[k] = ref
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
	if r.after == "" {
		return ""
	}
	return lineDelta(r.before, r.after)
}

// lineDelta is the change from one view to another: the lines gone
// ("- …") and the lines new ("+ …"), in order; "" when none changed.
func lineDelta(before, after string) string {
	if before == after {
		return ""
	}
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[strings.TrimSpace(l)]++
		}
		return m
	}
	was, now := count(before), count(after)
	var b strings.Builder
	for _, l := range strings.Split(before, "\n") {
		if t := strings.TrimSpace(l); now[t] > 0 {
			now[t]--
		} else if t != "" {
			b.WriteString("- " + t + "\n")
		}
	}
	for _, l := range strings.Split(after, "\n") {
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

// views are the page's interactive and content views as read at ts, and
// the document they are of (followedPage.document); a view that could not
// be read is nil.
type views struct {
	ts                   time.Time
	origin, doc          string
	interactive, content *string
}

func (s *session) views() views {
	v := views{ts: time.Now(), origin: s.origin(), doc: s.pg.document()}
	if text, err := s.interactiveView(); err == nil {
		v.interactive = &text
	}
	if text, err := evaluate[string](s.pg.ctx, `document.body ? document.body.innerText : ""`); err == nil {
		text = tidyText(text) + s.framesText()
		v.content = &text
	}
	return v
}

// sendViews sends views read earlier as the snapshots of step at when.
func (s *session) sendViews(v views, when string, step int) {
	if v.interactive != nil {
		text := *v.interactive
		s.refs.saw(when, text)
		s.sendSnapshot(v.ts, step, "interactive", when, v.origin, text)
		// delta: the change since the last interactive snapshot of the
		// same document (the page's, since its last load), after every
		// action. A step that loaded a new document has none: its after
		// snapshot is that document's first.
		s.mu.Lock()
		prev, seen := s.lastView[v.doc]
		s.lastView[v.doc] = text
		s.mu.Unlock()
		if when == "after" && seen {
			s.sendSnapshot(v.ts, step, "delta", when, v.origin, lineDelta(prev, text))
		}
	}
	if v.content != nil {
		s.sendSnapshot(v.ts, step, "content", when, v.origin, *v.content)
	}
}

// framesText is the text of the cross-origin frames (the top document's
// innerText holds none of a frame's), each under a line naming it.
func (s *session) framesText() string {
	frames, _ := childFrames(s.pg.ctx, s.pg)
	var b strings.Builder
	for _, f := range frames {
		if !f.cross {
			continue
		}
		text, err := evaluateIn[string](s.pg.ctx, f, `document.body ? document.body.innerText : ""`)
		if err != nil {
			continue
		}
		b.WriteString("\n\nframe " + strconv.Quote(f.label()) + " (cross-origin frame: " + f.origin + ")\n" + tidyText(text))
	}
	return b.String()
}

// origin is the current page's origin.
func (s *session) origin() string {
	if u, err := url.Parse(s.pg.currentURL()); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return ""
}

func (s *session) sendSnapshot(ts time.Time, step int, view, when, origin, text string) {
	snap := event.Snapshot{View: view, When: when, Origin: origin, Nonce: nonce(), Text: text, Page: s.pg.id}
	// A big snapshot (a page of 50,000 controls) is kept whole as long as
	// its event fits the event limit, and cut to fit beyond: readers get
	// it in pages (GET …/snapshots/{seq}), not in one piece.
	budget := s.st.limits.MaxEventBytes - snapshotOverhead
	for enc := jsonLen(snap.Text); enc > budget && len(snap.Text) > 0; enc = jsonLen(snap.Text) {
		cut := int(float64(len(snap.Text)) * float64(budget) / float64(enc) * 0.98)
		for cut > 0 && !isRuneStart(snap.Text[cut]) {
			cut--
		}
		snap.Text, snap.Truncated = snap.Text[:cut], true
	}
	s.st.emitAt(event.KindSnapshot, ts, step, snap)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// snapshotOverhead is room in an event for all of a snapshot but its
// text: the envelope and the other members.
const snapshotOverhead = 4 << 10

// jsonLen is the length of s encoded as a JSON string.
func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

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
// place it. Values of masked fields are never shown. A child frame's
// content follows its frame element inline, under a line naming the
// frame and its origin, with refs of its own (@f1e1 …).
func (s *session) interactiveView() (string, error) {
	return s.axView(false)
}

// fullView renders the whole accessibility tree the same way: every node
// that is not ignored, text as its own line, each with a DOM node a ref.
func (s *session) fullView() (string, error) {
	return s.axView(true)
}

func (s *session) axView(full bool) (string, error) {
	frames, _ := childFrames(s.pg.ctx, s.pg)
	var b strings.Builder
	if err := s.writeAXTree(&b, nil, frames, 0, map[cdp.FrameID]bool{}, full); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// fullSnapshot runs a snapshot step: the full view as a snapshot event of
// its own.
func (s *session) fullSnapshot() *event.StepError {
	text, err := s.fullView()
	if err != nil {
		return stepErr(CodeBrowserError, "check that the browser is still running", "reading the accessibility tree: %v", err)
	}
	s.sendSnapshot(time.Now(), -1, "full", "after", s.origin(), text)
	return nil
}

// fullSkipRoles are left out of the full view: they add a line and say
// nothing (their children are shown).
var fullSkipRoles = map[string]bool{"none": true, "generic": true, "InlineTextBox": true, "LineBreak": true}

// writeAXTree writes the tree of frame f (nil: the top document) at depth,
// each child frame's tree where its element is: the interactive view's
// lines, or with full every node's.
func (s *session) writeAXTree(b *strings.Builder, f *childFrame, frames []*childFrame, depth int, done map[cdp.FrameID]bool, full bool) error {
	p := accessibility.GetFullAXTreeParams{}
	// Refs are the page's (p2…, "" the first) and the frame's: backend
	// node ids are unique within a renderer, and pages and frames may
	// have renderers of their own.
	key := s.pg.id
	if f != nil {
		p.FrameID, key = f.id, key+f.key
		done[f.id] = true
	}
	ctx, cancel := f.on(s.pg.ctx)
	defer cancel()
	res, err := chromedp.Call(ctx, accessibility.GetFullAXTree, p)
	if err != nil {
		return err
	}
	masked, all := s.maskedNodes(f)
	owners := map[cdp.BackendNodeID]*childFrame{}
	for _, cf := range frames {
		owners[cf.owner] = cf
	}
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
		return nil
	}
	var walk func(n *accessibility.Node, depth int)
	walk = func(n *accessibility.Node, depth int) {
		role := axString(n.Role)
		next := depth
		if cf := owners[n.BackendDOMNodeID]; cf != nil && n.BackendDOMNodeID != 0 && !done[cf.id] {
			kind := "frame"
			if cf.cross {
				kind = "cross-origin frame"
			}
			b.WriteString(strings.Repeat(" ", depth) + "frame " + strconv.Quote(cf.label()) + " (" + kind + ": " + cf.origin + ")\n")
			// A frame that cannot be read now (it is loading) shows as
			// its line alone.
			_ = s.writeAXTree(b, cf, frames, depth+1, done, full)
			return
		}
		show := actionableRoles[role] || contextRoles[role]
		if full {
			show = !fullSkipRoles[role] && !(role == "StaticText" && normalizeSpace(axString(n.Name)) == "")
		}
		if !n.Ignored && show && !hiddenOption(n, byID) {
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
					if all || masked[n.BackendDOMNodeID] {
						v = "[masked]"
					}
					b.WriteString(" value=" + strconv.Quote(v))
				}
			}
			if (actionableRoles[role] || full) && n.BackendDOMNodeID != 0 {
				b.WriteString(" " + s.refs.ref(key, n.BackendDOMNodeID))
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
	walk(root, depth)
	return nil
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

// maskedNodes lists the backend ids of the masked elements of frame f
// (nil: the top document and its same-origin frames) and their
// descendants, from the page helper (the plan's mask rules). all is true
// when a child frame's helper cannot answer: then every value in it is
// masked.
func (s *session) maskedNodes(f *childFrame) (masked map[cdp.BackendNodeID]bool, all bool) {
	out := map[cdp.BackendNodeID]bool{}
	const expr = `window.__flightrec ? window.__flightrec.maskedElements() : []`
	var list cdpruntime.RemoteObjectID
	ctx, cancel := f.on(s.pg.ctx)
	defer cancel()
	if f != nil {
		obj, err := objectIn(ctx, f, `window.__flightrec ? window.__flightrec.maskedElements() : null`, "flightrec-mask")
		if err != nil {
			return out, true
		}
		list = obj
	} else {
		res, err := chromedp.Call(s.pg.ctx, cdpruntime.Evaluate, inWorld(s.pg.ctx, cdpruntime.EvaluateParams{Expression: expr, ObjectGroup: "flightrec-mask"}))
		if err != nil || res.Result == nil || res.Result.ObjectID == "" {
			return out, false
		}
		list = res.Result.ObjectID
	}
	defer chromedp.Call(ctx, cdpruntime.ReleaseObjectGroup, cdpruntime.ReleaseObjectGroupParams{ObjectGroup: "flightrec-mask"})
	props, err := chromedp.Call(ctx, cdpruntime.GetProperties, cdpruntime.GetPropertiesParams{
		ObjectID: list, OwnProperties: ptr(true)})
	if err != nil {
		return out, f != nil
	}
	for _, p := range props.Result {
		if p.Value == nil || p.Value.ObjectID == "" {
			continue
		}
		if _, err := strconv.Atoi(p.Name); err != nil {
			continue
		}
		d, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: p.Value.ObjectID, Depth: ptr(int64(-1))})
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
	return out, false
}
