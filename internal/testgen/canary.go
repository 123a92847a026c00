package testgen

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"

	"github.com/flightrec/flightrec/event"
)

// Canaries is a recording that plants secrets in every channel and every
// encoding, and the list of secrets, each of which must appear nowhere the
// service writes.
type Canaries struct {
	Events  []event.Envelope
	Secrets []string
	AppMap  map[string][]string
}

// canaryGen makes realistic secrets: each shaped like what a detector or
// rule looks for, each unique.
type canaryGen struct {
	r       *rand.Rand
	secrets []string
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func (g *canaryGen) str(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	return string(b)
}

func (g *canaryGen) keep(s string) string { g.secrets = append(g.secrets, s); return s }

func (g *canaryGen) jwt() string {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	h := b64(`{"alg":"HS256","typ":"JWT"}`)
	p := b64(fmt.Sprintf(`{"sub":"%s","iat":%d}`, g.str(12, alnum), 1700000000+g.r.IntN(1e6)))
	sig := g.str(43, alnum+"-_")
	g.keep(p + "." + sig) // the header is the same in every JWT; the rest is the secret
	return h + "." + p + "." + sig
}

func (g *canaryGen) aws() string {
	return g.keep("AKIA" + g.str(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"))
}
func (g *canaryGen) github() string { return g.keep("ghp_" + g.str(36, alnum)) }
func (g *canaryGen) slack() string {
	return g.keep(fmt.Sprintf("xoxb-%d-%d-%s", 1e11+g.r.IntN(1e11), 1e11+g.r.IntN(1e11), g.str(24, alnum)))
}
func (g *canaryGen) random(n int) string { return g.keep(g.str(n, alnum)) }
func (g *canaryGen) password() string    { return g.keep("Pw!" + g.str(14, alnum) + "#") }

// card returns a Luhn-valid 16-digit number, formatted with sep every 4.
func (g *canaryGen) card(sep string) string { return g.keep(LuhnCard(g.r, sep)) }

// LuhnCard returns a random Luhn-valid 16-digit Visa-like number, with sep
// between its groups of 4.
func LuhnCard(r *rand.Rand, sep string) string {
	d := make([]int, 16)
	d[0] = 4
	for i := 1; i < 15; i++ {
		d[i] = r.IntN(10)
	}
	sum := 0
	for i := 0; i < 15; i++ { // from the right, the check digit's neighbour doubles
		v := d[14-i]
		if i%2 == 0 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	d[15] = (10 - sum%10) % 10
	var b strings.Builder
	for i, x := range d {
		if i > 0 && i%4 == 0 {
			b.WriteString(sep)
		}
		fmt.Fprintf(&b, "%d", x)
	}
	return b.String()
}

func (g *canaryGen) pem() string {
	body := g.str(64, alnum+"+/") + "\n" + g.str(64, alnum+"+/") + "\n" + g.str(40, alnum+"+/")
	g.keep(body[:64])
	return "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----"
}

// CanaryRecording builds the recording.
func CanaryRecording(seed uint64) *Canaries {
	g := &canaryGen{r: rand.New(rand.NewPCG(seed, seed+1))}
	c := &Canaries{AppMap: map[string][]string{"masked_selectors": {"#gift-code"}, "mask_text_selectors": {".account-balance"}}}
	ts := int64(1764483600000000000)
	add := func(step int, kind event.Kind, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		ts += 1_000_000
		c.Events = append(c.Events, event.Envelope{Seq: uint64(len(c.Events) + 1), TS: ts, Step: step, Kind: kind, Data: b})
	}
	add(0, event.KindMeta, map[string]any{"versions": map[string]string{"engine": "chromium 148"},
		"labels": map[string]string{"deploy_note": "rotated key " + g.github()}})

	// HAR: headers (repeated, mixed case), cookies, params, fragments,
	// userinfo, bodies in every encoding.
	jwt1, jwt2 := g.jwt(), g.jwt()
	sid1, sid2, csrf := g.random(32), g.random(32), g.random(24)
	apiKey, tok, code, sig := g.random(40), g.random(30), g.random(20), g.random(44)
	userPw, formPw, jsonPw := g.password(), g.password(), g.password()
	fragTok := g.random(28)
	har := func(method, u string, reqHeaders, respHeaders []map[string]string, reqCookies, respCookies []map[string]any,
		post map[string]any, status int, mime, text, encoding string, extra map[string]any) map[string]any {
		if reqHeaders == nil {
			reqHeaders = []map[string]string{}
		}
		if respHeaders == nil {
			respHeaders = []map[string]string{}
		}
		if reqCookies == nil {
			reqCookies = []map[string]any{}
		}
		if respCookies == nil {
			respCookies = []map[string]any{}
		}
		req := map[string]any{"method": method, "url": u, "httpVersion": "HTTP/1.1", "headers": reqHeaders,
			"cookies": reqCookies, "queryString": []any{}, "headersSize": -1, "bodySize": 0}
		if post != nil {
			req["postData"] = post
		}
		content := map[string]any{"size": len(text), "mimeType": mime, "text": text}
		if encoding != "" {
			content["encoding"] = encoding
		}
		e := map[string]any{"startedDateTime": "2026-11-30T06:00:00.000Z", "time": 10.5, "request": req,
			"response": map[string]any{"status": status, "statusText": "OK", "httpVersion": "HTTP/1.1",
				"headers": respHeaders, "cookies": respCookies, "content": content, "redirectURL": "",
				"headersSize": -1, "bodySize": len(text)},
			"timings": map[string]float64{"send": 1, "wait": 8, "receive": 1.5}}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	add(1, event.KindHAR, har("GET", "https://app.example/api/cart?page=2&token="+tok+"#access_token="+fragTok+"&state=x",
		[]map[string]string{{"name": "Authorization", "value": "Bearer " + jwt1}, {"name": "AUTHORIZATION", "value": "Bearer " + jwt2},
			{"name": "Cookie", "value": "sid=" + sid1 + "; csrf=" + csrf}, {"name": "x-api-key", "value": apiKey},
			{"name": "X-CSRF-Token", "value": csrf}, {"name": "Referer", "value": "https://app.example/cb?code=" + code}},
		[]map[string]string{{"name": "Set-Cookie", "value": "sid=" + sid2 + "; Path=/; HttpOnly"},
			{"name": "set-cookie", "value": "csrf=" + csrf + "; Path=/"}, {"name": "Location", "value": "/next?sig=" + sig}},
		[]map[string]any{{"name": "sid", "value": sid1}, {"name": "csrf", "value": csrf}},
		[]map[string]any{{"name": "sid", "value": sid2, "httpOnly": true}},
		nil, 200, "application/json", `{"items":[1,2],"session_token":"`+g.random(26)+`"}`, "",
		map[string]any{"_initiator": map[string]any{"type": "script", "stack": map[string]any{"callFrames": []map[string]any{
			{"functionName": "load", "url": "https://cdn.example/app.js?api_key=" + g.random(32), "lineNumber": 10}}}}}))
	login := url.URL{Scheme: "https", User: url.UserPassword("bob", userPw), Host: "app.example", Path: "/login"}
	add(1, event.KindHAR, har("POST", login.String(), nil, nil, nil, nil,
		map[string]any{"mimeType": "application/x-www-form-urlencoded", "text": "user=bob&password=" + url.QueryEscape(formPw),
			"params": []map[string]string{{"name": "user", "value": "bob"}, {"name": "password", "value": formPw}}},
		302, "text/html", "", "", map[string]any{}))
	cardJSON := g.card("")
	add(2, event.KindHAR, har("POST", "https://app.example/api/pay", nil, nil, nil, nil,
		map[string]any{"mimeType": "application/json", "text": `{"password":"` + jsonPw + `","card_number":"` + cardJSON +
			`","cvv":"` + g.str(3, "0123456789") + `","note":"key ` + g.aws() + `"}`},
		200, "application/json", `{"ok":true}`, "", nil))
	// A base64 body holding a GitHub token and a Slack token.
	b64body := base64.StdEncoding.EncodeToString([]byte(`{"cfg":{"gh":"` + g.github() + `","slack":"` + g.slack() + `"}}`))
	add(2, event.KindHAR, har("GET", "https://app.example/config.json", nil, nil, nil, nil, nil, 200,
		"application/json", b64body, "base64", nil))
	// A 100 KiB body with an AWS key and a JWT straddling the 64 KiB cap.
	straddleKey, straddleJWT := g.aws(), g.jwt()
	pad := strings.Repeat("lorem ipsum ", (64<<10)/12)
	big := pad[:64<<10-10] + straddleKey + " " + straddleJWT + " " + strings.Repeat("tail ", 7000)
	add(2, event.KindHAR, har("GET", "https://app.example/big.txt", nil, nil, nil, nil, nil, 200, "text/plain", big, "", nil))
	// A redirect carrying an OAuth code; a JSON-escaped secret in a body.
	redirectCode := g.random(22)
	e := har("GET", "https://app.example/oauth", nil, nil, nil, nil, nil, 302, "text/html", "", "", nil)
	e["response"].(map[string]any)["redirectURL"] = "https://app.example/cb?code=" + redirectCode + "&state=ok"
	add(2, event.KindHAR, e)
	escaped := g.password()
	add(2, event.KindHAR, har("GET", "https://app.example/api/profile", nil, nil, nil, nil, nil, 200,
		"application/json", `{"profile":{"name":"Ann","secret":"`+strings.ReplaceAll(escaped, "!", `\u0021`)+`"}}`, "", nil))
	// PEM in a body.
	add(2, event.KindHAR, har("GET", "https://app.example/debug", nil, nil, nil, nil, nil, 200, "text/plain",
		"config dump\n"+g.pem()+"\nend", "", nil))

	// Console: a JWT in text, a token in a stack URL, a PEM, a card.
	add(3, event.KindConsole, map[string]any{"level": "error", "text": "auth failed for " + g.jwt(),
		"url": "https://app.example/app.js?session=" + g.random(30), "line": 10, "column": 4,
		"stack": []map[string]any{{"function": "pay", "url": "https://app.example/app.js?auth=" + g.random(30), "line": 11}}})
	add(3, event.KindConsole, map[string]any{"level": "log", "text": "paying with " + g.card(" ") + " and " + g.card("-")})
	add(3, event.KindConsole, map[string]any{"level": "warn", "text": "db_password=" + g.keep(g.str(10, alnum)+"x9Qz!"+g.str(8, alnum)) + " leaked"})

	// DOM: a full snapshot with every kind of masked field, then mutations
	// and input events aimed at them.
	pw1, hidden, textareaSecret := g.password(), g.random(26), g.random(30)
	selectVal, giftCode, balance := g.keep("exp-"+g.str(10, alnum)), g.random(16), g.keep("EUR "+g.str(12, "0123456789"))
	el := func(id int, tag string, attrs map[string]any, kids ...map[string]any) map[string]any {
		if attrs == nil {
			attrs = map[string]any{}
		}
		if kids == nil {
			kids = []map[string]any{}
		}
		return map[string]any{"type": 2, "id": id, "tagName": tag, "attributes": attrs, "childNodes": kids}
	}
	txt := func(id int, s string) map[string]any { return map[string]any{"type": 3, "id": id, "textContent": s} }
	doc := map[string]any{"type": 0, "id": 1, "childNodes": []map[string]any{
		el(2, "html", nil, el(3, "body", nil,
			el(10, "input", map[string]any{"type": "password", "name": "pw", "value": pw1}),
			el(11, "input", map[string]any{"TYPE": "PASSWORD", "value": g.password()}),
			el(12, "input", map[string]any{"type": "hidden", "name": "csrf", "value": hidden}),
			el(13, "textarea", map[string]any{"name": "card_notes", "autocomplete": "cc-number"}, txt(14, textareaSecret)),
			el(15, "select", map[string]any{"autocomplete": "cc-exp-month"},
				el(16, "option", map[string]any{"value": selectVal}, txt(17, selectVal))),
			el(18, "input", map[string]any{"id": "gift-code", "value": giftCode}),
			el(19, "span", map[string]any{"class": "account-balance"}, txt(20, balance)),
			el(21, "input", map[string]any{"type": "password", "id": "pw2"}),
			el(22, "input", map[string]any{"type": "text", "name": "search", "value": "shoes"}),
			el(30, "iframe", nil, map[string]any{"type": 0, "id": 31, "childNodes": []map[string]any{
				el(32, "input", map[string]any{"id": "gift-code", "value": g.random(16)})}}),
		))}}
	add(4, event.KindDOM, map[string]any{"type": 2, "timestamp": ts / 1e6, "data": map[string]any{"node": doc,
		"initialOffset": map[string]int{"top": 0, "left": 0}}})
	mut := func(step int, data map[string]any) {
		data["source"] = 0
		for _, k := range []string{"adds", "removes", "texts", "attributes"} {
			if _, ok := data[k]; !ok {
				data[k] = []any{}
			}
		}
		add(step, event.KindDOM, map[string]any{"type": 3, "timestamp": ts / 1e6, "data": data})
	}
	input := func(step, id int, text string) {
		add(step, event.KindDOM, map[string]any{"type": 3, "timestamp": ts / 1e6,
			"data": map[string]any{"source": 5, "id": id, "text": text, "isChecked": false}})
	}
	mut(4, map[string]any{"attributes": []map[string]any{{"id": 10, "attributes": map[string]any{"value": g.password()}}}})
	input(4, 21, g.password())
	// The show-password toggle, then more typing.
	mut(4, map[string]any{"attributes": []map[string]any{{"id": 10, "attributes": map[string]any{"type": "text"}}}})
	mut(4, map[string]any{"attributes": []map[string]any{{"id": 10, "attributes": map[string]any{"value": g.password()}}}})
	input(4, 10, g.password())
	// A secret split between a mutation and an input event.
	split := g.password()
	g.keep(split[:8])
	mut(5, map[string]any{"attributes": []map[string]any{{"id": 21, "attributes": map[string]any{"value": split[:8]}}}})
	input(5, 21, split)
	mut(5, map[string]any{"texts": []map[string]any{{"id": 14, "value": g.random(24)}}})
	mut(5, map[string]any{"adds": []map[string]any{{"parentId": 3, "nextId": nil,
		"node": el(40, "input", map[string]any{"type": "Password", "value": g.password()})}}})

	// Snapshot text with masked fields; a receipt filling a password; a
	// check on the card field.
	card := g.card(" ")
	add(6, event.KindSnapshot, map[string]any{"view": "interactive", "when": "after", "origin": "https://app.example",
		"text": "main \"Checkout\"\n textbox \"Card number\" value=\"" + card + "\" @e4\n textbox \"Password\" value=\"" +
			pw1 + "\" @e5\n textbox \"Gift code\" value=\"" + giftCode + "\" @e6\n button \"Pay\" @e7"})
	fillPw := g.password()
	add(6, event.KindReceipt, map[string]any{"step": 6, "action": map[string]any{"verb": "fill",
		"target": map[string]string{"ref": "@e5", "role": "textbox", "name": "Password"}, "args": map[string]string{"value": fillPw}},
		"outcome": "done"})
	add(6, event.KindReceipt, map[string]any{"step": 6, "action": map[string]any{"verb": "click",
		"target": map[string]string{"ref": "@e7", "role": "button", "name": "Pay"}}, "outcome": "failed",
		"error": map[string]string{"code": "NOT_ACTIONABLE", "message": "retry with token " + g.jwt(), "next": "snapshot"}})
	add(6, event.KindCheck, map[string]any{"type": "ui", "target": "textbox Card number",
		"expect": map[string]string{"value": cardJSON}, "actual": map[string]string{"value": card}, "passed": false})
	add(6, event.KindCheck, map[string]any{"type": "state", "target": "GET /api/account",
		"expect": map[string]any{"state": "ok", "api_key": g.random(32)}, "actual": map[string]any{"state": "ok"}, "passed": true})

	c.Secrets = g.secrets
	return c
}
