package importer_test

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/importer"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
)

// pwWall is the wall clock (unix ms) the synthetic traces' context-options
// pair with monotonic time pwMono.
const (
	pwWall = 1_772_359_200_000
	pwMono = 1000.0
)

// pwNS is the unix ns of monotonic ms mono in the synthetic traces.
func pwNS(mono float64) int64 { return pwWall*1_000_000 + int64(math.Round((mono-pwMono)*1e6)) }

// member is one file of a zip.
type member struct {
	name string
	data []byte
}

// ndjson writes one JSON line per value (a string goes in as it is).
func ndjson(lines ...any) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		if s, ok := l.(string); ok {
			b.WriteString(s)
		} else {
			j, _ := json.Marshal(l)
			b.Write(j)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func zipOf(t testing.TB, members ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, m := range members {
		w, err := zw.Create(m.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// unzip reads every member of a zip.
func unzip(t testing.TB, data []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = b
	}
	return out
}

func importPW(data []byte) ([]event.Envelope, error) {
	return importer.Playwright(bytes.NewReader(data), int64(len(data)))
}

type obj = map[string]any

func pwContext(version int) obj {
	return obj{"version": version, "type": "context-options", "origin": "library", "browserName": "chromium",
		"playwrightVersion": "1.61.1", "options": obj{"viewport": obj{"width": 1280, "height": 800}},
		"platform": "linux", "wallTime": pwWall, "monotonicTime": pwMono, "sdkLanguage": "javascript",
		"contextId": "browser-context@1"}
}

func pwEntry(mono float64, method, url string, status int, req, resp obj) obj {
	if req == nil {
		req = obj{}
	}
	req["method"], req["url"], req["httpVersion"] = method, url, "HTTP/1.1"
	req["cookies"], req["queryString"], req["headersSize"], req["bodySize"] = []any{}, []any{}, -1, 0
	if req["headers"] == nil {
		req["headers"] = []any{}
	}
	if resp == nil {
		resp = obj{"content": obj{"size": 0, "mimeType": "x-unknown"}}
	}
	resp["status"], resp["statusText"], resp["httpVersion"] = status, "", "HTTP/1.1"
	resp["cookies"], resp["headers"], resp["redirectURL"], resp["headersSize"], resp["bodySize"] = []any{}, []any{}, "", -1, 0
	return obj{"type": "resource-snapshot", "snapshot": obj{"pageref": "page@1", "startedDateTime": "2026-03-01T10:00:00.000Z",
		"time": 5, "request": req, "response": resp, "cache": obj{}, "timings": obj{"send": 0, "wait": 5, "receive": 0},
		"_frameref": "frame@1", "_monotonicTime": mono}}
}

func snapshotEv(name, callID, url string, mono float64, html any) obj {
	return obj{"type": "frame-snapshot", "snapshot": obj{"callId": callID, "snapshotName": name, "pageId": "page@1",
		"frameId": "frame@1", "frameUrl": url, "html": html, "viewport": obj{"width": 1280, "height": 800},
		"timestamp": mono, "collectionTime": 1, "resourceOverrides": []any{}, "isMainFrame": true}}
}

// pwSynthetic is a version-8 trace with every kind of line the importer
// reads (see TestPlaywrightMapping for what each becomes).
func pwSynthetic(t testing.TB) []byte { return pwSyntheticAt(t, 8) }

// pwSyntheticAt is pwSynthetic's trace as Playwright writes it in format
// version (8, 9 or 10): see pwAsFormat.
func pwSyntheticAt(t testing.TB, version int) []byte {
	t.Helper()
	jpeg := tinyJPEG(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
	ua := obj{"name": "User-Agent", "value": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/148.0.0.0 Safari/537.36"}
	signin := []any{"HTML", obj{"lang": "en"},
		[]any{"HEAD", obj{}, []any{"TITLE", obj{}, "Page title"}, []any{"STYLE", obj{}, "body{color:red}"}},
		[]any{"BODY", obj{},
			[]any{"H1", obj{}, "Sign in"},
			[]any{"SCRIPT", obj{}, "var inline = 1"},
			[]any{"P", obj{"hidden": ""}, "hidden words"},
			[]any{"FORM", obj{},
				[]any{"LABEL", obj{}, "Pass", []any{"B", obj{}, "word"}},
				[]any{"INPUT", obj{"__playwright_value_": "hunter2", "type": "password"}},
				[]any{"SELECT", obj{}, []any{"OPTION", obj{}, "red"}, []any{"OPTION", obj{"__playwright_selected_": "true"}, "blue"}},
				[]any{"BUTTON", obj{}, "  Go\n  on "}}}}
	// signin's nodes in post-order: 0 "Page title", 1 TITLE, 2 style text,
	// 3 STYLE, 4 HEAD, 5 "Sign in", 6 H1, 7 script text, 8 SCRIPT,
	// 9 "hidden words", 10 P, 11 "Pass", 12 "word", 13 B, 14 LABEL,
	// 15 INPUT, 16 "red", 17 OPTION, 18 "blue", 19 OPTION, 20 SELECT,
	// 21 "  Go\n  on ", 22 BUTTON, 23 FORM, 24 BODY, 25 HTML.
	// welcome comes two snapshots after signin in the frame's list (the
	// getter's is between them).
	welcome := []any{"HTML", obj{"lang": "en"}, []any{[]any{2, 4}},
		[]any{"BODY", obj{}, []any{[]any{2, 6}}, []any{"P", obj{}, "Welcome back"}, []any{[]any{2, 23}}}}
	// welcome's own nodes: 0 "Welcome back", 1 P, 2 BODY, 3 HTML.
	trace := ndjson(pwAsFormat(version,
		pwContext(version),
		obj{"type": "console", "messageType": "log", "text": "booting", "args": []any{}, "location": obj{"url": "http://shop.test/app.js", "lineNumber": 4, "columnNumber": 2}, "time": 1005, "pageId": "page@1"},
		obj{"type": "before", "callId": "call@1", "startTime": 1010, "class": "Frame", "method": "goto",
			"params": obj{"url": "http://shop.test/signin", "timeout": 30000, "waitUntil": "load"}, "pageId": "page@1", "beforeSnapshot": "before@call@1"},
		snapshotEv("before@call@1", "call@1", "about:blank", 1011, []any{"HTML", obj{}, []any{"HEAD", obj{}}, []any{"BODY"}}),
		obj{"type": "log", "callId": "call@1", "time": 1012, "message": "navigating"},
		obj{"type": "screencast-frame", "pageId": "page@1", "sha1": "page@1-1.jpeg", "width": 1280, "height": 800, "timestamp": 1050},
		obj{"type": "after", "callId": "call@1", "endTime": 1100, "afterSnapshot": "after@call@1"},
		snapshotEv("after@call@1", "call@1", "http://shop.test/signin", 1101, signin),
		// a getter: no step
		obj{"type": "before", "callId": "call@2", "startTime": 1110, "class": "Frame", "method": "textContent", "params": obj{"selector": "h1"}, "pageId": "page@1", "beforeSnapshot": "before@call@2"},
		snapshotEv("before@call@2", "call@2", "http://shop.test/signin", 1111, []any{[]any{1, 25}}),
		obj{"type": "after", "callId": "call@2", "endTime": 1112, "result": obj{"value": "Sign in"}},
		obj{"type": "before", "callId": "call@3", "startTime": 1120, "class": "Frame", "method": "fill",
			"params": obj{"selector": `internal:label="Password"i`, "strict": true, "value": "hunter2", "timeout": 100}, "pageId": "page@1", "beforeSnapshot": "before@call@3"},
		snapshotEv("before@call@3", "call@3", "http://shop.test/signin", 1121, welcome),
		obj{"type": "input", "callId": "call@3", "inputSnapshot": "input@call@3"},
		snapshotEv("input@call@3", "call@3", "http://shop.test/signin", 1122, []any{[]any{1, 3}}),
		obj{"type": "after", "callId": "call@3", "endTime": 1130, "afterSnapshot": "after@call@3",
			"error": obj{"name": "TimeoutError", "message": "locator.fill: Timeout 100ms exceeded.\nCall log:\n  - waiting for getByLabel('Password')\n", "stack": "TimeoutError: …"}},
		snapshotEv("after@call@3", "call@3", "http://shop.test/signin", 1131, []any{[]any{2, 3}}),
		obj{"type": "event", "time": 1140, "class": "BrowserContext", "method": "pageError", "pageId": "page@1",
			"params": obj{"error": obj{"error": obj{"name": "TypeError", "message": "x is undefined", "stack": "TypeError: x is undefined\n    at pay (http://shop.test/app.js:10:5)\n    at http://shop.test/app.js:20:1"}},
				"location": obj{"url": "http://shop.test/app.js", "line": 9, "column": 4}}},
		obj{"type": "event", "time": 1141, "class": "BrowserContext", "method": "dialog", "params": obj{"pageId": "page@1", "type": "alert", "message": "Hello"}},
		// a group: its calls are steps; a call nested in a call is not
		obj{"type": "before", "callId": "call@4", "startTime": 1150, "title": "log in", "class": "Tracing", "method": "tracingGroup", "params": obj{}},
		obj{"type": "before", "callId": "call@5", "startTime": 1151, "class": "Frame", "method": "click", "parentId": "call@4",
			"params": obj{"selector": `#form >> internal:role=button[name="Go on"i]`, "strict": true, "timeout": 30000, "button": "left"}, "pageId": "page@1"},
		obj{"type": "before", "callId": "call@6", "startTime": 1152, "class": "Frame", "method": "waitForSelector", "parentId": "call@5", "params": obj{"selector": "form"}},
		obj{"type": "after", "callId": "call@6", "endTime": 1153},
		obj{"type": "after", "callId": "call@5", "endTime": 1160},
		obj{"type": "after", "callId": "call@4", "endTime": 1161},
		// configuration: no step
		obj{"type": "before", "callId": "call@7", "startTime": 1170, "class": "BrowserContext", "method": "addInitScript", "params": obj{"source": "x"}},
		obj{"type": "after", "callId": "call@7", "endTime": 1171},
		// no after: the trace stopped during the call
		obj{"type": "before", "callId": "call@8", "startTime": 1180, "class": "Page", "method": "keyboardPress", "params": obj{"key": "Enter"}, "pageId": "page@1"},
		obj{"type": "console", "messageType": "warning", "text": "slow", "args": []any{}, "location": obj{"url": "", "lineNumber": 0, "columnNumber": 0}, "time": 1200},
		obj{"type": "console", "messageType": "endGroup", "text": "", "time": 1201},
		obj{"type": "stdout", "timestamp": 1202, "text": "ignored"},
	)...)
	network := ndjson(pwAsFormat(version,
		pwEntry(1012, "GET", "http://shop.test/signin", 200, obj{"headers": []any{ua}},
			obj{"content": obj{"size": 15, "mimeType": "text/html; charset=utf-8", "_sha1": "a.html"}}),
		pwEntry(1125, "POST", "http://shop.test/api/signin", 401,
			obj{"postData": obj{"mimeType": "application/json", "text": "", "params": []any{}, "_sha1": "b.json"}},
			obj{"content": obj{"size": 27, "mimeType": "application/json", "_sha1": "c.json"}}),
		pwEntry(1102, "GET", "http://shop.test/logo.png", 200, nil, obj{"content": obj{"size": 16, "mimeType": "image/png", "_sha1": "d.png"}}),
		pwEntry(1155, "GET", "http://shop.test/gone", 200, nil, obj{"content": obj{"size": 3, "mimeType": "text/plain", "_sha1": "not-in-the-zip.txt"}}),
		pwEntry(1185, "GET", "http://shop.test/pending", -1, nil, nil),
	)...)
	frameFile := "resources/page@1-1.jpeg"
	if version >= 9 {
		frameFile = "screencast/page@1-1.jpeg"
	}
	return zipOf(t,
		member{"trace.trace", trace},
		member{"trace.network", network},
		member{"trace.stacks", []byte(`{"files":[],"stacks":[]}`)},
		member{frameFile, jpeg},
		member{"resources/a.html", []byte("<h1>Sign in</h1>")},
		member{"resources/b.json", []byte(`{"password":"hunter2"}`)},
		member{"resources/c.json", []byte(`{"error":"BAD_CREDENTIALS"}`)},
		member{"resources/d.png", png},
	)
}

// pwAsFormat rewrites version-8 trace lines (the obj ones, in place) as
// Playwright writes them in a later format. 9 (Playwright 1.63): files are
// named by their path in the zip — a screencast frame's file under
// screencast/, a body's _file under resources/ — instead of sha1 and
// _sha1, a name under resources/; actions no longer name their snapshots
// (beforeSnapshot, inputSnapshot, afterSnapshot), a frame snapshot says
// its phase (before, action, after) instead of its snapshotName; a call
// may carry the stepId of the test step it belongs to. 10 (1.64 on):
// stepId is gone (a call's callId is its step's id).
func pwAsFormat(version int, lines ...any) []any {
	if version < 9 {
		return lines
	}
	toPath := func(m obj, from, to, dir string) {
		if name, ok := m[from].(string); ok {
			m[to] = dir + name
			delete(m, from)
		}
	}
	for _, l := range lines {
		e, ok := l.(obj)
		if !ok {
			continue
		}
		switch e["type"] {
		case "before":
			delete(e, "beforeSnapshot")
			if version == 9 {
				e["stepId"] = "step@" + e["callId"].(string)
			}
		case "input":
			delete(e, "inputSnapshot")
		case "after":
			delete(e, "afterSnapshot")
		case "frame-snapshot":
			sn := e["snapshot"].(obj)
			phase, _, _ := strings.Cut(sn["snapshotName"].(string), "@")
			if phase == "input" {
				phase = "action"
			}
			sn["phase"] = phase
			delete(sn, "snapshotName")
		case "screencast-frame":
			toPath(e, "sha1", "file", "screencast/")
		case "resource-snapshot":
			sn := e["snapshot"].(obj)
			if pd, ok := sn["request"].(obj)["postData"].(obj); ok {
				toPath(pd, "_sha1", "_file", "resources/")
			}
			if c, ok := sn["response"].(obj)["content"].(obj); ok {
				toPath(c, "_sha1", "_file", "resources/")
			}
		}
	}
	return lines
}

// TestPlaywrightNewerFormats: the synthetic trace written in format 9 and
// in format 10 imports to the very events format 8 does (the meta's
// trace_version aside), and the rewrite really took out what format 8
// had: no snapshot names, no sha1.
func TestPlaywrightNewerFormats(t *testing.T) {
	want, err := importPW(pwSynthetic(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []int{9, 10} {
		data := pwSyntheticAt(t, version)
		files := unzip(t, data)
		for _, name := range []string{"trace.trace", "trace.network"} {
			for _, old := range []string{"sha1", "Snapshot\"", "snapshotName"} {
				if bytes.Contains(files[name], []byte(old)) {
					t.Fatalf("format %d: %s still holds %s", version, name, old)
				}
			}
		}
		got, err := importPW(data)
		if err != nil {
			t.Fatalf("format %d: %v", version, err)
		}
		var meta event.Meta
		_ = json.Unmarshal(got[0].Data, &meta)
		if meta.Labels["trace_version"] != strconv.Itoa(version) {
			t.Errorf("format %d: meta %s", version, got[0].Data)
		}
		got[0] = want[0]
		if len(got) != len(want) {
			t.Fatalf("format %d: %d events, format 8 %d", version, len(got), len(want))
		}
		for i := range got {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Errorf("format %d: event %d:\n got %s %s\nwant %s %s", version, i, got[i].Kind, got[i].Data, want[i].Kind, want[i].Data)
			}
		}
	}
}

// TestPlaywrightMapping: a synthetic trace with every kind of line
// imports as documented on importer.Playwright.
func TestPlaywrightMapping(t *testing.T) {
	evs, err := importPW(pwSynthetic(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := importer.Check(evs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		what := ""
		switch e.Kind {
		case event.KindReceipt:
			var r event.Receipt
			_ = json.Unmarshal(e.Data, &r)
			what = r.Action.Verb + " " + r.Outcome
		case event.KindSnapshot:
			var s event.Snapshot
			_ = json.Unmarshal(e.Data, &s)
			what = s.When
		case event.KindHAR:
			h := entryOf(t, e)
			what = fmt.Sprintf("%s %s %d", h.Request.Method, strings.TrimPrefix(h.Request.URL, "http://shop.test"), h.Response.Status)
		case event.KindConsole:
			var c event.Console
			_ = json.Unmarshal(e.Data, &c)
			what = c.Level + " " + c.Text
		}
		got = append(got, strings.TrimSpace(fmt.Sprintf("%d %s %s", e.Step, e.Kind, what)))
	}
	want := []string{
		"0 meta",
		"0 console log booting",
		"1 receipt goto done",
		"1 snapshot before",
		"1 har GET /signin 200",
		"1 frame",
		"1 snapshot after",
		"1 har GET /logo.png 200",
		"2 receipt fill failed",
		"2 snapshot before",
		"2 har POST /api/signin 401",
		"2 snapshot after",
		"2 console error TypeError: x is undefined",
		"3 receipt click done",
		"3 har GET /gone 200",
		"4 receipt press outcome_unknown",
		"4 har GET /pending 0",
		"4 console warn slow",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var meta event.Meta
	_ = json.Unmarshal(evs[0].Data, &meta)
	if meta.Versions["browser"] != "chromium" || meta.Versions["browser_version"] != "148.0.0.0" ||
		meta.Versions["playwright"] != "1.61.1" || meta.Viewport == nil || *meta.Viewport != (event.Viewport{Width: 1280, Height: 800}) ||
		meta.Labels["imported_from"] != "playwright" || meta.Labels["trace_version"] != "8" || meta.Labels["platform"] != "linux" {
		t.Errorf("meta: %s", evs[0].Data)
	}
	if evs[1].TS != pwNS(1005) {
		t.Errorf("console ts %d, want %d", evs[1].TS, pwNS(1005))
	}

	receipts := map[int]event.Receipt{}
	for _, e := range kinds(evs, event.KindReceipt) {
		var r event.Receipt
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Step != e.Step || e.TS != r.StartedAt {
			t.Errorf("receipt of step %d: %s", e.Step, e.Data)
		}
		receipts[r.Step] = r
	}
	goTo := receipts[1]
	if goTo.StartedAt != pwNS(1010) || goTo.EndedAt != pwNS(1100) || string(goTo.Action.Args) != `{"url":"http://shop.test/signin","waitUntil":"load"}` ||
		goTo.Action.Target != nil || goTo.Effects == nil ||
		requestsOf(goTo.Effects) != "GET http://shop.test/signin 200; GET http://shop.test/logo.png 200" ||
		goTo.Effects.Navigation == nil || *goTo.Effects.Navigation != (event.Navigation{From: "about:blank", To: "http://shop.test/signin"}) {
		t.Errorf("goto: %+v %+v", goTo, goTo.Effects)
	}
	fill := receipts[2]
	if fill.Action.Target == nil || *fill.Action.Target != (event.Target{Name: "Password", Selector: `internal:label="Password"i`}) ||
		string(fill.Action.Args) != `{"value":"hunter2"}` || fill.Error == nil ||
		*fill.Error != (event.StepError{Code: "TIMEOUT", Message: "locator.fill: Timeout 100ms exceeded."}) ||
		fill.Effects == nil || fill.Effects.ConsoleErrors != 1 || fmt.Sprint(fill.Effects.Dialogs) != "[{alert Hello}]" ||
		requestsOf(fill.Effects) != "POST http://shop.test/api/signin 401" || fill.Effects.Navigation != nil {
		t.Errorf("fill: %+v %+v", fill, fill.Effects)
	}
	click := receipts[3]
	if click.Action.Target == nil || click.Action.Target.Role != "button" || click.Action.Target.Name != "Go on" ||
		string(click.Action.Args) != `{"button":"left"}` || click.EndedAt != pwNS(1160) {
		t.Errorf("click: %+v", click)
	}
	press := receipts[4]
	if string(press.Action.Args) != `{"key":"Enter"}` || press.EndedAt != 0 || press.Error != nil {
		t.Errorf("press: %+v", press)
	}

	// Snapshots: visible text, references resolved, nothing hidden.
	var texts []string
	for _, e := range kinds(evs, event.KindSnapshot) {
		var s event.Snapshot
		_ = json.Unmarshal(e.Data, &s)
		if s.View != "content" || s.Truncated {
			t.Errorf("snapshot: %s", e.Data)
		}
		texts = append(texts, fmt.Sprintf("%s@%s: %q", s.When, s.Origin, s.Text))
	}
	wantTexts := []string{
		`before@about:blank: ""`,
		`after@http://shop.test/signin: "Sign in\nPassword\nblue\nGo on"`,
		`before@http://shop.test/signin: "Sign in\nWelcome back\nPassword\nblue\nGo on"`,
		`after@http://shop.test/signin: "Sign in\nWelcome back\nPassword\nblue\nGo on"`,
	}
	if strings.Join(texts, "\n") != strings.Join(wantTexts, "\n") {
		t.Errorf("snapshots:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(wantTexts, "\n"))
	}

	// HAR: bodies inlined, binary as base64, a missing one left out with a
	// comment, no _sha1 left; a response never received is status 0.
	bodies := map[string]string{}
	for _, e := range kinds(evs, event.KindHAR) {
		if bytes.Contains(e.Data, []byte("_sha1")) {
			t.Errorf("_sha1 left in %s", e.Data)
		}
		var h struct {
			Request struct {
				URL      string `json:"url"`
				PostData *struct {
					Text string `json:"text"`
				} `json:"postData"`
			} `json:"request"`
			Response struct {
				Comment string `json:"comment"`
				Content struct {
					Text, Encoding, Comment string
				} `json:"content"`
			} `json:"response"`
			MonotonicTime float64 `json:"_monotonicTime"`
		}
		_ = json.Unmarshal(e.Data, &h)
		if e.TS != pwNS(h.MonotonicTime) {
			t.Errorf("%s: ts %d, want %d", h.Request.URL, e.TS, pwNS(h.MonotonicTime))
		}
		path := strings.TrimPrefix(h.Request.URL, "http://shop.test")
		c := h.Response.Content
		bodies[path] = c.Encoding + ":" + c.Text + c.Comment + h.Response.Comment
		if h.Request.PostData != nil {
			bodies[path+" request"] = h.Request.PostData.Text
		}
	}
	wantPNG := ":" + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"))
	if bodies["/signin"] != ":<h1>Sign in</h1>" || bodies["/api/signin"] != `:{"error":"BAD_CREDENTIALS"}` ||
		bodies["/api/signin request"] != `{"password":"hunter2"}` || bodies["/logo.png"] != "base64"+wantPNG ||
		bodies["/gone"] != ":body left out on import: its resource is not in the trace zip" ||
		bodies["/pending"] != ":no response before the trace ended" {
		t.Errorf("bodies: %q", bodies)
	}

	// Console: 1-based positions; a page error with its stack.
	for _, e := range kinds(evs, event.KindConsole) {
		var c event.Console
		_ = json.Unmarshal(e.Data, &c)
		switch c.Text {
		case "booting":
			if c.URL != "http://shop.test/app.js" || c.Line != 5 || c.Column != 3 {
				t.Errorf("console: %+v", c)
			}
		case "TypeError: x is undefined":
			if e.TS != pwNS(1140) || c.Line != 10 || c.Column != 5 || len(c.Stack) != 2 ||
				c.Stack[0] != (event.StackFrame{Function: "pay", URL: "http://shop.test/app.js", Line: 10, Column: 5}) ||
				c.Stack[1] != (event.StackFrame{URL: "http://shop.test/app.js", Line: 20, Column: 1}) {
				t.Errorf("page error: %+v", c)
			}
		case "slow":
			if c.URL != "" || c.Line != 0 {
				t.Errorf("console: %+v", c)
			}
		}
	}
	// The frame: the JPEG, its size, its time.
	frames := kinds(evs, event.KindFrame)
	var f event.Frame
	_ = json.Unmarshal(frames[0].Data, &f)
	if f.Mime != "image/jpeg" || !bytes.Equal(f.Image, tinyJPEG(t)) || f.Width != 1280 || f.Height != 800 || frames[0].TS != pwNS(1050) {
		t.Errorf("frame: %s %dx%d at %d", f.Mime, f.Width, f.Height, frames[0].TS)
	}

	// The same bytes through the io.Reader variant import the same.
	evs2, err := importer.PlaywrightReader(bytes.NewReader(pwSynthetic(t)))
	if err != nil || fmt.Sprint(evs2) != fmt.Sprint(evs) {
		t.Errorf("PlaywrightReader: %v", err)
	}
}

// TestPlaywrightOlderFormats: version 5 traces (action events, apiName,
// the wall clock on the action) and version 3 ones (action metadata).
func TestPlaywrightOlderFormats(t *testing.T) {
	v5 := ndjson(
		obj{"version": 5, "type": "context-options", "browserName": "firefox", "platform": "darwin", "wallTime": 1, "options": obj{}},
		obj{"type": "action", "callId": "call@1", "startTime": 500, "endTime": 600, "apiName": "page.goto", "class": "Frame", "method": "goto",
			"params": obj{"url": "http://a.test/"}, "wallTime": pwWall, "log": []any{}, "beforeSnapshot": "before@call@1"},
		obj{"type": "action", "callId": "call@2", "startTime": 700, "endTime": 800, "apiName": "locator.click", "class": "Frame", "method": "click",
			"params": obj{"selector": "#b"}, "wallTime": pwWall + 200, "error": obj{"error": obj{"name": "Error", "message": "boom"}}},
	)
	evs, err := importPW(zipOf(t, member{"trace.trace", v5}))
	if err != nil {
		t.Fatal(err)
	}
	rs := kinds(evs, event.KindReceipt)
	if len(rs) != 2 || rs[0].TS != pwWall*1e6 || rs[1].TS != (pwWall+200)*1e6 ||
		!strings.Contains(string(rs[0].Data), `"args":{"api":"page.goto","url":"http://a.test/"}`) ||
		!strings.Contains(string(rs[1].Data), `"outcome":"failed","error":{"code":"ACTION_FAILED","message":"boom"}`) {
		t.Fatalf("v5: %v", rs)
	}
	v3 := ndjson(
		obj{"version": 3, "type": "context-options", "browserName": "webkit", "wallTime": pwWall, "options": obj{}},
		obj{"type": "action", "metadata": obj{"id": "call@9", "type": "Frame", "method": "fill", "apiName": "page.fill",
			"params": obj{"selector": "#q", "value": "kettle"}, "startTime": 10, "endTime": 20, "wallTime": pwWall + 10,
			"snapshots": []any{obj{"title": "before", "snapshotName": "before@call@9"}}, "error": "not visible"}},
		obj{"type": "action", "metadata": obj{"id": "call@10", "type": "Tracing", "method": "tracingStop", "startTime": 30}},
		obj{"type": "action", "metadata": obj{"id": "call@11", "type": "Frame", "method": "click", "internal": true, "startTime": 40}},
	)
	evs, err = importPW(zipOf(t, member{"trace.trace", v3}))
	if err != nil {
		t.Fatal(err)
	}
	rs = kinds(evs, event.KindReceipt)
	if len(rs) != 1 || rs[0].TS != (pwWall+10)*1e6 ||
		!strings.Contains(string(rs[0].Data), `"action":{"verb":"fill","target":{"selector":"#q"},"args":{"api":"page.fill","value":"kettle"}},"outcome":"failed","error":{"code":"ACTION_FAILED","message":"not visible"}`) {
		t.Fatalf("v3: %v", rs)
	}
}

// TestBadPlaywright: each bad input is an *InputError that names where,
// never a value, and no events.
func TestBadPlaywright(t *testing.T) {
	good := pwSynthetic(t)
	ctx := ndjson(pwContext(8))
	withTrace := func(lines ...any) []byte {
		return zipOf(t, member{"trace.trace", ndjson(lines...)})
	}
	// A zip whose trace.trace is damaged inside: flip bytes of its
	// compressed data.
	damaged := append([]byte(nil), good...)
	if i := bytes.Index(damaged, []byte("trace.trace")); i >= 0 {
		for k := i + 40; k < i+80 && k < len(damaged); k++ {
			damaged[k] ^= 0x5a
		}
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "the file is empty"},
		{"json", []byte(`{"log":{"entries":[]}}`), "not a zip file: this file holds JSON"},
		{"text", []byte("hunter2 is not a zip"), "not a zip file"},
		{"truncated", good[:len(good)/2], "the zip is truncated or damaged"},
		{"cut before the end", good[:len(good)-10], "the zip is truncated or damaged"},
		{"damaged member", damaged, "the zip is truncated or damaged: trace.trace"},
		{"no trace.trace", zipOf(t, member{"trace.network", nil}), "no trace.trace in the zip"},
		{"test runner trace", zipOf(t, member{"test.trace", ctx}), "no trace.trace in the zip (it holds 1 other .trace files"},
		{"bad json line", zipOf(t, member{"trace.trace", append(append([]byte(nil), ctx...), "{\"type\":\"console\",\"text\":\"hunter2\" oops}\n"...)}), "trace.trace line 2: not valid JSON at column"},
		{"not an object", withTrace(pwContext(8), []any{"hunter2"}), "trace.trace line 2: a trace event is a JSON object; this line holds an array"},
		{"cut line", zipOf(t, member{"trace.trace", append(append([]byte(nil), ctx...), `{"type":"console","text":"hun`...)}), "trace.trace line 2: not valid JSON: the line ends early"},
		{"wrong type", withTrace(pwContext(8), obj{"type": "console", "time": "hunter2"}), "trace.trace line 2: time must be a number, not JSON string"},
		{"no type", withTrace(pwContext(8), obj{"text": "hunter2"}), "trace.trace line 2: the event has no type"},
		{"bad network line", zipOf(t, member{"trace.trace", ctx}, member{"trace.network", []byte("{\"type\":\"later\"}\nhunter2\n")}), "trace.network line 2: not valid JSON"},
		{"network not HAR", zipOf(t, member{"trace.trace", ctx}, member{"trace.network", ndjson(obj{"type": "resource-snapshot", "snapshot": obj{"url": "hunter2"}})}), "trace.network line 1: the resource snapshot has no request or response"},
		{"entry without url", zipOf(t, member{"trace.trace", ctx}, member{"trace.network", ndjson(pwEntry(1, "GET", "", 200, nil, nil))}), "trace.network line 1: the resource snapshot: request.url: is required"},
		{"newer", withTrace(pwContext(11)), "trace.trace line 1: trace format version 11 is newer than this importer reads (3 to 10)"},
		{"older", withTrace(pwContext(2)), "trace format version 2 is older"},
		{"no context", withTrace(obj{"type": "console", "messageType": "log", "text": "hunter2", "time": 1}), "trace.trace has no context-options event"},
		{"no wall time", withTrace(obj{"version": 8, "type": "context-options"}, obj{"type": "console", "messageType": "log", "text": "hunter2", "time": 1}), "context-options has no wallTime"},
		{"frame image missing", withTrace(pwContext(8), obj{"type": "screencast-frame", "sha1": "hunter2.jpeg", "width": 1, "height": 1, "timestamp": 1100}),
			"trace.trace line 2: the screencast frame's image is not in the zip"},
		{"frame file missing", withTrace(pwContext(10), obj{"type": "screencast-frame", "file": "screencast/hunter2.jpeg", "width": 1, "height": 1, "timestamp": 1100}),
			"trace.trace line 2: the screencast frame's image is not in the zip"},
		{"frame names no file", withTrace(pwContext(10), obj{"type": "screencast-frame", "width": 1, "height": 1, "timestamp": 1100}),
			"trace.trace line 2: screencast-frame without file or sha1"},
		{"before without callId", withTrace(pwContext(8), obj{"type": "before", "startTime": 1, "method": "click"}), "trace.trace line 2: before event without callId"},
		{"twice", withTrace(pwContext(8), obj{"type": "before", "callId": "c", "startTime": 1, "method": "click"}, obj{"type": "before", "callId": "c", "startTime": 2, "method": "click"}),
			"trace.trace line 3: a second before event for the same callId"},
		{"nothing", withTrace(pwContext(8)), "nothing to import"},
	}
	for _, c := range cases {
		evs, err := importPW(c.in)
		var ie *importer.InputError
		if !errors.As(err, &ie) || evs != nil {
			t.Errorf("%s: %v (%d events), want an InputError", c.name, err, len(evs))
			continue
		}
		if ie.Format != "Playwright trace" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, want %q", c.name, err, c.want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the message quotes the input: %v", c.name, err)
		}
	}
}

// TestPlaywrightTraceFromRealChromium: playwright-core (the release
// internal/testenv/playwright pins: the newest, trace format 10) drives
// Debian's Chromium through the storefront's gift-card checkout with
// tracing on (internal/testenv/playwright/checkout.js); the trace zip it
// writes imports with one step per action the script made, the 500 of
// POST /api/checkout in the Pay click's step, exactly the statuses the
// storefront served, the page's console error, frames and snapshots; the
// server stores it, frames and all, without the secrets typed or sent in
// it (the password and card number typed, the bearer token of every
// request's Authorization header, the session cookie) in any byte under
// its data directory, in any encoding a secret search knows; a truncated
// copy of the zip is refused.
func TestPlaywrightTraceFromRealChromium(t *testing.T) {
	start := time.Now()
	base, served := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	zipPath, run := testenv.PlaywrightCheckout(t, base)
	if run.Shown != failedPay {
		t.Fatalf("the page says %q", run.Shown)
	}
	data, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := importPW(data)
	if err != nil {
		t.Fatal(err)
	}

	// One step per action, in order, with the verb the API call maps to.
	verbOf := map[string]string{"browserContext.newPage": "new_page", "page.goto": "goto", "locator.fill": "fill",
		"locator.click": "click", "page.waitForURL": "wait", "locator.waitFor": "wait"}
	receipts := kinds(evs, event.KindReceipt)
	if len(receipts) != len(run.Actions) {
		t.Fatalf("%d receipts for the %d actions %v", len(receipts), len(run.Actions), run.Actions)
	}
	payStep := 0
	var last event.Receipt
	for i, e := range receipts {
		var r event.Receipt
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatal(err)
		}
		if e.Step != i+1 || r.Step != i+1 || r.Action.Verb != verbOf[run.Actions[i]] || r.StartedAt == 0 {
			t.Errorf("step %d (%s): %s", i+1, run.Actions[i], e.Data)
		}
		if r.Action.Verb == "click" && r.Action.Target != nil && r.Action.Target.Role == "button" && r.Action.Target.Name == "Pay" {
			payStep = r.Step
		}
		last = r
	}
	for _, e := range evs {
		if e.Step > len(run.Actions) {
			t.Fatalf("a %s event in step %d, after the last action's", e.Kind, e.Step)
		}
	}
	if payStep == 0 {
		t.Fatal("no receipt of the Pay click")
	}
	// The script's last action clicks a button the page does not have.
	if last.Outcome != event.OutcomeFailed || last.Error == nil || last.Error.Code != "TIMEOUT" ||
		strings.Contains(last.Error.Message, "Call log") {
		t.Errorf("the failing click: %+v %+v", last, last.Error)
	}

	// HAR entries: what the storefront served, with its statuses: every
	// imported entry was served, and everything served was imported but
	// the favicon, which the browser fetches for itself and Playwright
	// does not record. The failing checkout is in the Pay click's step,
	// body and all.
	var got, want []string
	var pay []event.Envelope
	for _, e := range kinds(evs, event.KindHAR) {
		h := entryOf(t, e)
		// The cart badge's WebSocket: Playwright records its upgrade as
		// ws:// 101, which the storefront's log (http://, once closed)
		// cannot match; it is checked for what it is instead.
		if h.Request.URL == "ws"+strings.TrimPrefix(base, "http")+"/ws/cart" && h.Response.Status == 101 {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %d", h.Request.Method, h.Request.URL, h.Response.Status))
		if h.Request.Method == "POST" && h.Request.URL == base+"/api/checkout" {
			pay = append(pay, e)
		}
	}
	unserved := map[string]int{}
	for _, r := range served() {
		unserved[fmt.Sprintf("%s %s %d", r.Method, r.URL, r.Status)]++
		// Nor is the cart badge's WebSocket asked of the import: the
		// storefront logs it only once closed, as a 200 of http://.
		if r.URL != base+"/favicon.ico" && r.URL != base+"/ws/cart" {
			want = append(want, fmt.Sprintf("%s %s %d", r.Method, r.URL, r.Status))
		}
	}
	var extra []string
	for _, g := range got {
		if unserved[g]--; unserved[g] < 0 {
			extra = append(extra, g)
		}
	}
	var missing []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if len(extra) > 0 || len(missing) > 0 || len(got) < len(want) {
		t.Fatalf("entries differ from what the storefront served: not served %v, not imported %v\n got:\n%s\nwant:\n%s",
			extra, missing, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(pay) != 1 || pay[0].Step != payStep || entryOf(t, pay[0]).Response.Status != 500 ||
		!strings.Contains(entryOf(t, pay[0]).Response.Content.Text, "GIFT_CARD_STATE") {
		t.Fatalf("POST /api/checkout (the Pay click is step %d): %v", payStep, pay)
	}
	var payReceipt event.Receipt
	_ = json.Unmarshal(receipts[payStep-1].Data, &payReceipt)
	if payReceipt.Effects == nil || !slices.Contains(payReceipt.Effects.Requests, event.RequestEffect{Method: "POST", URL: base + "/api/checkout", Status: 500}) {
		t.Errorf("the Pay receipt's effects: %s", receipts[payStep-1].Data)
	}

	// Console: the page's error; frames; snapshots of the page's text.
	consoleErr := false
	for _, e := range kinds(evs, event.KindConsole) {
		var c event.Console
		_ = json.Unmarshal(e.Data, &c)
		if c.Level == "error" && c.Text == "checkout failed: GIFT_CARD_STATE" && e.Step >= payStep && c.Line > 0 {
			consoleErr = true
		}
	}
	if !consoleErr {
		t.Errorf("no console error from the page: %v", kinds(evs, event.KindConsole))
	}
	frames := kinds(evs, event.KindFrame)
	if len(frames) == 0 {
		t.Fatal("no screencast frame imported")
	}
	for _, e := range frames {
		var f event.Frame
		_ = json.Unmarshal(e.Data, &f)
		if f.Mime != "image/jpeg" || f.Width <= 0 || f.Height <= 0 || len(f.Image) == 0 {
			t.Fatalf("frame: %s %dx%d", f.Mime, f.Width, f.Height)
		}
	}
	failedShown := false
	for _, e := range kinds(evs, event.KindSnapshot) {
		var s event.Snapshot
		_ = json.Unmarshal(e.Data, &s)
		if s.When == "after" && strings.Contains(s.Text, failedPay) {
			failedShown = true
		}
		if strings.Contains(s.Text, demoapp.Password) || strings.Contains(s.Text, "addEventListener") {
			t.Errorf("snapshot text holds an input value or script: %q", s.Text)
		}
	}
	if !failedShown {
		t.Error("no after snapshot shows the payment error")
	}
	var meta event.Meta
	_ = json.Unmarshal(evs[0].Data, &meta)
	major, _, _ := strings.Cut(run.Browser, ".")
	if meta.Versions["browser"] != "chromium" || meta.Versions["playwright"] != run.Playwright ||
		!strings.HasPrefix(meta.Versions["browser_version"], major+".") || meta.Viewport == nil || meta.Viewport.Width != 1280 ||
		meta.Labels["trace_version"] != "10" {
		t.Errorf("meta: %s (browser %s)", evs[0].Data, run.Browser)
	}

	// Stored through the server, frames and all: every secret typed or
	// sent was in the import (so a clean search means something), and no
	// spelling of any is in a byte under the data directory, the index's
	// rows, or what the server serves back.
	secrets := []string{demoapp.Password, demoapp.Card, run.Bearer, run.Cookie}
	labels := []string{"typed password", "typed card number", "Authorization bearer token", "session cookie"}
	imported, _ := json.Marshal(evs)
	for i, s := range secrets {
		if len(s) < 8 || len((testenv.Corpus{"import": imported}).Hits([]string{s}, labels[i:i+1])) == 0 {
			t.Fatalf("the import does not hold the %s: the search below proves nothing", labels[i])
		}
	}
	s := startServer(t)
	res, stored := s.imported(evs, "checkout-with-gift-card-fails")
	if len(stored) != len(evs) {
		t.Fatalf("stored %d events of %d", len(stored), len(evs))
	}
	servedJSON, _ := json.Marshal(stored)
	corpus := testenv.Corpus{"served events": servedJSON}
	corpus.AddFiles(t, s.dir, "running")
	s.stop()
	corpus.AddFiles(t, s.dir, "closed")
	corpus.AddSQLite(t, filepath.Join(s.dir, "index.sqlite"))
	if hits := corpus.Hits(secrets, labels); len(hits) > 0 {
		t.Errorf("secrets of the trace are stored (%d places):\n  %s", len(hits), strings.Join(hits, "\n  "))
	}

	// A truncated copy is refused.
	_, err = importPW(data[:len(data)*2/3])
	var ie *importer.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "the zip is truncated or damaged") {
		t.Errorf("truncated trace: %v", err)
	}
	t.Logf("playwright-core %s (trace format %s), Chromium %s: %d actions → %d events (%d har, %d console, %d frames, %d snapshots) in %d steps; %d secrets searched in %d bytes (%d files); %s",
		run.Playwright, meta.Labels["trace_version"], run.Browser, len(run.Actions), len(evs), len(got), len(kinds(evs, event.KindConsole)), len(frames),
		len(kinds(evs, event.KindSnapshot)), res.Steps, len(secrets), corpus.Size(), corpus.Count("file "), time.Since(start).Round(time.Millisecond))
}

// requestsOf lists a receipt's requests as "METHOD URL STATUS; …", the
// fields an import fills (a rerun's replay marks are not an import's).
func requestsOf(e *event.Effects) string {
	var parts []string
	for _, r := range e.Requests {
		parts = append(parts, fmt.Sprintf("%s %s %d", r.Method, r.URL, r.Status))
	}
	return strings.Join(parts, "; ")
}
