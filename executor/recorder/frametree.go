package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
)

// Child frames (iframes), cross-origin ones included. Chromium keeps a
// frame of the same site (another port on loopback, a payment provider
// on a subdomain) in the page's process, so the tab's CDP session reaches
// it: its accessibility tree (GetFullAXTree by frame id), its nodes, and
// its main world, where the recorder's page helper runs as in the top
// document (AddScriptToEvaluateOnNewDocument runs in every frame). The
// top document's own scripts cannot reach a cross-origin frame's
// document; the recorder asks the frame's helper directly, in the frame's
// execution context.

// childFrame is one child frame of the tab, as the recorder addresses it.
type childFrame struct {
	id     cdp.FrameID
	key    string // f1, f2 …: the frame's refs are @f1e1, @f1e2 …
	origin string // scheme://host:port
	title  string // its element's title attribute (its accessible name)
	owner  cdp.BackendNodeID
	// cross says the frame's origin is not the top document's: the top
	// document's scripts cannot see into it.
	cross bool
	// sess is the CDP session of an out-of-process frame (a cross-site
	// one: remoteFrame), nil for a frame in the page's process, which the
	// page's own session reaches; w is the worlds it is evaluated in.
	sess context.Context
	w    *worlds
}

// on is ctx for the session that reaches f's document: ctx itself for a
// frame in the page's process, else f's own session with ctx's deadline.
func (f *childFrame) on(ctx context.Context) (context.Context, context.CancelFunc) {
	if f == nil || f.sess == nil {
		return ctx, func() {}
	}
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(f.sess, d)
	}
	return context.WithTimeout(f.sess, 10*time.Second)
}

// label is how snapshots and receipts name the frame: its title, else
// its origin.
func (f *childFrame) label() string {
	if f.title != "" {
		return f.title
	}
	return f.origin
}

// worlds follows the main world (default execution context) of every
// frame, from Runtime's context events, so the recorder can evaluate in a
// frame whose document the top one cannot reach. On an attached page it
// follows the recorder's isolated world instead (newNamedWorlds): its
// scripts run there, not in the page's worlds. It keeps the frame keys
// too: a frame keeps its key for the whole recording.
type worlds struct {
	name string // "" follows each frame's main world; else its world of that name
	mu   sync.Mutex
	main map[cdp.FrameID]cdpruntime.ExecutionContextID
	of   map[string]cdp.FrameID // a main world's unique id → its frame
	keys map[cdp.FrameID]string
}

func newWorlds() *worlds { return newNamedWorlds("") }

// newNamedWorlds follows every frame's isolated world called name.
func newNamedWorlds(name string) *worlds {
	return &worlds{name: name, main: map[cdp.FrameID]cdpruntime.ExecutionContextID{}, of: map[string]cdp.FrameID{}, keys: map[cdp.FrameID]string{}}
}

// follows says whether an execution context is the one worlds follows.
func (w *worlds) follows(name string, isDefault bool) bool {
	if w.name == "" {
		return isDefault
	}
	return name == w.name
}

// set notes a frame's world the recorder created itself (its event may
// come later).
func (w *worlds) set(f cdp.FrameID, id cdpruntime.ExecutionContextID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.main[f] = id
}

// onEvent takes Runtime's context events (reader goroutine).
func (w *worlds) onEvent(ev any) bool {
	switch ev := ev.(type) {
	case *cdpruntime.EventExecutionContextCreated:
		var aux struct {
			FrameID   cdp.FrameID `json:"frameId"`
			IsDefault bool        `json:"isDefault"`
		}
		if ev.Context == nil || json.Unmarshal(ev.Context.AuxData, &aux) != nil || !w.follows(ev.Context.Name, aux.IsDefault) || aux.FrameID == "" {
			return true
		}
		w.mu.Lock()
		w.main[aux.FrameID] = ev.Context.ID
		w.of[ev.Context.UniqueID] = aux.FrameID
		w.mu.Unlock()
	case *cdpruntime.EventExecutionContextDestroyed:
		w.mu.Lock()
		if f, ok := w.of[ev.ExecutionContextUniqueID]; ok {
			delete(w.of, ev.ExecutionContextUniqueID)
			delete(w.main, f)
		}
		w.mu.Unlock()
	case *cdpruntime.EventExecutionContextsCleared:
		w.mu.Lock()
		clear(w.main)
		clear(w.of)
		w.mu.Unlock()
	default:
		return false
	}
	return true
}

// context is a frame's main world; ok is false while it has none.
func (w *worlds) context(f cdp.FrameID) (cdpruntime.ExecutionContextID, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, ok := w.main[f]
	return id, ok
}

// frameOf is the frame whose followed world id is; ok is false for
// another world or one gone.
func (w *worlds) frameOf(id cdpruntime.ExecutionContextID) (cdp.FrameID, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for f, c := range w.main {
		if c == id {
			return f, true
		}
	}
	return "", false
}

func (w *worlds) key(f cdp.FrameID) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	k, ok := w.keys[f]
	if !ok {
		k = "f" + strconv.Itoa(len(w.keys)+1)
		w.keys[f] = k
	}
	return k
}

// childFrames lists pg's child frames, depth first, with their owners,
// then its out-of-process frames (which the page's own frame tree does
// not list); a frame whose owner cannot be found (it is being torn down)
// is left out.
func childFrames(ctx context.Context, pg *followedPage) ([]*childFrame, error) {
	w := pg.worlds
	res, err := chromedp.Call(ctx, page.GetFrameTree, struct{}{})
	tree := res.FrameTree
	if err != nil || tree == nil || tree.Frame == nil {
		return nil, err
	}
	top := frameOrigin(tree.Frame)
	var out []*childFrame
	var walk func(t *page.FrameTree)
	walk = func(t *page.FrameTree) {
		for _, c := range t.ChildFrames {
			if c.Frame == nil {
				continue
			}
			own, err := chromedp.Call(ctx, dom.GetFrameOwner, dom.GetFrameOwnerParams{FrameID: c.Frame.ID})
			if err == nil && own.BackendNodeID != 0 {
				f := &childFrame{id: c.Frame.ID, key: w.key(c.Frame.ID), origin: frameOrigin(c.Frame), owner: own.BackendNodeID, w: w}
				f.cross = f.origin != top
				if d, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{BackendNodeID: own.BackendNodeID}); err == nil && d.Node != nil {
					f.title = attribute(d.Node, "title")
				}
				out = append(out, f)
			}
			walk(c)
		}
	}
	walk(tree)
	return append(out, remoteFrames(ctx, pg, top)...), nil
}

// frameOrigin is a frame's origin, scheme://host[:port].
func frameOrigin(f *cdp.Frame) string {
	if f.SecurityOrigin != "" && f.SecurityOrigin != "://" {
		return f.SecurityOrigin
	}
	if u, err := url.Parse(f.URL); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return ""
}

// evaluateIn evaluates expr in a frame's main world (by value).
func evaluateIn[T any](ctx context.Context, f *childFrame, expr string) (T, error) {
	var out T
	id, ok := f.w.context(f.id)
	if !ok {
		return out, errNoWorld
	}
	ctx, cancel := f.on(ctx)
	defer cancel()
	res, err := chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: expr, ContextID: id,
		ReturnByValue: ptr(true), AwaitPromise: ptr(true)})
	if err != nil {
		return out, err
	}
	return resultValue[T](res.Result, res.ExceptionDetails)
}

// objectIn evaluates expr in a frame's main world and keeps the result as
// a remote object (in group), in the session that reaches f (ctx: f.on).
func objectIn(ctx context.Context, f *childFrame, expr, group string) (cdpruntime.RemoteObjectID, error) {
	id, ok := f.w.context(f.id)
	if !ok {
		return "", errNoWorld
	}
	res, err := chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: expr, ContextID: id, ObjectGroup: group})
	if err != nil {
		return "", err
	}
	if res.ExceptionDetails != nil || res.Result == nil || res.Result.ObjectID == "" {
		return "", errNoWorld
	}
	return res.Result.ObjectID, nil
}

// errNoWorld: the frame has no document to evaluate in (yet, or any more).
var errNoWorld = errors.New("the frame has no document now")

// ownerBox is a frame element's content box in the top page's viewport
// (CSS px): where the frame's own viewport sits.
func ownerBox(ctx context.Context, f *childFrame) (event.Rect, bool) {
	x0, y0, x1, y1, ok := ownerQuad(ctx, f)
	if !ok {
		return event.Rect{}, false
	}
	x, y := int(math.Floor(x0)), int(math.Floor(y0))
	return event.Rect{X: x, Y: y, W: int(math.Ceil(x1)) - x, H: int(math.Ceil(y1)) - y}, true
}

// ownerQuad is the frame element's content box (left, top, right,
// bottom) in the top page's viewport.
func ownerQuad(ctx context.Context, f *childFrame) (x0, y0, x1, y1 float64, ok bool) {
	bm, err := chromedp.Call(ctx, dom.GetBoxModel, dom.GetBoxModelParams{BackendNodeID: f.owner})
	if err != nil || bm.Model == nil || len(bm.Model.Content) < 8 {
		return 0, 0, 0, 0, false
	}
	q := bm.Model.Content
	x0, y0, x1, y1 = q[0], q[1], q[0], q[1]
	for i := 0; i < 8; i += 2 {
		x0, x1 = min(x0, q[i]), max(x1, q[i])
		y0, y1 = min(y0, q[i+1]), max(y1, q[i+1])
	}
	return x0, y0, x1, y1, true
}

// frameDocument finds the one child frame whose title or origin is want
// and returns its document's node, to search in.
func (s *session) frameDocument(want string) (*childFrame, cdp.NodeID, *event.StepError) {
	frames, err := childFrames(s.pg.ctx, s.pg)
	if err != nil {
		return nil, 0, stepErr(CodeBrowserError, "check that the browser is still running", "listing the frames: %v", err)
	}
	var match []*childFrame
	var names []string
	for _, f := range frames {
		names = append(names, strconv.Quote(f.label())+" ("+f.origin+")")
		if f.title == want || f.origin == want {
			match = append(match, f)
		}
	}
	switch {
	case len(match) == 0:
		return nil, 0, stepErr(CodeNotFound, "name the frame by its title or origin, as the interactive snapshot shows it",
			"no frame titled or at %q (the page has %d: %s)", want, len(frames), strings.Join(names, ", "))
	case len(match) > 1:
		return nil, 0, stepErr(CodeAmbiguous, "name the frame by its origin, or give the frames distinct titles",
			"%d frames are titled or at %q", len(match), want)
	}
	f := match[0]
	ctx, cancel := f.on(s.pg.ctx)
	defer cancel()
	obj, err := objectIn(ctx, f, "document", "flightrec-frame")
	if err != nil {
		return nil, 0, stepErr(CodeStaleRef, "the frame is loading; it is retried", "reading frame %q: %v", want, err)
	}
	defer chromedp.Call(ctx, cdpruntime.ReleaseObjectGroup, cdpruntime.ReleaseObjectGroupParams{ObjectGroup: "flightrec-frame"})
	if f.sess != nil {
		// The frame's own session numbers its nodes from a document it
		// was asked for.
		_, _ = chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{Depth: ptr(int64(0))})
	}
	n, err := chromedp.Call(ctx, dom.RequestNode, dom.RequestNodeParams{ObjectID: obj})
	if err != nil || n.NodeID == 0 {
		return nil, 0, stepErr(CodeStaleRef, "the frame is loading; it is retried", "reading frame %q's document: %v", want, err)
	}
	return f, n.NodeID, nil
}

// frameMaskRects adds the mask rectangles of every cross-origin frame to
// rects, in the top page's coordinates and clipped to the frame's box
// (the top document's helper measures same-origin frames itself). A
// frame whose helper cannot answer is masked whole: its content is
// unknown, so all of it may be secret.
func frameMaskRects(ctx context.Context, pg *followedPage, rects []event.Rect) ([]event.Rect, error) {
	frames, err := childFrames(ctx, pg)
	if err != nil {
		return nil, err
	}
	var boxes []event.Rect
	for _, f := range frames {
		if !f.cross {
			continue
		}
		box, ok := ownerBox(ctx, f)
		if ok {
			boxes = append(boxes, box)
		}
		if !ok || box.W <= 0 || box.H <= 0 {
			continue // not rendered: nothing of it is on screen
		}
		inner, err := evaluateIn[[]event.Rect](ctx, f, `window.__flightrec ? window.__flightrec.maskRects() : null`)
		if err != nil || inner == nil {
			rects = append(rects, box)
			continue
		}
		for _, r := range inner {
			if c, ok := clip(event.Rect{X: r.X + box.X, Y: r.Y + box.Y, W: r.W, H: r.H}, box); ok {
				rects = append(rects, c)
			}
		}
	}
	// An iframe whose document the top one cannot read and that no frame
	// listed accounts for (an out-of-process frame still being set up, or
	// one the recorder could not join) is masked whole: its content is
	// unknown, so all of it may be secret.
	opaque, err := evaluate[[]event.Rect](ctx, opaqueFramesJS)
	if err != nil {
		return nil, err
	}
	for _, o := range opaque {
		known := false
		for _, b := range boxes {
			known = known || (b.X >= o.X && b.Y >= o.Y && b.X+b.W <= o.X+o.W && b.Y+b.H <= o.Y+o.H)
		}
		if !known {
			rects = append(rects, o)
		}
	}
	return rects, nil
}

// opaqueFramesJS lists the viewport boxes (border box, rounded out) of
// the top document's rendered iframes whose documents it cannot read.
const opaqueFramesJS = `Array.from(document.querySelectorAll("iframe")).filter(f => {
  try { return !f.contentDocument; } catch (e) { return true; }
}).map(f => {
  const r = f.getBoundingClientRect(), x = Math.floor(r.left), y = Math.floor(r.top);
  return {x: x, y: y, w: Math.ceil(r.right) - x, h: Math.ceil(r.bottom) - y};
}).filter(r => r.w > 0 && r.h > 0)`

// clip is r cut to within box; ok is false when nothing is left.
func clip(r, box event.Rect) (event.Rect, bool) {
	x0, y0 := max(r.X, box.X), max(r.Y, box.Y)
	x1, y1 := min(r.X+r.W, box.X+box.W), min(r.Y+r.H, box.Y+box.H)
	if x1 <= x0 || y1 <= y0 {
		return event.Rect{}, false
	}
	return event.Rect{X: x0, Y: y0, W: x1 - x0, H: y1 - y0}, true
}

// attribute is a node's attribute value, "" when it has none.
func attribute(n *cdp.Node, name string) string {
	for i := 0; i+1 < len(n.Attributes); i += 2 {
		if n.Attributes[i] == name {
			return n.Attributes[i+1]
		}
	}
	return ""
}
