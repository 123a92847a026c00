package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/policy"
)

// ---- helpers: rrweb events ----

type obj = map[string]any

func elem(id int, tag string, attrs obj, children ...obj) obj {
	if attrs == nil {
		attrs = obj{}
	}
	if children == nil {
		children = []obj{}
	}
	return obj{"type": 2, "id": id, "tagName": tag, "attributes": attrs, "childNodes": children}
}

func text(id int, s string) obj { return obj{"type": 3, "id": id, "textContent": s} }

func docNode(id int, children ...obj) obj {
	return obj{"type": 0, "id": id, "childNodes": children}
}

// page is a document with html/body around body's children; ids 1–3.
func page(body ...obj) obj {
	return docNode(1, elem(2, "html", nil, elem(3, "body", nil, body...)))
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fullSnapshot(t testing.TB, node obj) []byte {
	return mustJSON(t, obj{"type": 2, "data": obj{"node": node, "initialOffset": obj{"left": 0, "top": 0}}, "timestamp": 1764483600123})
}

// mutation builds an rrweb mutation; absent lists are empty.
func mutation(t testing.TB, m obj) []byte {
	data := obj{"source": 0, "adds": []obj{}, "removes": []obj{}, "texts": []obj{}, "attributes": []obj{}}
	for k, v := range m {
		data[k] = v
	}
	return mustJSON(t, obj{"type": 3, "data": data, "timestamp": 1764483600200})
}

func attrMut(id int, attrs obj) obj { return obj{"id": id, "attributes": attrs} }

func inputEvent(t testing.TB, id int, s string) []byte {
	return mustJSON(t, obj{"type": 3, "data": obj{"source": 5, "id": id, "text": s, "isChecked": false, "userTriggered": true}, "timestamp": 1764483600300})
}

type recorder struct {
	t   testing.TB
	r   *Redactor
	seq uint64
	// log holds what would be stored: the redacted data of each event.
	log [][]byte
}

func newRecorder(t testing.TB, edit func(*policy.Plan)) *recorder {
	t.Helper()
	p := testPlan()
	if edit != nil {
		edit(p)
		p.Normalize()
	}
	r, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{t: t, r: r}
}

func decoded(t testing.TB, seq uint64, kind event.Kind, data []byte) *event.Decoded {
	t.Helper()
	d, err := event.Decode(event.Envelope{Seq: seq, TS: 1764483600000000000 + int64(seq), Step: 1, Kind: kind, Data: data}, event.DefaultLimits)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return d
}

// send redacts one DOM event and returns the result and the stored bytes.
func (rc *recorder) send(data []byte) (Result, []byte) {
	rc.t.Helper()
	rc.seq++
	res, err := rc.r.Redact(decoded(rc.t, rc.seq, event.KindDOM, data))
	if err != nil {
		rc.t.Fatalf("redact: %v", err)
	}
	stored := data
	if res.Data != nil {
		stored = res.Data
		if !json.Valid(stored) {
			rc.t.Fatalf("redacted data is not JSON: %s", stored)
		}
	}
	rc.log = append(rc.log, stored)
	return res, stored
}

// noLeak fails if secret shows in blob in any encoding (leak_test.go).
func noLeak(t testing.TB, blob []byte, secret string) {
	t.Helper()
	assertNoSecret(t, blob, secret)
}

func hasFinding(res Result, rule, pointer string) bool {
	for _, f := range res.Findings {
		if f.Rule == rule && f.Pointer == pointer && f.Channel == "dom" {
			return true
		}
	}
	return false
}

func wantFinding(t testing.TB, res Result, rule, pointer string) {
	t.Helper()
	if !hasFinding(res, rule, pointer) {
		t.Errorf("no finding %s at %s; got %+v", rule, pointer, res.Findings)
	}
}

// storedString reads a JSON pointer out of stored data.
func pointerString(t testing.TB, data []byte, ptr string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i := 0
			for _, ch := range tok {
				i = i*10 + int(ch-'0')
			}
			if i >= len(c) {
				t.Fatalf("pointer %s: index out of range", ptr)
			}
			v = c[i]
		default:
			t.Fatalf("pointer %s: not a container at %q", ptr, tok)
		}
	}
	s, _ := v.(string)
	return s
}

// ---- known leaks, one test each ----

func TestDOMPasswordValueAttributeMutation(t *testing.T) {
	rc := newRecorder(t, nil)
	res, _ := rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password", "name": "pw"}))))
	if res.Changed() {
		t.Fatalf("an empty password field needs no change: %+v", res)
	}
	const secret = "hunter2-Correct"
	res, stored := rc.send(mutation(t, obj{"attributes": []obj{attrMut(10, obj{"value": secret})}}))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-type:password", "/data/attributes/0/attributes/value")
	if got := pointerString(t, stored, "/data/attributes/0/attributes/value"); got != Erased {
		t.Errorf("value = %q, want %q", got, Erased)
	}
}

func TestDOMPasswordToggleStaysMasked(t *testing.T) {
	rc := newRecorder(t, nil)
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password", "id": "login-field"}))))
	// the show-password button flips the type
	res, _ := rc.send(mutation(t, obj{"attributes": []obj{attrMut(10, obj{"type": "text"})}}))
	if res.Changed() {
		t.Errorf("a type change carries no secret: %+v", res)
	}
	const secret = "Tr0ub4dor&3"
	res, stored := rc.send(mutation(t, obj{"attributes": []obj{attrMut(10, obj{"value": secret})}}))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-type:password", "/data/attributes/0/attributes/value")
	res, stored = rc.send(inputEvent(t, 10, secret+"x"))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-event", "/data/text")

	// rrweb gives the element a new id in the next full snapshot, still
	// type=text, with its value inlined.
	res, stored = rc.send(fullSnapshot(t, page(elem(50, "input", obj{"type": "text", "id": "login-field", "value": secret}))))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-type:password", "/data/node/childNodes/0/childNodes/0/childNodes/0/attributes/value")
}

func TestDOMPasswordTypeInCapitals(t *testing.T) {
	rc := newRecorder(t, nil)
	const secret = "UPPERCASE-pass-99"
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "INPUT", obj{"TYPE": "PASSWORD", "VALUE": secret}),
		elem(11, "input", obj{"type": " Password ", "value": secret + "2"}),
	)))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-type:password", "/data/node/childNodes/0/childNodes/0/childNodes/0/attributes/VALUE")
	wantFinding(t, res, "dom:input-type:password", "/data/node/childNodes/0/childNodes/0/childNodes/1/attributes/value")
	if len(res.Findings) != 2 {
		t.Errorf("findings = %+v, want 2", res.Findings)
	}
}

func TestDOMHiddenInput(t *testing.T) {
	rc := newRecorder(t, nil)
	const secret = "csrf-9f8e7d6c5b4a3210"
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "form", nil, elem(11, "input", obj{"type": "hidden", "name": "authenticity_token", "value": secret})),
	)))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-type:hidden", "/data/node/childNodes/0/childNodes/0/childNodes/0/childNodes/0/attributes/value")
	// A hidden input never shows on screen.
	if rc.r.dom.maskedOnPage() {
		t.Error("a hidden input made the page count as showing a masked field")
	}
}

func TestDOMTextareaText(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskSelectors = []string{"textarea.private"} })
	const s1, s2, s3 = "my diary entry one", "second secret entry", "third added secret"
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "textarea", obj{"class": "note private", "name": "notes"}, text(11, s1)),
	)))
	noLeak(t, stored, s1)
	wantFinding(t, res, "dom:selector", "/data/node/childNodes/0/childNodes/0/childNodes/0/childNodes/0/textContent")

	res, stored = rc.send(mutation(t, obj{"texts": []obj{{"id": 11, "value": s2}}}))
	noLeak(t, stored, s2)
	wantFinding(t, res, "dom:selector", "/data/texts/0/value")

	res, stored = rc.send(mutation(t, obj{
		"removes": []obj{{"parentId": 10, "id": 11}},
		"adds":    []obj{{"parentId": 10, "nextId": nil, "node": text(12, s3)}},
	}))
	noLeak(t, stored, s3)
	wantFinding(t, res, "dom:selector", "/data/adds/0/node/textContent")

	// its value, too
	res, stored = rc.send(mutation(t, obj{"attributes": []obj{attrMut(10, obj{"value": s3})}}))
	noLeak(t, stored, s3)
	wantFinding(t, res, "dom:selector", "/data/attributes/0/attributes/value")
}

func TestDOMSelectOptions(t *testing.T) {
	rc := newRecorder(t, nil)
	opt := func(id int, v, label string, selected bool) obj {
		a := obj{"value": v}
		if selected {
			a["selected"] = true
		}
		return elem(id, "option", a, text(id+100, label))
	}
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "select", obj{"autocomplete": "cc-exp-month", "value": "month-07-july"},
			opt(11, "month-06-june", "June (06)", false),
			opt(12, "month-07-july", "July (07)", true),
			elem(13, "optgroup", obj{"label": "later"}, opt(14, "month-08-august", "August (08)", false)),
		),
	)))
	for _, s := range []string{"month-06-june", "month-07-july", "month-08-august", "June (06)", "July (07)", "August (08)"} {
		noLeak(t, stored, s)
	}
	sel := "/data/node/childNodes/0/childNodes/0/childNodes/0"
	wantFinding(t, res, "dom:autocomplete:cc-exp-month", sel+"/attributes/value")
	wantFinding(t, res, "dom:autocomplete:cc-exp-month", sel+"/childNodes/1/attributes/value")
	wantFinding(t, res, "dom:autocomplete:cc-exp-month", sel+"/childNodes/1/childNodes/0/textContent")
	wantFinding(t, res, "dom:autocomplete:cc-exp-month", sel+"/childNodes/2/childNodes/0/childNodes/0/textContent")
	// which option is chosen is the secret too
	wantFinding(t, res, "dom:autocomplete:cc-exp-month", sel+"/childNodes/1/attributes/selected")
	if bytes.Contains(stored, []byte(`"selected"`)) {
		t.Errorf("selected survived: %s", stored)
	}
	// choosing an option sends an input event with its value
	res, stored = rc.send(inputEvent(t, 10, "month-08-august"))
	noLeak(t, stored, "month-08-august")
	wantFinding(t, res, "dom:input-event", "/data/text")
	// a later option text change
	res, stored = rc.send(mutation(t, obj{"texts": []obj{{"id": 111, "value": "June (06) edited"}}}))
	noLeak(t, stored, "June (06) edited")
	if len(res.Findings) != 1 {
		t.Errorf("findings = %+v", res.Findings)
	}
}

func TestDOMSelectorInsideIframe(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskSelectors = []string{"form.pay input.card-field"} })
	const s1, s2 = "4111 1111 1111 1111", "5500 0000 0000 0004"
	iframeDoc := func(docID, base int, value string) obj {
		return obj{"type": 0, "id": docID, "childNodes": []obj{
			elem(base, "html", nil, elem(base+1, "body", nil,
				elem(base+2, "form", obj{"class": "pay"},
					elem(base+3, "input", obj{"class": "card-field", "type": "text", "value": value}),
					elem(base+4, "input", obj{"class": "zip", "type": "text", "value": "10115"}),
				))),
		}}
	}
	// inline in the snapshot, under the iframe element
	res, stored := rc.send(fullSnapshot(t, page(elem(10, "iframe", obj{"src": "https://pay.example/"}, iframeDoc(20, 21, s1)))))
	noLeak(t, stored, s1)
	if !bytes.Contains(stored, []byte("10115")) {
		t.Errorf("an unmasked field in the iframe was erased: %s", stored)
	}
	if len(res.Findings) != 1 || res.Findings[0].Rule != "dom:selector" {
		t.Errorf("findings = %+v", res.Findings)
	}
	// attached later, as rrweb does when the iframe loads (isAttachIframe)
	add := iframeDoc(40, 41, s2)
	add["rootId"] = 40
	res, stored = rc.send(mutation(t, obj{
		"adds":           []obj{{"parentId": 10, "nextId": nil, "node": add}},
		"isAttachIframe": true,
	}))
	noLeak(t, stored, s2)
	wantFinding(t, res, "dom:selector", "/data/adds/0/node/childNodes/0/childNodes/0/childNodes/0/childNodes/0/attributes/value")
	// and typing in it
	res, stored = rc.send(inputEvent(t, 44, "5500 0000 0000 0099"))
	noLeak(t, stored, "5500 0000 0000 0099")
	wantFinding(t, res, "dom:input-event", "/data/text")
}

func TestDOMSelectorInsideShadowRoot(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskSelectors = []string{"[data-private]"} })
	const s1, s2 = "shadow secret value", "later shadow secret"
	host := elem(10, "payment-widget", obj{}, obj{
		"type": 2, "id": 11, "tagName": "div", "isShadow": true, "attributes": obj{"data-private": ""},
		"childNodes": []obj{elem(12, "input", obj{"type": "text", "value": s1})},
	})
	host["isShadowHost"] = true
	res, stored := rc.send(fullSnapshot(t, page(host)))
	noLeak(t, stored, s1)
	wantFinding(t, res, "dom:selector", "/data/node/childNodes/0/childNodes/0/childNodes/0/childNodes/0/childNodes/0/attributes/value")
	// a shadow child added later matches by itself
	shadowInput := elem(13, "input", obj{"data-private": true, "value": s2})
	shadowInput["isShadow"] = true
	res, stored = rc.send(mutation(t, obj{"adds": []obj{{"parentId": 10, "nextId": nil, "node": shadowInput}}}))
	noLeak(t, stored, s2)
	wantFinding(t, res, "dom:selector", "/data/adds/0/node/attributes/value")
}

func TestDOMMaskTextSelector(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskTextSelectors = []string{".balance"} })
	const s1, s2, s3 = "$12,345.67 available", "$99,999.01 available", "IBAN DE89 3704 0044"
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "h1", nil, text(11, "Your account")),
		elem(12, "div", obj{"class": "card balance"}, elem(13, "span", nil, text(14, s1))),
	)))
	noLeak(t, stored, s1)
	if !bytes.Contains(stored, []byte("Your account")) {
		t.Error("text outside the selector was masked")
	}
	wantFinding(t, res, "dom:text-selector", "/data/node/childNodes/0/childNodes/0/childNodes/1/childNodes/0/childNodes/0/textContent")
	res, stored = rc.send(mutation(t, obj{"texts": []obj{{"id": 14, "value": s2}, {"id": 11, "value": "Your accounts"}}}))
	noLeak(t, stored, s2)
	if len(res.Findings) != 1 || !bytes.Contains(stored, []byte("Your accounts")) {
		t.Errorf("findings %+v, stored %s", res.Findings, stored)
	}
	// an element gaining the class later masks its text from then on
	res, stored = rc.send(mutation(t, obj{
		"attributes": []obj{attrMut(10, obj{"class": "balance"})},
		"texts":      []obj{{"id": 11, "value": s3}},
	}))
	noLeak(t, stored, s3)
	wantFinding(t, res, "dom:text-selector", "/data/texts/0/value")
}

func TestDOMInputEventOnMaskedNode(t *testing.T) {
	rc := newRecorder(t, nil)
	rc.send(fullSnapshot(t, page(
		elem(10, "input", obj{"type": "password"}),
		elem(11, "input", obj{"type": "checkbox", "name": "remember"}),
	)))
	const secret = "typed-password-123"
	res, stored := rc.send(inputEvent(t, 10, secret))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:input-event", "/data/text")
	var ev struct {
		Data struct {
			Text          string `json:"text"`
			IsChecked     *bool  `json:"isChecked"`
			UserTriggered *bool  `json:"userTriggered"`
		} `json:"data"`
	}
	if err := json.Unmarshal(stored, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Data.Text != Erased || ev.Data.IsChecked == nil || ev.Data.UserTriggered == nil {
		t.Errorf("stored %s", stored)
	}
	// the checkbox is not masked
	res, _ = rc.send(inputEvent(t, 11, "on"))
	if res.Changed() || res.Findings != nil {
		t.Errorf("unmasked input event changed: %+v", res)
	}
}

func TestDOMAutocompleteTokens(t *testing.T) {
	rc := newRecorder(t, nil)
	const card, otp = "4242424242424242", "918273"
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "input", obj{"autocomplete": "section-pay billing CC-Number", "name": "f1", "value": card}),
		elem(11, "input", obj{"autocomplete": "one-time-code", "inputmode": "numeric", "name": "f2", "value": otp}),
		elem(12, "input", obj{"autocomplete": "email", "name": "f3", "value": "a@b.example"}),
	)))
	noLeak(t, stored, card)
	noLeak(t, stored, otp)
	body := "/data/node/childNodes/0/childNodes/0"
	wantFinding(t, res, "dom:autocomplete:cc-number", body+"/childNodes/0/attributes/value")
	wantFinding(t, res, "dom:autocomplete:one-time-code", body+"/childNodes/1/attributes/value")
	if !bytes.Contains(stored, []byte("a@b.example")) {
		t.Error("autocomplete=email was masked")
	}
	// a page-made cc- token is not echoed into the report
	res, _ = rc.send(mutation(t, obj{"adds": []obj{{"parentId": 3, "node": elem(13, "input", obj{"autocomplete": "cc-4111x", "value": "abcd-efgh"})}}}))
	wantFinding(t, res, "dom:autocomplete:cc-*", "/data/adds/0/node/attributes/value")
	assertFindingsClean(t, res.Findings, "4111x", "abcd-efgh")
}

func TestDOMNamePattern(t *testing.T) {
	rc := newRecorder(t, nil)
	const secret = "4000 0566 5566 5556"
	res, stored := rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "text", "name": "card_number", "value": secret}))))
	noLeak(t, stored, secret)
	wantFinding(t, res, "dom:name-pattern", "/data/node/childNodes/0/childNodes/0/childNodes/0/attributes/value")
	// by id as well, for a textarea added later
	res, stored = rc.send(mutation(t, obj{"adds": []obj{{"parentId": 3, "nextId": 10,
		"node": elem(20, "textarea", obj{"id": "SSN-entry"}, text(21, "078-05-1120"))}}}))
	noLeak(t, stored, "078-05-1120")
	wantFinding(t, res, "dom:name-pattern", "/data/adds/0/node/childNodes/0/textContent")
}

// ---- state ----

func TestDOMObserveRebuildsStateAfterRestart(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskTextSelectors = []string{".pii"} })
	rc.send(fullSnapshot(t, page(
		elem(10, "input", obj{"type": "password", "value": "first-pass"}),
		elem(11, "p", obj{"class": "pii"}, text(12, "Jane Roe")),
		elem(13, "input", obj{"type": "text", "name": "q"}),
	)))
	rc.send(mutation(t, obj{"attributes": []obj{attrMut(10, obj{"type": "text"})}})) // toggle
	rc.send(mutation(t, obj{"adds": []obj{{"parentId": 3, "node": elem(14, "input", obj{"autocomplete": "cc-csc"})}}}))

	// a new server: a fresh redactor that observes the stored (redacted) log
	r2, err := New(rc.r.plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range rc.log {
		r2.Observe(event.KindDOM, data)
	}
	for _, tc := range []struct {
		data []byte
		rule string
		ptr  string
		leak string
	}{
		{mutation(t, obj{"attributes": []obj{attrMut(10, obj{"value": "after-restart-pw"})}}), "dom:input-type:password", "/data/attributes/0/attributes/value", "after-restart-pw"},
		{inputEvent(t, 14, "837164"), "dom:input-event", "/data/text", "837164"},
		{mutation(t, obj{"texts": []obj{{"id": 12, "value": "John Doe-Smith"}}}), "dom:text-selector", "/data/texts/0/value", "John Doe-Smith"},
	} {
		res, err := r2.Redact(decoded(t, 99, event.KindDOM, tc.data))
		if err != nil {
			t.Fatal(err)
		}
		noLeak(t, res.Data, tc.leak)
		wantFinding(t, res, tc.rule, tc.ptr)
	}
	if !r2.dom.maskedOnPage() {
		t.Error("observe did not rebuild the masked set")
	}
	// and the unmasked field stays unmasked
	res, err := r2.Redact(decoded(t, 100, event.KindDOM, inputEvent(t, 13, "shoes")))
	if err != nil || res.Changed() {
		t.Errorf("unmasked field after restart: %+v %v", res, err)
	}
}

func TestDOMNoFalsePositives(t *testing.T) {
	rc := newRecorder(t, nil)
	snap := fullSnapshot(t, page(
		elem(10, "form", obj{"role": "search"},
			elem(11, "input", obj{"type": "search", "name": "q", "id": "site-search", "value": "blue suede shoes"}),
			elem(12, "button", obj{"type": "submit"}, text(13, "Search")),
		),
		elem(14, "textarea", obj{"name": "comment"}, text(15, "Nice shop")),
	))
	for _, data := range [][]byte{
		snap,
		mutation(t, obj{"attributes": []obj{attrMut(11, obj{"value": "red shoes", "class": "focused"})}}),
		mutation(t, obj{"texts": []obj{{"id": 15, "value": "Great shop"}}}),
		inputEvent(t, 11, "green shoes"),
	} {
		res, stored := rc.send(data)
		if res.Data != nil || res.Image != nil || res.Drop || res.Findings != nil {
			t.Errorf("unmasked event changed: %+v", res)
		}
		if !bytes.Equal(stored, data) {
			t.Error("stored bytes differ")
		}
	}
	if rc.r.dom.maskedOnPage() {
		t.Error("nothing masked, yet maskedOnPage")
	}
}

func TestDOMOtherEventsPassThrough(t *testing.T) {
	rc := newRecorder(t, nil)
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	for _, data := range []string{
		`{"type":4,"data":{"href":"https://shop.example/","width":1280,"height":800},"timestamp":1}`,
		`{"type":3,"data":{"source":1,"positions":[{"x":1,"y":2,"id":10,"timeOffset":0}]},"timestamp":2}`,
		`{"type":3,"data":{"source":2,"type":1,"id":10,"x":3,"y":4},"timestamp":3}`,
		`{"type":3,"data":{"source":3,"id":1,"x":0,"y":100},"timestamp":4}`,
		`{"type":5,"data":{"tag":"step","payload":{"text":"hello"}},"timestamp":5}`,
		`{"type":1,"data":{},"timestamp":6}`,
		// a nested "source" must not fool the dispatch, nor a string source
		`{"type":3,"data":{"meta":{"source":5},"source":1,"id":10,"text":"x"},"timestamp":7}`,
	} {
		res, _ := rc.send([]byte(data))
		if res.Changed() || res.Findings != nil {
			t.Errorf("%s: changed: %+v", data, res)
		}
	}
	// a mouse event with a decoy "source" still routes on the real one
	res, stored := rc.send([]byte(`{"type":3,"data":{"x":{"source":1},"source":5,"id":10,"text":"decoy-secret-1"},"timestamp":8}`))
	noLeak(t, stored, "decoy-secret-1")
	wantFinding(t, res, "dom:input-event", "/data/text")
}

func TestDOMPreservesUnmodelledFieldsByteExact(t *testing.T) {
	rc := newRecorder(t, nil)
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	in := `{"type":3, "data":{"source":0,"texts":[],"removes":[],"adds":[],` +
		`"attributes":[{"id":10,"attributes":{"style":{"color":"red"},"value":"s3cr3t-val"},"x-extra":1.50}],"future":[1e3,{"a":"\u00e9"}]},` +
		`"timestamp":1764483600123,"extra":true}`
	res, stored := rc.send([]byte(in))
	want := strings.Replace(in, `"s3cr3t-val"`, `"`+Erased+`"`, 1)
	if string(stored) != want {
		t.Errorf("stored\n%s\nwant\n%s", stored, want)
	}
	wantFinding(t, res, "dom:input-type:password", "/data/attributes/0/attributes/value")
}

func TestDOMPseudonymsAndKnownValues(t *testing.T) {
	p := testPlan()
	p.Pseudonymize = true
	r, err := New(p, []byte("0123456789abcdef0123"))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "pseudonym-secret-42"
	data := fullSnapshot(t, page(elem(10, "input", obj{"type": "password", "value": secret})))
	res, err := r.Redact(decoded(t, 1, event.KindDOM, data))
	if err != nil {
		t.Fatal(err)
	}
	want := r.erase(secret)
	if !strings.HasPrefix(want, "[redacted:") || !bytes.Contains(res.Data, []byte(want)) {
		t.Errorf("pseudonym %q not in %s", want, res.Data)
	}
	if _, ok := r.known.vals[secret]; !ok {
		t.Error("the masked value was not remembered for other channels")
	}
}

func TestDOMMaskedOnPage(t *testing.T) {
	rc := newRecorder(t, nil)
	if rc.r.dom.maskedOnPage() {
		t.Fatal("empty page")
	}
	rc.send(fullSnapshot(t, page(elem(10, "div", nil, elem(11, "input", obj{"type": "password"})))))
	if !rc.r.dom.maskedOnPage() {
		t.Fatal("password field on the page")
	}
	rc.send(mutation(t, obj{"removes": []obj{{"parentId": 3, "id": 10}}}))
	if rc.r.dom.maskedOnPage() {
		t.Fatal("password field removed, still on the page")
	}
	// re-added under the same id (a move): still masked, on the page again
	res, stored := rc.send(mutation(t, obj{"adds": []obj{{"parentId": 3, "node": elem(11, "input", obj{"type": "text", "value": "moved-secret"})}}}))
	noLeak(t, stored, "moved-secret")
	wantFinding(t, res, "dom:input-type:password", "/data/adds/0/node/attributes/value")
	if !rc.r.dom.maskedOnPage() {
		t.Fatal("re-added masked field not on the page")
	}
	// a new snapshot without it
	rc.send(fullSnapshot(t, page(elem(10, "div", nil))))
	if rc.r.dom.maskedOnPage() {
		t.Fatal("new page without masked fields")
	}
}

func TestDOMAddsOutOfOrderAndMovedSubtrees(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskSelectors = []string{".vault textarea"} })
	rc.send(fullSnapshot(t, page(elem(10, "div", obj{"class": "vault"}))))
	// the child's add comes before its parent's
	res, stored := rc.send(mutation(t, obj{"adds": []obj{
		{"parentId": 20, "nextId": nil, "node": text(21, "ordered-secret-text")},
		{"parentId": 10, "nextId": nil, "node": elem(20, "textarea", nil)},
	}}))
	noLeak(t, stored, "ordered-secret-text")
	wantFinding(t, res, "dom:selector", "/data/adds/0/node/textContent")
	// a class change on an ancestor masks what is below it
	rc.send(mutation(t, obj{"adds": []obj{{"parentId": 3, "node": elem(30, "section", nil, elem(31, "textarea", nil, text(32, "plain")))}}}))
	res, stored = rc.send(mutation(t, obj{
		"attributes": []obj{attrMut(30, obj{"class": "vault"})},
		"texts":      []obj{{"id": 32, "value": "now-a-secret-text"}},
	}))
	noLeak(t, stored, "now-a-secret-text")
	wantFinding(t, res, "dom:selector", "/data/texts/0/value")
}

func TestDOMRefusesAmbiguousEvents(t *testing.T) {
	rc := newRecorder(t, nil)
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	for name, data := range map[string]string{
		"duplicate key":         `{"type":3,"data":{"source":0,"attributes":[{"id":10,"attributes":{"value":"a","value":"b"}}]},"timestamp":1}`,
		"escaped duplicate key": `{"type":3,"data":{"source":0,"attributes":[{"id":10,"attributes":{"value":"a","valu\u0065":"b"}}]},"timestamp":1}`,
		"duplicate id": `{"type":3,"data":{"source":0,"adds":[{"parentId":3,"node":{"type":2,"id":50,"tagName":"input","attributes":{"type":"password","value":"x1"},"childNodes":[]}},` +
			`{"parentId":3,"node":{"type":2,"id":50,"tagName":"div","attributes":{},"childNodes":[]}}]},"timestamp":1}`,
		"node without id":  `{"type":3,"data":{"source":0,"adds":[{"parentId":3,"node":{"type":2,"tagName":"input","attributes":{"type":"password","value":"x1"},"childNodes":[]}}]},"timestamp":1}`,
		"texts not a list": `{"type":3,"data":{"source":0,"texts":{"0":{"id":1,"value":"x"}}},"timestamp":1}`,
	} {
		rc.seq++
		// Either layer may refuse: ingest's validation (duplicate keys)
		// or the DOM redactor (duplicate ids, malformed nodes).
		d, err := event.Decode(event.Envelope{Seq: rc.seq, TS: 1, Step: 1, Kind: event.KindDOM, Data: []byte(data)}, event.DefaultLimits)
		if err == nil {
			_, err = rc.r.Redact(d)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "x1") {
			t.Errorf("%s: error quotes a value: %v", name, err)
		}
	}
	// a node that would become its own ancestor is not linked (no hang)
	res, _ := rc.send(mutation(t, obj{"adds": []obj{{"parentId": 3, "node": elem(60, "div", nil, elem(61, "div", nil))}}}))
	_ = res
	rc.send(mutation(t, obj{"adds": []obj{{"parentId": 61, "node": elem(60, "div", nil)}}}))
	rc.r.dom.maskedOnPage()
	// keys are case-sensitive, as in JavaScript: "ID" is not "id"
	res, stored := rc.send([]byte(`{"type":3,"data":{"source":5,"ID":99,"id":10,"text":"case-secret-9"},"timestamp":1}`))
	noLeak(t, stored, "case-secret-9")
	wantFinding(t, res, "dom:input-event", "/data/text")
}

func TestDOMBadPlanRefused(t *testing.T) {
	for _, edit := range []func(*policy.Plan){
		func(p *policy.Plan) { p.MaskNamePatterns = []string{"("} },
		func(p *policy.Plan) { p.MaskSelectors = []string{"input[value=x]"} },
		func(p *policy.Plan) { p.MaskTextSelectors = []string{"div["} },
	} {
		p := testPlan()
		edit(p)
		if _, err := New(p, nil); err == nil {
			t.Errorf("plan accepted: %+v", p)
		}
	}
}

// ---- benchmark ----

func benchPage(n int) obj {
	var rows []obj
	id := 100
	for i := 0; i < n; i++ {
		rows = append(rows, elem(id, "div", obj{"class": "row"}, elem(id+1, "span", nil, text(id+2, "cell"))))
		id += 3
	}
	rows = append(rows, elem(10, "input", obj{"type": "password"}))
	return page(rows...)
}

// BenchmarkDOMMutation: a ~300-byte text + attribute mutation on unmasked
// nodes, the common DOM event; with no known values yet, and with some
// (after a masked field was filled), when every string is checked too.
func BenchmarkDOMMutation(b *testing.B) {
	for _, known := range []int{0, 8} {
		name := "clean"
		if known > 0 {
			name = "known-values"
		}
		b.Run(name, func(b *testing.B) {
			p := testPlan()
			p.MaskSelectors = []string{".secret input", "[data-private]"}
			p.MaskTextSelectors = []string{".pii"}
			p.Normalize()
			r, err := New(p, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Redact(decoded(b, 1, event.KindDOM, fullSnapshot(b, benchPage(300)))); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < known; i++ {
				r.known.add("known-secret-value-" + string(rune('a'+i)))
			}
			// two events that toggle the row's class, so every one changes the model
			var ds [2]*event.Decoded
			for k, class := range []string{"row active selected", "row inactive shown"} {
				data := []byte(`{"type":3,"data":{"source":0,"texts":[{"id":102,"value":"Order #10432 shipped to Berlin on 2025-11-30"}],` +
					`"attributes":[{"id":100,"attributes":{"class":"` + class + `","style":"background-color: rgb(240, 248, 255); transform: translateY(12px);"}}],` +
					`"removes":[],"adds":[]},"timestamp":1764483600123}`)
				ds[k] = decoded(b, uint64(2+k), event.KindDOM, data)
				b.SetBytes(int64(len(data)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := r.Redact(ds[i&1])
				if err != nil || res.Changed() {
					b.Fatal(err, res)
				}
			}
		})
	}
}

func BenchmarkDOMMouseMove(b *testing.B) {
	r, err := New(testPlan(), nil)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"type":3,"data":{"source":1,"positions":[{"x":512,"y":610,"id":42,"timeOffset":-40},{"x":515,"y":612,"id":42,"timeOffset":-20},{"x":520,"y":615,"id":42,"timeOffset":0}]},"timestamp":1764483600123}`)
	d := decoded(b, 1, event.KindDOM, data)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Redact(d); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDOMKnownValuesMaskedElsewhere(t *testing.T) {
	rc := newRecorder(t, nil)
	const secret = "echoed-Secret-77"
	// the echo comes before the field in document order
	res, stored := rc.send(fullSnapshot(t, page(
		elem(9, "p", obj{"title": "was " + secret}, text(8, "Your password "+secret+" is weak")),
		elem(10, "input", obj{"type": "password", "value": secret}),
	)))
	noLeak(t, stored, secret)
	body := "/data/node/childNodes/0/childNodes/0"
	wantFinding(t, res, "dom:input-type:password", body+"/childNodes/1/attributes/value")
	wantFinding(t, res, "known-value", body+"/childNodes/0/childNodes/0/textContent")
	wantFinding(t, res, "known-value", body+"/childNodes/0/attributes/title")
	if !bytes.Contains(stored, []byte("Your password "+Erased+" is weak")) {
		t.Errorf("only the value should be replaced: %s", stored)
	}
	// later, in an unmasked node's text and in a custom event
	res, stored = rc.send(mutation(t, obj{"texts": []obj{{"id": 8, "value": "again: " + secret}}}))
	noLeak(t, stored, secret)
	wantFinding(t, res, "known-value", "/data/texts/0/value")
	res, stored = rc.send([]byte(`{"type":5,"data":{"tag":"note","payload":{"a/b":"` + secret + `"}},"timestamp":9}`))
	noLeak(t, stored, secret)
	wantFinding(t, res, "known-value", "/data/payload/a~1b")
	// structure the model reads is not rewritten
	_, stored = rc.send(mutation(t, obj{"attributes": []obj{attrMut(9, obj{"name": "x " + secret})}}))
	if !bytes.Contains(stored, []byte(secret)) {
		t.Error("a tracked attribute was rewritten")
	}
}

func TestDOMContentEditableUnderSelector(t *testing.T) {
	rc := newRecorder(t, func(p *policy.Plan) { p.MaskSelectors = []string{".private-note"} })
	const s1, s2 = "editable secret one", "editable secret two"
	res, stored := rc.send(fullSnapshot(t, page(
		elem(10, "div", obj{"class": "private-note", "contenteditable": "true"}, elem(11, "p", nil, text(12, s1))),
		elem(13, "div", obj{"class": "private-note"}, text(14, "a label, not a value")),
	)))
	noLeak(t, stored, s1)
	wantFinding(t, res, "dom:selector", "/data/node/childNodes/0/childNodes/0/childNodes/0/childNodes/0/childNodes/0/textContent")
	if !bytes.Contains(stored, []byte("a label, not a value")) {
		t.Error("text of a non-editable masked element was erased (that is what MaskTextSelectors are for)")
	}
	res, stored = rc.send(mutation(t, obj{"texts": []obj{{"id": 12, "value": s2}}}))
	noLeak(t, stored, s2)
	wantFinding(t, res, "dom:selector", "/data/texts/0/value")
}

func TestDOMRefusedEventLeavesModelUnchanged(t *testing.T) {
	rc := newRecorder(t, nil)
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	bad := `{"type":3,"data":{"source":0,"removes":[{"parentId":3,"id":10}],"adds":[{"parentId":3,"node":{"type":2,"id":11,"tagName":"p","attributes":{},"childNodes":[{"type":3,"textContent":"no id"}]}}]},"timestamp":1}`
	if _, err := rc.r.Redact(decoded(t, 50, event.KindDOM, []byte(bad))); err == nil {
		t.Fatal("accepted a node without an id")
	}
	if !rc.r.dom.maskedOnPage() {
		t.Error("a refused event's remove was applied")
	}
	badSnap := `{"type":2,"data":{"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":7,"attributes":{},"childNodes":[]}]}},"timestamp":1}`
	if _, err := rc.r.Redact(decoded(t, 51, event.KindDOM, []byte(badSnap))); err == nil {
		t.Fatal("accepted a tagName that is not a string")
	}
	if !rc.r.dom.maskedOnPage() {
		t.Error("a refused snapshot reset the model")
	}
}
