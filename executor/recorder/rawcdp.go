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
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

// rawTransport is the recorder's connection to the browser, the one
// chromedp reads and writes, with one thing chromedp lacks: a command on
// a session chromedp did not open. A target Chromium auto-attaches with
// waitForDebuggerOnStart (an out-of-process frame, before its document
// commits) waits until Runtime.runIfWaitingForDebugger arrives on that
// very session, and chromedp routes commands only to the sessions it
// attached itself. The reply comes back on that session and chromedp
// drops it (it knows no such session), which is all a release needs.
type rawTransport struct {
	chromedp.Transport
	mu   sync.Mutex // chromedp's writes and the recorder's, one at a time
	next atomic.Int64
}

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
	// Ids counted down from the largest Chromium takes (a 32-bit int),
	// far from chromedp's own, which count up from 1.
	id := int64(math.MaxInt32) - t.next.Add(1)
	_ = t.Write(ctx, &cdproto.Message{ID: id, SessionID: session, Method: "Runtime.runIfWaitingForDebugger"})
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
