package recorder

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/executor/cdphar"
)

// Out-of-process frames. Chromium renders a frame of another site (a
// payment provider's card form on its own domain) in a renderer of its
// own: the page's session does not reach its document, its network or
// its accessibility tree, and the page's frame tree does not list it once
// it committed. The page's session auto-attaches such frames (chromedp
// sets Target.setAutoAttach with flatten on every page it attaches to),
// so each one arrives as Target.attachedToTarget of type "iframe"; the
// recorder joins it with a session of its own (remoteFrame) and sets it
// up as it sets up a page: the HAR recorder on its Network domain, the
// page helper and rrweb in its documents (rrweb's cross-origin mode
// posts the frame's DOM to the top document's recorder, process or not),
// and its execution contexts followed for evaluation. Snapshots, actions
// and mask rectangles then reach it through childFrame.sess; its element
// boxes are in its own viewport, to which the owner element's box is
// added, as for an in-process cross-origin frame.
//
// Each followed page auto-attaches its frames paused at their start
// (pauseFrames: waitForDebuggerOnStart); a frame is released once its
// session is set up, so its first requests are recorded and its first
// document gets the scripts as it is created. The release has to come on
// the auto-attached session itself, which chromedp routes no command to:
// rawTransport writes it. The frame's document request starts on the
// page's session (Chromium reports a navigation where it starts, before
// the frame has a process of its own) and is answered on the frame's: the
// frame's HAR recorder takes it over from the page's (cdphar's From).
// Frames nested in an out-of-process frame are not followed (its session
// does not pause them, and nothing listens for them).

// remoteFrame is one out-of-process frame a page followed.
type remoteFrame struct {
	target target.ID
	mu     sync.Mutex
	frame  cdp.FrameID // its root frame, once its document committed
	ctx    context.Context
	cancel context.CancelFunc
	w      *worlds
	har    *cdphar.Recorder
}

// frameSetup is how a recorder sets up a frame's session: its scripts,
// the world they run in ("" the main one) and the bindings they call.
type frameSetup struct {
	world    string
	scripts  []string
	bindings []string
	stepOf   func() int
	pageRef  string // the page the frame's HAR entries belong to
	raw      *rawTransport
	// parentHAR is the page's HAR recorder: the frame's document request
	// starts there, its response arrives on the frame's session.
	parentHAR *cdphar.Recorder
	// onEvent hears the frame's events that the worlds do not take.
	onEvent func(r *remoteFrame, ev any)
}

// remotes lists pg's out-of-process frames that are still attached.
func (p *followedPage) remotes() []*remoteFrame {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*remoteFrame, 0, len(p.remote))
	for _, r := range p.remote {
		if r.ctx.Err() == nil {
			out = append(out, r)
		}
	}
	return out
}

// allHAR is pg's HAR recorders: its own and its frames'.
func (p *followedPage) allHAR() []*cdphar.Recorder {
	var out []*cdphar.Recorder
	if p.har != nil {
		out = append(out, p.har)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.remote {
		if r.har != nil {
			out = append(out, r.har)
		}
	}
	return out
}

// closeRemotes ends the frames' sessions.
func (p *followedPage) closeRemotes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.remote {
		r.cancel()
	}
}

// startFrame follows the out-of-process frame tid of pg (from pg's
// listener, which must not block: the work is on a goroutine of its own,
// counted in wg and in pg's pending frames until it is set up).
func startFrame(pg *followedPage, ev *target.EventAttachedToTarget, fs frameSetup, wg *sync.WaitGroup) {
	pg.mu.Lock()
	pg.pending++
	pg.mu.Unlock()
	wg.Add(1)
	go followFrame(pg, ev, fs, wg)
}

// pauseFrames makes pg's session auto-attach its out-of-process frames
// paused at their start (before their document commits), so the
// recorder's set-up sees the frame's first requests and document; each is
// released (raw.release) once set up. Without raw frames are not paused.
func pauseFrames(ctx context.Context, raw *rawTransport) error {
	if raw == nil {
		return nil
	}
	_, err := chromedp.Call(ctx, target.SetAutoAttach, target.SetAutoAttachParams{AutoAttach: true,
		WaitForDebuggerOnStart: true, Flatten: ptr(true)})
	return err
}

// settledFrames waits (at most wait) until no frame of pg is being set
// up, so a snapshot taken now sees every frame the page has.
func (p *followedPage) settledFrames(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		p.mu.Lock()
		n := p.pending
		p.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// followFrame joins the out-of-process frame tid of pg and sets it up
// with fs; a frame that goes before it is set up is left alone.
func followFrame(pg *followedPage, at *target.EventAttachedToTarget, fs frameSetup, wg *sync.WaitGroup) {
	defer wg.Done()
	waiting := at.WaitingForDebugger
	// Whatever happens here, a frame paused for the recorder goes on.
	defer fs.raw.release(pg.ctx, at.SessionID)
	defer func() {
		pg.mu.Lock()
		pg.pending--
		pg.mu.Unlock()
	}()
	r := &remoteFrame{target: at.TargetInfo.TargetID, w: newNamedWorlds(fs.world)}
	ctx, cancel := chromedp.NewContext(pg.ctx, chromedp.WithTargetID(r.target), chromedp.WithDetachOnCancel(),
		chromedp.WithListener(func(ev any) {
			if !r.w.onEvent(ev) && fs.onEvent != nil {
				fs.onEvent(r, ev)
			}
		}))
	r.ctx, r.cancel = ctx, cancel
	if err := setupFrame(ctx, r, fs, waiting); err != nil {
		cancel()
		return
	}
	pg.mu.Lock()
	pg.remote = append(pg.remote, r)
	pg.mu.Unlock()
}

func (r *remoteFrame) setFrame(f cdp.FrameID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frame = f
}

// root is the frame's root frame id, read from its session's frame tree
// ("" when it cannot be read). (An out-of-process frame's root has a
// parent, in another process: it is the root of its session's tree.)
func (r *remoteFrame) root() cdp.FrameID {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, page.GetFrameTree, struct{}{})
	if err == nil && tree.FrameTree != nil && tree.FrameTree.Frame != nil {
		r.setFrame(tree.FrameTree.Frame.ID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frame
}

// setupFrame sets up the frame's session; waiting says the frame is
// paused before its document (which gets the scripts as it is created),
// else the document there now gets them at once.
func setupFrame(ctx context.Context, r *remoteFrame, fs frameSetup, waiting bool) error {
	if err := chromedp.Do(ctx); err != nil && chromedp.FromContext(ctx).Target == nil {
		// chromedp's own set-up of a target may fail part way in a frame
		// (a frame has no default context until it commits); the session
		// is there once the target is, and the recorder enables what it
		// needs itself.
		return err
	}
	var err error
	if r.har, err = cdphar.Start(ctx, cdphar.Options{StepOf: fs.stepOf, PageRef: fs.pageRef, From: fs.parentHAR}); err != nil {
		return err
	}
	calls := []func() error{
		func() error { _, err := chromedp.Call(ctx, cdpruntime.Enable, struct{}{}); return err },
		func() error { _, err := chromedp.Call(ctx, page.Enable, page.EnableParams{}); return err },
		func() error { _, err := chromedp.Call(ctx, dom.Enable, dom.EnableParams{}); return err },
	}
	for _, b := range fs.bindings {
		calls = append(calls, func() error {
			_, err := chromedp.Call(ctx, cdpruntime.AddBinding, cdpruntime.AddBindingParams{Name: b, ExecutionContextName: fs.world})
			return err
		})
	}
	for _, src := range fs.scripts {
		calls = append(calls, func() error {
			_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
				page.AddScriptToEvaluateOnNewDocumentParams{Source: src, WorldName: fs.world})
			return err
		})
	}
	for _, call := range calls {
		if err := call(); err != nil {
			return fmt.Errorf("setting up an out-of-process frame: %w", err)
		}
	}
	if waiting {
		return nil
	}
	// The document there now got none of the scripts: run them in it
	// (each runs once per document).
	tree, err := chromedp.Call(ctx, page.GetFrameTree, struct{}{})
	if err != nil || tree.FrameTree == nil || tree.FrameTree.Frame == nil {
		return fmt.Errorf("reading an out-of-process frame: %v", err)
	}
	fid := tree.FrameTree.Frame.ID
	r.setFrame(fid)
	cid, ok := r.w.context(fid)
	if fs.world != "" {
		w, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: fid, WorldName: fs.world})
		if err != nil {
			return err
		}
		r.w.set(fid, w.ExecutionContextID)
		cid, ok = w.ExecutionContextID, true
	}
	if !ok {
		return errNoWorld
	}
	for _, src := range fs.scripts {
		_, _ = chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: src, ContextID: cid})
	}
	return nil
}

// remoteFrames lists pg's out-of-process frames as child frames: their
// own session's root frame, its owner element in pg (found through pg's
// session in ctx), its origin (cross: another site is another origin
// than top).
func remoteFrames(ctx context.Context, pg *followedPage, top string) []*childFrame {
	wait := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)/2) // a frame's masks are measured against a deadline
	}
	pg.settledFrames(wait)
	var out []*childFrame
	for _, r := range pg.remotes() {
		f := &childFrame{sess: r.ctx, w: r.w, cross: true}
		rctx, cancel := f.on(ctx)
		tree, err := chromedp.Call(rctx, page.GetFrameTree, struct{}{})
		cancel()
		if err != nil || tree.FrameTree == nil || tree.FrameTree.Frame == nil {
			continue
		}
		fr := tree.FrameTree.Frame
		own, err := chromedp.Call(ctx, dom.GetFrameOwner, dom.GetFrameOwnerParams{FrameID: fr.ID})
		if err != nil || own.BackendNodeID == 0 {
			continue
		}
		f.id, f.key, f.origin, f.owner = fr.ID, pg.worlds.key(fr.ID), frameOrigin(fr), own.BackendNodeID
		f.cross = f.origin != top
		if d, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{BackendNodeID: own.BackendNodeID}); err == nil && d.Node != nil {
			f.title = attribute(d.Node, "title")
		}
		out = append(out, f)
	}
	return out
}
