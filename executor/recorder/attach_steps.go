package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/dom"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
)

// RuleObserved marks a receipt whose step was inferred from what the page
// observed (record --attach), not run from a flow.
const RuleObserved = "observed"

// stepMax bounds how long an observed step waits to settle before its
// receipt is written anyway.
const stepMax = 10 * time.Second

// An observation is one step inferred from the page: a trusted input the
// page saw (attach.js) or a top-level navigation the browser was told to
// make. Steps are numbered as they are observed, on the reader goroutine,
// so a request the input causes is already in its step; the receipt is
// written by the stepper when the step settled or the next one began.
type observation struct {
	n    int
	p    *attachedPage
	verb string // click, check, fill, press, select, submit, goto
	el   int64  // the element's id in attach.js
	// world is the recorder's world the input was seen in (its frame's:
	// el is that document's id); 0 for a goto.
	world cdpruntime.ExecutionContextID
	// remote is the out-of-process frame whose session world is in; nil:
	// the page's session.
	remote *remoteFrame
	key    string
	url    string
	masked bool
	from   string // the page's URL when it was observed
	at     time.Time
	// fallback is attach.js's own description of the target, for when the
	// accessibility tree cannot be asked (the element left the page).
	fallback event.Target
	resolved chan *event.Target
	// seen are the page's views read the moment the step was observed,
	// before the page reacted: the step's before and its predecessor's
	// after.
	seen     chan views
	seenOnce sync.Once
	seenVal  views

	value  string    // under stepper.mu: a fill's latest value
	closed bool      // under stepper.mu: no more input extends it
	to     string    // under stepper.mu: the page's URL when the next step began
	endAt  time.Time // under stepper.mu: when the next step began
	before bool      // a before view was taken (else the step has no delta)
}

// stepper turns observations into steps with receipts, one at a time.
type stepper struct {
	a    *attachment
	obs  chan *observation
	quit chan struct{}
	done chan struct{}
	last atomic.Int64 // the newest step's number

	mu      sync.Mutex
	newest  *observation
	byStep  map[int][]cdphar.Taken // HAR entries taken, by the step they started in
	failed  []StepResult
	written int
}

func newStepper(a *attachment) *stepper {
	return &stepper{a: a, obs: make(chan *observation, 4096), quit: make(chan struct{}), done: make(chan struct{}),
		byStep: map[int][]cdphar.Taken{}}
}

// observed is the step a request starting now belongs to (cdphar's StepOf).
func (s *stepper) observed() int { return int(s.last.Load()) }

// input takes one report of attach.js from the world of the frame it
// runs in (reader goroutine).
func (s *stepper) input(p *attachedPage, remote *remoteFrame, world cdpruntime.ExecutionContextID, payload string) {
	var in struct {
		Type   string `json:"type"`
		ID     int64  `json:"id"`
		Role   string `json:"role"`
		Name   string `json:"name"`
		Value  string `json:"value"`
		Masked bool   `json:"masked"`
		Key    string `json:"key"`
		TS     int64  `json:"ts"` // the page's clock, ms: when the input happened
	}
	if json.Unmarshal([]byte(payload), &in) != nil || in.Type == "" {
		return
	}
	s.mu.Lock()
	if o := s.newest; in.Type == "fill" && o != nil && o.verb == "fill" && o.p == p && o.remote == remote && o.world == world && o.el == in.ID && !o.closed {
		// The next input event of the same field is the same fill.
		o.value = in.Value
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	o := &observation{p: p, verb: in.Type, el: in.ID, world: world, remote: remote, key: in.Key, value: in.Value, masked: in.Masked,
		fallback: event.Target{Role: in.Role, Name: in.Name}}
	s.begin(o, time.UnixMilli(in.TS))
	go s.resolve(o)
}

// navigated takes a main-frame navigation the page did not ask for: the
// driving client's goto (reader goroutine).
func (s *stepper) navigated(p *attachedPage, url string, at time.Time) {
	o := &observation{p: p, verb: "goto", url: url}
	s.begin(o, at)
	o.resolved <- nil
}

// begin numbers an observation that happened at (when the browser says;
// now when it did not) and queues it. Under load the events can reach the
// recorder in a burst, so their own time is the step's start.
func (s *stepper) begin(o *observation, at time.Time) {
	if at.Unix() <= 0 || at.After(time.Now()) {
		at = time.Now()
	}
	o.at, o.from = at, o.p.pg.currentURL()
	o.resolved = make(chan *event.Target, 1)
	o.seen = make(chan views, 1)
	go func() { o.seen <- o.p.s.views() }()
	s.mu.Lock()
	o.n = int(s.last.Add(1))
	if prev := s.newest; prev != nil && prev.to == "" {
		prev.to, prev.endAt = o.from, o.at
	}
	s.newest = o
	s.mu.Unlock()
	// From now on what the page does (requests, console, DOM, frames) is
	// this step's.
	s.a.st.setStep(o.n)
	select {
	case s.obs <- o:
	default: // thousands of steps behind: this one is left out
	}
}

// resolve names an observation's element by the accessibility tree, at
// once, before the page moves on.
func (s *stepper) resolve(o *observation) {
	t := o.fallback
	defer func() { o.resolved <- &t }()
	ps, pg := o.p.s, o.p.pg
	ctx, cancel := context.WithTimeout(pg.ctx, 5*time.Second)
	defer cancel()
	// Asked in the world that saw the input: a child frame's element is
	// its own document's, with a ref of the frame's (@f1e2). An
	// out-of-process frame's world is its own session's.
	key := pg.id
	frame, child := pg.worlds.frameOf(o.world)
	pageCtx := ctx
	if o.remote != nil {
		frame, child = o.remote.root(), true
		ctx, cancel = context.WithTimeout(o.remote.ctx, 5*time.Second)
		defer cancel()
	}
	if child = child && frame != o.p.w.mainFrame(); child {
		key += pg.worlds.key(frame)
	}
	res, err := chromedp.Call(ctx, cdpruntime.Evaluate, cdpruntime.EvaluateParams{ContextID: o.world,
		Expression: fmt.Sprintf("window.__flightrecAttach ? window.__flightrecAttach.el(%d) : null", o.el)})
	if err != nil || res.Result == nil || res.Result.ObjectID == "" {
		return
	}
	defer chromedp.Call(ctx, cdpruntime.ReleaseObject, cdpruntime.ReleaseObjectParams{ObjectID: res.Result.ObjectID})
	d, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{ObjectID: res.Result.ObjectID})
	if err != nil || d.Node == nil {
		return
	}
	t.Ref = ps.refs.ref(key, d.Node.BackendNodeID)
	if role, name, ok := axOf(ctx, d.Node.BackendNodeID); ok && role != "" && role != "generic" && role != "none" {
		t.Role, t.Name = role, name
	}
	if child {
		// The frame as a flow's target names it (frame "Payment card").
		frames, _ := childFrames(pageCtx, pg)
		for _, f := range frames {
			if f.id == frame {
				t.Frame = f.label()
			}
		}
	}
}

// run writes the steps' receipts in order until stop.
func (s *stepper) run() {
	defer close(s.done)
	for {
		var o *observation
		select {
		case o = <-s.obs:
		case <-s.quit:
			select {
			case o = <-s.obs:
				s.before(o)
				s.drain(o)
			default:
			}
			return
		}
		for o != nil {
			s.before(o)
			next, quit := s.wait(o)
			if quit {
				s.drain(o)
				return
			}
			s.finish(o, next)
			o = next
		}
	}
}

// drain writes the receipts of o and of the steps still queued when the
// recording stops: each gets its chance to settle, so the last step's
// answers are in it.
func (s *stepper) drain(o *observation) {
	for o != nil {
		var next *observation
		select {
		case next = <-s.obs:
		default:
			o.p.s.settle(2 * time.Second)
		}
		s.finish(o, next)
		if o = next; o != nil {
			s.before(o)
		}
	}
}

// before sends o's before views.
func (s *stepper) before(o *observation) {
	if v, ok := o.views(); ok {
		o.p.s.sendViews(v, "before", o.n)
		o.before = true
	}
}

// views are the views read when o was observed; ok is false when they did
// not come (the page is gone).
func (o *observation) views() (views, bool) {
	o.seenOnce.Do(func() {
		select {
		case o.seenVal = <-o.seen:
		case <-time.After(10 * time.Second):
		}
	})
	return o.seenVal, !o.seenVal.ts.IsZero()
}

// wait returns when o settled (next nil: no request in flight and the DOM
// quiet for a moment, as settle judges), the next step began, or stop.
// Unlike settle it hears the next step at once: a driver acts every few
// milliseconds, and a late step boundary would give o what the next did.
func (s *stepper) wait(o *observation) (next *observation, quit bool) {
	const quiet = 150 * time.Millisecond
	pg := o.p.pg
	lastMut, lastChange := -1, time.Now()
	for deadline := time.Now().Add(stepMax); time.Now().Before(deadline) || o.verb == "fill"; {
		m, err := evaluate[int](pg.ctx, `window.__flightrec ? window.__flightrec.mutations() : -1`)
		if err != nil {
			m = -2 // between documents: not settled
		}
		if m != lastMut || pg.har.InFlight() > 0 {
			lastMut, lastChange = m, time.Now()
		} else if time.Since(lastChange) >= quiet && o.verb != "fill" {
			// A fill stays open until the next step: a client typing
			// key by key pauses longer than a settled page.
			return nil, false
		}
		select {
		case next = <-s.obs:
			return next, false
		case <-s.quit:
			return nil, true
		case <-time.After(25 * time.Millisecond):
		}
	}
	return nil, false
}

// finish writes o's receipt: what it did to what, its effects, and
// whether the page says it failed.
//
// A step the next one superseded before it settled is written as it
// stood when the next began: its after views are the ones read the moment
// the next input was seen, its end is then, and its frames and failure
// screenshot are left to the screencast (they would land in the next
// step).
func (s *stepper) finish(o, next *observation) {
	ps := o.p.s
	superseded, after := next != nil, true
	if superseded {
		var v views
		if v, after = next.views(); after && next.p == o.p {
			ps.sendViews(v, "after", o.n)
		}
	} else {
		ps.ensureFrame(o.n)
		ps.snapshotsAt("after", o.n)
	}
	var resolved *event.Target
	select {
	case resolved = <-o.resolved:
	case <-time.After(5 * time.Second):
	}
	// A download the step began is described once it ends (or as it
	// stands after downloadWait), before the step's requests are taken:
	// its type is the response's that became it.
	files, _, _ := s.a.cap.effects(o.n, downloadWait)
	s.takeHAR()
	ended := time.Now()
	s.mu.Lock()
	o.closed = true
	value, to, endAt := o.value, o.to, o.endAt
	entries := s.byStep[o.n]
	s.mu.Unlock()
	if to == "" {
		to = o.p.pg.currentURL()
	}
	if endAt.IsZero() {
		endAt = ended
	}

	rc := event.Receipt{Step: o.n, Action: o.action(value, resolved), Resolved: resolved, Rule: RuleObserved,
		StartedAt: o.at.UnixNano(), EndedAt: endAt.UnixNano(), BrowserSeconds: endAt.Sub(o.at).Seconds()}
	eff := &event.Effects{}
	if to != o.from && to != "" {
		eff.Navigation = &event.Navigation{From: o.from, To: to}
	}
	var appErr *event.StepError
	eff.Requests, appErr = ps.requestEffects(entries, o.n)
	ps.mu.Lock()
	eff.ConsoleErrors = ps.consoleErrors[o.n]
	eff.Dialogs = ps.dialogs[o.n]
	ps.mu.Unlock()
	if o.before && after {
		eff.SnapshotDelta = s.a.refs.delta()
	}
	eff.Files = files
	for i, f := range eff.Files {
		eff.Downloads = append(eff.Downloads, f.Name)
		eff.Files[i].MIME = responseType(entries, f.URL)
	}
	if eff.Navigation != nil || len(eff.Requests) > 0 || eff.ConsoleErrors > 0 || len(eff.Dialogs) > 0 || eff.SnapshotDelta != "" ||
		len(eff.Files) > 0 {
		rc.Effects = eff
	}
	rc.Outcome = event.OutcomeDone
	if appErr == nil {
		if ex := ps.pageException(o.n); ex != "" {
			appErr = stepErr(CodePageError, "open this step's console: the page threw an uncaught exception", "uncaught exception: %s", ex)
		}
	}
	if appErr != nil {
		rc.Outcome, rc.Error = event.OutcomeFailed, appErr
	}
	s.a.st.emitAt(event.KindReceipt, ended, o.n, rc)
	if appErr != nil && !superseded {
		ps.screenshotOnFailure()
	}
	s.mu.Lock()
	s.written++
	if appErr != nil {
		s.failed = append(s.failed, StepResult{Step: o.n, Verb: o.verb, Code: appErr.Code, Message: appErr.Message})
	}
	s.mu.Unlock()
	if log := s.a.cfg.Log; log != nil {
		line := fmt.Sprintf("step %d %s %s: %s", o.n, o.verb, describeObserved(rc), rc.Outcome)
		if appErr != nil {
			line += " " + appErr.Code + ": " + appErr.Message
		}
		fmt.Fprintln(log, line)
	}
}

// downloadWait bounds how long a receipt waits for its step's downloads
// to end.
const downloadWait = 10 * time.Second

// responseType is the MIME type the server gave the response to url
// among entries ("" when none answered). A download's request ends
// aborted, as the browser hands the response over to the download.
func responseType(entries []cdphar.Taken, url string) string {
	for _, e := range entries {
		var h event.HAR
		if e.URL == url && json.Unmarshal(e.Entry, &h) == nil && h.Response.Content.MimeType != "" {
			return h.Response.Content.MimeType
		}
	}
	return ""
}

func describeObserved(rc event.Receipt) string {
	if t := rc.Action.Target; t != nil {
		return fmt.Sprintf("%s %q", t.Role, t.Name)
	}
	return ""
}

// action is the receipt's action: the verb, the target as the tree named
// it, and the arguments a flow step would have. A fill's value goes as
// the reference recorder sends it: the server erases it when the target
// is masked (and attach.js reported masked fields, so the snapshots and
// rrweb never carry it).
func (o *observation) action(value string, resolved *event.Target) event.Action {
	a := event.Action{Verb: o.verb}
	if resolved != nil {
		a.Target = &event.Target{Frame: resolved.Frame, Role: resolved.Role, Name: resolved.Name}
	}
	args := map[string]any{}
	switch o.verb {
	case "goto":
		args["url"] = o.url
	case "fill", "select":
		args["value"] = value
	case "press":
		args["key"] = o.key
	}
	if len(args) > 0 {
		a.Args, _ = json.Marshal(args)
	}
	return a
}

// takeHAR sends the entries of every page that ended and keeps them by
// step for the receipts.
func (s *stepper) takeHAR() {
	for _, p := range s.a.pageList() {
		entries := p.pg.har.Take(false)
		p.s.sendHAR(entries)
		s.mu.Lock()
		for _, e := range entries {
			s.byStep[e.Step] = append(s.byStep[e.Step], e)
		}
		s.mu.Unlock()
	}
}

// stop ends the stepper after the step under way, and notes what failed
// outside every step (before the first, or on a page no step was on).
func (s *stepper) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	if s.a.ready.Load() {
		<-s.done
	}
	s.takeHAR()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.byStep[0] {
		if err := appError(e); err != nil {
			s.failed = append(s.failed, StepResult{Step: 0, Verb: "observe", Code: err.Code, Message: err.Message})
			break
		}
	}
	for _, p := range s.a.pageList() {
		p.s.mu.Lock()
		ex := p.s.exceptions[0]
		p.s.mu.Unlock()
		if ex != "" {
			s.failed = append(s.failed, StepResult{Step: 0, Verb: "observe", Code: CodePageError, Message: "uncaught exception: " + ex})
			break
		}
	}
}

// outcome is how many steps were written and which failed.
func (s *stepper) outcome() (int, []StepResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written, append([]StepResult(nil), s.failed...)
}
