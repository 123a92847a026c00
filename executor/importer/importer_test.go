package importer_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/importer"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// server is a flightrec server on loopback for one test.
type server struct {
	t    testing.TB
	base string
	c    *client.Client
	dir  string // the data directory
	stop func() // closes the server and the app (once; also on cleanup)
}

func startServer(t testing.TB) *server {
	t.Helper()
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	stop := sync.OnceFunc(func() {
		hs.Close()
		if err := a.Close(); err != nil {
			t.Errorf("closing the app: %v", err)
		}
	})
	t.Cleanup(stop)
	c := client.New(hs.URL)
	c.RetryFor = 10 * time.Second
	return &server{t: t, base: hs.URL, c: c, dir: cfg.Store.Data, stop: stop}
}

func (s *server) get(path string, v any) {
	s.t.Helper()
	res, err := http.Get(s.base + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		s.t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
}

// imported sends evs, waits until the index has them and returns what
// the server serves back.
func (s *server) imported(evs []event.Envelope, flow string) (importer.Result, []event.Envelope) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := importer.Send(ctx, s.c, wire.OpenRequest{Project: "import", Flow: flow, Executor: "importer test"}, evs, "pass")
	if err != nil {
		s.t.Fatalf("send: %v", err)
	}
	if res.Events != len(evs) || res.AckedThrough != uint64(len(evs)) || !strings.HasPrefix(res.Root, "bafkrei") {
		s.t.Fatalf("result: %+v", res)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var rec store.RecordingRow
		s.get("/v1/recordings/"+res.ID, &rec)
		if rec.State == store.StateFinished && rec.IndexedTo >= uint64(len(evs)) {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("not indexed: %+v", rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var page wire.EventPage
	s.get("/v1/recordings/"+res.ID+"/events?limit=10000", &page)
	return res, page.Events
}

func (s *server) recordings() int {
	s.t.Helper()
	var list playback.RecordingList
	s.get("/v1/recordings", &list)
	return len(list.Recordings)
}

// harEntry is the part of a HAR entry the tests look at.
type harEntry struct {
	StartedDateTime string `json:"startedDateTime"`
	Request         struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
	Response struct {
		Status  int `json:"status"`
		Content struct {
			Text    string `json:"text"`
			Comment string `json:"comment"`
		} `json:"content"`
		Error string `json:"_error"`
	} `json:"response"`
}

func entryOf(t testing.TB, e event.Envelope) harEntry {
	t.Helper()
	var h harEntry
	if err := json.Unmarshal(e.Data, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

func kinds(evs []event.Envelope, k event.Kind) []event.Envelope {
	var out []event.Envelope
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// synthetic HAR entries: start offsets in ms from a base time.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func entry(ms int, dur float64, method, url string, status int, pageref string) map[string]any {
	e := map[string]any{
		"startedDateTime": t0.Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02T15:04:05.000Z"),
		"time":            dur,
		"request": map[string]any{"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": []any{},
			"headers": []any{}, "queryString": []any{}, "headersSize": -1, "bodySize": 0},
		"response": map[string]any{"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": []any{},
			"headers": []any{}, "content": map[string]any{"size": 0, "mimeType": "text/html"}, "redirectURL": "",
			"headersSize": -1, "bodySize": 0},
		"cache": map[string]any{}, "timings": map[string]any{"send": 1, "wait": dur - 2, "receive": 1},
		"_resourceType": "document", "_priority": "VeryHigh",
	}
	if pageref != "" {
		e["pageref"] = pageref
	}
	return e
}

func harDoc(pages []map[string]any, entries ...map[string]any) []byte {
	log := map[string]any{"version": "1.2", "creator": map[string]any{"name": "WebInspector", "version": "537.36"},
		"entries": entries}
	if pages != nil {
		log["pages"] = pages
	}
	b, _ := json.Marshal(map[string]any{"log": log})
	return b
}

func harPage(id, title string, ms int) map[string]any {
	return map[string]any{"id": id, "title": title, "pageTimings": map[string]any{},
		"startedDateTime": t0.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)}
}

func TestHARPagesBecomeSteps(t *testing.T) {
	doc := harDoc([]map[string]any{harPage("page_1", "Sign in", 0), harPage("page_2", "Checkout", 5000)},
		entry(10, 50, "GET", "http://shop.test/signin", 200, "page_1"),
		entry(5010, 40, "GET", "http://shop.test/checkout", 200, "page_2"),
		entry(6000, 30, "POST", "http://shop.test/api/checkout", 500, "page_2"),
		entry(100, 20, "GET", "http://shop.test/static/app.js", 200, "page_1"),
		entry(7000, 5, "GET", "http://shop.test/beacon", 204, ""),
	)
	evs, err := importer.HAR(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		step int
		kind event.Kind
		what string
	}
	var got []row
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
		r := row{e.Step, e.Kind, ""}
		switch e.Kind {
		case event.KindHAR:
			h := entryOf(t, e)
			r.what = fmt.Sprintf("%s %s %d", h.Request.Method, strings.TrimPrefix(h.Request.URL, "http://shop.test"), h.Response.Status)
		case event.KindMeta:
			var m event.Meta
			_ = json.Unmarshal(e.Data, &m)
			r.what = m.Labels["page_title"] + m.Versions["har_creator"]
		}
		got = append(got, r)
	}
	want := []row{
		{0, event.KindMeta, "WebInspector 537.36"},
		{1, event.KindMeta, "Sign in"},
		{1, event.KindHAR, "GET /signin 200"},
		{1, event.KindHAR, "GET /static/app.js 200"},
		{2, event.KindMeta, "Checkout"},
		{2, event.KindHAR, "GET /checkout 200"},
		{2, event.KindHAR, "POST /api/checkout 500"},
		{2, event.KindHAR, "GET /beacon 204"}, // no pageref: the page started before it
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	if evs[2].TS != t0.Add(10*time.Millisecond).UnixNano() || evs[0].TS != t0.UnixNano() {
		t.Errorf("ts: %d %d", evs[2].TS, evs[0].TS)
	}
	// The entry goes into the event unchanged.
	var m map[string]any
	_ = json.Unmarshal(evs[2].Data, &m)
	if m["_priority"] != "VeryHigh" || m["pageref"] != "page_1" {
		t.Errorf("entry changed: %v", m)
	}
}

func TestHARWithoutPagesGroupsByTime(t *testing.T) {
	doc := harDoc(nil,
		entry(0, 3000, "GET", "http://a.test/slow", 200, ""),    // busy until 3.0 s
		entry(2500, 10, "GET", "http://a.test/during", 200, ""), // within the first
		entry(4900, 10, "GET", "http://a.test/soon", 200, ""),   // 1.9 s after: same step
		entry(7000, 10, "GET", "http://a.test/later", 200, ""),  // 2.09 s after: new step
		entry(20000, 10, "GET", "http://a.test/much", 404, ""),  // new step
		entry(20500, 10, "GET", "http://a.test/after", 200, ""), // same
		entry(1000, 10, "GET", "http://a.test/early", 200, ""),  // out of order in the file
	)
	evs, err := importer.HAR(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range kinds(evs, event.KindHAR) {
		got = append(got, fmt.Sprintf("%d:%s", e.Step, strings.TrimPrefix(entryOf(t, e).Request.URL, "http://a.test/")))
	}
	want := "1:slow 1:early 1:during 1:soon 2:later 3:much 3:after"
	if strings.Join(got, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if len(evs) != 8 || evs[0].Kind != event.KindMeta {
		t.Fatalf("%d events", len(evs))
	}
}

// TestBadHAR: each bad input is refused with a clear message and no
// events; nothing reaches the server.
func TestBadHAR(t *testing.T) {
	good := harDoc(nil, entry(0, 10, "GET", "http://a.test/", 200, ""))
	noURL := entry(0, 10, "GET", "", 200, "")
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "HAR: the file is empty"},
		{"not JSON", []byte("<html>nope</html>"), "HAR: not valid JSON at byte 1"},
		{"truncated", good[:len(good)/2], fmt.Sprintf("HAR: the JSON ends early at byte %d: is the file truncated?", len(good)/2)},
		{"an array", []byte(`[{"log":{}}]`), `HAR: a HAR file is a JSON object {"log": …}; this one holds an array`},
		{"no log", []byte(`{"version":"1.2","entries":[]}`), `HAR: no "log" member: not a HAR file`},
		{"log not an object", []byte(`{"log":[]}`), "HAR: log must be an object"},
		{"missing log.entries", []byte(`{"log":{"version":"1.2","creator":{"name":"x","version":"1"},"pages":[]}}`), "HAR: log.entries is missing: a HAR lists its requests there"},
		{"entries not an array", []byte(`{"log":{"entries":{}}}`), "HAR: log.entries must be an array"},
		{"no entries", []byte(`{"log":{"entries":[]}}`), "HAR: log.entries is empty: nothing to import"},
		{"entry not an object", []byte(`{"log":{"entries":[1]}}`), "HAR: log.entries[0] must be an object"},
		{"entry without time", []byte(`{"log":{"entries":[{"request":{"method":"GET","url":"http://a/"},"response":{"status":200}}]}}`), "HAR: log.entries[0].startedDateTime is missing"},
		{"entry bad time", []byte(`{"log":{"entries":[{"startedDateTime":"yesterday"}]}}`), "HAR: log.entries[0].startedDateTime: not an ISO 8601 date and time"},
		{"entry without url", harDoc(nil, entry(0, 1, "GET", "http://a/", 200, ""), noURL), "HAR: log.entries[1]: request.url: is required"},
		{"entry status type", []byte(`{"log":{"entries":[{"startedDateTime":"2026-01-01T00:00:00Z","request":{"method":"GET","url":"http://a/"},"response":{"status":"ok"}}]}}`), `HAR: log.entries[0]: field "response": expected int, got JSON string`},
		{"page without id", harDoc([]map[string]any{{"title": "x"}}, entry(0, 1, "GET", "http://a/", 200, "")), "HAR: log.pages[0]: id is missing"},
		{"duplicate page", harDoc([]map[string]any{harPage("p", "a", 0), harPage("p", "b", 1)}, entry(0, 1, "GET", "http://a/", 200, "")), "HAR: log.pages[1]: its id is used by an earlier page"},
	}
	for _, c := range cases {
		evs, err := importer.HAR(bytes.NewReader(c.in))
		if err == nil || evs != nil {
			t.Errorf("%s: accepted (%d events)", c.name, len(evs))
			continue
		}
		var ie *importer.InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: not an InputError: %v", c.name, err)
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, err, c.want)
		}
	}
}

// TestHARHugeBodyLeftOut: an entry over the event limit keeps everything
// but its bodies.
func TestHARHugeBodyLeftOut(t *testing.T) {
	e := entry(0, 10, "GET", "http://a.test/big", 200, "")
	e["response"].(map[string]any)["content"] = map[string]any{"size": 20 << 20, "mimeType": "text/plain",
		"text": strings.Repeat("x", 20<<20)}
	evs, err := importer.HAR(bytes.NewReader(harDoc(nil, e)))
	if err != nil {
		t.Fatal(err)
	}
	h := entryOf(t, evs[1])
	if h.Response.Content.Text != "" || !strings.Contains(h.Response.Content.Comment, "body left out on import") || h.Response.Status != 200 {
		t.Fatalf("%+v", h.Response)
	}
}

// cdpEvent is one element of a DevTools protocol log.
func cdpEvent(method string, params any) map[string]any {
	return map[string]any{"method": method, "params": params}
}

// perfLog wraps an event the way ChromeDriver's performance log does.
func perfLog(method string, params any) map[string]any {
	inner, _ := json.Marshal(map[string]any{"message": map[string]any{"method": method, "params": params}, "webview": "T1"})
	return map[string]any{"level": "INFO", "message": string(inner), "timestamp": 1}
}

func tinyJPEG(t testing.TB) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 32, 20))
	for i := range img.Pix {
		img.Pix[i] = 0xc0
	}
	img.Set(1, 1, color.Black)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCDPStepsConsoleFrames(t *testing.T) {
	wall := float64(t0.Unix())
	req := func(id, loader, url string, ts float64) map[string]any {
		return map[string]any{"requestId": id, "loaderId": loader, "documentURL": url, "timestamp": ts, "wallTime": wall + ts,
			"request": map[string]any{"url": url, "method": "GET", "headers": map[string]any{}, "initialPriority": "High",
				"referrerPolicy": "no-referrer"}, "initiator": map[string]any{"type": "other"}, "type": "Document", "frameId": "F"}
	}
	resp := func(id string, status int, ts float64) map[string]any {
		return map[string]any{"requestId": id, "loaderId": "", "timestamp": ts, "type": "Document", "hasExtraInfo": false,
			"response": map[string]any{"url": "x", "status": status, "statusText": "", "headers": map[string]any{}, "mimeType": "text/html",
				"charset": "", "connectionReused": false, "connectionId": 0, "encodedDataLength": 10, "securityState": "neutral"}}
	}
	done := func(id string, ts float64) map[string]any {
		return map[string]any{"requestId": id, "timestamp": ts, "encodedDataLength": 10}
	}
	nav := func(loader, url string) map[string]any {
		return map[string]any{"frame": map[string]any{"id": "F", "loaderId": loader, "url": url, "domainAndRegistry": "",
			"securityOrigin": "http://a.test", "mimeType": "text/html", "secureContextType": "InsecureScheme",
			"crossOriginIsolatedContextType": "NotIsolated", "gatedAPIFeatures": []any{}}, "type": "Navigation"}
	}
	jpg := tinyJPEG(t)
	log := []any{
		// A console message of the page that was open before.
		cdpEvent("Runtime.consoleAPICalled", map[string]any{"type": "log", "executionContextId": 1, "timestamp": (wall + 0.5) * 1000,
			"args": []any{map[string]any{"type": "string", "value": "left over"}}}),
		map[string]any{"id": 3, "result": map[string]any{}}, // a command reply: skipped
		cdpEvent("Network.requestWillBeSent", req("L1", "L1", "http://a.test/one", 1)),
		cdpEvent("Network.responseReceived", resp("L1", 200, 1.1)),
		perfLog("Page.frameNavigated", nav("L1", "http://a.test/one")),
		cdpEvent("Network.loadingFinished", done("L1", 1.2)),
		cdpEvent("Page.screencastFrame", map[string]any{"data": base64.StdEncoding.EncodeToString(jpg), "sessionId": 1,
			"metadata": map[string]any{"offsetTop": 0, "pageScaleFactor": 1, "deviceWidth": 1280, "deviceHeight": 800,
				"scrollOffsetX": 0, "scrollOffsetY": 0, "timestamp": wall + 1.3}}),
		cdpEvent("Animation.animationStarted", map[string]any{"whatever": true}), // not used: skipped
		cdpEvent("Network.requestWillBeSent", req("L2", "L2", "http://a.test/two", 2)),
		cdpEvent("Runtime.consoleAPICalled", map[string]any{"type": "error", "executionContextId": 1, "timestamp": (wall + 2.05) * 1000,
			"args": []any{map[string]any{"type": "string", "value": "checkout failed:"}, map[string]any{"type": "number", "value": 500},
				map[string]any{"type": "object", "subtype": "null", "value": nil}},
			"stackTrace": map[string]any{"callFrames": []any{map[string]any{"functionName": "pay", "scriptId": "9",
				"url": "http://a.test/app.js", "lineNumber": 9, "columnNumber": 3}}}}),
		cdpEvent("Network.responseReceived", resp("L2", 500, 2.1)),
		cdpEvent("Network.loadingFinished", done("L2", 2.2)),
		cdpEvent("Page.frameNavigated", nav("L2", "http://a.test/two")),
		cdpEvent("Log.entryAdded", map[string]any{"entry": map[string]any{"source": "network", "level": "error",
			"text": "Failed to load resource: the server responded with a status of 500", "timestamp": (wall + 2.3) * 1000,
			"url": "http://a.test/two", "networkRequestId": "L2"}}),
		cdpEvent("Runtime.exceptionThrown", map[string]any{"timestamp": (wall + 2.4) * 1000, "exceptionDetails": map[string]any{
			"exceptionId": 1, "text": "Uncaught", "lineNumber": 4, "columnNumber": 7, "url": "http://a.test/app.js",
			"exception": map[string]any{"type": "object", "subtype": "error", "description": "TypeError: x is not a function\n    at pay (app.js:5:8)"}}}),
		cdpEvent("Runtime.consoleAPICalled", map[string]any{"type": "endGroup", "executionContextId": 1, "timestamp": (wall + 2.5) * 1000, "args": []any{}}),
	}
	b, _ := json.Marshal(log)
	evs, err := importer.CDP(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		s := fmt.Sprintf("%d %s", e.Step, e.Kind)
		switch e.Kind {
		case event.KindHAR:
			h := entryOf(t, e)
			s += fmt.Sprintf(" %s %d", h.Request.URL, h.Response.Status)
		case event.KindConsole:
			var c event.Console
			_ = json.Unmarshal(e.Data, &c)
			s += fmt.Sprintf(" %s %q %s:%d:%d", c.Level, c.Text, c.URL, c.Line, c.Column)
		case event.KindFrame:
			var f event.Frame
			_ = json.Unmarshal(e.Data, &f)
			s += fmt.Sprintf(" %s %dx%d %v", f.Mime, f.Width, f.Height, bytes.Equal(f.Image, jpg))
		case event.KindMeta:
			s += " " + string(e.Data)
		}
		got = append(got, s)
	}
	want := []string{
		`0 meta {"viewport":{"width":1280,"height":800},"labels":{"imported_from":"cdp"}}`,
		// Before the first navigation: a step of its own.
		`1 console log "left over" :0:0`,
		`2 har http://a.test/one 200`,
		`2 frame image/jpeg 1280x800 true`,
		// Logged before page two committed: page one's.
		`2 console error "checkout failed: 500 null" http://a.test/app.js:10:4`,
		// Page two's document request precedes its navigation but is its.
		`3 har http://a.test/two 500`,
		// The browser's log entry goes with its request.
		`3 console error "Failed to load resource: the server responded with a status of 500" http://a.test/two:0:0`,
		`3 console error "Uncaught TypeError: x is not a function" http://a.test/app.js:5:8`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	near := func(ts int64, sec float64) bool { d := ts - int64(sec*1e9); return d > -1000 && d < 1000 }
	if !near(evs[2].TS, wall+1) || !near(evs[1].TS, wall+0.5) || !near(evs[0].TS, wall+0.5) {
		t.Errorf("ts: %d %d %d", evs[0].TS, evs[1].TS, evs[2].TS)
	}
	// The entry says its body was not in the log.
	if h := entryOf(t, evs[2]); h.Response.Content.Comment != "body not in the DevTools log" {
		t.Errorf("body comment: %q", h.Response.Content.Comment)
	}
}

func TestBadCDP(t *testing.T) {
	good, _ := json.Marshal([]any{cdpEvent("Log.entryAdded", map[string]any{"entry": map[string]any{"source": "other",
		"level": "info", "text": "hello", "timestamp": 1.7e12}})})
	if evs, err := importer.CDP(bytes.NewReader(good)); err != nil || len(evs) != 2 {
		t.Fatalf("the good log: %v %d", err, len(evs))
	}
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "  \n", "DevTools log: the file is empty"},
		{"an object", `{"method":"Network.requestWillBeSent","params":{}}`, `DevTools log: a DevTools protocol log is a JSON array of {"method", "params"} events; this file holds an object`},
		{"a string", `"[]"`, `DevTools log: a DevTools protocol log is a JSON array of {"method", "params"} events; this file holds a string`},
		{"truncated", string(good[:len(good)-7]), fmt.Sprintf("DevTools log: the JSON ends early at byte %d: is the file truncated?", len(good)-7)},
		{"not JSON", "method,params\n", "DevTools log: not valid JSON at byte 1"},
		{"element not an object", `[1]`, `DevTools log: element 0: want an object {"method", "params"} or {"message": …}`},
		{"bad wrapper", `[{"message":"{not json"}]`, "DevTools log: element 0: message does not hold a JSON object with a protocol event"},
		{"no params", `[{"method":"Network.loadingFinished"}]`, "DevTools log: element 0 (Network.loadingFinished): params are missing"},
		{"bad params", `[{"method":"Network.loadingFinished","params":{"requestId":7}}]`, "DevTools log: element 0 (Network.loadingFinished): params do not decode:"},
		{"bad frame", `[{"method":"Page.screencastFrame","params":{"data":"aGVsbG8=","sessionId":1,"metadata":{"deviceWidth":10,"deviceHeight":10,"offsetTop":0,"pageScaleFactor":1,"scrollOffsetX":0,"scrollOffsetY":0}}}]`, "DevTools log: element 0 (Page.screencastFrame): data is not a JPEG or PNG image"},
		{"nothing useful", `[{"method":"Animation.animationStarted","params":{}},{"id":1,"result":{}}]`, "DevTools log: no Network, Runtime, Log or Page event in 2 elements: nothing to import"},
		{"only navigations", `[{"method":"Page.frameNavigated","params":{"frame":{"id":"F","loaderId":"L","url":"http://a/","domainAndRegistry":"","securityOrigin":"","mimeType":"","secureContextType":"Secure","crossOriginIsolatedContextType":"NotIsolated","gatedAPIFeatures":[]},"type":"Navigation"}}]`, "DevTools log: no request, console message or screencast frame in the log: nothing to import"},
	}
	for _, c := range cases {
		evs, err := importer.CDP(strings.NewReader(c.in))
		if err == nil || evs != nil {
			t.Errorf("%s: accepted (%d events)", c.name, len(evs))
			continue
		}
		var ie *importer.InputError
		if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.name, err, c.want)
		}
	}
}

// TestImportStoresNothingOnBadInput: the import path refuses a bad file
// before it opens anything, so the server has no recording, not even an
// empty one.
func TestImportStoresNothingOnBadInput(t *testing.T) {
	s := startServer(t)
	good := harDoc(nil, entry(0, 10, "GET", "http://a.test/", 200, ""))
	inputs := map[string]func() ([]event.Envelope, error){
		"HAR missing log.entries": func() ([]event.Envelope, error) {
			return importer.HAR(strings.NewReader(`{"log":{"version":"1.2","pages":[]}}`))
		},
		"truncated HAR": func() ([]event.Envelope, error) { return importer.HAR(bytes.NewReader(good[:len(good)-3])) },
		"CDP log not an array": func() ([]event.Envelope, error) {
			return importer.CDP(strings.NewReader(`{"method":"Network.requestWillBeSent","params":{}}`))
		},
		"truncated CDP log": func() ([]event.Envelope, error) {
			return importer.CDP(strings.NewReader(`[{"method":"Log.entryAdded","params":{"entry":{"source":"other","level":"info","te`))
		},
	}
	for name, f := range inputs {
		evs, err := f()
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		// What a caller does with the result: nothing to send.
		if evs != nil {
			t.Fatalf("%s: partial events returned", name)
		}
	}
	// Events the server would refuse are refused before Open.
	bad := []event.Envelope{{Seq: 1, TS: 1, Kind: event.KindHAR, Data: json.RawMessage(`{"request":{}}`)}}
	if _, err := importer.Send(context.Background(), s.c, wire.OpenRequest{Project: "p"}, bad, "pass"); err == nil {
		t.Fatal("Send sent an invalid event")
	}
	if n := s.recordings(); n != 0 {
		t.Fatalf("%d recordings stored", n)
	}
	// And a good import does store one.
	evs, err := importer.HAR(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if _, served := s.imported(evs, "good"); len(kinds(served, event.KindHAR)) != 1 {
		t.Fatalf("served %d events", len(served))
	}
	if n := s.recordings(); n != 1 {
		t.Fatalf("%d recordings after a good import", n)
	}
}

func TestWithoutRenumbers(t *testing.T) {
	jpg := base64.StdEncoding.EncodeToString(tinyJPEG(t))
	log, _ := json.Marshal([]any{
		cdpEvent("Page.screencastFrame", map[string]any{"data": jpg, "sessionId": 1, "metadata": map[string]any{"offsetTop": 0,
			"pageScaleFactor": 1, "deviceWidth": 0, "deviceHeight": 0, "scrollOffsetX": 0, "scrollOffsetY": 0}}),
		cdpEvent("Log.entryAdded", map[string]any{"entry": map[string]any{"source": "other", "level": "warning", "text": "w", "timestamp": 1.7e12}}),
	})
	evs, err := importer.CDP(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	var f event.Frame
	if len(evs) != 3 || json.Unmarshal(evs[1].Data, &f) != nil || f.Width != 32 || f.Height != 20 {
		t.Fatalf("frame size from the image when the metadata has none: %d events, %+v", len(evs), f)
	}
	out := importer.Without(evs, event.KindFrame)
	if len(out) != 2 || out[1].Kind != event.KindConsole || out[1].Seq != 2 || importer.Check(out) != nil {
		t.Fatalf("%+v", out)
	}
}
