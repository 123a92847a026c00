package redact

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testgen"
)

// Issue 17: every string of every channel goes through the same pass.

func TestDOMTextAndAttributesGetTheDetectors(t *testing.T) {
	rc := newRecorder(t, nil)
	_, stored := rc.send(fullSnapshot(t, page(
		elem(10, "p", nil, text(11, "your token is "+tJWT)),
		elem(12, "img", obj{"alt": "password: SECRETCOLONDOM", "title": "card 4111.1111.1111.1111",
			"data-key": "api_key=" + tGHP, "src": "data:text/plain,token%3D" + tGHP}),
		elem(13, "input", obj{"type": "text", "name": "q", "id": "search"}),
	)))
	for _, s := range []string{tJWT, "SECRETCOLONDOM", "4111.1111.1111.1111", tGHP} {
		noLeak(t, stored, s)
	}
	// the structure the model reads stays as it was
	for _, keep := range []string{`"name":"q"`, `"id":"search"`, `"tagName":"img"`} {
		if !strings.Contains(string(stored), keep) {
			t.Errorf("stored snapshot lost %s: %s", keep, stored)
		}
	}
	res, stored := rc.send(mutation(t, obj{"texts": []obj{{"id": 11, "value": "now " + tJWT}},
		"attributes": []obj{attrMut(12, obj{"title": "pwd=hunter2hunter2"})}}))
	noLeak(t, stored, tJWT)
	noLeak(t, stored, "hunter2hunter2")
	wantFinding(t, res, "detector:jwt", "/data/texts/0/value")
}

func TestKeySignalledValues(t *testing.T) {
	r := redactorOf(t)
	for _, line := range []string{
		"password: SECRETCOLONCONSOLE",
		"Token: PLAINWORDTOKEN",
		"api_key=PLAINWORDAPIKEY",
		`{"passwd": "short"}`,
		"authorization: Basic QWxhZGRpbjpvcGVu",
		"credential: EASYCRED",
	} {
		res, err := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":`+jsonStr(line)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		v := line[strings.IndexAny(line, ":=")+1:]
		v = strings.Trim(strings.TrimSpace(strings.TrimSuffix(v, "}")), `"`)
		if res.Data == nil || strings.Contains(string(res.Data), v) {
			t.Errorf("%q: value stored: %s", line, res.Data)
		}
	}
	// prose after a word that is not a secret's name stays
	res, _ := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"Session: expired"}`))
	if res.Data != nil {
		t.Errorf("prose redacted: %s", res.Data)
	}
}

func TestDottedCard(t *testing.T) {
	r := redactorOf(t)
	res, err := r.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"paid with 4111.1111.1111.1111 today, version 1.2.3, total 1234.56"}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "4111.1111.1111.1111")
	for _, keep := range []string{"1.2.3", "1234.56"} {
		if !strings.Contains(string(res.Data), keep) {
			t.Errorf("%s erased: %s", keep, res.Data)
		}
	}
}

func TestRedactMeta(t *testing.T) {
	r := redactorOf(t)
	m, fs, err := r.RedactMeta(Meta{Labels: map[string]string{"note": "password=HUNTERHUNTER", "api_token": tJWT, "team": "web"},
		Executor: "bot " + tGHP, Versions: map[string]string{"app": "sha256:abc"}})
	if err != nil {
		t.Fatal(err)
	}
	all := m.Labels["note"] + m.Labels["api_token"] + m.Executor
	for _, s := range []string{"HUNTERHUNTER", tJWT, tGHP} {
		if strings.Contains(all, s) {
			t.Errorf("%s kept in %+v", s, m)
		}
	}
	if m.Labels["team"] != "web" || m.Versions["app"] != "sha256:abc" {
		t.Errorf("clean metadata changed: %+v", m)
	}
	if len(fs) < 3 || fs[0].Channel != "recording" {
		t.Errorf("findings %+v", fs)
	}
}

func TestFillTargetsResolvedAgainstTheDOM(t *testing.T) {
	fill := func(target string, v string) string {
		return `{"step":2,"action":{"verb":"fill","target":` + target + `,"args":{"value":"` + v + `"}},"outcome":"done"}`
	}
	rc := newRecorder(t, nil)
	r := rc.r
	// Before any DOM or snapshot: nothing resolves, every value is masked.
	res, err := r.Redact(evOf(t, event.KindReceipt, fill(`{"css":"#q"}`, "NODOMYETVALUE")))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "NODOMYETVALUE")
	rc.send(fullSnapshot(t, page(
		elem(10, "input", obj{"type": "password", "id": "pw"}),
		elem(11, "input", obj{"type": "text", "id": "q"}),
	)))
	r.Redact(evOf(t, event.KindSnapshot, `{"view":"interactive","text":"textbox \"Search\" @e3\ntextbox \"Secret answer\" @e9"}`))
	for _, c := range []struct {
		target, value string
		masked        bool
	}{
		{`{"css":"#pw"}`, "CSSPASSWORDVALUE", true},
		{`{"selector":"input#pw"}`, "SELPASSWORDVALUE", true},
		{`{"css":"#q"}`, "shoes", false},
		{`{"css":"#nosuch"}`, "NOSUCHVALUE", true},
		{`{"ref":"@e3"}`, "boots", false},
		{`{"ref":"@e9"}`, "REFSECRETVALUE", true},
		{`{"ref":"@e77"}`, "UNKNOWNREFVALUE", true},
		{`{"xpath":"//input[1]"}`, "XPATHVALUE", true},
		{`{"css":"#q","frame":"checkout-iframe"}`, "FRAMEVALUE", true},
		{`{"role":"textbox","name":"Search"}`, "sandals", false},
	} {
		res, err := r.Redact(evOf(t, event.KindReceipt, fill(c.target, c.value)))
		if err != nil {
			t.Fatal(err)
		}
		stored := res.Data != nil && !strings.Contains(string(res.Data), c.value)
		if stored != c.masked {
			t.Errorf("fill %s: masked %v, want %v (%s)", c.target, stored, c.masked, res.Data)
		}
	}
	res, err = r.Redact(evOf(t, event.KindCheck, `{"type":"ui","target":"#pw","expect":"CHECKEDPWVALUE","passed":true}`))
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, res.Data, "CHECKEDPWVALUE")
	res, _ = r.Redact(evOf(t, event.KindCheck, `{"type":"ui","target":"#q","expect":"shoes","passed":true}`))
	if res.Data != nil {
		t.Errorf("check on an unmasked field changed: %s", res.Data)
	}
}

func TestKnownValuesOutliveARestartAsHashes(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	p := testPlan()
	p.Pseudonymize = true
	r1, err := New(p, key)
	if err != nil {
		t.Fatal(err)
	}
	const pw = "Tr0ub4dor&3horse"
	res1, _ := r1.Redact(evOf(t, event.KindReceipt, `{"step":1,"action":{"verb":"fill","target":{"role":"textbox","name":"Password"},"args":{"value":"`+pw+`"}},"outcome":"done"}`))
	assertNoSecret(t, res1.Data, pw)
	hashes := r1.TakeKnownHashes()
	if len(hashes) == 0 || len(hashes)%KnownHashSize != 0 || strings.Contains(string(hashes), pw) {
		t.Fatalf("hashes: %d bytes", len(hashes))
	}
	r2, err := New(p, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.LoadKnownHashes(hashes); err != nil {
		t.Fatal(err)
	}
	b64 := base64Forms("xx" + pw)
	for _, text := range []string{"echo " + pw + " end", "q=" + strings.ReplaceAll(pw, "&", "%26") + "&x=1", "blob " + b64[0] + " end"} {
		res, err := r2.Redact(evOf(t, event.KindConsole, `{"level":"log","text":`+jsonStr(text)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Data == nil || strings.Contains(string(res.Data), pw) || strings.Contains(string(res.Data), "%26horse") {
			t.Errorf("%q: stored %s", text, res.Data)
		}
	}
	// the pseudonym after the restart is the one before it
	res, _ := r2.Redact(evOf(t, event.KindConsole, `{"level":"log","text":"echo `+strings.ReplaceAll(pw, "&", `\u0026`)+`"}`))
	if want := r1.erase(pw); !strings.Contains(string(res.Data), want) {
		t.Errorf("want pseudonym %s in %s", want, res.Data)
	}
}

func TestUnmaskedFrameMustBeAnImage(t *testing.T) {
	r := redactorOf(t)
	frame := func(img []byte) string {
		return `{"mime":"image/jpeg","image":"` + base64.StdEncoding.EncodeToString(img) + `","width":16,"height":16}`
	}
	res, err := r.Redact(evOf(t, event.KindFrame, frame([]byte("password=hunter2hunter2 and not a jpeg"))))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Drop || len(res.Findings) != 1 || res.Findings[0].Rule != "frame:undecodable" {
		t.Errorf("non-image frame kept: %+v", res)
	}
	// a JPEG header over garbage is refused too
	res, _ = r.Redact(evOf(t, event.KindScreenshot, `{"reason":"failure",`+frame([]byte("\xff\xd8\xff\xe0garbage"))[1:]))
	if !res.Drop {
		t.Errorf("broken JPEG screenshot kept: %+v", res)
	}
	res, _ = r.Redact(evOf(t, event.KindFrame, frame(testgen.FrameJPEG(rand.New(rand.NewPCG(1, 2)), 3000))))
	if res.Changed() {
		t.Errorf("a valid unmasked JPEG changed: %+v", res)
	}
}

func TestSanitizeJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"ok \ud83d\ude00"}`:      `{"a":"ok \ud83d\ude00"}`,
		`{"a":"lone \ud800 x"}`:        `{"a":"lone \ufffd x"}`,
		`{"a":"low \uDC00\ud800"}`:     `{"a":"low \ufffd\ufffd"}`,
		`{"a":"esc \\ud800"}`:          `{"a":"esc \\ud800"}`,
		"{\"a\":\"raw \xff\xfe end\"}": "{\"a\":\"raw \uFFFD\uFFFD end\"}",
		"{\"a\":\"cut \xe2\x82\"}":     "{\"a\":\"cut \uFFFD\uFFFD\"}",
		`{"a":"high at end \ud800"}`:   `{"a":"high at end \ufffd"}`,
		`{"a":"\ud800\u0041"}`:         `{"a":"\ufffd\u0041"}`,
	} {
		got, n := SanitizeJSON([]byte(in))
		if string(got) != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
		if (n == 0) != (in == want) {
			t.Errorf("%q: count %d", in, n)
		}
	}
}

func TestRollingHashSlidesLikeItHashes(t *testing.T) {
	base := rollBase([]byte("0123456789abcdef0123456789abcdef"))
	s := strings.Repeat("\xff\xfe~a9Z", 40)
	const n = 17
	pw := uint64(1)
	for i := 1; i < n; i++ {
		pw = mulMod(pw, base)
	}
	hv := rollHash(base, s[:n])
	for i := 0; i+n < len(s); i++ {
		if want := rollHash(base, s[i:i+n]); hv != want {
			t.Fatalf("at %d: sliding %d, direct %d", i, hv, want)
		}
		hv = rollSlide(hv, s[i], s[i+n], pw, base)
	}
}
