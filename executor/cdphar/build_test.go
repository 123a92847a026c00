package cdphar

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
)

// feed drives a Recorder with events in a given order, no browser needed.
func feed(t *testing.T, evs ...any) []Entry {
	t.Helper()
	r := newRecorder(context.Background(), Options{})
	r.fetch = func(context.Context, network.RequestID) ([]byte, bool, error) { return []byte("ok"), false, nil }
	r.fetchPost = func(context.Context, network.RequestID) ([]byte, error) { return []byte("a=1"), nil }
	for _, ev := range evs {
		r.handle(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.WaitIdle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for _, raw := range r.Entries() {
		var e Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func sent(id, url string, ts float64, redirect *network.Response) *network.EventRequestWillBeSent {
	return &network.EventRequestWillBeSent{RequestID: network.RequestID(id), Timestamp: cdp.MonotonicTime(ts),
		WallTime: cdp.TimeSinceEpoch(1764483600 + ts), RedirectResponse: redirect, RedirectHasExtraInfo: redirect != nil,
		Request:   &network.Request{Method: "GET", URL: url, Headers: network.Headers{"Accept": "*/*"}},
		Initiator: &network.Initiator{Type: network.InitiatorTypeOther}}
}

// TestExtraInfoPairing: ExtraInfo events may come before the event they
// belong to, and a redirect chain's hops each get their own pair.
func TestExtraInfoPairing(t *testing.T) {
	id := network.RequestID("7")
	entries := feed(t,
		// Hop 1's request ExtraInfo comes first.
		&network.EventRequestWillBeSentExtraInfo{RequestID: id, Headers: network.Headers{"Cookie": "a=1; b=2"}},
		sent("7", "http://x.test/old", 10, nil),
		&network.EventResponseReceivedExtraInfo{RequestID: id, StatusCode: 302,
			Headers: network.Headers{"Location": "/new", "Set-Cookie": "s=1; Path=/; HttpOnly\nt=2; Secure; Max-Age=0"}},
		sent("7", "http://x.test/new", 10.5, &network.Response{Status: 302, StatusText: "Found", Protocol: "http/1.1",
			Headers: network.Headers{"Location": "/new"}}),
		// Hop 2: the response arrives before its ExtraInfo.
		&network.EventResponseReceived{RequestID: id, Timestamp: 10.6, HasExtraInfo: true, Type: network.ResourceTypeDocument,
			Response: &network.Response{Status: 200, Protocol: "h2", MimeType: "text/plain", Headers: network.Headers{}}},
		&network.EventRequestWillBeSentExtraInfo{RequestID: id, Headers: network.Headers{"Cookie": "s=1"}},
		&network.EventResponseReceivedExtraInfo{RequestID: id, StatusCode: 200, Headers: network.Headers{"Content-Type": "text/plain"}},
		&network.EventLoadingFinished{RequestID: id, Timestamp: 10.7},
	)
	if len(entries) != 2 {
		t.Fatalf("%d entries", len(entries))
	}
	old, nw := entries[0], entries[1]
	if len(old.Request.Cookies) != 2 || old.Request.Cookies[1].Name != "b" || old.Request.Cookies[1].Value != "2" {
		t.Errorf("hop 1 request cookies: %+v", old.Request.Cookies)
	}
	if old.Response.Status != 302 || old.Response.RedirectURL != "http://x.test/new" || len(old.Response.Cookies) != 2 {
		t.Fatalf("hop 1 response: %+v", old.Response)
	}
	if c := old.Response.Cookies[0]; c.Name != "s" || c.Value != "1" || !c.HTTPOnly || c.Path != "/" {
		t.Errorf("cookie s: %+v", c)
	}
	if c := old.Response.Cookies[1]; c.Name != "t" || !c.Secure || c.Expires != "1970-01-01T00:00:00Z" {
		t.Errorf("cookie t: %+v", c)
	}
	n := 0
	for _, h := range old.Response.Headers {
		if h.Name == "Set-Cookie" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("hop 1 Set-Cookie lines: %+v", old.Response.Headers)
	}
	if len(nw.Request.Cookies) != 1 || nw.Request.Cookies[0].Value != "1" || nw.Response.HTTPVersion != "HTTP/2" ||
		nw.Response.Content.Text != "ok" || nw.Response.StatusText != "OK" || nw.ResourceType != "Document" {
		t.Errorf("hop 2: %+v", nw)
	}
	if old.StartedDateTime != "2025-11-30T06:20:10.000Z" || nw.Timings.Wait != 100 || nw.Timings.Receive != 100 || nw.Time != 200 {
		t.Errorf("times: %s, %+v, %v", old.StartedDateTime, nw.Timings, nw.Time)
	}
}

// TestFailedAndPost: a request with no response is status 0 with _error;
// a body CDP left out of requestWillBeSent is fetched.
func TestFailedAndPost(t *testing.T) {
	ev := sent("9", "http://x.test/api?q=1", 1, nil)
	ev.Request.Method, ev.Request.HasPostData = "POST", true
	ev.Request.Headers = network.Headers{"Content-Type": "application/x-www-form-urlencoded"}
	entries := feed(t, ev,
		&network.EventLoadingFailed{RequestID: "9", Timestamp: 2, ErrorText: "net::ERR_CONNECTION_RESET"})
	if len(entries) != 1 {
		t.Fatalf("%d entries", len(entries))
	}
	e := entries[0]
	if e.Response.Status != 0 || e.Response.Error != "net::ERR_CONNECTION_RESET" || e.Response.Headers == nil {
		t.Errorf("response: %+v", e.Response)
	}
	if p := e.Request.PostData; p == nil || p.Text != "a=1" || len(p.Params) != 1 || e.Request.BodySize != 3 {
		t.Errorf("postData: %+v", p)
	}
	if len(e.Request.QueryString) != 1 || e.Timings.Send != 0 || e.Timings.Wait != 1000 || e.Timings.Blocked != -1 {
		t.Errorf("query %+v timings %+v", e.Request.QueryString, e.Timings)
	}
}
