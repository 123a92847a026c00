// Package cdphar records HAR 1.2 entries from a Chromium tab over the
// Chrome DevTools Protocol. A Recorder listens to a chromedp target's
// Network domain and turns each request (each hop of a redirect chain) into
// one HAR entry, the payload of one `har` event.
//
// The raw headers come from the ExtraInfo events, so the entries hold what
// went over the wire, Cookie and every Set-Cookie line included: an entry
// is as secret as the traffic. Redaction is ingest's job, not this
// package's; never write entries anywhere before they went through it.
package cdphar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// DefaultMaxBody is the largest response or request body a Recorder keeps
// unless Options say otherwise. The server caps stored bodies far lower
// (event.MaxHARBody) after redaction has scanned the whole body.
const DefaultMaxBody = 8 << 20

// Options tune a Recorder. The zero value is usable.
type Options struct {
	// MaxBody bounds a body kept whole; a larger body is left out (with a
	// comment saying so), never cut, so no half of a secret is kept.
	// 0 means DefaultMaxBody; < 0 means no bodies at all.
	MaxBody int
	// BodyTimeout bounds one Network.getResponseBody call (default 10s).
	BodyTimeout time.Duration
	// Parallel bounds concurrent body fetches (default 4).
	Parallel int
	// StepOf, when set, is asked for the current step when a request
	// starts; Take reports it with the request's entry.
	StepOf func() int
	// PageRef, when set, is every entry's pageref: the page (of several
	// a recording follows) whose requests this recorder sees.
	PageRef string
	// From, when set, is the recorder of the session a request of this
	// one's can start on: an out-of-process frame's document is requested
	// on its parent's session, and its response arrives on the frame's
	// own. A response to a request this recorder never saw takes the
	// request over from From (one entry, with both halves).
	From *Recorder
}

// Recorder collects HAR entries from one chromedp target. Start it before
// the navigation whose traffic it should see. Its methods are safe for
// concurrent use; the events arrive on chromedp's reader goroutine.
type Recorder struct {
	ctx  context.Context
	opts Options
	sem  chan struct{}
	// fetch gets a response body; tests replace it.
	fetch     func(ctx context.Context, id network.RequestID) (body []byte, base64 bool, err error)
	fetchPost func(ctx context.Context, id network.RequestID) ([]byte, error)
	// offline, when set, is why bodies cannot be fetched (a Builder fed
	// recorded events has no browser to ask); it becomes the body's note.
	offline string

	mu       sync.Mutex
	cond     *sync.Cond // signalled when fetching drops
	reqs     map[network.RequestID]*request
	hops     []*hop // in the order the requests started
	sockets  []*socket
	fetching int
	last     time.Time // when the last network event arrived
	stopped  bool
}

// request is what one CDP requestId gathered: its hops (more than one for
// a redirect chain) and the ExtraInfo events, which may come before or
// after the events they belong to.
type request struct {
	hops      []*hop
	reqExtra  []*network.EventRequestWillBeSentExtraInfo
	respExtra []*network.EventResponseReceivedExtraInfo
}

// hop is one request/response exchange: one HAR entry.
type hop struct {
	req          *request
	sent         *network.EventRequestWillBeSent
	resp         *network.Response
	respAt       float64 // monotonic seconds
	respHasExtra *bool   // from responseReceived; nil when unknown
	resType      network.ResourceType
	redirectTo   string  // the next hop's URL
	end          float64 // monotonic seconds when it finished or failed
	ended        bool
	endedAt      time.Time
	finished     *network.EventLoadingFinished
	failed       *network.EventLoadingFailed

	step  int  // Options.StepOf when the request started
	taken bool // returned by Take

	bodyDone bool // the fetch (if any) is over
	body     []byte
	body64   bool
	bodyNote string

	post     []byte
	postNote string
}

// Start subscribes to the Network events of ctx's target (a chromedp
// context) and enables the Network domain. The Recorder stops listening
// when ctx ends; body fetches run on ctx too.
func Start(ctx context.Context, opts Options) (*Recorder, error) {
	r := newRecorder(ctx, opts)
	r.fetch = func(ctx context.Context, id network.RequestID) ([]byte, bool, error) {
		res, err := chromedp.Call(ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: id})
		return res.Body, res.Base64encoded, err
	}
	r.fetchPost = func(ctx context.Context, id network.RequestID) ([]byte, error) {
		res, err := chromedp.Call(ctx, network.GetRequestPostData, network.GetRequestPostDataParams{RequestID: id})
		return res.PostData, err
	}
	if err := chromedp.Listen(ctx, r.handle); err != nil {
		return nil, fmt.Errorf("listening to the target: %w", err)
	}
	maxPost := MaxPostData
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{MaxPostDataSize: &maxPost}); err != nil {
		return nil, fmt.Errorf("enabling the Network domain: %w", err)
	}
	return r, nil
}

// MaxPostData is the Network domain's maxPostDataSize a Recorder enables
// it with (larger request bodies are fetched with getRequestPostData).
const MaxPostData = int64(64 << 10)

// Caller runs a command on a CDP session (cdp.Session's Call).
type Caller interface {
	Call(ctx context.Context, method string, params, result any) error
}

// StartOn is Start for a session that chromedp does not hold and whose
// Network domain the caller enabled itself (with MaxPostData): record
// --attach enables it on the session the browser's auto-attach hands over
// for a page paused at its start, the moment that session arrives, since
// another client may release the page a moment later. The caller passes
// the session's events to Handle; bodies are fetched through s on ctx.
func StartOn(ctx context.Context, opts Options, s Caller) *Recorder {
	r := newRecorder(ctx, opts)
	r.fetch = func(ctx context.Context, id network.RequestID) ([]byte, bool, error) {
		var res network.GetResponseBodyResult
		err := s.Call(ctx, network.GetResponseBody.Method, network.GetResponseBodyParams{RequestID: id}, &res)
		return res.Body, res.Base64encoded, err
	}
	r.fetchPost = func(ctx context.Context, id network.RequestID) ([]byte, error) {
		var res network.GetRequestPostDataResult
		err := s.Call(ctx, network.GetRequestPostData.Method, network.GetRequestPostDataParams{RequestID: id}, &res)
		return res.PostData, err
	}
	return r
}

// Handle takes one event of a StartOn recorder's session (on the
// caller's reader goroutine: it returns fast and runs no command).
func (r *Recorder) Handle(ev any) { r.handle(ev) }

func newRecorder(ctx context.Context, opts Options) *Recorder {
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 10 * time.Second
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	r := &Recorder{ctx: ctx, opts: opts, sem: make(chan struct{}, opts.Parallel),
		reqs: map[network.RequestID]*request{}, last: time.Now()}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// Stop makes the Recorder ignore events from now on. Entries still waits
// for the bodies of requests that had finished.
func (r *Recorder) Stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// handle runs on chromedp's reader goroutine: it must return fast and run
// no command, so body fetches go to goroutines of their own.
func (r *Recorder) handle(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.handleSocket(ev) {
		return
	}
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		r.last = time.Now()
		rq := r.reqs[ev.RequestID]
		if rq == nil {
			rq = &request{}
			r.reqs[ev.RequestID] = rq
		}
		if ev.RedirectResponse != nil {
			// The previous hop of this id was redirected here: its response
			// is the redirect response, and it ended when this one started.
			if prev := rq.current(); prev != nil && !prev.ended {
				prev.resp = ev.RedirectResponse
				prev.respAt = ev.Timestamp.Float64()
				prev.redirectTo = ev.Request.URL
				prev.end = ev.Timestamp.Float64()
				prev.ended, prev.endedAt, prev.bodyDone = true, time.Now(), true
			}
		}
		h := &hop{req: rq, sent: ev, resType: ev.Type}
		if r.opts.StepOf != nil {
			h.step = r.opts.StepOf()
		}
		rq.hops = append(rq.hops, h)
		r.hops = append(r.hops, h)
	case *network.EventRequestWillBeSentExtraInfo:
		r.last = time.Now()
		rq := r.reqs[ev.RequestID]
		if rq == nil { // it may come before requestWillBeSent
			rq = &request{}
			r.reqs[ev.RequestID] = rq
		}
		rq.reqExtra = append(rq.reqExtra, ev)
	case *network.EventResponseReceived:
		r.last = time.Now()
		r.adopt(ev.RequestID)
		if h := r.current(ev.RequestID); h != nil && !h.ended {
			h.resp = ev.Response
			h.respAt = ev.Timestamp.Float64()
			has := ev.HasExtraInfo
			h.respHasExtra = &has
			if ev.Type != "" {
				h.resType = ev.Type
			}
		}
	case *network.EventResponseReceivedExtraInfo:
		r.last = time.Now()
		r.adopt(ev.RequestID)
		rq := r.reqs[ev.RequestID]
		if rq == nil {
			rq = &request{}
			r.reqs[ev.RequestID] = rq
		}
		rq.respExtra = append(rq.respExtra, ev)
	case *network.EventLoadingFinished:
		r.last = time.Now()
		r.adopt(ev.RequestID)
		if h := r.current(ev.RequestID); h != nil && !h.ended {
			h.finished = ev
			h.end = ev.Timestamp.Float64()
			h.ended, h.endedAt = true, time.Now()
			r.startFetch(ev.RequestID, h, true)
		}
	case *network.EventLoadingFailed:
		r.last = time.Now()
		r.adopt(ev.RequestID)
		if h := r.current(ev.RequestID); h != nil && !h.ended {
			h.failed = ev
			h.end = ev.Timestamp.Float64()
			h.ended, h.endedAt = true, time.Now()
			r.startFetch(ev.RequestID, h, false)
		}
	}
}

// adopt takes request id over from opts.From when this recorder has not
// seen it start (called with r.mu held; From's lock is taken inside it,
// never the other way round).
func (r *Recorder) adopt(id network.RequestID) {
	if r.opts.From == nil {
		return
	}
	mine := r.reqs[id]
	if mine != nil && len(mine.hops) > 0 {
		return
	}
	got := r.opts.From.give(id)
	if got == nil {
		return
	}
	if mine != nil { // ExtraInfo that came first
		got.reqExtra = append(got.reqExtra, mine.reqExtra...)
		got.respExtra = append(got.respExtra, mine.respExtra...)
	}
	r.reqs[id] = got
	r.hops = append(r.hops, got.hops...)
}

// give hands request id, started here and not ended, over to another
// recorder (adopt): it is no longer this one's.
func (r *Recorder) give(id network.RequestID) *request {
	r.mu.Lock()
	defer r.mu.Unlock()
	rq := r.reqs[id]
	if rq == nil || len(rq.hops) == 0 || rq.current().ended {
		return nil
	}
	delete(r.reqs, id)
	kept := r.hops[:0]
	for _, h := range r.hops {
		if h.req != rq {
			kept = append(kept, h)
		}
	}
	clear(r.hops[len(kept):])
	r.hops = kept
	return rq
}

func (rq *request) current() *hop {
	if len(rq.hops) == 0 {
		return nil
	}
	return rq.hops[len(rq.hops)-1]
}

func (r *Recorder) current(id network.RequestID) *hop {
	if rq := r.reqs[id]; rq != nil {
		return rq.current()
	}
	return nil
}

// startFetch gets, off the reader goroutine, the response body (when the
// request finished) and the request body (when CDP left it out of
// requestWillBeSent). Called with r.mu held.
func (r *Recorder) startFetch(id network.RequestID, h *hop, body bool) {
	needPost := h.sent.Request != nil && h.sent.Request.HasPostData && len(h.sent.Request.PostDataEntries) == 0
	if r.opts.MaxBody < 0 {
		h.bodyDone = true
		h.bodyNote = "bodies not recorded"
		return
	}
	if r.offline != "" {
		h.bodyDone = true
		if body {
			h.bodyNote = r.offline
		}
		if needPost {
			h.postNote = r.offline
		}
		return
	}
	if !body && !needPost {
		h.bodyDone = true
		return
	}
	if body && h.finished != nil && h.finished.EncodedDataLength > float64(2*r.opts.MaxBody) {
		// Far over the limit even compressed: do not pull it over CDP.
		h.bodyNote = fmt.Sprintf("body over %d bytes not recorded", r.opts.MaxBody)
		body = false
		if !needPost {
			h.bodyDone = true
			return
		}
	}
	r.fetching++
	go func() {
		r.sem <- struct{}{}
		defer func() { <-r.sem }()
		var (
			b, post   []byte
			b64       bool
			err, perr error
		)
		if body {
			ctx, cancel := context.WithTimeout(r.ctx, r.opts.BodyTimeout)
			b, b64, err = r.fetch(ctx, id)
			cancel()
		}
		if needPost {
			ctx, cancel := context.WithTimeout(r.ctx, r.opts.BodyTimeout)
			post, perr = r.fetchPost(ctx, id)
			cancel()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if body {
			switch {
			case err != nil:
				h.bodyNote = "body not available: " + errText(err)
			case len(b) > r.opts.MaxBody:
				h.bodyNote = fmt.Sprintf("body of %d bytes over %d not recorded", len(b), r.opts.MaxBody)
			default:
				h.body, h.body64 = b, b64
			}
		}
		if needPost {
			switch {
			case perr != nil:
				h.postNote = "request body not available: " + errText(perr)
			case len(post) > r.opts.MaxBody:
				h.postNote = fmt.Sprintf("request body of %d bytes over %d not recorded", len(post), r.opts.MaxBody)
			default:
				h.post = post
			}
		}
		h.bodyDone = true
		r.fetching--
		r.cond.Broadcast()
	}()
}

// errText is a CDP error's message; it names the failure, never a value.
func errText(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return err.Error()
}

// WaitIdle waits until every request seen so far has ended, its bodies
// have been fetched and its ExtraInfo events have arrived, and no network
// event came for quiet. It returns ctx's error if ctx ends first. A
// request that never ends (a long poll, a stream) keeps it waiting: bound
// ctx.
func (r *Recorder) WaitIdle(ctx context.Context, quiet time.Duration) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r.mu.Lock()
		busy := r.fetching > 0 || time.Since(r.last) < quiet
		for _, h := range r.hops {
			if busy {
				break
			}
			busy = !h.ended || !h.bodyDone
		}
		if !busy {
			for _, rq := range r.reqs {
				if rq.awaitingExtra() {
					busy = true
					break
				}
			}
		}
		r.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// extraGrace is how long an ended request waits for ExtraInfo events the
// browser said would come.
const extraGrace = 2 * time.Second

func (rq *request) awaitingExtra() bool {
	want := 0
	for i, h := range rq.hops {
		if !h.ended || time.Since(h.endedAt) > extraGrace {
			continue
		}
		if rq.hasExtra(i) == yes {
			want++
		}
	}
	return want > 0 && (len(rq.reqExtra) < want || len(rq.respExtra) < want)
}

type tri int

const (
	unknown tri = iota
	yes
	no
)

// hasExtra says whether the browser sends ExtraInfo events for hop i.
func (rq *request) hasExtra(i int) tri {
	if i+1 < len(rq.hops) {
		if rq.hops[i+1].sent.RedirectHasExtraInfo {
			return yes
		}
		return no
	}
	if p := rq.hops[i].respHasExtra; p != nil {
		if *p {
			return yes
		}
		return no
	}
	return unknown
}

// Entries waits for the body fetches in flight and returns one HAR 1.2
// entry (as JSON) per ended request hop, in the order the requests
// started. Requests still in flight are left out; call WaitIdle first.
func (r *Recorder) Entries() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]json.RawMessage, 0, len(r.hops))
	r.build(true, func(h *hop) bool { return h.ended }, func(_ *hop, _ *Entry, b json.RawMessage) {
		out = append(out, b)
	})
	for _, s := range r.sockets {
		if b, err := json.Marshal(socketEntry(s)); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// build calls fn with the HAR entry (built and as JSON) of every hop pick
// selects, in the order the requests started; with wait, body fetches in
// flight are waited for first. Called with r.mu held.
func (r *Recorder) build(wait bool, pick func(*hop) bool, fn func(h *hop, e *Entry, b json.RawMessage)) {
	for wait && r.fetching > 0 {
		r.cond.Wait()
	}
	extras := map[*hop]extraInfo{}
	for _, rq := range r.reqs {
		rq.assignExtra(extras)
	}
	for _, h := range r.hops {
		if !pick(h) {
			continue
		}
		e := build(h, extras[h])
		e.PageRef = r.opts.PageRef
		b, err := json.Marshal(e)
		if err != nil {
			continue // cannot happen: only strings, numbers and bools
		}
		fn(h, e, b)
	}
}

type extraInfo struct {
	req  *network.EventRequestWillBeSentExtraInfo
	resp *network.EventResponseReceivedExtraInfo
}

// assignExtra pairs the ExtraInfo events of a requestId with its hops:
// the browser sends one pair per hop that has them, in hop order.
func (rq *request) assignExtra(into map[*hop]extraInfo) {
	kq, kr := 0, 0
	for i, h := range rq.hops {
		if rq.hasExtra(i) == no {
			continue
		}
		var x extraInfo
		if kq < len(rq.reqExtra) {
			x.req = rq.reqExtra[kq]
			kq++
		}
		if h.resp != nil || i == len(rq.hops)-1 {
			if kr < len(rq.respExtra) {
				x.resp = rq.respExtra[kr]
				kr++
			}
		}
		into[h] = x
	}
}

// Taken is one entry Take returns: the HAR entry, the step its request
// started in, and what a step receipt says of it.
type Taken struct {
	Step    int
	Entry   json.RawMessage
	Method  string
	URL     string
	Status  int    // 0 when the request failed
	Failed  string // the network error of a failed request
	Type    string // CDP's resource type: Document, XHR, Fetch, Script…
	Started time.Time
}

// Take returns, in the order the requests started, the entries of the
// hops that are complete (ended, bodies fetched, ExtraInfo arrived) and
// not taken before; with all, every ended hop, waiting for body fetches
// in flight first. A recorder streaming entries calls it as it goes.
func (r *Recorder) Take(all bool) []Taken {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Taken
	complete := func(h *hop) bool {
		return !h.taken && h.ended && h.bodyDone && (all || !h.req.awaitingExtra())
	}
	r.build(all, complete, func(h *hop, e *Entry, b json.RawMessage) {
		h.taken = true
		t := Taken{Step: h.step, Entry: b, Method: e.Request.Method, URL: e.Request.URL,
			Status: e.Response.Status, Type: string(h.resType),
			Started: time.Unix(0, int64(h.sent.WallTime.Float64()*1e9))}
		if h.failed != nil {
			t.Failed = h.failed.ErrorText
			if h.failed.Canceled {
				t.Failed = "canceled"
			}
		}
		out = append(out, t)
	})
	for _, s := range r.sockets {
		if s.taken || !(s.closed || all) {
			continue
		}
		s.taken = true
		e := socketEntry(s)
		e.PageRef = r.opts.PageRef
		if b, err := json.Marshal(e); err == nil {
			out = append(out, Taken{Step: s.step, Entry: b, Method: "GET", URL: s.url, Status: s.status,
				Type: "WebSocket", Started: s.wall})
		}
	}
	return out
}

// InFlight is how many requests seen have not ended.
func (r *Recorder) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hops {
		if !h.ended {
			n++
		}
	}
	return n
}
