package recorder

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/debugger"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/wire"
)

// Attach mode (flightrec record --attach) records a browser that another
// CDP client drives: Playwright's connectOverCDP, Puppeteer, an agent
// framework. The recorder joins the browser's DevTools endpoint as one more
// client, attaches to every page target, present and future, and streams
// the same channels as Record. It drives nothing: its scripts run in an
// isolated world the page cannot see, it handles no dialog, emulates
// nothing and navigates nowhere, and it leaves the browser running when it
// stops. Steps are inferred from what the page observed (attach_steps.go).

// AttachConfig tunes Attach. Of Config, the channel settings apply
// (FrameInterval, JPEGQuality, Project, Labels, Log); Chromium, StepTimeout
// and Pins do not (the browser is someone else's).
type AttachConfig struct {
	Config
	// Flow names the recording ("" is "attached"): the flow the driving
	// client runs, so that flightrec diff compares it with that flow's runs.
	Flow string
	// TargetURLPrefix, when set, limits the recording to pages whose URL
	// starts with it (a page still at about:blank is recorded once it
	// gets there).
	TargetURLPrefix string
	// Verdict finishes the recording when set; "" infers it: fail when a
	// step failed or the page threw or got a 5xx outside any step, else
	// pass.
	Verdict string
	// Ready, when set, hears once that the pages open at the start are
	// recorded (their number): a driver may start then.
	Ready func(pages int)
}

// isolatedWorld names the recorder's world in every document.
const isolatedWorld = "__flightrec"

// inputBinding is the CDP binding the input observer reports through.
const inputBinding = "__flightrecInput"

//go:embed attach.js
var attachJS string

// worldKey is the context key of an attached page's world: the recorder's
// evaluations on that page run there, not in the page's main world.
type worldKey struct{}

// inWorld points an evaluation at the recorder's isolated world when ctx is
// an attached page's and the world exists; else it is left to the main
// world (the reference recorder's pages, which it owns).
func inWorld(ctx context.Context, p cdpruntime.EvaluateParams) cdpruntime.EvaluateParams {
	if w, ok := ctx.Value(worldKey{}).(*world); ok {
		p.ContextID = w.id()
	}
	return p
}

// world is an attached page's isolated world: the recorder's execution
// context in each frame (worlds, named isolatedWorld, which is the page's
// followedPage.worlds too) and the page's main frame, whose context the
// recorder's evaluations use. Every new document replaces both.
type world struct {
	frames *worlds
	mu     sync.Mutex
	main   cdp.FrameID
}

func newWorld() *world { return &world{frames: newNamedWorlds(isolatedWorld)} }

// id is the main frame's context of the world (0 while it has none).
func (w *world) id() cdpruntime.ExecutionContextID {
	id, _ := w.frames.context(w.mainFrame())
	return id
}

func (w *world) setMain(f cdp.FrameID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.main = f
}

// attachment is one attached recording: the pages recorded, the stream
// they share and the steps inferred.
type attachment struct {
	cfg    AttachConfig
	bctx   context.Context // the browser connection
	raw    *rawTransport   // releases the frames paused for the recorder
	st     *stream
	refs   *refs
	mask   wire.MaskRules
	helper string // page.js with the plan's mask rules
	rrweb  string
	steps  *stepper
	cap    *capture // the downloads the pages report (described, never read)

	mu     sync.Mutex
	pages  map[target.ID]*attachedPage
	seen   map[target.ID]bool // attached or being attached
	seq    int                // the last page number given (the first page attached is 1)
	closed bool               // detaching: no more attaches
	// paused holds the sessions of new pages the browser paused at their
	// start for the recorder (held by hold, released by attach); gaveUp
	// the pages whose attach stopped waiting for theirs (then a late
	// pause is released at once).
	paused  map[target.ID]target.SessionID
	gaveUp  map[target.ID]bool
	changed chan struct{}  // closed and replaced when paused changes
	wg      sync.WaitGroup // attaches under way
	ready   atomic.Bool
}

// attachedPage is one page target being recorded: a followedPage (its
// CDP context, HAR recorder, frame worlds and URL, as the reference
// recorder's pages have) with a session of its own, since each page has
// its own screencast, views and per-step console and dialog notes, while
// the stream, the refs and the steps are the attachment's.
type attachedPage struct {
	a      *attachment
	id     target.ID
	pg     *followedPage
	s      *session
	w      *world
	cancel context.CancelFunc
	opened bool // a popup: its first document is its opener's effect

	// held: paused at its start, its HAR read from the auto-attached
	// session (rawTransport.hold).
	held bool

	mu        sync.Mutex
	documents int  // main-frame documents requested since attach
	requested bool // the page itself asked the main frame to navigate
	missed    bool // a held page's document came without its request (committed)
}

// Attach records the browser at cdpURL (http://host:port or a ws:// browser
// URL) until ctx ends (the caller's SIGINT or SIGTERM) or the browser
// closes, then finishes the recording with a verdict. It detaches cleanly:
// the browser and its pages keep running.
func Attach(ctx context.Context, cfg AttachConfig, cdpURL string, c *client.Client) (Result, error) {
	cfg.defaults()
	start := time.Now()
	if cfg.Flow == "" {
		cfg.Flow = "attached"
	}
	// The connection outlives ctx: the recording is finished over it after
	// the signal.
	// Over a websocket the recorder holds (rawTransport): it releases the
	// out-of-process frames it pauses at their start.
	raw := &rawTransport{holdPages: true}
	allocCtx, cancelAlloc := chromedp.NewAllocatorContext(context.Background(), &rawAllocator{url: cdpURL, raw: raw})
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(allocCtx, quietUnknownSessions())
	defer cancelB()
	ver, err := chromedp.CallBrowser(bctx, browser.GetVersion, struct{}{})
	if err != nil {
		return Result{}, fmt.Errorf("connecting to the browser at %s: %w", cdpURL, err)
	}
	versions := map[string]string{"engine": ver.Product, "protocol": ver.ProtocolVersion,
		"v8": ver.JsVersion, "recorder": "flightrec record --attach", "rrweb": rrwebVersion, "client": ver.UserAgent}
	rep, err := c.Open(ctx, wire.OpenRequest{Project: cfg.Project, Flow: cfg.Flow, Labels: cfg.Labels,
		Executor: "flightrec record --attach", Versions: versions})
	if err != nil {
		return Result{}, fmt.Errorf("opening the recording: %w", err)
	}
	a := &attachment{cfg: cfg, bctx: bctx, raw: raw, st: newStream(c, rep.ID), refs: newRefs(),
		cap:   newCapture("", false, "", nil, nil, nil),
		pages: map[target.ID]*attachedPage{}, seen: map[target.ID]bool{},
		paused: map[target.ID]target.SessionID{}, gaveUp: map[target.ID]bool{}, changed: make(chan struct{})}
	a.mask = defaultMask(rep.Mask)
	rules, _ := json.Marshal(a.mask)
	a.helper = strings.Replace(pageJS, "const rules = __RULES__;", "const rules = "+string(rules)+";", 1)
	// The stop function lets a detach end rrweb's observers in the page.
	a.rrweb = strings.Replace(rrwebScript(), ";rrwebRecord.record({", ";window.__flightrecStopDOM = rrwebRecord.record({", 1)
	a.steps = newStepper(a)
	labels := map[string]string{"flow": cfg.Flow, "mode": "attach"}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	a.st.emitAt(event.KindMeta, start, 0, event.Meta{Versions: versions, Labels: labels})
	res := Result{ID: rep.ID, Flow: cfg.Flow}

	runErr := a.run(ctx)

	a.steps.stop()
	a.detachAll()
	res.Events, res.Total = a.st.stats()
	if err := a.st.close(); err != nil {
		return res, err
	}
	res.Steps, res.Failed = a.steps.outcome()
	res.Verdict = cfg.Verdict
	if res.Verdict == "" {
		res.Verdict = "pass"
		if len(res.Failed) > 0 || runErr != nil {
			res.Verdict = "fail"
		}
	}
	fin, err := c.Finish(context.Background(), rep.ID, res.Verdict)
	if err != nil {
		return res, fmt.Errorf("finishing recording %s: %w", rep.ID, err)
	}
	res.Root = fin.Root
	res.Wall = time.Since(start)
	return res, runErr
}

// defaultMask is the plan's mask rules, or, from a server that sends none,
// what the default policy would mask rather than nothing.
func defaultMask(m *wire.MaskRules) wire.MaskRules {
	if m != nil {
		return *m
	}
	return wire.MaskRules{InputTypes: []string{"password", "hidden"},
		Autocomplete: []string{"cc-*", "current-password", "new-password", "one-time-code"},
		NamePatterns: []string{"card|cc-?(num|number|csc|cvc|exp)|cvv|cvc|pass(word|wd)?|pin|otp|ssn|secret"}}
}

// run attaches to the pages there are and the ones to come, and waits for
// ctx or the browser's end.
func (a *attachment) run(ctx context.Context) error {
	if err := chromedp.ListenBrowser(a.bctx, a.onBrowserEvent); err != nil {
		return err
	}
	if _, err := chromedp.CallBrowser(a.bctx, target.SetDiscoverTargets, target.SetDiscoverTargetsParams{Discover: true}); err != nil {
		return fmt.Errorf("listening for the browser's pages: %w", err)
	}
	// New pages (popups, tabs) wait at their start until the recorder
	// has their Network domain and scripts in place (hold, attach), so
	// their document request is their own first HAR entry. The wait is
	// the driving client's too: attach releases at once after those.
	if _, err := chromedp.CallBrowser(a.bctx, target.SetAutoAttach, target.SetAutoAttachParams{AutoAttach: true,
		WaitForDebuggerOnStart: true, Flatten: ptr(true), Filter: target.Filter{{Type: "page"}}}); err != nil {
		return fmt.Errorf("pausing the browser's new pages: %w", err)
	}
	infos, err := chromedp.Targets(a.bctx)
	if err != nil {
		return fmt.Errorf("listing the browser's pages: %w", err)
	}
	for _, ti := range infos {
		a.consider(ti)
	}
	a.wg.Wait()
	a.ready.Store(true)
	go a.steps.run()
	if a.cfg.Ready != nil {
		a.mu.Lock()
		n := len(a.pages)
		a.mu.Unlock()
		a.cfg.Ready(n)
	}
	select {
	case <-ctx.Done():
	case <-a.bctx.Done():
	}
	return nil
}

// onBrowserEvent attaches to new pages, and to pages that reach the URL
// prefix (reader goroutine: the attach runs on its own).
func (a *attachment) onBrowserEvent(ev any) {
	switch ev := ev.(type) {
	case *target.EventTargetCreated:
		a.consider(ev.TargetInfo)
	case *target.EventTargetInfoChanged:
		a.consider(ev.TargetInfo)
	case *target.EventAttachedToTarget:
		if ev.WaitingForDebugger {
			a.hold(ev)
		}
	}
}

// hold keeps the session of a new page paused at its start for its
// attach to release, and releases at once a page the recorder will not
// attach (or whose attach gave up waiting). Reader goroutine: the
// release is a write, not a call.
func (a *attachment) hold(ev *target.EventAttachedToTarget) {
	ti := ev.TargetInfo
	a.mu.Lock()
	keep := ti != nil && a.wanted(ti) && !a.closed && !a.gaveUp[ti.TargetID]
	if keep {
		a.paused[ti.TargetID] = ev.SessionID
		close(a.changed)
		a.changed = make(chan struct{})
	}
	a.mu.Unlock()
	if !keep {
		a.raw.drop(ev.SessionID)
		go a.raw.release(context.Background(), ev.SessionID)
	}
}

// takePaused waits (at most wait) for page tid's paused session and takes
// it ("" if the page is not paused for the recorder; a pause that comes
// later is released at once).
func (a *attachment) takePaused(tid target.ID, wait time.Duration) target.SessionID {
	deadline := time.After(wait)
	for {
		a.mu.Lock()
		sess, ok := a.paused[tid]
		delete(a.paused, tid)
		ch := a.changed
		if !ok && wait == 0 {
			a.gaveUp[tid] = true
		}
		a.mu.Unlock()
		if ok || wait == 0 {
			return sess
		}
		select {
		case <-ch:
		case <-deadline:
			wait = 0 // one last look, then give up
		}
	}
}

// wanted says whether a page is recorded.
func (a *attachment) wanted(ti *target.Info) bool {
	if ti == nil || ti.Type != "page" {
		return false
	}
	p := a.cfg.TargetURLPrefix
	return p == "" || strings.HasPrefix(ti.URL, p) || ti.URL == "about:blank" || ti.URL == ""
}

func (a *attachment) consider(ti *target.Info) {
	if !a.wanted(ti) {
		return
	}
	a.mu.Lock()
	if a.seen[ti.TargetID] || a.closed || a.bctx.Err() != nil {
		a.mu.Unlock()
		return
	}
	a.seen[ti.TargetID] = true
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		p, err := a.attach(ti)
		if err != nil {
			if a.cfg.Log != nil && a.bctx.Err() == nil {
				fmt.Fprintf(a.cfg.Log, "page %s not recorded: %v\n", ti.URL, err)
			}
			return
		}
		a.mu.Lock()
		a.pages[ti.TargetID] = p
		a.mu.Unlock()
	}()
}

// attach joins one page target as an extra session and installs the
// recorder's listeners and isolated-world scripts.
func (a *attachment) attach(ti *target.Info) (*attachedPage, error) {
	p := &attachedPage{a: a, id: ti.TargetID, opened: ti.OpenerID != "",
		w: newWorld()}
	tctx, cancel := chromedp.NewContext(a.bctx, chromedp.WithTargetID(ti.TargetID), chromedp.WithDetachOnCancel(),
		// Ahead of every other listener: a document request must start its
		// goto step before the HAR recorder asks which step it is in.
		chromedp.WithListener(p.onEvent))
	p.cancel = cancel
	ctx := context.WithValue(tctx, worldKey{}, p.w)
	id, opener := a.pageIDs(ti)
	// cancel stays the attachedPage's: detachAll ends the page's session
	// once what it gathered is sent.
	pg := newPage(id, ctx, nil, opener)
	pg.target, pg.worlds = ti.TargetID, p.w.frames
	p.pg = pg
	s := &session{cfg: a.cfg.Config, st: a.st, refs: a.refs, mask: a.mask, maps: newSourceMaps(),
		first: pg, pg: pg, pages: []*followedPage{pg}, pageSeq: 1,
		consoleErrors: map[int]int{}, dialogs: map[int][]event.Dialog{}, exceptions: map[int]string{},
		misses: map[int][]replayMiss{}, replayed: map[string][]string{}, lastView: map[string]string{},
		cwork: make(chan func(), 1024), cdone: make(chan struct{})}
	p.s = s
	go s.consoleWorker()
	fail := func(err error) (*attachedPage, error) {
		close(s.cwork)
		cancel()
		return nil, err
	}
	// A page created since the attach began (a popup, a new tab) is
	// paused at its start, as a rule: its target event comes just before
	// the pause's.
	var wait time.Duration
	if a.ready.Load() {
		wait = time.Second
	}
	sess := a.takePaused(ti.TargetID, wait)
	paused := sess != ""
	release := func() {
		a.raw.release(a.bctx, sess)
		sess = ""
	}
	defer release()
	harOpts := cdphar.Options{StepOf: a.steps.observed, PageRef: pg.id}
	// A paused page's HAR comes from the session the browser's auto-attach
	// handed over, whose Network domain was enabled as it arrived
	// (rawTransport.hold): the driving client may have released the page
	// already. Its network events are the page's listener's too (a
	// document request may start a goto step). The page is recorded from
	// here whatever fails: a popup may close before the rest is set up,
	// and what it loaded is in its HAR.
	held := a.raw.pausedPage(sess)
	if paused {
		// A page target's main frame has the target's id: known before
		// its frame tree is read, which waits until it runs.
		p.w.setMain(cdp.FrameID(ti.TargetID))
	}
	if held != nil {
		p.held = true
		har := cdphar.StartOn(ctx, harOpts, held)
		pg.har = har
		held.to(func(ev any) {
			p.onEvent(ev)
			har.Handle(ev)
		})
	}
	// chromedp's own set-up of a paused page can fail part way (it has no
	// document to evaluate in yet); the session is there all the same.
	// Without one (the popup closed at once) a held page keeps its HAR
	// alone: every call on ctx would attach anew.
	if err := chromedp.Do(ctx); err != nil && (!paused || chromedp.FromContext(ctx).Target == nil) {
		if held == nil {
			return fail(err)
		}
		return p, nil
	}
	// What must precede the page's first request: the HAR's Network
	// domain, and the isolated world's bindings and scripts (with the
	// Runtime and Page events they report through). Then a paused page
	// goes on at once; the reads and screenshots come after.
	var err error
	if held == nil {
		if pg.har, err = cdphar.Start(ctx, harOpts); err != nil {
			return fail(err)
		}
	}
	early := []func() error{
		func() error { _, err := chromedp.Call(ctx, cdpruntime.Enable, struct{}{}); return err },
		func() error { _, err := chromedp.Call(ctx, page.Enable, page.EnableParams{}); return err },
		func() error {
			_, err := chromedp.Call(ctx, cdpruntime.AddBinding, cdpruntime.AddBindingParams{Name: domBinding, ExecutionContextName: isolatedWorld})
			return err
		},
		func() error {
			_, err := chromedp.Call(ctx, cdpruntime.AddBinding, cdpruntime.AddBindingParams{Name: inputBinding, ExecutionContextName: isolatedWorld})
			return err
		},
		func() error {
			for _, src := range []string{a.helper, attachJS, a.rrweb} {
				if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
					page.AddScriptToEvaluateOnNewDocumentParams{Source: src, WorldName: isolatedWorld}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	for _, call := range early {
		if err := call(); err != nil && held == nil {
			return fail(fmt.Errorf("setting up the page: %w", err))
		}
	}
	release()
	// A page that was paused is recorded from here whatever fails: a
	// popup may close while the rest is set up, and what it loaded is in
	// its HAR already.
	main := cdp.FrameID(ti.TargetID)
	tree, err := chromedp.Call(ctx, page.GetFrameTree, struct{}{})
	switch {
	case err == nil:
		main = tree.FrameTree.Frame.ID
		p.w.setMain(main)
		pg.navigated(tree.FrameTree.Frame.URL, tree.FrameTree.Frame.LoaderID)
		p.committed(tree.FrameTree.Frame.URL)
	case !paused:
		return fail(err)
	}
	if m, err := chromedp.Call(ctx, page.GetLayoutMetrics, struct{}{}); err == nil && m.CSSLayoutViewport != nil {
		s.vp = event.Viewport{Width: int(m.CSSLayoutViewport.ClientWidth), Height: int(m.CSSLayoutViewport.ClientHeight)}
	}
	if s.vp.Width == 0 {
		s.vp = event.Viewport{Width: 1280, Height: 800}
	}
	for _, call := range []func() error{
		func() error { return s.enableLogs(ctx) },
		func() error { return pauseFrames(ctx, a.raw) },
		// The recorder's Debugger session must never stop the page: a
		// debugger statement or a breakpoint of another client's pauses
		// only the client that asked.
		func() error {
			_, err := chromedp.Call(ctx, debugger.SetSkipAllPauses, debugger.SetSkipAllPausesParams{Skip: true})
			return err
		},
	} {
		if err := call(); err != nil && !paused {
			return fail(fmt.Errorf("setting up the page: %w", err))
		}
	}
	// The document already open gets the scripts now: rrweb starts with a
	// full snapshot of the page as it is.
	p.injectNow(main)
	startFrames(s, pg)
	s.snapshots("after")
	s.ensureFrame(a.st.currentStep())
	return p, nil
}

// injectNow runs the recorder's scripts in a new isolated world of the
// frame's current document (the ones to come get them on creation).
func (p *attachedPage) injectNow(frame cdp.FrameID) {
	ctx := p.pg.ctx
	w, err := chromedp.Call(ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: frame, WorldName: isolatedWorld})
	if err != nil {
		return
	}
	p.w.frames.set(frame, w.ExecutionContextID)
	for _, src := range []string{p.a.helper, attachJS, p.a.rrweb} {
		_, _ = chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: src, ContextID: w.ExecutionContextID})
	}
}

// onEvent is the page's listener (reader goroutine). Unlike the reference
// recorder's it answers no dialog: the driving client does.
func (p *attachedPage) onEvent(ev any) {
	s, pg := p.s, p.pg
	if s == nil || pg == nil {
		return
	}
	switch ev := ev.(type) {
	case *cdpruntime.EventBindingCalled:
		p.onBinding(nil, ev)
	case *target.EventAttachedToTarget:
		// An out-of-process frame (oopif.go), set up as the page is: the
		// recorder's scripts in its isolated world, its input observed.
		if ev.TargetInfo != nil && ev.TargetInfo.Type == "iframe" {
			startFrame(pg, ev, p.frameSetup(), &p.a.wg)
		}
	case *page.EventFrameRequestedNavigation:
		if ev.FrameID == p.w.mainFrame() {
			p.mu.Lock()
			p.requested = true
			p.mu.Unlock()
		}
	case *network.EventRequestWillBeSent:
		if ev.Type == network.ResourceTypeDocument && string(ev.RequestID) == string(ev.LoaderID) &&
			ev.RedirectResponse == nil && ev.FrameID == p.w.mainFrame() {
			p.mu.Lock()
			p.documents++
			first, requested := p.documents == 1, p.requested
			p.requested = false
			p.mu.Unlock()
			// A navigation the page asked for (a link, a form, a script)
			// is its step's effect; one the browser was told to make is
			// the driving client's goto.
			if !requested && !(first && p.opened) && p.a.ready.Load() {
				p.a.steps.navigated(p, ev.DocumentURL, time.Unix(0, int64(ev.WallTime.Float64()*1e9)))
			}
		}
	case *page.EventFrameNavigated:
		if ev.Frame != nil && ev.Frame.ParentID == "" {
			p.w.setMain(ev.Frame.ID)
			pg.navigated(ev.Frame.URL, ev.Frame.LoaderID)
			p.committed(ev.Frame.URL)
		}
	case *page.EventNavigatedWithinDocument:
		if ev.FrameID == p.w.mainFrame() {
			pg.navigated(ev.URL, "")
		}
	case *page.EventJavascriptDialogOpening:
		s.noteDialog(ev) // and left to the driving client to answer
	case *browser.EventDownloadWillBegin, *browser.EventDownloadProgress:
		p.a.cap.onEvent(ev, p.a.st.currentStep())
	case *page.EventScreencastFrame:
		s.onScreencastFrame(pg, ev)
	default:
		if !pg.worlds.onEvent(ev) {
			s.onConsoleEvent(pg, ev)
		}
	}
}

// committed notes a main-frame document the page has. A held page's
// document whose request the recorder did not see was requested before
// the Network domain the recorder enabled as the page arrived was on (the
// driving client released the page first): it is not in the HAR, and
// nothing stands in for it (no status or body the recorder did not see).
// The log says so, once.
func (p *attachedPage) committed(url string) {
	if !p.held || !strings.HasPrefix(url, "http") {
		return
	}
	p.mu.Lock()
	missed := p.documents == 0 && !p.missed
	p.missed = p.missed || missed
	p.mu.Unlock()
	if missed && p.a.cfg.Log != nil {
		fmt.Fprintf(p.a.cfg.Log, "page %s: %s was requested before the recorder could see it: its request is not in the HAR\n", p.pg.id, url)
	}
}

// onBinding takes the recorder's bindings of the page, or of its
// out-of-process frame r (nil: the page's session).
func (p *attachedPage) onBinding(r *remoteFrame, ev *cdpruntime.EventBindingCalled) {
	switch ev.Name {
	case domBinding:
		p.s.onDOM(p.pg, ev.Payload)
	case inputBinding:
		p.a.steps.input(p, r, ev.ExecutionContextID, ev.Payload)
	}
}

// frameSetup sets up the page's out-of-process frames as the page:
// the recorder's scripts and bindings in its isolated world.
func (p *attachedPage) frameSetup() frameSetup {
	s, pg := p.s, p.pg
	return frameSetup{world: isolatedWorld, scripts: []string{p.a.helper, attachJS, p.a.rrweb},
		bindings: []string{domBinding, inputBinding}, stepOf: p.a.steps.observed, pageRef: pg.id, raw: p.a.raw, parentHAR: pg.har,
		onEvent: func(r *remoteFrame, ev any) {
			switch ev := ev.(type) {
			case *cdpruntime.EventBindingCalled:
				p.onBinding(r, ev)
			case *cdpruntime.EventConsoleAPICalled, *cdpruntime.EventExceptionThrown:
				s.onConsoleEvent(pg, ev)
			}
		}}
}

func (w *world) mainFrame() cdp.FrameID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.main
}

// stopDOM stops the recorder's scripts in the world id of the session
// in ctx (0: it has none).
func stopDOM(ctx context.Context, id cdpruntime.ExecutionContextID) {
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _ = chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{ContextID: id,
		Expression: `window.__flightrecStopDOM && window.__flightrecStopDOM()`})
}

// pageIDs names an attached page as the reference recorder names its
// pages: the first attached is "" (the first page), the others p2, p3 …,
// with the page that opened it when that page is recorded.
func (a *attachment) pageIDs(ti *target.Info) (id, opener string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	if a.seq > 1 {
		id = "p" + strconv.Itoa(a.seq)
	}
	if op, ok := a.pages[ti.OpenerID]; ok && ti.OpenerID != "" {
		opener = op.pg.id
	}
	return id, opener
}

// pageList is the pages recorded now.
func (a *attachment) pageList() []*attachedPage {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*attachedPage, 0, len(a.pages))
	for _, p := range a.pages {
		out = append(out, p)
	}
	return out
}

// detachAll sends what every page gathered, stops the recorder's scripts
// in them and detaches: the pages and the browser go on.
func (a *attachment) detachAll() {
	// No page waits for the recorder any more: a pause that comes now is
	// released at once (hold).
	a.mu.Lock()
	a.closed = true
	held := a.paused
	a.paused = map[target.ID]target.SessionID{}
	a.mu.Unlock()
	for _, sess := range held {
		a.raw.drop(sess)
		a.raw.release(a.bctx, sess)
	}
	a.wg.Wait()
	pages := a.pageList()
	for _, p := range pages {
		p.s.drainNetwork(3 * time.Second)
	}
	// Auto-attach off once the pages' network is drained: it ends the
	// auto-attached sessions, which a paused page's HAR reads.
	_, _ = chromedp.CallBrowser(a.bctx, target.SetAutoAttach, target.SetAutoAttachParams{Flatten: ptr(true)})
	for _, p := range pages {
		s := p.s
		s.frames.stop()
		stopDOM(p.pg.ctx, p.w.id())
		for _, r := range p.pg.remotes() {
			stopDOM(r.ctx, func() cdpruntime.ExecutionContextID { id, _ := r.w.context(r.root()); return id }())
		}
		p.pg.closeRemotes()
		close(s.cwork)
		<-s.cdone
		p.cancel()
	}
}
