package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
)

func TestTextSnapshotMaskedFields(t *testing.T) {
	text := "main \"Checkout\"\n" +
		" textbox \"Email\" value=\"buyer@acme.example\" @e3\n" +
		" textbox \"Card number\" value=\"4242 4242 4242 4242\" @e4\n" +
		" textbox \"Password\" value=\"hunter2\" @e5\n" +
		" textbox \"Your PIN\" value=\"8812\" @e6\n" +
		" textbox \"Promo\" value=\"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\" @e7\n" +
		" textbox \"Quantity\" value=\"2\" @e8\n" +
		" button \"Pay\" @e9"
	data := `{"view":"interactive","when":"after","origin":"https://pv-4718.preview.example","nonce":"7f3a","text":` + jsonStr(text) + `}`
	r := redactorOf(t)
	res, err := r.Redact(evOf(t, event.KindSnapshot, data))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"4242 4242 4242 4242", "hunter2", "8812", tGHP} {
		assertNoSecret(t, res.Data, s)
	}
	assertFindingsClean(t, res.Findings, "hunter2", "4242", "8812")
	got := evOf(t, event.KindSnapshot, string(res.Data)).Payload.(*event.Snapshot).Text
	for _, want := range []string{
		`textbox "Email" value="buyer@acme.example" @e3`,
		`textbox "Card number" value="[redacted]" @e4`,
		`textbox "Password" value="[redacted]" @e5`,
		`textbox "Your PIN" value="[redacted]" @e6`,
		`textbox "Promo" value="[redacted]" @e7`,
		`textbox "Quantity" value="2" @e8`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("snapshot text lacks %q:\n%s", want, got)
		}
	}
	n := 0
	for _, f := range res.Findings {
		if f.Rule == "snapshot:masked-field" && f.Pointer == "/text" && f.Channel == "snapshot" {
			n++
		}
	}
	if n != 4 {
		t.Errorf("want 4 snapshot:masked-field findings at /text, have %+v", res.Findings)
	}
	// the password is now known: a console line quoting it is masked
	cres, err := r.Redact(evOf(t, event.KindConsole, `{"level":"warn","text":"login with hunter2 failed"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, cres.Data, "hunter2")
	// and a fill aimed at the masked ref alone is recognised
	rres, err := r.Redact(evOf(t, event.KindReceipt, `{"step":2,"action":{"verb":"fill","target":{"ref":"@e5"},"args":["n3wPassw0rd"]},"outcome":"done"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, rres.Data, "n3wPassw0rd")
}

func TestTextReceiptFillPassword(t *testing.T) {
	r := redactorOf(t)
	data := `{"step":3,"action":{"verb":"fill","target":{"ref":"@e5","role":"textbox","name":"Password"},"args":{"text":"corr3ct-h0rse","delay":10}},
		"outcome":"done","effects":{"navigation":{"from":"https://app.example/login","to":"https://app.example/home"}},"rule":"preview-auto"}`
	res, err := r.Redact(evOf(t, event.KindReceipt, data))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "corr3ct-h0rse")
	if !findingsHave(res.Findings, "receipt:masked-target", "/action/args/text") {
		t.Errorf("findings %+v", res.Findings)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Data, &got); err != nil {
		t.Fatal(err)
	}
	if got["rule"] != "preview-auto" || got["action"].(map[string]any)["verb"] != "fill" {
		t.Errorf("receipt = %s", res.Data)
	}
	// a selector in MaskSelectors, and type into a card field
	p := testPlan()
	p.MaskSelectors = []string{"#secret-answer"}
	r2, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ data, secret string }{
		{`{"step":1,"action":{"verb":"fill","target":{"selector":"#secret-answer"},"args":"myFirstPet99"},"outcome":"done"}`, "myFirstPet99"},
		{`{"step":1,"action":{"verb":"type","target":{"role":"textbox","name":"Card number"},"args":["5555 5555 5555 4444"]},"outcome":"done"}`, "5555 5555 5555 4444"},
		{`{"step":1,"action":{"verb":"FILL","target":{"role":"textbox","name":"Field 7"},"args":["otpValue3141"]},"resolved":{"role":"textbox","name":"One-time code (OTP)"},"outcome":"done"}`, "otpValue3141"},
	} {
		res, err := r2.Redact(evOf(t, event.KindReceipt, c.data))
		if err != nil {
			t.Fatal(err)
		}
		assertNoSecret(t, res.Data, c.secret)
		if !findingsHave(res.Findings, "receipt:masked-target", "") {
			t.Errorf("%s: findings %+v", c.data, res.Findings)
		}
	}
	// a click on a password field has no args to erase; a fill elsewhere is kept
	for _, data := range []string{
		`{"step":1,"action":{"verb":"click","target":{"role":"textbox","name":"Password"}},"outcome":"done"}`,
		`{"step":1,"action":{"verb":"fill","target":{"role":"textbox","name":"Email"},"args":["buyer@acme.example"]},"outcome":"done"}`,
	} {
		res, err := r2.Redact(evOf(t, event.KindReceipt, data))
		if err != nil || res.Data != nil {
			t.Errorf("%s: changed to %s (%v)", data, res.Data, err)
		}
	}
}

func TestTextCheckOnCardField(t *testing.T) {
	r := redactorOf(t)
	data := `{"type":"ui","target":"textbox \"Card number\"","expect":{"value":"4000 0566 5566 5556"},"actual":{"value":"4000056655665556"},"passed":false}`
	res, err := r.Redact(evOf(t, event.KindCheck, data))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "4000 0566 5566 5556")
	assertNoSecret(t, res.Data, "4000056655665556")
	c := evOf(t, event.KindCheck, string(res.Data)).Payload.(*event.Check)
	if string(c.Expect) != `"[redacted]"` || string(c.Actual) != `"[redacted]"` || c.Target != `textbox "Card number"` {
		t.Errorf("check = %s", res.Data)
	}
	if !findingsHave(res.Findings, "check:masked-field", "/expect") || !findingsHave(res.Findings, "check:masked-field", "/actual") {
		t.Errorf("findings %+v", res.Findings)
	}
	// a state check: secret keys inside expect/actual are erased, the rest kept
	data = `{"type":"state","target":"GET /api/me","expect":{"state":"paid","otp":"918273"},"actual":{"state":"paid","otp":"918273","profile":{"api_key":"k3y-9f8e7d6c"}},"passed":true}`
	res, err = r.Redact(evOf(t, event.KindCheck, data))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "918273")
	assertNoSecret(t, res.Data, "k3y-9f8e7d6c")
	if !strings.Contains(string(res.Data), `"state":"paid"`) {
		t.Errorf("check = %s", res.Data)
	}
	if !findingsHave(res.Findings, "json-key:otp", "/expect/otp") || !findingsHave(res.Findings, "json-key:apikey", "/actual/profile/api_key") {
		t.Errorf("findings %+v", res.Findings)
	}
}

func TestTextConsoleJWTInStackURL(t *testing.T) {
	data := `{"level":"error","text":"Uncaught TypeError: x is undefined","url":"https://app.example/static/app.js","line":10,"column":4,
		"stack":[{"function":"pay","url":"https://app.example/pay?jwt=` + tJWT + `#frag","line":10,"column":4},
		         {"function":"cb","url":"https://app.example/cb#access_token=fragAccessSecret1&token_type=bearer","line":3}]}`
	r := redactorOf(t)
	res, err := r.Redact(evOf(t, event.KindConsole, data))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, tJWT)
	assertNoSecret(t, res.Data, "fragAccessSecret1")
	if !findingsHave(res.Findings, "detector:jwt", "/stack/0/url") || !findingsHave(res.Findings, "fragment:access_token", "/stack/1/url") {
		t.Errorf("findings %+v", res.Findings)
	}
	c := evOf(t, event.KindConsole, string(res.Data)).Payload.(*event.Console)
	if c.Stack[0].URL != "https://app.example/pay?jwt=[redacted]#frag" || c.Text != "Uncaught TypeError: x is undefined" || c.Line != 10 {
		t.Errorf("console = %+v", c)
	}
}

func TestTextKnownValuePropagation(t *testing.T) {
	r := redactorOf(t)
	r.known.add("s3cr3tC0upon")
	res, err := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"applied coupon s3cr3tC0upon to cart"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "s3cr3tC0upon")
	if !findingsHave(res.Findings, "known-value", "/text") {
		t.Errorf("findings %+v", res.Findings)
	}
	// a known value percent-encoded in a URL, and in meta labels
	res, err = r.Redact(evOf(t, event.KindMeta, `{"labels":{"ref":"https://app.example/?q=s3cr3tC0upon%21"},"versions":{"engine":"chromium 156"}}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "s3cr3tC0upon")
	if !strings.Contains(string(res.Data), `"engine":"chromium 156"`) {
		t.Errorf("meta = %s", res.Data)
	}
	// a value a HAR erased shows up later in a snapshot
	req := `{"method":"POST","url":"https://app.example/login?password=Tr0ub4dor%263","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}`
	if _, err := r.Redact(evOf(t, event.KindHAR, harOf(req, okResp, ""))); err != nil {
		t.Fatal(err)
	}
	sres, err := r.Redact(evOf(t, event.KindSnapshot, `{"view":"content","text":"heading \"Your password is Tr0ub4dor&3\""}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, sres.Data, "Tr0ub4dor&3")
}

func TestTextUnchanged(t *testing.T) {
	r := redactorOf(t)
	for _, c := range []struct {
		kind event.Kind
		data string
	}{
		{event.KindConsole, cleanConsoleEvent},
		{event.KindSnapshot, cleanSnapshotEvent},
		{event.KindReceipt, cleanReceiptEvent},
		{event.KindCheck, `{"type":"state","target":"GET /api/orders?last=1","expect":{"state":"paid"},"actual":{"state":"paid"},"passed":true}`},
		{event.KindMeta, `{"versions":{"engine":"chromium 156","flow_revision":"r12"},"viewport":{"width":1280,"height":800}}`},
		{event.KindConsole, `{"level":"log","text":"caf\u00e9 \u003cb\u003e \u0026 co","url":"https://app.example/a.js"}`},
	} {
		res, err := r.Redact(evOf(t, c.kind, c.data))
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed() || len(res.Findings) != 0 {
			t.Errorf("%s changed: %s %+v", c.kind, res.Data, res.Findings)
		}
	}
	// an escaped secret cannot slip through the fast path
	res, err := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"\u0070assword=hunter22"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "hunter22")
	res, err = r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"go https:\/\/u:p4ssw0rd99@h.example\/"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "p4ssw0rd99")
}

const (
	cleanConsoleEvent  = `{"level":"error","text":"Uncaught TypeError: Cannot read properties of undefined (reading 'items')","url":"https://app.example/static/js/main.8f3a2c.js","line":212,"column":17,"stack":[{"function":"renderCart","url":"https://app.example/static/js/main.8f3a2c.js","line":212,"column":17}]}`
	cleanSnapshotEvent = `{"view":"interactive","when":"after","origin":"https://pv-4718.preview.example","nonce":"7f3a9c","text":"main \"Checkout\"\n button \"Pay\" @e12\n textbox \"Email\" value=\"buyer@acme.example\" @e4\n textbox \"Card number\" @e5\n link \"Terms\" @e6\n checkbox \"Remember me\" @e7"}`
	cleanReceiptEvent  = `{"step":4,"action":{"verb":"click","target":{"ref":"@e12","role":"button","name":"Pay"}},"outcome":"done","effects":{"requests":[{"method":"POST","url":"/api/gift","status":200}],"console_errors":0},"rule":"preview-auto","started_at":1764483600000000000,"ended_at":1764483600400000000,"browser_seconds":0.41}`
)

func BenchmarkRedactTextClean(b *testing.B) {
	r := redactorOf(b)
	for _, c := range []struct {
		name string
		kind event.Kind
		data string
	}{
		{"console", event.KindConsole, cleanConsoleEvent},
		{"snapshot", event.KindSnapshot, cleanSnapshotEvent},
		{"receipt", event.KindReceipt, cleanReceiptEvent},
	} {
		d := evOf(b, c.kind, c.data)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if res, _ := r.Redact(d); res.Data != nil {
					b.Fatal("changed")
				}
			}
		})
	}
}

func BenchmarkRedactTextDirty(b *testing.B) {
	r := redactorOf(b)
	d := evOf(b, event.KindConsole, `{"level":"error","text":"POST /api/login failed: password=hunter22","url":"https://app.example/static/js/main.8f3a2c.js","line":212,"column":17}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, _ := r.Redact(d); res.Data == nil {
			b.Fatal("unchanged")
		}
	}
}

func TestTextManyKnownValues(t *testing.T) {
	r := redactorOf(t)
	var vals []string
	for i := 0; i < 200; i++ {
		v := fmt.Sprintf("kn0wn-%04d-val", i)
		vals = append(vals, v)
		r.known.add(v)
	}
	r.known.add(`quo"ted&val`)
	if res, err := r.Redact(evOf(t, event.KindConsole, cleanConsoleEvent)); err != nil || res.Data != nil {
		t.Fatalf("clean event changed with many known values: %s %v", res.Data, err)
	}
	for _, c := range []string{
		`{"level":"log","text":"a kn0wn-0123-val b kn0wn-0199-val"}`,
		`{"level":"log","text":"https://x.example/?q=kn0wn-0007-val"}`,
		`{"level":"log","text":"x","url":"https://x.example/?q=quo%22ted%26val"}`,
		`{"level":"log","text":"json {\"a\":\"quo\\\"ted&val\"}"}`,
	} {
		res, err := r.Redact(evOf(t, event.KindConsole, c))
		if err != nil {
			t.Fatal(err)
		}
		if res.Data == nil {
			t.Errorf("%s: known value not masked", c)
			continue
		}
		for _, v := range append(vals[:0:0], "kn0wn-0123-val", "kn0wn-0199-val", "kn0wn-0007-val", `quo"ted&val`) {
			assertNoSecret(t, res.Data, v)
		}
	}
}

func BenchmarkRedactTextCleanManyKnown(b *testing.B) {
	r := redactorOf(b)
	for i := 0; i < 500; i++ {
		r.known.add(fmt.Sprintf("kn0wn-%04d-val", i))
	}
	d := evOf(b, event.KindConsole, cleanConsoleEvent)
	b.ReportAllocs()
	for b.Loop() {
		if res, _ := r.Redact(d); res.Data != nil {
			b.Fatal("changed")
		}
	}
}

func TestTextURLEncodedSecrets(t *testing.T) {
	r := redactorOf(t)
	for _, c := range []struct{ text, secret string }{
		{"GET https://shop.example/pay?q=4242%204242%204242%204242&x=1", "4242 4242 4242 4242"},
		{"GET https://shop.example/pay?q=4242+4242+4242+4242&x=1", "4242 4242 4242 4242"},
		{"GET https://shop.example/s?filter=password%3Dhunter22%26a%3Db", "hunter22"},
		{"redirect https://app.example/cb?next=%2Flogin%3Ftoken%3DnestedTok9%26a%3D1 done", "nestedTok9"},
		{"open https://app.example/#/route?access_token=hashRouteTok7&x=1", "hashRouteTok7"},
		{"GET https://app.example/api?user%5Bpassword%5D=railsPw88&a=1", "railsPw88"},
		{"user[password]=railsPw89 in a form dump: /x?user[password]=railsPw89", "railsPw89"},
	} {
		res, err := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":`+jsonStr(c.text)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Data == nil {
			t.Errorf("%q: not redacted", c.text)
			continue
		}
		assertNoSecret(t, res.Data, c.secret)
		assertFindingsClean(t, res.Findings, c.secret)
	}
}

// TestTextDownloadNames: a download's name is receipt text like any
// other: a secret in it (a token, here) is erased from effects.files and
// effects.downloads alike, the description (size, type, hash) kept.
func TestTextDownloadNames(t *testing.T) {
	r := redactorOf(t)
	name := "statement-" + tGHP + ".pdf"
	data := `{"step":4,"action":{"verb":"click","target":{"role":"link","name":"Download statement"}},"outcome":"done",
		"effects":{"downloads":[` + jsonStr(name) + `],"files":[{"name":` + jsonStr(name) + `,"size":812,
		"mime":"application/pdf","sha256":"` + strings.Repeat("ab", 32) + `","state":"completed"}]}}`
	res, err := r.Redact(evOf(t, event.KindReceipt, data))
	if err != nil {
		t.Fatal(err)
	}
	if res.Data == nil {
		t.Fatal("the receipt came out unchanged: the token in the file name was not seen")
	}
	assertNoSecret(t, res.Data, tGHP)
	rc := evOf(t, event.KindReceipt, string(res.Data)).Payload.(*event.Receipt)
	if f := rc.Effects.Files[0]; f.Size != 812 || f.MIME != "application/pdf" || f.SHA256 != strings.Repeat("ab", 32) ||
		!strings.HasPrefix(f.Name, "statement-") || !strings.HasPrefix(rc.Effects.Downloads[0], "statement-") {
		t.Errorf("the redacted receipt lost the download's description: %s", res.Data)
	}
}
