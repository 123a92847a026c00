package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
	"github.com/flightrec/flightrec/executor/flow"
)

// followedPage is one browser page the recording follows: the tab the run began
// in, or a popup or tab a recorded page opened. Each has its own CDP
// session (context), network recorder, frame worlds and URL; its events
// carry its id. Setting one up (setupPage) needs only its context, so a
// page the recorder did not open itself is followed the same way.
type followedPage struct {
	id     string // "" for the first page; p2, p3 … for the pages it opened
	target target.ID
	ctx    context.Context
	cancel context.CancelFunc // nil for the first page (Record owns it)
	opener string             // the id of the page that opened it
	har    *cdphar.Recorder
	worlds *worlds

	mu      sync.Mutex
	remote  []*remoteFrame // its out-of-process frames (oopif.go)
	pending int            // out-of-process frames being set up
	url     string         // the main frame's URL as last navigated
	loader  cdp.LoaderID   // the main frame's document, as last loaded
	// begun and painted are the main frame's last documents whose
	// lifecycle began ("init") and that painted ("firstPaint"), when the
	// browser sends lifecycle events (chromedp's pages do).
	begun, painted cdp.LoaderID
	closed         bool
}

func newPage(id string, ctx context.Context, cancel context.CancelFunc, opener string) *followedPage {
	pg := &followedPage{id: id, ctx: ctx, cancel: cancel, opener: opener, worlds: newWorlds()}
	if c := chromedp.FromContext(ctx); c != nil && c.Target != nil {
		pg.target = c.Target.TargetID
	}
	return pg
}

func (p *followedPage) currentURL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.url
}

// navigated notes the main frame's new URL; a new document (a load, not
// a history change within the document) comes with its loader.
func (p *followedPage) navigated(u string, loader cdp.LoaderID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.url = u
	if loader != "" {
		p.loader = loader
	}
}

// document names the page's current document (for the delta snapshot):
// the page and the loader of its main frame's last load.
func (p *followedPage) document() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.documentLocked()
}

func (p *followedPage) documentLocked() string { return p.id + "/" + string(p.loader) }

// lifecycle notes the main frame's lifecycle events.
func (p *followedPage) lifecycle(name string, loader cdp.LoaderID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch name {
	case "init":
		p.begun = loader
	case "firstPaint":
		p.painted = loader
	}
}

// shownDocument is the document a screencast frame arriving now shows:
// the current one, or "" (no document) when it has not painted yet. From
// a navigation's commit to the new document's first paint the browser
// may still show, and send frames of, the document before.
func (p *followedPage) shownDocument() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.begun == p.loader && p.loader != "" && p.painted != p.loader {
		return ""
	}
	return p.documentLocked()
}

func (p *followedPage) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// name is how progress lines and errors name the page.
func (p *followedPage) name() string {
	if p.id == "" {
		return "the first page"
	}
	return "page " + p.id
}

// setupPage enables the domains the recorder listens to on pg and
// installs its page scripts (pins, helper, rrweb) for every document to
// come; loaded says a document is already there (a popup followed after
// it loaded, a page attached to), which gets them at once as well.
func (s *session) setupPage(pg *followedPage, loaded bool) error {
	ctx := pg.ctx
	chromedp.Listen(ctx, s.pageEvents(pg))
	var err error
	pg.har, err = cdphar.Start(ctx, cdphar.Options{StepOf: s.st.currentStep, PageRef: pg.id})
	if err != nil {
		return err
	}
	rules, _ := json.Marshal(s.mask)
	helper := strings.Replace(pageJS, "const rules = __RULES__;", "const rules = "+string(rules)+";", 1)
	var scripts []string
	if s.cfg.Pins.any() {
		// The pins go in first: the page's own scripts, and the
		// recorder's, see the pinned clock and randomness from the start.
		scripts = append(scripts, s.cfg.Pins.script())
	}
	scripts = append(scripts, helper, rrwebScript())
	var calls []func() error
	if s.cfg.Pins.Network != nil {
		calls = append(calls, func() error {
			_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}})
			return err
		})
	}
	vp := s.vp
	calls = append(calls, []func() error{
		func() error {
			_, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
				Width: int64(vp.Width), Height: int64(vp.Height), DeviceScaleFactor: 1})
			return err
		},
		func() error { _, err := chromedp.Call(ctx, cdpruntime.Enable, struct{}{}); return err },
		func() error { _, err := chromedp.Call(ctx, page.Enable, page.EnableParams{}); return err },
		func() error {
			_, err := chromedp.Call(ctx, cdpruntime.AddBinding, cdpruntime.AddBindingParams{Name: domBinding})
			return err
		},
	}...)
	for _, src := range scripts {
		calls = append(calls, func() error {
			_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
			return err
		})
	}
	calls = append(calls, func() error { return s.enableLogs(ctx) }, func() error { return pauseFrames(ctx, s.raw) })
	if loaded {
		// The document there now got none of the scripts: run them in it
		// (each is idempotent, so a document that did get them is left
		// as it is). The pins are not: a loaded page's clock has run.
		for _, src := range scripts[len(scripts)-2:] {
			calls = append(calls, func() error {
				_, err := chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: src})
				return err
			})
		}
		calls = append(calls, func() error {
			res, err := chromedp.Call(ctx, page.GetFrameTree, struct{}{})
			if err == nil && res.FrameTree != nil && res.FrameTree.Frame != nil {
				pg.navigated(res.FrameTree.Frame.URL, res.FrameTree.Frame.LoaderID)
			}
			return err
		})
	}
	for _, call := range calls {
		if err := call(); err != nil {
			return fmt.Errorf("setting up %s: %w", pg.name(), err)
		}
	}
	return nil
}

// pageEvents is pg's CDP listener. It runs on chromedp's reader
// goroutine: it must not block or run commands, so anything that needs
// the browser goes to a goroutine.
func (s *session) pageEvents(pg *followedPage) func(ev any) {
	return func(ev any) {
		switch ev := ev.(type) {
		case *cdpruntime.EventBindingCalled:
			if ev.Name == domBinding {
				s.onDOM(pg, ev.Payload)
			}
		case *page.EventFrameNavigated:
			if ev.Frame != nil && ev.Frame.ParentID == "" {
				pg.navigated(ev.Frame.URL, ev.Frame.LoaderID)
			}
		case *page.EventNavigatedWithinDocument:
			if ev.FrameID == "" || string(ev.FrameID) == string(pg.target) {
				pg.navigated(ev.URL, "")
			}
		case *page.EventLifecycleEvent:
			if string(ev.FrameID) == string(pg.target) {
				pg.lifecycle(ev.Name, ev.LoaderID)
			}
		case *page.EventJavascriptDialogOpening:
			s.noteDialog(ev)
			go chromedp.Call(pg.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		case *fetch.EventRequestPaused:
			go s.onRequestPaused(pg, ev)
		case *page.EventScreencastFrame:
			s.onScreencastFrame(pg, ev)
		case *browser.EventDownloadWillBegin, *browser.EventDownloadProgress:
			s.cap.onEvent(ev, s.st.currentStep())
		case *target.EventAttachedToTarget:
			if ev.TargetInfo != nil && ev.TargetInfo.Type == "iframe" {
				startFrame(pg, ev, s.frameSetup(pg), &s.following)
			}
		default:
			if !pg.worlds.onEvent(ev) {
				s.onConsoleEvent(pg, ev)
			}
		}
	}
}

// frameSetup sets up pg's out-of-process frames as pg itself: the page
// helper and rrweb in the main world, rrweb's binding, console output.
func (s *session) frameSetup(pg *followedPage) frameSetup {
	rules, _ := json.Marshal(s.mask)
	helper := strings.Replace(pageJS, "const rules = __RULES__;", "const rules = "+string(rules)+";", 1)
	return frameSetup{scripts: []string{helper, rrwebScript()}, bindings: []string{domBinding},
		stepOf: s.st.currentStep, pageRef: pg.id, raw: s.raw, parentHAR: pg.har, onEvent: func(_ *remoteFrame, ev any) {
			switch ev := ev.(type) {
			case *cdpruntime.EventBindingCalled:
				if ev.Name == domBinding {
					s.onDOM(pg, ev.Payload)
				}
			case *cdpruntime.EventConsoleAPICalled, *cdpruntime.EventExceptionThrown:
				s.onConsoleEvent(pg, ev)
			}
		}}
}

// noteDialog notes a dialog in the current step's effects.
func (s *session) noteDialog(ev *page.EventJavascriptDialogOpening) {
	step := s.st.currentStep()
	s.mu.Lock()
	s.dialogs[step] = append(s.dialogs[step], event.Dialog{Type: string(ev.Type), Message: ev.Message})
	s.mu.Unlock()
}

// onScreencastFrame hands a frame of pg to the screencast's bookkeeping
// (reader goroutine).
func (s *session) onScreencastFrame(pg *followedPage, ev *page.EventScreencastFrame) {
	s.mu.Lock()
	f := s.frames
	s.mu.Unlock()
	if f == nil || f.pg != pg {
		// Not ours (setup has not begun the screencast's bookkeeping, or
		// it moved to another page): acknowledge it, or the browser sends
		// no more.
		go chromedp.Call(pg.ctx, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: ev.SessionID})
		return
	}
	f.offer(ev)
}

// opened is told (by capture, on the browser's reader goroutine) of a
// page a followed page opened: it names it and follows it on a goroutine
// of its own.
func (s *session) opened(tid target.ID, opener target.ID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := ""
	for _, p := range s.pages {
		if p.target == opener {
			by = p.id
		}
	}
	s.pageSeq++
	id := "p" + strconv.Itoa(s.pageSeq)
	s.following.Add(1)
	go s.follow(id, tid, by)
	return id
}

// follow attaches to a page another opened and sets it up like the
// first; it joins s.pages once it records.
//
// A popup the browser paused at its start (capture.hold) is set up
// before its document loads, then released: its document request is its
// own first HAR entry, in the step that opened it.
func (s *session) follow(id string, tid target.ID, opener string) {
	defer s.following.Done()
	// The target-created event comes before the attach of the paused
	// page, as a rule: wait a little for it.
	paused := s.cap.paused(tid, time.Second)
	defer s.cap.release(s.first.ctx, tid)
	ctx, cancel := chromedp.NewContext(s.first.ctx, chromedp.WithTargetID(tid))
	pg := newPage(id, ctx, cancel, opener)
	pg.target = tid
	// chromedp's own set-up of a paused page can fail part way (it has
	// no document to evaluate in yet); the session is there all the same.
	if err := chromedp.Do(ctx); err == nil || (paused && chromedp.FromContext(ctx).Target != nil) {
		_ = s.setupPage(pg, !paused)
	}
	s.mu.Lock()
	s.pages = append(s.pages, pg)
	s.mu.Unlock()
}

// closed is told (by capture) that a page's target went away.
func (s *session) closed(tid target.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pages {
		if p.target == tid {
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
		}
	}
}

// allPages is every page followed so far, the first first.
func (s *session) allPages() []*followedPage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*followedPage(nil), s.pages...)
}

// switchPage runs a switch step: the run's actions, snapshots and frames
// go to the named page from now on.
func (s *session) switchPage(to string, timeout time.Duration) *event.StepError {
	var pick *followedPage
	ok := s.poll(timeout, func() bool {
		pick = nil
		if to == flow.PageMain {
			pick = s.first
			return true
		}
		for _, p := range s.allPages() {
			if p != s.first && p != s.pg && !p.isClosed() && p.har != nil {
				pick = p // the newest
			}
		}
		return pick != nil
	})
	if !ok {
		return stepErr(CodeNotFound, "the step that opens the popup comes first: its receipt's effects.pages lists what opened",
			"no popup is open to switch to (waited %s)", timeout)
	}
	s.usePage(pick)
	return nil
}

// usePage makes pg the page steps act on; the screencast follows it.
func (s *session) usePage(pg *followedPage) {
	if pg == s.pg {
		return
	}
	s.frames.stop()
	s.pg = pg
	startFrames(s, pg)
}

// fallBack moves the run to the page's opener when the page it acts on
// closed (a popup's Close button): the next step acts where the run can.
func (s *session) fallBack() {
	for s.pg.isClosed() && s.pg != s.first {
		to := s.first
		for _, p := range s.allPages() {
			if p.id == s.pg.opener {
				to = p
			}
		}
		s.usePage(to)
	}
}
