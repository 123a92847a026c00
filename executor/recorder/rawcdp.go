package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/flightrec/flightrec/executor/cdphar"
)

// rawTransport is the recorder's connection to the browser, the one
// chromedp reads and writes, with one thing chromedp lacks: a command on
// a session chromedp did not open. A target Chromium auto-attaches with
// waitForDebuggerOnStart (an out-of-process frame, before its document
// commits) waits until Runtime.runIfWaitingForDebugger arrives on that
// very session, and chromedp routes commands only to the sessions it
// attached itself. The reply comes back on that session and chromedp
// drops it (it knows no such session), which is all a release needs.
//
// In record --attach it also holds the sessions the browser's own
// auto-attach hands over for new pages paused at their start (popups,
// tabs): holdPages. Chromium lets such a page run at the first
// Runtime.runIfWaitingForDebugger of any client that auto-attached it
// (Chromium 156: a window.open popup's document request starts once the
// driving client, Playwright's connectOverCDP, released it, whether or
// not the recorder did), so the recorder cannot hold the page until it is
// set up. What it can do is enable the Network domain on that very
// session the moment the attach event is read, before chromedp or any
// round trip: the browser then reports the page's first request to that
// session as long as the enable arrived before the other client's
// release, which follows the other client's own set-up commands. The
// session's messages are kept (pausedPage) for the page's attach, which
// records its HAR from them (cdphar.StartOn) and runs commands on it
// (call).
type rawTransport struct {
	chromedp.Transport
	mu   sync.Mutex // chromedp's writes and the recorder's, one at a time
	next atomic.Int64
	// holdPages: enable Network on paused pages as they are attached.
	holdPages bool

	tmu   sync.Mutex
	held  map[target.SessionID]*pausedPage
	calls map[int64]chan *cdproto.Message
}

// pausedPage is the session of a page paused at its start, with its
// events kept until the page's attach takes them (to).
type pausedPage struct {
	raw  *rawTransport
	sess target.SessionID
	mu   sync.Mutex
	kept []any
	fn   func(ev any)
}

// to hands the session's events to fn from now on, the kept ones first.
func (p *pausedPage) to(fn func(ev any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range p.kept {
		fn(ev)
	}
	p.kept, p.fn = nil, fn
}

func (p *pausedPage) event(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fn != nil {
		p.fn(ev)
		return
	}
	if len(p.kept) < maxKept {
		p.kept = append(p.kept, ev)
	}
}

// maxKept bounds the events kept for a page whose attach has not taken
// them yet (it takes them within a second, or gives up and drops them).
const maxKept = 10000

// Call runs a command on the paused page's session (cdphar.Caller).
func (p *pausedPage) Call(ctx context.Context, method string, params, result any) error {
	return p.raw.call(ctx, p.sess, method, params, result)
}

// Read is the connection's, but for the messages of the held sessions and
// the replies to the recorder's own commands (call), which chromedp
// never sees; and it enables Network on a page paused at its start as
// soon as its attach event is read (holdPages).
func (t *rawTransport) Read(ctx context.Context, msg *cdproto.Message) error {
	for {
		if err := t.Transport.Read(ctx, msg); err != nil {
			return err
		}
		if !t.divert(msg) {
			return nil
		}
		*msg = cdproto.Message{}
	}
}

// divert takes msg when it is the recorder's (true).
func (t *rawTransport) divert(msg *cdproto.Message) bool {
	if msg.ID != 0 && msg.Method == "" {
		t.tmu.Lock()
		ch, ok := t.calls[msg.ID]
		delete(t.calls, msg.ID)
		t.tmu.Unlock()
		if ok {
			m := *msg
			ch <- &m
		}
		return ok
	}
	if msg.SessionID == "" {
		switch msg.Method {
		case cdproto.EventTargetAttachedToTarget:
			t.hold(msg)
		case cdproto.EventTargetDetachedFromTarget:
			var ev target.EventDetachedFromTarget
			if jsonv2.Unmarshal(msg.Params, &ev) == nil {
				t.drop(ev.SessionID)
			}
		}
		return false
	}
	if t.holdPages {
		// A page's download events (Chromium sends Page.downloadWillBegin
		// and Page.downloadProgress to every session that enabled Page,
		// cdproto no longer knows them) go to the page's listeners as the
		// Browser events they repeat field for field: Browser's own reach
		// only the client that set the download behaviour, the driving
		// client's.
		switch msg.Method {
		case "Page.downloadWillBegin":
			msg.Method = cdproto.EventBrowserDownloadWillBegin
		case "Page.downloadProgress":
			msg.Method = cdproto.EventBrowserDownloadProgress
		}
	}
	t.tmu.Lock()
	p := t.held[msg.SessionID]
	t.tmu.Unlock()
	if p == nil || msg.Method == "" {
		return false
	}
	if ev, err := cdproto.UnmarshalMessage(msg, chromedp.DefaultUnmarshalOptions); err == nil {
		p.event(ev)
	}
	return true
}

// hold enables Network on a page the browser's auto-attach paused at its
// start, at once (a write: the reply is not waited for), and keeps its
// session's events from now on.
func (t *rawTransport) hold(msg *cdproto.Message) {
	if !t.holdPages {
		return
	}
	var ev target.EventAttachedToTarget
	if jsonv2.Unmarshal(msg.Params, &ev) != nil || !ev.WaitingForDebugger || ev.TargetInfo == nil || ev.TargetInfo.Type != "page" {
		return
	}
	t.tmu.Lock()
	if t.held == nil {
		t.held = map[target.SessionID]*pausedPage{}
	}
	t.held[ev.SessionID] = &pausedPage{raw: t, sess: ev.SessionID}
	t.tmu.Unlock()
	params, _ := jsonv2.Marshal(network.EnableParams{MaxPostDataSize: ptr(cdphar.MaxPostData)}, chromedp.DefaultMarshalOptions)
	_ = t.Write(context.Background(), &cdproto.Message{ID: t.id(), SessionID: ev.SessionID, Method: "Network.enable", Params: params})
}

// pausedPage is the held session (nil: it is not held).
func (t *rawTransport) pausedPage(session target.SessionID) *pausedPage {
	t.tmu.Lock()
	defer t.tmu.Unlock()
	return t.held[session]
}

// drop stops holding session (detached, or a page the recorder does not
// record: its Network domain is turned off again).
func (t *rawTransport) drop(session target.SessionID) {
	t.tmu.Lock()
	p := t.held[session]
	delete(t.held, session)
	t.tmu.Unlock()
	if p != nil {
		_ = t.Write(context.Background(), &cdproto.Message{ID: t.id(), SessionID: session, Method: "Network.disable"})
	}
}

// call runs a command on a session chromedp did not open and waits for
// its reply.
func (t *rawTransport) call(ctx context.Context, session target.SessionID, method string, params, result any) error {
	b, err := jsonv2.Marshal(params, chromedp.DefaultMarshalOptions)
	if err != nil {
		return err
	}
	id := t.id()
	ch := make(chan *cdproto.Message, 1)
	t.tmu.Lock()
	if t.calls == nil {
		t.calls = map[int64]chan *cdproto.Message{}
	}
	t.calls[id] = ch
	t.tmu.Unlock()
	forget := func() {
		t.tmu.Lock()
		delete(t.calls, id)
		t.tmu.Unlock()
	}
	if err := t.Write(ctx, &cdproto.Message{ID: id, SessionID: session, Method: cdproto.MethodType(method), Params: b}); err != nil {
		forget()
		return err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return m.Error
		}
		if result == nil || len(m.Result) == 0 {
			return nil
		}
		return jsonv2.Unmarshal(m.Result, result, chromedp.DefaultUnmarshalOptions)
	case <-ctx.Done():
		forget()
		return ctx.Err()
	}
}

// id is a command id of the recorder's own: counted down from the
// largest Chromium takes (a 32-bit int), far from chromedp's own, which
// count up from 1.
func (t *rawTransport) id() int64 { return int64(math.MaxInt32) - t.next.Add(1) }

func (t *rawTransport) Write(ctx context.Context, msg *cdproto.Message) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Transport.Write(ctx, msg)
}

// SetDebugf passes chromedp's protocol logger on to the connection.
func (t *rawTransport) SetDebugf(f func(string, ...any)) {
	if d, ok := t.Transport.(interface{ SetDebugf(func(string, ...any)) }); ok {
		d.SetDebugf(f)
	}
}

// release resumes the target waiting on session (nil t: nothing waits,
// the recorder did not ask for waits).
func (t *rawTransport) release(ctx context.Context, session target.SessionID) {
	if t == nil || session == "" {
		return
	}
	_ = t.Write(ctx, &cdproto.Message{ID: t.id(), SessionID: session, Method: "Runtime.runIfWaitingForDebugger"})
}

// rawDialer is an ExecAllocator dialer that keeps the connection in t.
func rawDialer(t *rawTransport) chromedp.Dialer {
	return func(ctx context.Context, wsURL string) (chromedp.Transport, error) {
		c, err := remote.DialContext(ctx, wsURL)
		if err != nil {
			return nil, err
		}
		t.Transport = c
		return t, nil
	}
}

// rawAllocator connects to a running browser (record --attach) as
// remote.Allocator does, through a rawTransport.
type rawAllocator struct {
	url string
	raw *rawTransport
	wg  sync.WaitGroup
}

func (a *rawAllocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	wsURL, err := browserWebSocket(ctx, a.url)
	if err != nil {
		return nil, err
	}
	// The connection has a context of its own: the pages close before it.
	wctx, cancel := context.WithCancel(context.Background())
	a.wg.Go(func() {
		<-ctx.Done()
		chromedp.Cancel(ctx)
		cancel()
	})
	dctx, dcancel := context.WithTimeout(wctx, 20*time.Second)
	defer dcancel()
	tr, err := rawDialer(a.raw)(dctx, wsURL)
	if err != nil {
		return nil, fmt.Errorf("could not dial %q: %w", wsURL, err)
	}
	return chromedp.NewBrowserTransport(wctx, tr, opts...)
}

func (a *rawAllocator) Wait() { a.wg.Wait() }

// Attaches: the browser runs already, and keeps running.
func (a *rawAllocator) Attaches() bool { return true }

// browserWebSocket is the browser's DevTools websocket address for an
// endpoint given as http://host:port (asked at /json/version) or as a
// ws:// URL (used as it is when it names the browser, else asked at
// /json/version of its host).
func browserWebSocket(ctx context.Context, endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the DevTools endpoint %q is not a URL", endpoint)
	}
	if (u.Scheme == "ws" || u.Scheme == "wss") && strings.HasPrefix(u.Path, "/devtools/browser/") {
		return endpoint, nil
	}
	scheme := "http"
	if u.Scheme == "https" || u.Scheme == "wss" {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+u.Host+"/json/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("asking %s for its websocket address: %w", u.Host, err)
	}
	defer resp.Body.Close()
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.WS == "" {
		return "", fmt.Errorf("%s/json/version gave no websocket address (%d): %v", u.Host, resp.StatusCode, err)
	}
	return v.WS, nil
}

// quietUnknownSessions is chromedp's error logger without one complaint:
// the detach of a session chromedp did not open ("executor for … doesn't
// exist"), which the browser-level auto-attach (popups paused at their
// start) makes for every page when the browser closes.
func quietUnknownSessions() chromedp.ContextOption {
	return chromedp.WithBrowserOption(chromedp.WithBrowserErrorf(func(format string, v ...any) {
		if strings.HasPrefix(format, "executor for %q doesn't exist") {
			return
		}
		log.Printf("ERROR: "+format, v...)
	}))
}
