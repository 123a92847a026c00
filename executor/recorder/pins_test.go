package recorder

import (
	"testing"

	"github.com/flightrec/flightrec/event"
)

func TestIsAPI(t *testing.T) {
	none := func(string) string { return "" }
	json := func(n string) string {
		if n == "Accept" {
			return "application/json"
		}
		return ""
	}
	for _, c := range []struct {
		method, url string
		hdr         func(string) string
		want        bool
	}{
		{"GET", "http://a/product", none, false},
		{"GET", "http://a/static/app.min.js", none, false},
		{"POST", "http://a/signin", none, true}, // a form post
		{"PUT", "http://a/x", none, true},
		{"GET", "http://a/api/orders/last", none, true},
		{"GET", "http://a/data", json, true},
		{"HEAD", "http://a/", none, false},
	} {
		if got := IsAPI(c.method, c.url, c.hdr); got != c.want {
			t.Errorf("IsAPI(%s %s) = %v", c.method, c.url, got)
		}
	}
}

func har(method, u, body string, status int, respBody string) event.HAR {
	h := event.HAR{Request: event.HARRequest{Method: method, URL: u}, Response: event.HARResponse{Status: status,
		Headers: []event.NameValue{{Name: "Content-Type", Value: "application/json"}, {Name: "Set-Cookie", Value: "sid=[redacted:00ff00ff00ff00ff]"},
			{Name: "Content-Length", Value: "99"}},
		Content: event.HARContent{MimeType: "application/json", Text: respBody}}}
	if body != "" {
		h.Request.PostData = &event.PostData{MimeType: "application/json", Text: body}
	}
	return h
}

// TestReplayMatch: matching by method, the URL with the recorded origin
// replaced by base's and the query sorted, and the body, where a
// redaction mark stands for any value; each entry answers once before a
// repeat reuses the last; the answer drops what no longer fits and says
// what was redacted or cut.
func TestReplayMatch(t *testing.T) {
	cut := har("POST", "http://127.0.0.1:9000/api/big", "", 200, `{"items":[1,2`)
	cut.Truncated = true
	r, err := NewReplay("http://127.0.0.1:7000", []event.HAR{
		har("GET", "http://127.0.0.1:9000/signin", "", 200, "<html>"), // a page: not an API entry
		har("POST", "http://127.0.0.1:9000/api/checkout", `{"card":"[redacted:0123456789abcdef]","email":"b@x"}`, 500, `{"error":"GIFT_CARD_STATE"}`),
		har("GET", "http://127.0.0.1:9000/api/search?b=2&a=1", "", 200, `{"n":1}`),
		har("GET", "http://127.0.0.1:9000/api/search?b=2&a=1", "", 200, `{"n":2}`),
		har("POST", "http://127.0.0.1:9000/api/token", "", 200, `{"token":"[redacted]"}`),
		// A service on another port of the app's host (the demo's payment
		// provider): its port is another in the rerun.
		har("POST", "http://127.0.0.1:9001/api/tokens", "", 201, `{"token":"tok_1"}`),
		cut,
	}, []event.Check{{Type: "state", Target: "GET http://127.0.0.1:9000/api/orders/last", Actual: []byte(`{"status":200,"json":{"state":"failed"}}`)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 6 {
		t.Errorf("%d API entries, want 6", r.Len())
	}
	if _, ok := r.Match("POST", "http://127.0.0.1:7000/api/tokens", nil, ""); ok {
		t.Error("the peer's request matched on the app's own origin")
	}
	if a, ok := r.Match("POST", "http://127.0.0.1:7001/api/tokens", nil, ""); !ok || string(a.Body) != `{"token":"tok_1"}` {
		t.Errorf("the peer's request on its new port: %v %+v", ok, a)
	}
	a, ok := r.Match("POST", "http://127.0.0.1:7000/api/checkout", []byte(`{"card":"4242 4242 4242 4242","email":"b@x"}`), "application/json")
	if !ok || a.Status != 500 || string(a.Body) != `{"error":"GIFT_CARD_STATE"}` || a.Note != "answered from the recording" {
		t.Errorf("checkout: %v %+v", ok, a)
	}
	for _, h := range a.Headers {
		if h.Name == "Set-Cookie" || h.Name == "Content-Length" {
			t.Errorf("replayed header %s", h.Name)
		}
	}
	if _, ok := r.Match("POST", "http://127.0.0.1:7000/api/checkout", []byte(`{"card":"4242","email":"other@x"}`), "application/json"); ok {
		t.Error("a body with another unredacted value matched")
	}
	if _, ok := r.Match("POST", "http://127.0.0.1:7000/api/pay", nil, ""); ok {
		t.Error("an unrecorded URL matched")
	}
	for i, want := range []string{`{"n":1}`, `{"n":2}`, `{"n":2}`} {
		a, ok := r.Match("GET", "http://127.0.0.1:7000/api/search?a=1&b=2", nil, "")
		if !ok || string(a.Body) != want {
			t.Errorf("search #%d: %v %s, want %s", i+1, ok, a.Body, want)
		}
	}
	if a, _ := r.Match("POST", "http://127.0.0.1:7000/api/token", nil, ""); a.Note != "answered from the recording as recorded (body redacted)" {
		t.Errorf("redacted body note %q", a.Note)
	}
	if a, _ := r.Match("POST", "http://127.0.0.1:7000/api/big", nil, ""); a.Note != "answered from the recording as recorded (body cut at 64 KiB)" {
		t.Errorf("cut body note %q", a.Note)
	}
	if s, ok := r.State("GET", "http://127.0.0.1:7000/api/orders/last"); !ok || string(s) != `{"status":200,"json":{"state":"failed"}}` {
		t.Errorf("state: %v %s", ok, s)
	}
	if _, err := NewReplay("/relative", nil, nil, nil); err == nil {
		t.Error("a relative base was taken")
	}
}

func TestBodiesMatch(t *testing.T) {
	for _, c := range []struct {
		rec, live string
		cut, want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, false, true},
		{`card=[redacted]&x=1`, `card=4242&x=1`, false, true},
		{`card=[redacted]&x=1`, `card=4242&x=2`, false, false},
		{`{"a":"abc`, `{"a":"abcdef"}`, true, true},
		{`{"a":"abc`, `{"a":"abcdef"}`, false, false},
		{``, ``, false, true},
		// Redaction writes JSON back with its keys sorted.
		{`{"card":"[redacted]","email":"b@x"}`, `{"email":"b@x","card":"4242 4242"}`, false, true},
		{`{"card":"[redacted:00ff00ff00ff00ff]","email":"b@x"}`, `{"email":"c@x","card":"4242"}`, false, false},
		{`{"pin":"[redacted]","n":[1,{"a":true}]}`, `{"n":[1,{"a":true}],"pin":1234}`, false, true},
		{`{"n":[1,2]}`, `{"n":[1,2,3]}`, false, false},
	} {
		if got := bodiesMatch(c.rec, c.live, c.cut); got != c.want {
			t.Errorf("bodiesMatch(%q, %q, %v) = %v", c.rec, c.live, c.cut, got)
		}
	}
}
