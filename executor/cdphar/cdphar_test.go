package cdphar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
	"github.com/flightrec/flightrec/internal/testenv"
)

// TestRecordCookieApp drives a real Chromium to the cookie app and checks
// that the capture holds what went over the wire: both Set-Cookie lines,
// the Cookie header sent back, the form body.
func TestRecordCookieApp(t *testing.T) {
	cp := testenv.CaptureCookieApp(t)
	if len(cp.Entries) < 3 {
		t.Fatalf("captured %d entries, want at least 3", len(cp.Entries))
	}
	if len(cp.Secrets) != 3 {
		t.Fatalf("the app issued or received %d secrets, want sid, csrf and a password: the page did not run through", len(cp.Secrets))
	}
	sid, csrf, password := cp.Secrets[0], cp.Secrets[1], cp.Secrets[2]

	// A fixture for looking at (go test -v prints its path); never in the repo.
	fixture := filepath.Join(t.TempDir(), "cookieapp.har.ndjson")
	var nd bytes.Buffer
	for _, e := range cp.Entries {
		nd.Write(e)
		nd.WriteByte('\n')
	}
	if err := os.WriteFile(fixture, nd.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries saved to %s", len(cp.Entries), fixture)

	byPath := map[string]cdphar.Entry{}
	for i, raw := range cp.Entries {
		// Every entry validates as the har kind's payload.
		env := event.Envelope{Seq: uint64(i + 1), TS: time.Now().UnixNano(), Step: 1, Kind: event.KindHAR, Data: raw}
		if _, err := event.Decode(env, event.DefaultLimits); err != nil {
			t.Fatalf("entry %d does not validate as har: %v\n%s", i, err, raw)
		}
		var e cdphar.Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.StartedDateTime); err != nil || !strings.Contains(e.StartedDateTime, ".") {
			t.Errorf("startedDateTime %q is not RFC 3339 with ms", e.StartedDateTime)
		}
		if e.Timings.Send < 0 || e.Timings.Wait < 0 || e.Timings.Receive < 0 || e.Time < 0 {
			t.Errorf("%s: timings %+v time %v", e.Request.URL, e.Timings, e.Time)
		}
		path := strings.TrimPrefix(e.Request.URL, cp.BaseURL)
		t.Logf("%s %s -> %d %s, %d req headers, %d resp headers, %d bytes, %.1f ms, initiator %s",
			e.Request.Method, path, e.Response.Status, e.Response.HTTPVersion, len(e.Request.Headers),
			len(e.Response.Headers), e.Response.Content.Size, e.Time, initiatorType(e))
		byPath[e.Request.Method+" "+path] = e
	}

	root, ok := byPath["GET /"]
	if !ok {
		t.Fatalf("no entry for GET /: %v", keys(byPath))
	}
	if root.Response.Status != 200 || root.Response.HTTPVersion != "HTTP/1.1" {
		t.Errorf("GET /: %d %s", root.Response.Status, root.Response.HTTPVersion)
	}
	var setCookies []string
	for _, h := range root.Response.Headers {
		if strings.EqualFold(h.Name, "Set-Cookie") {
			setCookies = append(setCookies, h.Value)
		}
	}
	if len(setCookies) != 2 || !strings.Contains(setCookies[0]+setCookies[1], "sid="+sid) ||
		!strings.Contains(setCookies[0]+setCookies[1], "csrf="+csrf) {
		t.Errorf("GET / Set-Cookie headers: %q", setCookies)
	}
	cookies := map[string]event.Cookie{}
	for _, c := range root.Response.Cookies {
		cookies[c.Name] = c
	}
	if c := cookies["sid"]; len(root.Response.Cookies) != 2 || c.Value != sid || !c.HTTPOnly || c.Path != "/" {
		t.Errorf("GET / response cookies: %+v", root.Response.Cookies)
	}
	if c := cookies["csrf"]; c.Value != csrf || c.HTTPOnly {
		t.Errorf("GET / csrf cookie: %+v", c)
	}
	if !strings.Contains(root.Response.Content.Text, "/api/login") || root.Response.Content.Encoding != "" ||
		!strings.HasPrefix(root.Response.Content.MimeType, "text/html") {
		t.Errorf("GET / content: %+v", root.Response.Content)
	}
	if root.Response.BodySize != root.Response.Content.Size {
		t.Errorf("GET / bodySize %d, content size %d", root.Response.BodySize, root.Response.Content.Size)
	}
	if root.Initiator == nil || root.Initiator.Type != "other" {
		t.Errorf("GET / initiator: %+v", root.Initiator)
	}

	me, ok := byPath["GET /api/me"]
	if !ok {
		t.Fatalf("no entry for GET /api/me: %v", keys(byPath))
	}
	cookieHdr := ""
	for _, h := range me.Request.Headers {
		if strings.EqualFold(h.Name, "Cookie") {
			cookieHdr = h.Value
		}
	}
	if me.Response.Status != 200 || !strings.Contains(cookieHdr, "sid="+sid) || !strings.Contains(cookieHdr, "csrf="+csrf) {
		t.Errorf("GET /api/me: status %d, Cookie %q", me.Response.Status, cookieHdr)
	}
	sent := map[string]string{}
	for _, c := range me.Request.Cookies {
		sent[c.Name] = c.Value
	}
	if sent["sid"] != sid || sent["csrf"] != csrf {
		t.Errorf("GET /api/me request cookies: %+v", me.Request.Cookies)
	}
	if !strings.Contains(me.Response.Content.Text, sid) {
		t.Errorf("GET /api/me body: %q", me.Response.Content.Text)
	}
	if me.Initiator == nil || me.Initiator.Type != "script" {
		t.Errorf("GET /api/me initiator: %+v", me.Initiator)
	} else if me.Initiator.Stack != nil && (len(me.Initiator.Stack.CallFrames) == 0 ||
		!strings.HasPrefix(me.Initiator.Stack.CallFrames[0].URL, cp.BaseURL)) {
		t.Errorf("GET /api/me initiator stack: %+v", me.Initiator.Stack)
	}

	login, ok := byPath["POST /api/login"]
	if !ok {
		t.Fatalf("no entry for POST /api/login: %v", keys(byPath))
	}
	pd := login.Request.PostData
	if login.Response.Status != 200 || pd == nil || pd.Text != "user=buyer&password="+password ||
		!strings.HasPrefix(pd.MimeType, "application/x-www-form-urlencoded") || login.Request.BodySize != int64(len(pd.Text)) {
		t.Fatalf("POST /api/login: status %d, postData %+v", login.Response.Status, pd)
	}
	if len(pd.Params) != 2 || pd.Params[1] != (event.NameValue{Name: "password", Value: password}) {
		t.Errorf("POST /api/login params: %+v", pd.Params)
	}
	for k, e := range byPath {
		want := 200
		switch {
		case strings.HasPrefix(k, "GET /favicon"):
			continue
		case strings.Contains(k, " /collect"):
			want = 204 // the app's analytics beacons answer No Content
		}
		if e.Response.Status != want {
			t.Errorf("%s: status %d, want %d", k, e.Response.Status, want)
		}
	}
}

func initiatorType(e cdphar.Entry) string {
	if e.Initiator == nil {
		return "-"
	}
	return e.Initiator.Type
}

func keys(m map[string]cdphar.Entry) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRecordRedirectAndFailure checks the two ways an entry ends other
// than loadingFinished: a redirect (one CDP request id, two entries) and a
// request that gets no response (status 0 with _error).
func TestRecordRedirectAndFailure(t *testing.T) {
	ctx := testenv.Chromium(t)
	// A port nothing listens on: take one, then give it back.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/nothing"
	ln.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>start</title><script>
(async () => {
  const r = await fetch("/old?a=1&b=x%%20y");
  await r.text();
  try { await fetch(%q); } catch (e) {}
  document.title = "done";
})();
</script>`, refused)
	})
	mux.HandleFunc("GET /old", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "hop=1; Path=/; Max-Age=60")
		http.Redirect(w, r, "/new", http.StatusFound)
	})
	mux.HandleFunc("GET /new", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2, 0xff})
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	rec, err := cdphar.Start(ctx, cdphar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(srv.URL+"/"),
		chromedp.Poll[chromedp.Void](`document.title === "done"`, chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if err := rec.WaitIdle(tctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var old, nw, fail *cdphar.Entry
	for _, raw := range rec.Entries() {
		var e cdphar.Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(e.Request.URL, srv.URL+"/old"):
			old = &e
		case e.Request.URL == srv.URL+"/new":
			nw = &e
		case e.Request.URL == refused:
			fail = &e
		}
	}
	if old == nil || nw == nil || fail == nil {
		t.Fatalf("entries for /old %v, /new %v, the refused port %v", old != nil, nw != nil, fail != nil)
	}
	if old.Response.Status != 302 || old.Response.RedirectURL != srv.URL+"/new" || old.Response.BodySize != 0 ||
		len(old.Response.Cookies) != 1 || old.Response.Cookies[0].Name != "hop" || old.Response.Cookies[0].Expires == "" {
		t.Errorf("redirect hop: %+v", old.Response)
	}
	if len(old.Request.QueryString) != 2 || old.Request.QueryString[1] != (event.NameValue{Name: "b", Value: "x y"}) {
		t.Errorf("query string: %+v", old.Request.QueryString)
	}
	if nw.Response.Status != 200 || nw.Response.Content.Encoding != "base64" || nw.Response.Content.Text != "AAEC/w==" ||
		nw.Response.Content.Size != 4 {
		t.Errorf("redirect target: %+v", nw.Response)
	}
	if nw.StartedDateTime < old.StartedDateTime {
		t.Errorf("redirect target starts %s before the hop %s", nw.StartedDateTime, old.StartedDateTime)
	}
	if fail.Response.Status != 0 || !strings.Contains(fail.Response.Error, "ERR_CONNECTION_REFUSED") {
		t.Errorf("refused request: %+v", fail.Response)
	}
	t.Logf("redirect %d -> %s; refused: %q", old.Response.Status, old.Response.RedirectURL, fail.Response.Error)
}
