package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// evOf decodes and validates an event as ingest would.
func evOf(t testing.TB, kind event.Kind, data string) *event.Decoded {
	t.Helper()
	d, err := event.Decode(event.Envelope{Seq: 1, TS: 1764483600000000000, Step: 1, Kind: kind, Data: json.RawMessage(data)}, event.DefaultLimits)
	if err != nil {
		t.Fatalf("decode %s: %v", kind, err)
	}
	return d
}

func redactorOf(t testing.TB) *Redactor {
	t.Helper()
	r, err := New(testPlan(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// harOf builds a HAR entry around a request and response.
func harOf(req, resp string, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"startedDateTime":"2026-11-30T06:00:00.000Z","time":12.5,"request":` + req +
		`,"response":` + resp + `,"timings":{"send":0.1,"wait":10,"receive":2.4}` + extra + `}`
}

const okResp = `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":2,"mimeType":"application/json","text":"{}"},"redirectURL":"","headersSize":-1,"bodySize":2}`

func findingsHave(fs []Finding, rule, ptr string) bool {
	for _, f := range fs {
		if f.Rule == rule && (ptr == "" || f.Pointer == ptr) {
			return true
		}
	}
	return false
}

func TestHARHeadersCookiesURLs(t *testing.T) {
	const (
		authSecret   = "s3cr3t-auth-tok3n-AAAA"
		authSecret2  = "s3cond-auth-tok3n-BBBB"
		cookieSecret = "cookieSecretValue123"
		csrfSecret   = "csrfSecretValue456"
		userinfoPass = "pa55w0rdSecret"
		urlToken     = "urlTokenSecret789"
		fragToken    = "fragSecret000xyz"
		redirCode    = "redirCodeSecret111"
		locToken     = "locTokenSecret222"
		refSession   = "refSessionSecret333"
		initSig      = "initSigSecret444"
		formPass     = "p@ssFormSecret555"
	)
	reqURL := "https://bob:" + userinfoPass + "@api.example.com/cb?page=2&access_token=" + urlToken + "&x=1#id_token=" + fragToken + "&state=ok"
	req := `{"method":"POST","url":` + jsonStr(reqURL) + `,"httpVersion":"HTTP/1.1",
		"cookies":[{"name":"sid","value":"` + cookieSecret + `"},{"name":"theme","value":"dark"}],
		"headers":[{"name":"AUTHORIZATION","value":"Bearer ` + authSecret + `"},
			{"name":"Accept","value":"application/json"},
			{"name":"authorization","value":"Bearer ` + authSecret2 + `"},
			{"name":"Cookie","value":"sid=` + cookieSecret + `; csrftok=` + csrfSecret + `"},
			{"name":"Referer","value":"https://app.example/?session=` + refSession + `&tab=2"}],
		"queryString":[{"name":"page","value":"2"},{"name":"access_token","value":"` + urlToken + `"},{"name":"x","value":"1"}],
		"postData":{"mimeType":"application/x-www-form-urlencoded","text":"user=bob&password=` + url.QueryEscape(formPass) + `&remember=1",
			"params":[{"name":"user","value":"bob"},{"name":"password","value":"` + formPass + `"}]},
		"headersSize":-1,"bodySize":40}`
	resp := `{"status":302,"statusText":"Found","httpVersion":"HTTP/1.1",
		"cookies":[{"name":"sid","value":"` + cookieSecret + `","path":"/","httpOnly":true}],
		"headers":[{"name":"Set-Cookie","value":"sid=` + cookieSecret + `; Path=/; HttpOnly"},
			{"name":"Set-Cookie","value":"csrftok=` + csrfSecret + `; Path=/"},
			{"name":"Location","value":"/login?token=` + locToken + `&next=%2Fhome"}],
		"content":{"size":0,"mimeType":"text/html","text":""},
		"redirectURL":"https://app.example/next?code=` + redirCode + `&lang=en","headersSize":-1,"bodySize":0}`
	initiator := `"_initiator":{"type":"script","stack":{"callFrames":[{"functionName":"load","url":"https://cdn.example/app.js?sig=` + initSig + `&v=3","lineNumber":10}]}},"_priority":"High"`
	d := evOf(t, event.KindHAR, harOf(req, resp, initiator))
	r := redactorOf(t)
	res, err := r.Redact(d)
	if err != nil {
		t.Fatal(err)
	}
	if res.Data == nil {
		t.Fatal("nothing redacted")
	}
	secrets := []string{authSecret, authSecret2, cookieSecret, csrfSecret, userinfoPass, urlToken, fragToken,
		redirCode, locToken, refSession, initSig, formPass}
	for _, s := range secrets {
		assertNoSecret(t, res.Data, s)
	}
	assertFindingsClean(t, res.Findings, secrets...)

	// The result is still a valid HAR event; what is not secret survives.
	out := evOf(t, event.KindHAR, string(res.Data))
	h := out.Payload.(*event.HAR)
	if got := h.Request.URL; got != "https://[redacted]@api.example.com/cb?page=2&access_token=[redacted]&x=1#id_token=[redacted]&state=ok" {
		t.Errorf("url = %q", got)
	}
	if h.Response.RedirectURL != "https://app.example/next?code=[redacted]&lang=en" {
		t.Errorf("redirectURL = %q", h.Response.RedirectURL)
	}
	if h.Request.Headers[1].Value != "application/json" {
		t.Errorf("Accept header changed: %q", h.Request.Headers[1].Value)
	}
	if h.Request.Headers[0].Value != Erased || h.Request.Headers[2].Value != Erased {
		t.Errorf("authorization headers: %q, %q", h.Request.Headers[0].Value, h.Request.Headers[2].Value)
	}
	if v := h.Response.Headers[2].Value; v != "/login?token=[redacted]&next=%2Fhome" {
		t.Errorf("Location = %q", v)
	}
	if h.Request.Cookies[1].Value != Erased { // "*" drops every cookie
		t.Errorf("theme cookie = %q", h.Request.Cookies[1].Value)
	}
	if h.Request.QueryString[0].Value != "2" || h.Request.QueryString[1].Value != Erased {
		t.Errorf("queryString = %+v", h.Request.QueryString)
	}
	if h.Request.PostData.Text != "user=bob&password=[redacted]&remember=1" {
		t.Errorf("form text = %q", h.Request.PostData.Text)
	}
	var raw map[string]any
	if err := json.Unmarshal(res.Data, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["_priority"] != "High" {
		t.Error("an unknown HAR member was lost")
	}

	for _, c := range []struct{ rule, ptr string }{
		{"header:authorization", "/request/headers/0/value"},
		{"header:authorization", "/request/headers/2/value"},
		{"header:cookie", "/request/headers/3/value"},
		{"header:set-cookie", "/response/headers/0/value"},
		{"header:set-cookie", "/response/headers/1/value"},
		{"cookie", "/request/cookies/0/value"},
		{"cookie", "/response/cookies/0/value"},
		{"userinfo", "/request/url"},
		{"param:access_token", "/request/url"},
		{"fragment:id_token", "/request/url"},
		{"param:access_token", "/request/queryString/1/value"},
		{"param:password", "/request/postData/params/1/value"},
		{"param:password", "/request/postData/text"},
		{"param:code", "/response/redirectURL"},
		{"param:token", "/response/headers/2/value"},
		{"param:session", "/request/headers/4/value"},
		{"param:sig", "/_initiator/stack/callFrames/0/url"},
	} {
		if !findingsHave(res.Findings, c.rule, c.ptr) {
			t.Errorf("no finding %s at %s; have %+v", c.rule, c.ptr, res.Findings)
		}
	}
	for _, f := range res.Findings {
		if f.Channel != "har" {
			t.Errorf("finding channel %q", f.Channel)
		}
	}
}

func TestHARCookieHeaderKeptByPlan(t *testing.T) {
	p := testPlan()
	var keep []string
	for _, h := range p.DropHeaders {
		if h != "cookie" && h != "set-cookie" {
			keep = append(keep, h)
		}
	}
	p.DropHeaders = keep
	p.DropCookies = []string{"sid"}
	r, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := `{"method":"GET","url":"https://app.example/","httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"Cookie","value":"theme=dark; sid=cookieSecretValue123; lang=en"}],"queryString":[],"headersSize":-1,"bodySize":0}`
	resp := `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"set-cookie","value":"sid=otherCookieSecret456; Path=/; HttpOnly"},{"name":"Set-Cookie","value":"theme=light; Path=/"}],
		"content":{"size":0,"mimeType":"text/plain"},"redirectURL":"","headersSize":-1,"bodySize":0}`
	res, err := r.Redact(evOf(t, event.KindHAR, harOf(req, resp, "")))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "cookieSecretValue123")
	assertNoSecret(t, res.Data, "otherCookieSecret456")
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	if v := h.Request.Headers[0].Value; v != "theme=dark; sid=[redacted]; lang=en" {
		t.Errorf("Cookie = %q", v)
	}
	if v := h.Response.Headers[0].Value; v != "sid=[redacted]; Path=/; HttpOnly" {
		t.Errorf("Set-Cookie = %q", v)
	}
	if v := h.Response.Headers[1].Value; v != "theme=light; Path=/" {
		t.Errorf("kept Set-Cookie = %q", v)
	}
	if !findingsHave(res.Findings, "cookie", "/request/headers/0/value") || !findingsHave(res.Findings, "cookie", "/response/headers/0/value") {
		t.Errorf("findings %+v", res.Findings)
	}
}

func TestHARJSONPostData(t *testing.T) {
	body := `{"username":"bob","password":"jsonPwSecret666","payment":{"card_number":"4000056655665556","CVV":"737","note":"ok"},"code":"authCodeSecret777","items":[{"sku":"A1","qty":2}]}`
	req := `{"method":"POST","url":"https://api.example/pay","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],
		"postData":{"mimeType":"application/json; charset=utf-8","text":` + jsonStr(body) + `},"headersSize":-1,"bodySize":10}`
	r := redactorOf(t)
	res, err := r.Redact(evOf(t, event.KindHAR, harOf(req, okResp, "")))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"jsonPwSecret666", "4000056655665556", "authCodeSecret777"} {
		assertNoSecret(t, res.Data, s)
	}
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	var got map[string]any
	if err := json.Unmarshal([]byte(h.Request.PostData.Text), &got); err != nil {
		t.Fatalf("body no longer JSON: %v", err)
	}
	pay := got["payment"].(map[string]any)
	if got["username"] != "bob" || pay["note"] != "ok" || pay["CVV"] != Erased || pay["card_number"] != Erased || got["code"] != Erased {
		t.Errorf("body = %v", got)
	}
	for _, rule := range []string{"json-key:password", "json-key:cardnumber", "json-key:cvv", "param:code"} {
		if !findingsHave(res.Findings, rule, "/request/postData/text") {
			t.Errorf("no finding %s; have %+v", rule, res.Findings)
		}
	}
	// The erased values are remembered: a console line quoting one is masked.
	cres, err := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"debug: pw jsonPwSecret666"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, cres.Data, "jsonPwSecret666")
	if !findingsHave(cres.Findings, "known-value", "/text") {
		t.Errorf("console findings %+v", cres.Findings)
	}
}

func TestHARBase64JSONBodyWithJWT(t *testing.T) {
	body := `{"id_token":"` + tJWT + `","user":"bob","data":"jwt:` + tJWT2 + `","amount":12.50}`
	resp := `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],
		"content":{"size":100,"mimeType":"application/json","encoding":"base64","text":"` + base64.StdEncoding.EncodeToString([]byte(body)) + `"},
		"redirectURL":"","headersSize":-1,"bodySize":100}`
	req := `{"method":"GET","url":"https://api.example/me","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}`
	r := redactorOf(t)
	res, err := r.Redact(evOf(t, event.KindHAR, harOf(req, resp, "")))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{tJWT, tJWT2, strings.Split(tJWT2, ".")[1], strings.Split(tJWT, ".")[2]} {
		assertNoSecret(t, res.Data, s)
	}
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	if h.Response.Content.Encoding != "base64" {
		t.Errorf("encoding = %q", h.Response.Content.Encoding)
	}
	dec, err := base64.StdEncoding.DecodeString(h.Response.Content.Text)
	if err != nil {
		t.Fatalf("body not base64: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(dec, &got); err != nil {
		t.Fatalf("decoded body not JSON: %v (%q)", err, dec)
	}
	if got["user"] != "bob" || got["id_token"] != Erased || got["data"] != "jwt:"+Erased {
		t.Errorf("body = %v", got)
	}
	if !strings.Contains(string(dec), `"amount":12.50`) {
		t.Errorf("number spelling lost: %s", dec)
	}
	if !findingsHave(res.Findings, "json-key:idtoken", "/response/content/text") || !findingsHave(res.Findings, "detector:jwt", "/response/content/text") {
		t.Errorf("findings %+v", res.Findings)
	}
}

const tJWT2 = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6MTc2NDQ4MzYwMH0.c2lnbmF0dXJlLXNlY29uZC10b2tlbi1zaWduYXR1cmUtYnl0ZXM"

func TestHARBodyJWTStraddlesCap(t *testing.T) {
	for _, b64 := range []bool{false, true} {
		t.Run(fmt.Sprintf("base64=%v", b64), func(t *testing.T) {
			start := event.MaxHARBody - 40 // the token runs across the cap
			body := strings.Repeat("a", start) + " " + tJWT + " " + strings.Repeat("b", 100<<10-start-len(tJWT)-2)
			text, enc := body, ""
			if b64 {
				text, enc = base64.StdEncoding.EncodeToString([]byte(body)), `,"encoding":"base64"`
			}
			resp := `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],
				"content":{"size":102400,"mimeType":"text/plain"` + enc + `,"text":"` + text + `"},
				"redirectURL":"","headersSize":-1,"bodySize":102400}`
			req := `{"method":"GET","url":"https://api.example/big","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}`
			r := redactorOf(t)
			res, err := r.Redact(evOf(t, event.KindHAR, harOf(req, resp, "")))
			if err != nil {
				t.Fatal(err)
			}
			for _, part := range append([]string{tJWT}, strings.Split(tJWT, ".")...) {
				assertNoSecret(t, res.Data, part)
			}
			h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
			if !h.Truncated {
				t.Error("_truncated not set")
			}
			got := h.Response.Content.Text
			if b64 {
				dec, err := base64.StdEncoding.DecodeString(got)
				if err != nil {
					t.Fatal(err)
				}
				got = string(dec)
			}
			if len(got) > event.MaxHARBody || len(got) < event.MaxHARBody-len(tJWT) {
				t.Errorf("stored body is %d bytes, want the cap %d", len(got), event.MaxHARBody)
			}
			if !strings.Contains(got, " "+Erased+" ") || !strings.HasPrefix(got, "aaaa") {
				t.Errorf("body around the token: %q", got[start-10:start+20])
			}
			if !findingsHave(res.Findings, "detector:jwt", "/response/content/text") {
				t.Errorf("findings %+v", res.Findings)
			}
		})
	}
}

func TestHARCapUTF8(t *testing.T) {
	body := strings.Repeat("é", event.MaxHARBody) // 2 bytes each: over the cap
	resp := `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],
		"content":{"size":1,"mimeType":"text/plain","text":"` + body + `"},"redirectURL":"","headersSize":-1,"bodySize":1}`
	req := `{"method":"GET","url":"https://api.example/","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}`
	res, err := redactorOf(t).Redact(evOf(t, event.KindHAR, harOf(req, resp, "")))
	if err != nil {
		t.Fatal(err)
	}
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	if !h.Truncated || len(h.Response.Content.Text) != event.MaxHARBody || strings.ContainsRune(h.Response.Content.Text, '\uFFFD') {
		t.Errorf("truncated=%v len=%d", h.Truncated, len(h.Response.Content.Text))
	}
	if len(res.Findings) != 0 {
		t.Errorf("capping is not a finding: %+v", res.Findings)
	}
}

func TestHARDropBodyMime(t *testing.T) {
	resp := `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],
		"content":{"size":20,"mimeType":"application/octet-stream","text":"binarySecretBody777"},"redirectURL":"","headersSize":-1,"bodySize":20}`
	req := `{"method":"PUT","url":"https://api.example/blob","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],
		"postData":{"mimeType":"Application/Octet-Stream","text":"uploadSecretBody888"},"headersSize":-1,"bodySize":20}`
	res, err := redactorOf(t).Redact(evOf(t, event.KindHAR, harOf(req, resp, "")))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "binarySecretBody777")
	assertNoSecret(t, res.Data, "uploadSecretBody888")
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	if h.Response.Content.Text != "" || h.Response.Content.MimeType != "application/octet-stream" {
		t.Errorf("content = %+v", h.Response.Content)
	}
	if !findingsHave(res.Findings, "body-mime:application/octet-stream", "/response/content/text") ||
		!findingsHave(res.Findings, "body-mime:application/octet-stream", "/request/postData/text") {
		t.Errorf("findings %+v", res.Findings)
	}

	// a trailing /* matches the type
	p := testPlan()
	p.DropBodyMimes = []string{"image/*"}
	r, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp = `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[],
		"content":{"size":20,"mimeType":"image/png","encoding":"base64","text":"aW1hZ2VTZWNyZXRCeXRlcw=="},"redirectURL":"","headersSize":-1,"bodySize":20}`
	req = `{"method":"GET","url":"https://api.example/i.png","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}`
	res, err = r.Redact(evOf(t, event.KindHAR, harOf(req, resp, "")))
	if err != nil {
		t.Fatal(err)
	}
	if !findingsHave(res.Findings, "body-mime:image/*", "/response/content/text") {
		t.Errorf("findings %+v", res.Findings)
	}
	assertNoSecret(t, res.Data, "imageSecretBytes")
}

func TestHARHeaderDetectorAndPercentEncoding(t *testing.T) {
	nested := "https://app.example/cb?next=" + url.QueryEscape("https://idp.example/x?client_secret=nestedSecret999&a=1")
	req := `{"method":"GET","url":` + jsonStr(nested) + `,"httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"X-Debug","value":"trace ` + tGHP + `"},{"name":"X-Session-Token","value":"hdrSessSecret42"}],
		"queryString":[{"name":"next","value":` + jsonStr("https://idp.example/x?client_secret=nestedSecret999&a=1") + `}],"headersSize":-1,"bodySize":0}`
	res, err := redactorOf(t).Redact(evOf(t, event.KindHAR, harOf(req, okResp, "")))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{tGHP, "nestedSecret999", "hdrSessSecret42"} {
		assertNoSecret(t, res.Data, s)
	}
	if !findingsHave(res.Findings, "detector:github", "/request/headers/0/value") ||
		!findingsHave(res.Findings, "detector:generic", "/request/headers/1/value") ||
		!findingsHave(res.Findings, "param:client_secret", "/request/url") ||
		!findingsHave(res.Findings, "param:client_secret", "/request/queryString/0/value") {
		t.Errorf("findings %+v", res.Findings)
	}
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	u, err := url.Parse(h.Request.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Query().Get("next"); got != "https://idp.example/x?client_secret=[redacted]&a=1" {
		t.Errorf("nested URL = %q", got)
	}
}

func TestHARUnchanged(t *testing.T) {
	req := `{"method":"GET","url":"https://app.example/api/item/7?page=2","httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"accept","value":"application/json"}],"queryString":[{"name":"page","value":"2"}],"headersSize":-1,"bodySize":0}`
	r := redactorOf(t)
	for _, data := range []string{
		harOf(req, okResp, ""),
		harOf(req, `{"status":200,"statusText":"OK","httpVersion":"HTTP/1.1","cookies":[],"headers":[{"name":"content-type","value":"application/json"}],
			"content":{"size":60,"mimeType":"application/json","text":"{\"items\":[{\"id\":1,\"name\":\"Widget\"}],\"total\":1}"},"redirectURL":"","headersSize":-1,"bodySize":60}`, ""),
	} {
		res, err := r.Redact(evOf(t, event.KindHAR, data))
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed() || res.Data != nil || len(res.Findings) != 0 {
			t.Errorf("clean HAR changed: %s %+v", res.Data, res.Findings)
		}
	}
	// The slow path too (a header the fast path sends on) leaves a clean
	// entry alone.
	p := testPlan()
	p.DropHeaders = nil
	r2, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	req2 := `{"method":"GET","url":"https://app.example/","httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"cookie","value":""}],"queryString":[],"headersSize":-1,"bodySize":0}`
	res, err := r2.Redact(evOf(t, event.KindHAR, harOf(req2, okResp, "")))
	if err != nil || res.Data != nil {
		t.Errorf("clean HAR (slow path) changed: %s %v", res.Data, err)
	}
}

func TestHARPseudonyms(t *testing.T) {
	p := testPlan()
	p.Pseudonymize = true
	r, err := New(p, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	req := `{"method":"GET","url":"https://app.example/?token=sameTokenSecret1","httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"X-Auth-Token","value":"sameTokenSecret1"}],"queryString":[],"headersSize":-1,"bodySize":0}`
	res, err := r.Redact(evOf(t, event.KindHAR, harOf(req, okResp, "")))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "sameTokenSecret1")
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	ps := h.Request.Headers[0].Value
	if !strings.HasPrefix(ps, "[redacted:") || !strings.Contains(h.Request.URL, "token="+ps) {
		t.Errorf("pseudonyms do not correlate: header %q url %q", ps, h.Request.URL)
	}
}

func BenchmarkRedactHARClean(b *testing.B) {
	r := redactorOf(b)
	d := evOf(b, event.KindHAR, harOf(`{"method":"GET","url":"https://app.example/api/item/412?page=3","httpVersion":"HTTP/1.1","cookies":[],
		"headers":[{"name":"accept","value":"application/json"}],"queryString":[],"headersSize":-1,"bodySize":0}`, okResp, ""))
	b.ReportAllocs()
	for b.Loop() {
		if res, _ := r.Redact(d); res.Data != nil {
			b.Fatal("changed")
		}
	}
}

func TestHARMiscasedMembers(t *testing.T) {
	// encoding/json accepts "Request", "Headers", "Value": so must redaction.
	data := `{"startedDateTime":"2026-11-30T06:00:00.000Z","time":1,"Request":{"Method":"GET","URL":"https://app.example/?token=caseTokenSecret1","httpVersion":"HTTP/1.1","cookies":[],
		"Headers":[{"Name":"Authorization","VALUE":"Bearer caseAuthSecret2"}],"queryString":[],"headersSize":-1,"bodySize":0},"response":` + okResp + `}`
	d := evOf(t, event.KindHAR, data)
	before := string(d.Data)
	res, err := redactorOf(t).Redact(d)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Data) != before {
		t.Error("Redact modified the event's data")
	}
	assertNoSecret(t, res.Data, "caseTokenSecret1")
	assertNoSecret(t, res.Data, "caseAuthSecret2")
	if !findingsHave(res.Findings, "header:authorization", "/request/headers/0/value") {
		t.Errorf("findings %+v", res.Findings)
	}
	if !strings.Contains(string(res.Data), `"request":`) {
		t.Errorf("member not canonicalized: %s", res.Data)
	}
	// two spellings of one member: refused, not half-redacted
	dup := `{"startedDateTime":"x","time":1,"request":{"method":"GET","url":"https://a.example/","httpVersion":"1.1","cookies":[],"headers":[{"name":"authorization","value":"Bearer a","Value":"Bearer dupSecret"}],"queryString":[],"headersSize":-1,"bodySize":0},"response":` + okResp + `}`
	if _, err := redactorOf(t).Redact(evOf(t, event.KindHAR, dup)); err == nil {
		t.Error("members differing only in case were accepted")
	} else if strings.Contains(err.Error(), "dupSecret") {
		t.Error("the error quotes the input")
	}
}
