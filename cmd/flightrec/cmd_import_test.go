package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/wire"
)

// harFile writes a HAR 1.2 document with two pages and three entries.
func harFile(t *testing.T) string {
	t.Helper()
	entry := func(at, method, url string, status int, page string) map[string]any {
		return map[string]any{"pageref": page, "startedDateTime": at, "time": 12.5,
			"request": map[string]any{"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": []any{},
				"headers": []any{}, "queryString": []any{}, "headersSize": -1, "bodySize": 0},
			"response": map[string]any{"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": []any{},
				"headers": []any{}, "content": map[string]any{"size": 27, "mimeType": "application/json",
					"text": `{"error":"GIFT_CARD_STATE"}`}, "redirectURL": "", "headersSize": -1, "bodySize": 27},
			"cache": map[string]any{}, "timings": map[string]any{"send": 1, "wait": 10, "receive": 1.5}}
	}
	doc := map[string]any{"log": map[string]any{
		"version": "1.2", "creator": map[string]any{"name": "WebInspector", "version": "537.36"},
		"pages": []any{
			map[string]any{"id": "page_1", "title": "http://shop.test/product", "startedDateTime": "2026-03-01T10:00:00.000Z", "pageTimings": map[string]any{}},
			map[string]any{"id": "page_2", "title": "http://shop.test/checkout", "startedDateTime": "2026-03-01T10:00:05.000Z", "pageTimings": map[string]any{}},
		},
		"entries": []any{
			entry("2026-03-01T10:00:00.010Z", "GET", "http://shop.test/product", 200, "page_1"),
			entry("2026-03-01T10:00:05.010Z", "GET", "http://shop.test/checkout", 200, "page_2"),
			entry("2026-03-01T10:00:07.000Z", "POST", "http://shop.test/api/checkout", 500, "page_2"),
		},
	}}
	b, _ := json.Marshal(doc)
	file := filepath.Join(t.TempDir(), "shop.har")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// playwrightZip writes a Playwright trace zip: two actions (goto, click
// Pay), a request in each step (the click's answered 500), a console
// error and a screencast frame.
func playwrightZip(t *testing.T) string {
	t.Helper()
	var frame bytes.Buffer
	if err := jpeg.Encode(&frame, image.NewRGBA(image.Rect(0, 0, 16, 10)), nil); err != nil {
		t.Fatal(err)
	}
	lines := func(vs ...any) []byte {
		var b bytes.Buffer
		for _, v := range vs {
			j, _ := json.Marshal(v)
			b.Write(j)
			b.WriteByte('\n')
		}
		return b.Bytes()
	}
	type obj = map[string]any
	entry := func(mono float64, method, url string, status int, sha, mime string) obj {
		return obj{"type": "resource-snapshot", "snapshot": obj{"startedDateTime": "2026-03-01T10:00:00.000Z", "time": 3,
			"request": obj{"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": []any{}, "headers": []any{},
				"queryString": []any{}, "headersSize": -1, "bodySize": 0},
			"response": obj{"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": []any{}, "headers": []any{},
				"content": obj{"size": 10, "mimeType": mime, "_sha1": sha}, "redirectURL": "", "headersSize": -1, "bodySize": 10},
			"cache": obj{}, "timings": obj{"send": 0, "wait": 3, "receive": 0}, "_monotonicTime": mono}}
	}
	trace := lines(
		obj{"version": 8, "type": "context-options", "origin": "library", "browserName": "chromium", "playwrightVersion": "1.61.1",
			"options": obj{"viewport": obj{"width": 1280, "height": 800}}, "platform": "linux", "wallTime": 1772359200000, "monotonicTime": 1000},
		obj{"type": "before", "callId": "call@1", "startTime": 1010, "class": "Frame", "method": "goto", "params": obj{"url": "http://shop.test/checkout"}},
		obj{"type": "screencast-frame", "pageId": "page@1", "sha1": "page@1-1.jpeg", "width": 1280, "height": 800, "timestamp": 1050},
		obj{"type": "after", "callId": "call@1", "endTime": 1100},
		obj{"type": "before", "callId": "call@2", "startTime": 1200, "class": "Frame", "method": "click",
			"params": obj{"selector": `internal:role=button[name="Pay"i]`, "strict": true}},
		obj{"type": "after", "callId": "call@2", "endTime": 1300},
		obj{"type": "console", "messageType": "error", "text": "checkout failed: GIFT_CARD_STATE", "time": 1250,
			"location": obj{"url": "http://shop.test/static/app.js", "lineNumber": 88, "columnNumber": 12}},
	)
	network := lines(
		entry(1020, "GET", "http://shop.test/checkout", 200, "a.html", "text/html"),
		entry(1210, "POST", "http://shop.test/api/checkout", 500, "b.json", "application/json"),
	)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range []struct {
		name string
		data []byte
	}{
		{"trace.trace", trace}, {"trace.network", network}, {"resources/page@1-1.jpeg", frame.Bytes()},
		{"resources/a.html", []byte("<h1>Checkout</h1>")}, {"resources/b.json", []byte(`{"error":"GIFT_CARD_STATE"}`)},
	} {
		w, _ := zw.Create(m.name)
		w.Write(m.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trace.zip")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

type importResult struct {
	ID, Root, Verdict string
	Events, Steps     int
}

// TestImportIntoDataDirAndServer: import har --data DIR stores through an
// in-process server; import cdp --server URL through a running one. Both
// read back with the right steps.
func TestImportIntoDataDirAndServer(t *testing.T) {
	data := t.TempDir()
	har := harFile(t)
	out, errOut, code := flightrec(t, "import", "har", "--data", data, "--project", "shop", "--flow", "checkout", "--json", har)
	if code != exitOK {
		t.Fatalf("import har --data: exit %d: %s %s", code, out, errOut)
	}
	var res importResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	// meta + two page metas + three entries, in two steps.
	if res.Events != 6 || res.Steps != 2 || res.Verdict != "pass" || !strings.HasPrefix(res.Root, "bafkrei") {
		t.Fatalf("result: %+v", res)
	}
	if out, _, code := flightrec(t, "verify", "--data", data); code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("verify after the import: exit %d: %s", code, out)
	}

	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	var evs wire.EventPage
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=har", &evs)
	if len(evs.Events) != 3 || evs.Events[2].Step != 2 || !strings.Contains(string(evs.Events[2].Data), `"status":500`) {
		t.Fatalf("served har events: %+v", evs.Events)
	}

	cdp := filepath.Join(t.TempDir(), "devtools.json")
	os.WriteFile(cdp, []byte(`[
 {"method":"Runtime.consoleAPICalled","params":{"type":"error","executionContextId":1,"timestamp":1772359200000,
  "args":[{"type":"string","value":"checkout failed: GIFT_CARD_STATE"}]}},
 {"method":"Page.screencastFrame","params":{"data":"/9j/4AAQSkZJRgABAQ==","sessionId":1,
  "metadata":{"offsetTop":0,"pageScaleFactor":1,"deviceWidth":1280,"deviceHeight":800,"scrollOffsetX":0,"scrollOffsetY":0,"timestamp":1772359200.5}}},
 {"id":7,"result":{}}
]`), 0o644)
	// Frames in a DevTools log cannot be masked: left out unless asked for.
	out, errOut, code = flightrec(t, "import", "cdp", "--server", base, "--verdict", "fail", cdp)
	if code != exitOK || !strings.Contains(out, ": 2 events in 1 steps") || !strings.Contains(out, "finished fail: root bafkrei") {
		t.Fatalf("import cdp --server: exit %d: %s %s", code, out, errOut)
	}
	out, errOut, code = flightrec(t, "import", "cdp", "--server", base, "--unmasked-frames", cdp)
	if code != exitOK || !strings.Contains(out, ": 3 events in 1 steps") {
		t.Fatalf("import cdp --unmasked-frames: exit %d: %s %s", code, out, errOut)
	}
	var list playback.RecordingList
	getJSON(t, base+"/v1/recordings", &list)
	if len(list.Recordings) != 3 {
		t.Fatalf("%d recordings", len(list.Recordings))
	}
}

// TestImportPlaywright: import playwright stores a step per action, the
// 500 in the Pay click's step; a trace's frames are left out unless
// --unmasked-frames (they carry no mask rectangles).
func TestImportPlaywright(t *testing.T) {
	data := t.TempDir()
	trace := playwrightZip(t)
	out, errOut, code := flightrec(t, "import", "playwright", "--data", data, "--project", "shop", "--json", trace)
	if code != exitOK {
		t.Fatalf("import playwright: exit %d: %s %s", code, out, errOut)
	}
	var res importResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	// meta; goto: receipt, GET; click: receipt, POST, console. No frame.
	if res.Events != 6 || res.Steps != 2 || res.Verdict != "pass" || !strings.HasPrefix(res.Root, "bafkrei") {
		t.Fatalf("result: %+v", res)
	}
	out, errOut, code = flightrec(t, "import", "playwright", "--data", data, "--unmasked-frames", "--verdict", "fail", trace)
	if code != exitOK || !strings.Contains(out, ": 7 events in 2 steps") || !strings.Contains(out, "finished fail: root bafkrei") {
		t.Fatalf("import playwright --unmasked-frames: exit %d: %s %s", code, out, errOut)
	}

	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	var evs wire.EventPage
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events", &evs)
	var got []string
	for _, e := range evs.Events {
		what := string(e.Kind)
		switch e.Kind {
		case event.KindReceipt:
			var r event.Receipt
			_ = json.Unmarshal(e.Data, &r)
			what += " " + r.Action.Verb
		case event.KindHAR:
			var h event.HAR
			_ = json.Unmarshal(e.Data, &h)
			what += " " + h.Request.Method + " " + h.Request.URL + " " + h.Response.Content.Text
		}
		got = append(got, strings.TrimSpace(string(rune('0'+e.Step))+" "+what))
	}
	want := "0 meta|1 receipt goto|1 har GET http://shop.test/checkout <h1>Checkout</h1>|2 receipt click|" +
		`2 har POST http://shop.test/api/checkout {"error":"GIFT_CARD_STATE"}|2 console`
	if strings.Join(got, "|") != want {
		t.Fatalf("served events:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	out, errOut, code = flightrec(t, "import", "--help")
	if help := out + errOut; code != exitOK || !strings.Contains(help, "playwright") || !strings.Contains(help, "--unmasked-frames") {
		t.Errorf("import --help: exit %d: %s", code, help)
	}
}

// TestImportRefusesBadInput: each bad file is a usage error with the
// envelope and a next step, and nothing is stored.
func TestImportRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		os.WriteFile(f, []byte(body), 0o644)
		return f
	}
	good, _ := os.ReadFile(harFile(t))
	goodZip, _ := os.ReadFile(playwrightZip(t))
	cases := []struct {
		format, file, want string
	}{
		{"har", write("noentries.har", `{"log":{"version":"1.2","creator":{"name":"x","version":"1"},"pages":[]}}`), "log.entries is missing"},
		{"har", write("truncated.har", string(good[:len(good)/3])), "is the file truncated?"},
		{"cdp", write("object.json", `{"method":"Network.requestWillBeSent","params":{}}`), "a DevTools protocol log is a JSON array"},
		{"cdp", write("truncated.json", `[{"method":"Log.entryAdded","params":{"entry":{"sou`), "is the file truncated?"},
		{"playwright", write("truncated.zip", string(goodZip[:len(goodZip)/2])), "the zip is truncated or damaged"},
		{"playwright", write("shop.har", string(good)), "not a zip file: this file holds JSON"},
	}
	data := t.TempDir()
	for _, c := range cases {
		_, errOut, code := flightrec(t, "import", c.format, "--data", data, c.file)
		if code != exitUsage || !strings.Contains(errOut, "MALFORMED_INPUT") || !strings.Contains(errOut, c.want) ||
			!strings.Contains(errOut, "next: fix the file; nothing was stored") {
			t.Errorf("%s %s: exit %d: %s", c.format, filepath.Base(c.file), code, errOut)
		}
		_, errOut, code = flightrec(t, "import", c.format, "--data", data, "--json", c.file)
		var env struct {
			Error struct{ Code, Message, Next string }
		}
		if code != exitUsage || json.Unmarshal([]byte(errOut), &env) != nil || env.Error.Code != "MALFORMED_INPUT" || env.Error.Next == "" {
			t.Errorf("%s %s --json: exit %d: %s", c.format, filepath.Base(c.file), code, errOut)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "recordings")); len(ents) != 0 {
		t.Fatalf("bad imports stored %d recordings", len(ents))
	}

	_, errOut, code := flightrec(t, "import", "har", "--data", data, "--server", "http://127.0.0.1:1", harFile(t))
	if code != exitUsage || !strings.Contains(errOut, "exclusive") {
		t.Errorf("--data with --server: exit %d: %s", code, errOut)
	}
	_, errOut, code = flightrec(t, "import", "zip", harFile(t))
	if code != exitUsage || !strings.Contains(errOut, "UNKNOWN_FORMAT") {
		t.Errorf("unknown format: exit %d: %s", code, errOut)
	}
	_, errOut, code = flightrec(t, "import", "har", "--server", "http://127.0.0.1:1", "--retry-for", "200ms", harFile(t))
	if code != exitFailure || !strings.Contains(errOut, "next:") {
		t.Errorf("no server: exit %d: %s", code, errOut)
	}
	_, errOut, code = flightrec(t, "import", "har", filepath.Join(dir, "missing.har"))
	if code != exitFailure || !strings.Contains(errOut, "READ_FAILED") {
		t.Errorf("missing file: exit %d: %s", code, errOut)
	}
}

// TestImportPlaywrightCurrentTrace: the trace the newest playwright-core
// writes (trace format 10: testenv.PlaywrightCheckout drives Debian's
// Chromium through the storefront's failing gift-card checkout) goes
// through the binary: import playwright --data stores a step per action,
// the 500 of POST /api/checkout in the Pay click's step, and, frames
// included (--unmasked-frames), no byte under the data directory or row
// of its index holds a secret typed or sent in the trace: the password
// and card number typed, the bearer token every request sent, the
// session cookie.
func TestImportPlaywrightCurrentTrace(t *testing.T) {
	shop, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	trace, run := testenv.PlaywrightCheckout(t, shop)
	secrets := []string{demoapp.Password, demoapp.Card, run.Bearer, run.Cookie}
	labels := []string{"typed password", "typed card number", "Authorization bearer token", "session cookie"}
	zr, err := zip.OpenReader(trace)
	if err != nil {
		t.Fatal(err)
	}
	inTrace := testenv.Corpus{}
	for _, f := range zr.File {
		if rc, err := f.Open(); err == nil {
			inTrace[f.Name], _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	zr.Close()
	for i, s := range secrets {
		if len(inTrace.Hits([]string{s}, labels[i:i+1])) == 0 {
			t.Fatalf("the trace does not hold the %s: the search below proves nothing", labels[i])
		}
	}

	data := t.TempDir()
	out, errOut, code := flightrec(t, "import", "playwright", "--data", data, "--unmasked-frames", "--verdict", "fail", "--json", trace)
	if code != exitOK {
		t.Fatalf("import playwright: exit %d: %s %s", code, out, errOut)
	}
	var res importResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	if res.Steps != len(run.Actions) || res.Verdict != "fail" {
		t.Fatalf("%+v for the %d actions %v", res, len(run.Actions), run.Actions)
	}

	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	base := "http://" + p.addr
	var hars, receipts wire.EventPage
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=har&limit=1000", &hars)
	getJSON(t, base+"/v1/recordings/"+res.ID+"/events?kind=receipt&limit=1000", &receipts)
	p.stop()
	payStep := 0
	for _, e := range receipts.Events {
		var r event.Receipt
		if json.Unmarshal(e.Data, &r) == nil && r.Action.Target != nil && r.Action.Target.Role == "button" && r.Action.Target.Name == "Pay" {
			payStep = e.Step
		}
	}
	var checkout []string
	for _, e := range hars.Events {
		var h event.HAR
		if json.Unmarshal(e.Data, &h) == nil && h.Request.URL == shop+"/api/checkout" {
			checkout = append(checkout, fmt.Sprintf("%s %d in step %d", h.Request.Method, h.Response.Status, e.Step))
		}
	}
	if payStep == 0 || len(receipts.Events) != len(run.Actions) || fmt.Sprint(checkout) != fmt.Sprintf("[POST 500 in step %d]", payStep) {
		t.Fatalf("%d receipts, Pay in step %d; /api/checkout: %v", len(receipts.Events), payStep, checkout)
	}

	stored := testenv.Corpus{}
	stored.AddFiles(t, data, "after")
	stored.AddSQLite(t, filepath.Join(data, "index.sqlite"))
	if hits := stored.Hits(secrets, labels); len(hits) > 0 {
		t.Errorf("secrets of the trace are stored (%d places):\n  %s", len(hits), strings.Join(hits, "\n  "))
	}
	t.Logf("playwright-core %s: %d events in %d steps; %d secrets searched in %d bytes (%d files and the index's rows)",
		run.Playwright, res.Events, res.Steps, len(secrets), stored.Size(), stored.Count("file "))
}
