package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
	"github.com/flightrec/flightrec/executor/flow"
)

// Step error codes. Each comes with a next step in the receipt.
const (
	CodeNotFound      = "NOT_FOUND"      // no element matches the target
	CodeAmbiguous     = "AMBIGUOUS"      // more than one visible element matches
	CodeNotActionable = "NOT_ACTIONABLE" // found, but hidden, disabled, covered or read-only
	CodeStaleRef      = "STALE_REF"      // the element left the page while the step acted on it
	CodeNotSettled    = "NOT_SETTLED"    // a wait's condition did not come true in time
	CodeExpectFailed  = "EXPECT_FAILED"  // an expected text is not on the page
	CodeStateMismatch = "STATE_MISMATCH" // a state check's answer is not what the flow expects
	CodeNavFailed     = "NAVIGATION_FAILED"
	CodeNoOption      = "NO_SUCH_OPTION"
	CodeBadTarget     = "BAD_TARGET"    // a selector the browser cannot parse
	CodeAppError      = "APP_ERROR"     // the step's request answered 5xx or failed
	CodePageError     = "PAGE_ERROR"    // the page threw an uncaught exception
	CodeBrowserError  = "BROWSER_ERROR" // the browser did not answer
)

// stepOutcome is how a step ended; stop ends the flow.
type stepOutcome struct {
	outcome string
	err     *event.StepError
	stop    bool
}

func stepErr(code, next, format string, args ...any) *event.StepError {
	return &event.StepError{Code: code, Message: fmt.Sprintf(format, args...), Next: next}
}

// runStep runs step n: snapshots before, the action, settling, the HAR
// entries it caused, snapshots after, the receipt, and a screenshot when
// it failed.
func (s *session) runStep(n int, step flow.Step) stepOutcome {
	s.st.setStep(n)
	on := s.pg // the page the step acts on (a switch step: the one it goes to)
	startURL := on.currentURL()
	s.snapshots("before")
	started := time.Now()
	timeout := step.Timeout
	if timeout <= 0 {
		timeout = s.cfg.StepTimeout
	}
	resolved, actErr := s.act(step, timeout)
	if step.Verb == flow.Switch {
		on, startURL = s.pg, s.pg.currentURL()
	}
	s.settle(2 * time.Second)
	// A download the step began is described once it ends (or the step's
	// timeout passes: then as it stands).
	files, popups, pages := s.cap.effects(n, timeout)
	entries := s.takeHAR()
	// A page that closed in the step (a popup's Close button): the rest
	// of the run goes on where it can.
	s.fallBack()
	s.sendHAR(entries)
	s.ensureFrame(n)
	s.snapshots("after")
	ended := time.Now()

	rc := event.Receipt{Step: n, Page: on.id, Action: actionOf(step), Resolved: resolved,
		StartedAt: started.UnixNano(), EndedAt: ended.UnixNano(),
		BrowserSeconds: ended.Sub(started).Seconds()}
	eff := &event.Effects{}
	if to := on.currentURL(); to != startURL && to != "" {
		eff.Navigation = &event.Navigation{From: startURL, To: to}
	}
	var appErr *event.StepError
	eff.Requests, appErr = s.requestEffects(entries, n)
	s.mu.Lock()
	eff.ConsoleErrors = s.consoleErrors[n]
	eff.Dialogs = s.dialogs[n]
	s.mu.Unlock()
	eff.SnapshotDelta = s.refs.delta()
	eff.Popups, eff.Pages, eff.Files = popups, pages, files
	// Kept bytes go before the receipt that names their CIDs.
	for _, d := range s.cap.takeKept(n) {
		s.st.emit(event.KindDownload, ended, d)
	}
	for _, f := range files {
		eff.Downloads = append(eff.Downloads, f.Name)
	}
	if eff.Navigation != nil || len(eff.Requests) > 0 || eff.ConsoleErrors > 0 || len(eff.Dialogs) > 0 || eff.SnapshotDelta != "" ||
		len(eff.Popups) > 0 || len(eff.Pages) > 0 || len(eff.Files) > 0 {
		rc.Effects = eff
	}
	misses := s.takeMisses(n)
	out := stepOutcome{outcome: event.OutcomeDone}
	switch {
	case actErr != nil:
		out = stepOutcome{outcome: event.OutcomeFailed, err: actErr, stop: true}
	case len(misses) > 0:
		m := misses[0]
		out = stepOutcome{outcome: event.OutcomeFailed, err: stepErr(CodeNetworkNotRecorded,
			"the run asked what the recording never did: rerun without --pin network (against the real API), or record the flow again",
			"%s %s is not in the recording (%d request(s) unanswered in this step)", m.method, m.url, len(misses))}
	case appErr != nil:
		out = stepOutcome{outcome: event.OutcomeFailed, err: appErr}
	default:
		if ex := s.pageException(n); ex != "" {
			out = stepOutcome{outcome: event.OutcomeFailed, err: stepErr(CodePageError,
				"open this step's console: the page threw an uncaught exception", "uncaught exception: %s", ex)}
		}
	}
	rc.Outcome, rc.Error = out.outcome, out.err
	s.st.emit(event.KindReceipt, ended, rc)
	if out.err != nil {
		s.screenshotOnFailure()
	}
	return out
}

// requestEffects lists the requests of entries that step n started, and
// the APP_ERROR of the first that answered 5xx or got no answer.
func (s *session) requestEffects(entries []cdphar.Taken, n int) ([]event.RequestEffect, *event.StepError) {
	var reqs []event.RequestEffect
	var appErr *event.StepError
	for _, e := range entries {
		if e.Step != n {
			continue
		}
		reqs = append(reqs, event.RequestEffect{Method: e.Method, URL: e.URL, Status: e.Status,
			Replayed: s.replayNote(e.Method, e.URL)})
		if appErr == nil {
			appErr = appError(e)
		}
	}
	return reqs, appErr
}

// appError is the APP_ERROR of a request the page made that answered 5xx
// or got no answer; nil for any other.
func appError(e cdphar.Taken) *event.StepError {
	if !causedByPage(e) {
		return nil
	}
	switch {
	case e.Status >= 500:
		return stepErr(CodeAppError, "open this step's network entry: the server answered with an error",
			"%s %s answered %d", e.Method, e.URL, e.Status)
	case e.Status == 0 && e.Failed != "" && e.Failed != "canceled" && !strings.Contains(e.Failed, "ERR_ABORTED"):
		return stepErr(CodeAppError, "open this step's network entry: the request got no answer",
			"%s %s failed: %s", e.Method, e.URL, e.Failed)
	}
	return nil
}

// causedByPage says whether a request is one whose failure is the app's:
// a document, a fetch or an XHR. A missing favicon is not a failed step.
func causedByPage(e cdphar.Taken) bool {
	switch e.Type {
	case "Document", "Fetch", "XHR", "":
		return !strings.HasSuffix(e.URL, "/favicon.ico")
	}
	return false
}

// actionOf is a step's action as a receipt names it. A fill's value is
// in args: the server's redaction erases it when the target is masked.
func actionOf(step flow.Step) event.Action {
	a := event.Action{Verb: string(step.Verb)}
	if t := step.Target; t != nil {
		a.Target = &event.Target{Frame: t.Frame, Role: t.Role, Name: t.Name, Selector: t.CSS}
	}
	args := map[string]any{}
	switch step.Verb {
	case flow.Goto:
		args["url"] = step.URL
	case flow.Fill, flow.Select:
		args["value"] = step.Value
	case flow.Press:
		args["key"] = step.Key
	case flow.Wait:
		args["wait"] = step.Wait
	case flow.Expect:
		args["expect"] = step.Expect
	case flow.Switch:
		args["page"] = step.Page
	case flow.Snapshot:
		args["view"] = step.View
	}
	if len(args) > 0 {
		a.Args, _ = json.Marshal(args)
	}
	return a
}

// act performs a step's action, waiting up to timeout for its target or
// condition.
func (s *session) act(step flow.Step, timeout time.Duration) (*event.Target, *event.StepError) {
	switch step.Verb {
	case flow.Goto:
		return nil, s.navigate(step.URL, timeout)
	case flow.Wait:
		return nil, s.wait(step.Wait, timeout)
	case flow.Expect:
		return nil, s.expect(step.Expect, timeout)
	case flow.Switch:
		return nil, s.switchPage(step.Page, timeout)
	case flow.Snapshot:
		return nil, s.fullSnapshot()
	case flow.Press:
		if step.Target == nil {
			return nil, s.pressKey(step.Key)
		}
	}
	deadline := time.Now().Add(timeout)
	var last *event.StepError
	for {
		el, resolved, e := s.resolve(*step.Target)
		if e == nil {
			var st elementState
			st, e = s.actionable(el, step.Verb == flow.Fill)
			if e == nil {
				e = s.perform(step, el, st)
				if e == nil {
					return resolved, nil
				}
			}
		}
		if e.Code == CodeBadTarget || e.Code == CodeNoOption || e.Code == CodeBrowserError {
			return resolved, e
		}
		last = e
		if time.Now().After(deadline) {
			if last.Code == CodeStaleRef || last.Code == CodeNotFound || last.Code == CodeAmbiguous || last.Code == CodeNotActionable {
				last.Message += fmt.Sprintf(" (waited %s)", timeout)
			}
			return resolved, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// element is a resolved page element.
type element struct {
	backend cdp.BackendNodeID
	object  cdpruntime.RemoteObjectID
	frame   *childFrame // the child frame it is in; nil: the top document
	// ctx reaches the element's document: the page's session, or an
	// out-of-process frame's own.
	ctx context.Context
}

// resolve finds the one visible element a target names, in the top
// document or, when the target names a frame, in that frame.
func (s *session) resolve(t flow.Target) (element, *event.Target, *event.StepError) {
	ctx := s.pg.ctx
	doc, err := chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{Depth: ptr(int64(0))})
	if err != nil {
		return element{}, nil, stepErr(CodeBrowserError, "check that the browser is still running", "reading the document: %v", err)
	}
	root := doc.Root.NodeID
	var frame *childFrame
	if t.Frame != "" {
		var e *event.StepError
		if frame, root, e = s.frameDocument(t.Frame); e != nil {
			return element{}, nil, e
		}
		if frame.sess != nil {
			ctx = frame.sess
		}
	}
	var ids []cdp.BackendNodeID
	if t.CSS != "" {
		res, err := chromedp.Call(ctx, dom.QuerySelectorAll, dom.QuerySelectorAllParams{NodeID: root, Selector: t.CSS})
		if err != nil {
			if strings.Contains(err.Error(), "not valid") || strings.Contains(err.Error(), "-32000") {
				return element{}, nil, stepErr(CodeBadTarget, "fix the selector in the flow file", "css %q is not a valid selector", t.CSS)
			}
			return element{}, nil, stepErr(CodeStaleRef, "the page changed while the step looked; it is retried", "querying %s: %v", t, err)
		}
		for _, id := range res.NodeIDs {
			d, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{NodeID: id})
			if err == nil && d.Node != nil {
				ids = append(ids, d.Node.BackendNodeID)
			}
		}
	} else {
		res, err := chromedp.Call(ctx, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{
			NodeID: root, AccessibleName: t.Name, Role: t.Role})
		if err != nil {
			return element{}, nil, stepErr(CodeStaleRef, "the page changed while the step looked; it is retried", "querying %s: %v", t, err)
		}
		for _, n := range res.Nodes {
			if !n.Ignored && n.BackendDOMNodeID != 0 {
				ids = append(ids, n.BackendDOMNodeID)
			}
		}
	}
	if len(ids) == 0 {
		return element{}, nil, stepErr(CodeNotFound, "the interactive snapshot lists what the page offers; fix the target or wait for it",
			"no element matches %s", t)
	}
	var found []element
	for _, id := range ids {
		r, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: id})
		if err != nil || r.Object == nil {
			continue
		}
		vis, err := callOn[bool](ctx, r.Object.ObjectID, `function() {
			const r = this.getBoundingClientRect(), st = getComputedStyle(this);
			return r.width > 0 && r.height > 0 && st.visibility !== "hidden" && st.display !== "none";
		}`)
		if err == nil && vis {
			found = append(found, element{backend: id, object: r.Object.ObjectID, frame: frame, ctx: ctx})
		}
	}
	switch {
	case len(found) == 0:
		return element{}, nil, stepErr(CodeNotActionable, "the element exists but is not visible; wait for it to show",
			"%s matches %d element(s), none visible", t, len(ids))
	case len(found) > 1:
		return element{}, nil, stepErr(CodeAmbiguous, "name the target more precisely (role and name, or a unique css selector)",
			"%s matches %d visible elements", t, len(found))
	}
	el := found[0]
	key := s.pg.id
	if frame != nil {
		key += frame.key
	}
	resolved := &event.Target{Ref: s.refs.ref(key, el.backend), Frame: t.Frame, Role: t.Role, Name: t.Name, Selector: t.CSS}
	if t.CSS != "" {
		if role, name, ok := axOf(ctx, el.backend); ok {
			resolved.Role, resolved.Name = role, name
		}
	}
	return el, resolved, nil
}

// axOf is an element's accessibility role and name (ctx: the session
// that reaches its document).
func axOf(ctx context.Context, id cdp.BackendNodeID) (role, name string, ok bool) {
	res, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{
		BackendNodeID: id, FetchRelatives: ptr(false)})
	if err != nil || len(res.Nodes) == 0 {
		return "", "", false
	}
	n := res.Nodes[0]
	return axString(n.Role), axString(n.Name), true
}

// elementState is the answer of the page helper's state().
type elementState struct {
	State string  `json:"state"`
	By    string  `json:"by"`
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
}

// actionable checks the element can take the action now and returns
// where to point at it.
//
// In a child frame the helper answers in the frame's viewport; the frame
// element is scrolled into view first and its content box's corner added,
// so the point is the top page's (where input events go).
func (s *session) actionable(el element, editable bool) (elementState, *event.StepError) {
	if el.frame != nil {
		_, _ = chromedp.Call(s.pg.ctx, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{BackendNodeID: el.frame.owner})
	}
	st, err := callOn[elementState](el.ctx, el.object,
		`function(editable) { return window.__flightrec.state(this, editable); }`, editable)
	if err != nil {
		return st, stepErr(CodeStaleRef, "the element left the page; take a new snapshot", "the element is gone: %v", err)
	}
	switch st.State {
	case "ok":
		if el.frame != nil {
			x, y, _, _, ok := ownerQuad(s.pg.ctx, el.frame)
			if !ok {
				return st, stepErr(CodeNotActionable, "wait until the frame is visible", "the frame %q is not rendered", el.frame.label())
			}
			st.X, st.Y = st.X+x, st.Y+y
		}
		return st, nil
	case "detached":
		return st, stepErr(CodeStaleRef, "the element left the page; take a new snapshot", "the element left the page")
	case "covered":
		return st, stepErr(CodeNotActionable, "close what covers it (a dialog, a banner) or wait for it to go",
			"the element is covered by %s", st.By)
	default:
		return st, stepErr(CodeNotActionable, "wait until the element is visible and enabled", "the element is %s", st.State)
	}
}

// perform does a step's action on a resolved, actionable element.
func (s *session) perform(step flow.Step, el element, st elementState) *event.StepError {
	// The element's session: text typed into an out-of-process frame goes
	// to that frame's widget.
	ctx := el.ctx
	switch step.Verb {
	case flow.Click:
		return s.click(st.X, st.Y)
	case flow.Check:
		checked, err := callOn[bool](ctx, el.object, `function() { return !!this.checked || this.getAttribute("aria-checked") === "true"; }`)
		if err != nil {
			return stepErr(CodeStaleRef, "the element left the page; take a new snapshot", "reading the element: %v", err)
		}
		if checked {
			return nil
		}
		if e := s.click(st.X, st.Y); e != nil {
			return e
		}
		checked, _ = callOn[bool](ctx, el.object, `function() { return !!this.checked || this.getAttribute("aria-checked") === "true"; }`)
		if !checked {
			return stepErr(CodeNotActionable, "check that the element is a checkbox, radio or switch", "the element did not become checked")
		}
		return nil
	case flow.Fill:
		if _, err := callOn[bool](ctx, el.object, `function() {
			this.focus();
			if (typeof this.select === "function") this.select();
			else { const r = document.createRange(); r.selectNodeContents(this); const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
			return true;
		}`); err != nil {
			return stepErr(CodeStaleRef, "the element left the page; take a new snapshot", "focusing the element: %v", err)
		}
		var err error
		if step.Value == "" {
			err = s.key("Delete")
		} else {
			_, err = chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: step.Value})
		}
		if err != nil {
			return stepErr(CodeBrowserError, "check that the browser is still running", "typing: %v", err)
		}
		// The change event a person's typing fires when focus leaves.
		_, _ = callOn[bool](ctx, el.object, `function() { this.dispatchEvent(new Event("change", {bubbles: true})); return true; }`)
		return nil
	case flow.Select:
		ok, err := callOn[bool](ctx, el.object, `function(v) {
			if (this.localName !== "select") return false;
			const opt = Array.from(this.options).find(o => o.value === v) || Array.from(this.options).find(o => o.label === v || o.text.trim() === v);
			if (!opt) return false;
			this.value = opt.value;
			this.dispatchEvent(new Event("input", {bubbles: true}));
			this.dispatchEvent(new Event("change", {bubbles: true}));
			return true;
		}`, step.Value)
		if err != nil {
			return stepErr(CodeStaleRef, "the element left the page; take a new snapshot", "selecting: %v", err)
		}
		if !ok {
			return stepErr(CodeNoOption, "the interactive snapshot lists the element; check its options", "no option %q in %s", step.Value, step.Target)
		}
		return nil
	case flow.Press:
		if _, err := callOn[bool](ctx, el.object, `function() { this.focus(); return true; }`); err != nil {
			return stepErr(CodeStaleRef, "the element left the page; take a new snapshot", "focusing the element: %v", err)
		}
		return s.pressKey(step.Key)
	}
	return stepErr(CodeBadTarget, "", "verb %s takes no target", step.Verb)
}

// click moves the mouse to (x, y) and clicks there, as a person would.
func (s *session) click(x, y float64) *event.StepError {
	s.mu.Lock()
	s.cursor = &event.Point{X: int(x), Y: int(y)}
	s.mu.Unlock()
	for _, p := range []input.DispatchMouseEventParams{
		{Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y},
		{Type: input.DispatchMouseEventTypeMousePressed, X: x, Y: y, Button: input.MouseButtonLeft, Buttons: 1, ClickCount: 1},
		{Type: input.DispatchMouseEventTypeMouseReleased, X: x, Y: y, Button: input.MouseButtonLeft, ClickCount: 1},
	} {
		if _, err := chromedp.Call(s.pg.ctx, input.DispatchMouseEvent, p); err != nil {
			if p.Type == input.DispatchMouseEventTypeMouseReleased && errors.Is(err, chromedp.ErrTargetDetached) {
				// The click closed its page (a popup's own Close): the
				// release was dispatched, and the page went before it
				// answered. fallBack moves the run to the opener.
				return nil
			}
			return stepErr(CodeBrowserError, "check that the browser is still running", "clicking: %v", err)
		}
	}
	return nil
}

// keys are the named keys a press step may use: key, code and Windows
// virtual key code, and the text the key types.
var keys = map[string]struct {
	code string
	vk   int64
	text string
}{
	"Enter": {"Enter", 13, "\r"}, "Tab": {"Tab", 9, ""}, "Escape": {"Escape", 27, ""},
	"Backspace": {"Backspace", 8, ""}, "Delete": {"Delete", 46, ""}, "Space": {"Space", 32, " "},
	"ArrowUp": {"ArrowUp", 38, ""}, "ArrowDown": {"ArrowDown", 40, ""},
	"ArrowLeft": {"ArrowLeft", 37, ""}, "ArrowRight": {"ArrowRight", 39, ""},
	"Home": {"Home", 36, ""}, "End": {"End", 35, ""}, "PageUp": {"PageUp", 33, ""}, "PageDown": {"PageDown", 34, ""},
}

func (s *session) pressKey(name string) *event.StepError {
	if err := s.key(name); err != nil {
		return stepErr(CodeBrowserError, "check that the browser is still running", "pressing %s: %v", name, err)
	}
	return nil
}

// key sends one key press: a named key, or a single character.
func (s *session) key(name string) error {
	k, ok := keys[name]
	keyName := name
	if name == "Space" {
		keyName = " "
	}
	if !ok {
		if len([]rune(name)) != 1 {
			return fmt.Errorf("unknown key %q", name)
		}
		k.text = name
		k.code = "Key" + strings.ToUpper(name)
	}
	down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: keyName, Code: k.code, WindowsVirtualKeyCode: k.vk, Text: k.text}
	if k.text == "" {
		down.Type = input.DispatchKeyEventTypeRawKeyDown
	}
	if _, err := chromedp.Call(s.pg.ctx, input.DispatchKeyEvent, down); err != nil {
		return err
	}
	_, err := chromedp.Call(s.pg.ctx, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Key: keyName, Code: k.code, WindowsVirtualKeyCode: k.vk})
	return err
}

// navigate loads url in the tab and waits for its load event.
func (s *session) navigate(url string, timeout time.Duration) *event.StepError {
	ctx, cancel := context.WithTimeout(s.pg.ctx, timeout)
	defer cancel()
	loaded := make(chan struct{}, 1)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	chromedp.Listen(lctx, func(ev any) {
		if _, ok := ev.(*page.EventLoadEventFired); ok {
			select {
			case loaded <- struct{}{}:
			default:
			}
		}
	})
	res, err := chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: url})
	if err != nil {
		return stepErr(CodeNavFailed, "check that the app is running at that address", "loading %s: %v", url, err)
	}
	if res.ErrorText != "" {
		return stepErr(CodeNavFailed, "check that the app is running at that address", "loading %s: %s", url, res.ErrorText)
	}
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return stepErr(CodeNotSettled, "the page loads slowly: raise the step's timeout", "%s did not finish loading within %s", url, timeout)
	}
}

// settle waits, at most max, until no request is in flight and the DOM
// has not changed for a short quiet time, so what a step caused is in
// its HAR entries and its after snapshot.
func (s *session) settle(max time.Duration) bool {
	const quiet = 150 * time.Millisecond
	deadline := time.Now().Add(max)
	lastMut, lastChange := -1, time.Now()
	for time.Now().Before(deadline) {
		m, err := evaluate[int](s.pg.ctx, `window.__flightrec ? window.__flightrec.mutations() : -1`)
		if err != nil {
			m = -2 // mid-navigation: not settled
		}
		if m != lastMut || s.pg.har.InFlight() > 0 {
			lastMut, lastChange = m, time.Now()
		} else if time.Since(lastChange) >= quiet {
			ctx, cancel := context.WithTimeout(s.pg.ctx, time.Until(deadline))
			err := s.pg.har.WaitIdle(ctx, 50*time.Millisecond)
			cancel()
			return err == nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return false
}

// wait runs a wait step.
func (s *session) wait(w *flow.WaitFor, timeout time.Duration) *event.StepError {
	switch {
	case w.Settled:
		if !s.settle(timeout) {
			return stepErr(CodeNotSettled, "something keeps loading or changing: raise the timeout or wait for a text", "the page did not settle within %s", timeout)
		}
		return nil
	case w.Text != "":
		if !s.poll(timeout, func() bool { return s.pageHasText(w.Text) }) {
			return stepErr(CodeNotSettled, "the content snapshot after this step shows what the page says", "text %q did not appear within %s", w.Text, timeout)
		}
		return nil
	case w.URL != "":
		if !s.poll(timeout, func() bool { return urlMatches(w.URL, s.pg.currentURL()) }) {
			return stepErr(CodeNotSettled, "the receipt's navigation shows where the page went", "the URL did not become %s within %s (it is %s)", w.URL, timeout, s.pg.currentURL())
		}
		return nil
	}
	return nil
}

// poll checks cond every 50ms until it holds or timeout passes.
func (s *session) poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *session) pageHasText(t string) bool {
	text, err := evaluate[string](s.pg.ctx, `window.__flightrec ? window.__flightrec.text() : (document.body ? document.body.innerText : "")`)
	return err == nil && strings.Contains(normalizeSpace(text), normalizeSpace(t))
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// urlMatches matches a URL against a pattern where * is any run of
// characters.
func urlMatches(pattern, u string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == u
	}
	if !strings.HasPrefix(u, parts[0]) {
		return false
	}
	u = u[len(parts[0]):]
	for i, p := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(u, p)
		}
		k := strings.Index(u, p)
		if k < 0 {
			return false
		}
		u = u[k+len(p):]
	}
	return true
}

// callOn calls fn with this bound to the object and returns its result
// by value.
func callOn[T any](ctx context.Context, obj cdpruntime.RemoteObjectID, fn string, args ...any) (T, error) {
	var out T
	p := cdpruntime.CallFunctionOnParams{FunctionDeclaration: fn, ObjectID: obj, ReturnByValue: ptr(true), AwaitPromise: ptr(true)}
	for _, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return out, err
		}
		p.Arguments = append(p.Arguments, &cdpruntime.CallArgument{Value: b})
	}
	res, err := chromedp.Call(ctx, cdpruntime.CallFunctionOn, p)
	if err != nil {
		return out, err
	}
	return resultValue[T](res.Result, res.ExceptionDetails)
}

// evaluate evaluates expr in the page's main world (or the recorder's
// isolated world when attached: inWorld) and returns its value.
func evaluate[T any](ctx context.Context, expr string) (T, error) {
	var out T
	res, err := chromedp.Call(ctx, cdpruntime.Evaluate, inWorld(ctx, cdpruntime.EvaluateParams{Expression: expr, ReturnByValue: ptr(true), AwaitPromise: ptr(true)}))
	if err != nil {
		return out, err
	}
	return resultValue[T](res.Result, res.ExceptionDetails)
}

// resultValue decodes a by-value call result, or the exception it threw.
func resultValue[T any](r *cdpruntime.RemoteObject, exc *cdpruntime.ExceptionDetails) (T, error) {
	var out T
	if exc != nil {
		return out, errors.New(exceptionText(exc))
	}
	if r == nil || len(r.Value) == 0 {
		return out, nil
	}
	err := json.Unmarshal(r.Value, &out)
	return out, err
}

func exceptionText(d *cdpruntime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		first, _, _ := strings.Cut(d.Exception.Description, "\n")
		return first
	}
	return d.Text
}

func ptr[T any](v T) *T { return &v }
