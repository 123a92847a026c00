package redact

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/flightrec/flightrec/event"
)

// redactHAR redacts one HAR entry. It works on the JSON generically
// (map[string]any, numbers kept as written) so members the HAR type does
// not model survive, and re-encodes only when something changed.
//
//   - request and response headers[]: a name in DropHeaders (any case, every
//     occurrence) has its value erased ("header:<name>"); a Cookie or
//     Set-Cookie header the plan keeps has its dropped cookies' values
//     erased ("cookie"); a secret-looking name under the generic detector
//     ("detector:generic");
//   - cookies[]: DropCookies ("*" is all) → value erased ("cookie");
//   - queryString[] and postData.params[]: DropParams → value erased
//     ("param:<name>");
//   - bodies (request.postData.text, response.content.text): a mime type in
//     DropBodyMimes drops the body ("body-mime:<mime>"); base64 is decoded
//     first; JSON has SecretKeys' values (and, for a request, DropParams')
//     erased ("json-key:<key>") and every string scrubbed; a form body is
//     scrubbed parameter by parameter; any other text is scanned whole.
//     Only then is the body capped at event.MaxHARBody (on a UTF-8
//     boundary; for base64 the decoded bytes) and _truncated set, so a
//     secret straddling the cap is erased whole;
//   - every other string (url, redirectURL, Location, Referer, _initiator,
//     unknown members): URL scrubbing (userinfo, DropParams in the query and
//     the fragment), detectors and known values.
//
// Erased values are remembered so other channels mask them too.
func (r *Redactor) redactHAR(d *event.Decoded) (Result, error) {
	if h, ok := d.Payload.(*event.HAR); ok && !r.harNeedsWork(h) && !r.rawNeedsWork(d.Data) {
		return Result{}, nil
	}
	m, err := decodeObject(d.Data)
	if err != nil {
		return Result{}, err
	}
	if err := canonHAR(m); err != nil {
		return Result{}, err
	}
	w := &scrubber{r: r, channel: string(event.KindHAR)}
	changed, truncated := false, false

	// Bodies are taken out of the entry while the rest is walked, then put
	// back: they are scrubbed (and capped) once, by body rules.
	type held struct {
		obj  map[string]any
		text any
	}
	var bodies []held
	body := func(obj map[string]any, request bool) {
		if obj == nil {
			return
		}
		w.push("text")
		ch, tr := w.harBody(obj, request)
		w.pop()
		changed = changed || ch
		truncated = truncated || tr
		if t, ok := obj["text"]; ok {
			bodies = append(bodies, held{obj, t})
			delete(obj, "text")
		}
	}

	if req, ok := m["request"].(map[string]any); ok {
		w.push("request")
		changed = w.harHeaders(req) || changed
		changed = w.harCookies(req) || changed
		changed = w.harParams(req, "queryString") || changed
		if pd, ok := req["postData"].(map[string]any); ok {
			w.push("postData")
			changed = w.harParams(pd, "params") || changed
			body(pd, true)
			w.pop()
		}
		w.pop()
	}
	if resp, ok := m["response"].(map[string]any); ok {
		w.push("response")
		changed = w.harHeaders(resp) || changed
		changed = w.harCookies(resp) || changed
		if c, ok := resp["content"].(map[string]any); ok {
			w.push("content")
			body(c, false)
			w.pop()
		}
		w.pop()
	}
	if msgs, ok := m["_webSocketMessages"].([]any); ok {
		w.push("_webSocketMessages")
		for i, x := range msgs {
			if msg, ok := x.(map[string]any); ok {
				w.push(strconv.Itoa(i))
				ch, tr := w.socketMessage(msg)
				w.pop()
				changed = changed || ch || tr
				if t, ok := msg["data"]; ok {
					bodies = append(bodies, held{msg, t})
					delete(msg, "data")
				}
			}
		}
		w.pop()
	}
	if _, ch := w.walk(m); ch {
		changed = true
	}
	for _, b := range bodies {
		if _, ok := b.obj["opcode"]; ok {
			b.obj["data"] = b.text // a WebSocket message
		} else {
			b.obj["text"] = b.text
		}
	}
	if truncated {
		m["_truncated"] = true
	}
	if !changed {
		return Result{}, nil
	}
	out, err := marshalJSON(m)
	if err != nil {
		return Result{}, errBadData
	}
	return Result{Data: out, Findings: w.findings}, nil
}

// canonHAR spells the members redaction reads canonically (canonKeys).
func canonHAR(m map[string]any) error {
	if err := canonKeys(m, "request", "response"); err != nil {
		return err
	}
	nv := []string{"name", "value"}
	for _, side := range []string{"request", "response"} {
		o, ok := m[side].(map[string]any)
		if !ok {
			continue
		}
		if err := canonKeys(o, "url", "headers", "cookies", "queryString", "postData", "content", "redirectURL"); err != nil {
			return err
		}
		for _, arr := range []string{"headers", "cookies", "queryString"} {
			if err := canonEach(o, arr, nv...); err != nil {
				return err
			}
		}
		for _, b := range []string{"postData", "content"} {
			if bo, ok := o[b].(map[string]any); ok {
				if err := canonKeys(bo, "mimeType", "text", "encoding", "params"); err != nil {
					return err
				}
				if err := canonEach(bo, "params", nv...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// harNeedsWork is the fast path's verdict from the typed entry (the raw
// JSON is checked separately).
func (r *Redactor) harNeedsWork(h *event.HAR) bool {
	d := r.det
	for _, hs := range [][]event.NameValue{h.Request.Headers, h.Response.Headers} {
		for _, x := range hs {
			if x.Value == "" {
				continue
			}
			name := strings.TrimSpace(x.Name)
			if d.dropHeaders[lowerASCII(name)] || strings.EqualFold(name, "cookie") ||
				strings.EqualFold(name, "set-cookie") || (d.generic && secretishName(name)) {
				return true
			}
		}
	}
	for _, cs := range [][]event.Cookie{h.Request.Cookies, h.Response.Cookies} {
		for _, c := range cs {
			if c.Value != "" && d.dropCookie(c.Name) {
				return true
			}
		}
	}
	params := h.Request.QueryString
	if pd := h.Request.PostData; pd != nil {
		if pd.Text != "" {
			return true
		}
		params = append(params[:len(params):len(params)], pd.Params...)
	}
	for _, p := range params {
		if p.Value == "" {
			continue
		}
		if _, ok := d.dropParam(p.Name); ok || (d.generic && secretishName(p.Name)) {
			return true
		}
	}
	if len(h.WebSocketMessages) > 0 {
		return true
	}
	c := h.Response.Content
	if c.Text != "" {
		if c.Encoding != "" || len(c.Text) > event.MaxHARBody {
			return true
		}
		if _, ok := d.dropMime(c.MimeType); ok {
			return true
		}
	}
	return false
}

// lowerASCII lowercases s, allocating only when s has an uppercase letter.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// nameValues returns obj[key] as a list of name/value objects.
func nameValues(obj map[string]any, key string) []any {
	a, _ := obj[key].([]any)
	return a
}

// harHeaders erases dropped headers' values (and dropped cookies inside
// kept Cookie / Set-Cookie headers).
func (w *scrubber) harHeaders(obj map[string]any) bool {
	d := w.r.det
	changed := false
	w.push("headers")
	for i, h := range nameValues(obj, "headers") {
		hm, ok := h.(map[string]any)
		if !ok {
			continue
		}
		name, _ := hm["name"].(string)
		val, ok := hm["value"].(string)
		if !ok || val == "" || isErased(val) {
			continue
		}
		w.push(strconv.Itoa(i))
		w.push("value")
		lname := lowerASCII(strings.TrimSpace(name))
		switch {
		case d.dropHeaders[lname]:
			hm["value"] = w.r.erase(val)
			w.find("header:" + lname)
			w.rememberHeader(lname, val)
			changed = true
		case lname == "cookie" || lname == "set-cookie":
			if nv, ch := w.cookieHeader(val, lname == "set-cookie"); ch {
				hm["value"] = nv
				changed = true
			}
		case d.generic && secretishName(name) && !trivialValue(val):
			hm["value"] = w.r.erase(val)
			w.find("detector:" + detGeneric)
			w.remember(val)
			changed = true
		}
		w.pop()
		w.pop()
	}
	w.pop()
	return changed
}

// rememberHeader remembers an erased header value and the parts of it that
// are secrets on their own: the credential after an auth scheme, the values
// in a cookie string.
func (w *scrubber) rememberHeader(lname, val string) {
	switch lname {
	case "cookie":
		for _, kv := range cookiePairs(val, false) {
			w.rememberCookie(kv[0], kv[1])
		}
		return
	case "set-cookie":
		for _, kv := range cookiePairs(val, true) {
			w.rememberCookie(kv[0], kv[1])
		}
		return
	}
	w.remember(val)
	if sch, cred, ok := strings.Cut(strings.TrimSpace(val), " "); ok && len(sch) <= 8 {
		w.remember(cred)
	}
}

// rememberCookie remembers a dropped cookie's value. Under "*" every
// cookie is dropped, locale and theme cookies included, so only values that
// look like secrets are remembered (masking "en-US" everywhere would be
// noise).
func (w *scrubber) rememberCookie(name, val string) {
	d := w.r.det
	if d.dropCookies[name] || secretishName(name) || looksSecret(val) {
		w.remember(val)
	}
}

func looksSecret(v string) bool {
	return len(v) >= 16 || (len(v) >= 8 && mixedClasses(v))
}

// cookiePairs splits a Cookie header ("a=1; b=2") or Set-Cookie header
// (the first pair of each line) into name/value pairs.
func cookiePairs(v string, set bool) [][2]string {
	var out [][2]string
	if set {
		for _, line := range strings.Split(v, "\n") {
			first, _, _ := strings.Cut(line, ";")
			if n, val, ok := strings.Cut(first, "="); ok {
				out = append(out, [2]string{strings.TrimSpace(n), strings.TrimSpace(val)})
			}
		}
		return out
	}
	for _, part := range strings.Split(v, ";") {
		if n, val, ok := strings.Cut(part, "="); ok {
			out = append(out, [2]string{strings.TrimSpace(n), strings.TrimSpace(val)})
		}
	}
	return out
}

// cookieHeader erases dropped cookies' values inside a Cookie or Set-Cookie
// header the plan keeps, leaving names and attributes.
func (w *scrubber) cookieHeader(v string, set bool) (string, bool) {
	var edits []uedit
	d := w.r.det
	pos := 0
	for _, line := range strings.SplitAfter(v, "\n") {
		segs := []string{line}
		if set {
			first, _, _ := strings.Cut(line, ";")
			segs = []string{first}
		} else {
			segs = strings.SplitAfter(line, ";")
		}
		p := pos
		for _, seg := range segs {
			if eq := strings.IndexByte(seg, '='); eq > 0 {
				name := strings.TrimSpace(seg[:eq])
				vst := eq + 1
				ven := len(strings.TrimRight(strings.TrimSuffix(strings.TrimRight(seg, "\r\n"), ";"), " "))
				for vst < ven && seg[vst] == ' ' {
					vst++
				}
				val := seg[vst:max(vst, ven)]
				if val != "" && !isErased(val) && d.dropCookie(name) {
					edits = append(edits, uedit{p + vst, p + vst + len(val), w.r.erase(val)})
					w.find("cookie")
					w.rememberCookie(name, val)
				}
			}
			p += len(seg)
		}
		pos += len(line)
	}
	if len(edits) == 0 {
		return v, false
	}
	return applyEdits(v, edits), true
}

// harCookies erases dropped cookies' values in a cookies[] array.
func (w *scrubber) harCookies(obj map[string]any) bool {
	d := w.r.det
	changed := false
	w.push("cookies")
	for i, c := range nameValues(obj, "cookies") {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		name, _ := cm["name"].(string)
		val, ok := cm["value"].(string)
		if !ok || val == "" || isErased(val) || !d.dropCookie(name) {
			continue
		}
		w.push(strconv.Itoa(i))
		w.push("value")
		cm["value"] = w.r.erase(val)
		w.find("cookie")
		w.rememberCookie(name, val)
		w.pop()
		w.pop()
		changed = true
	}
	w.pop()
	return changed
}

// harParams erases dropped parameters' values in queryString[] or params[].
func (w *scrubber) harParams(obj map[string]any, key string) bool {
	d := w.r.det
	changed := false
	w.push(key)
	for i, p := range nameValues(obj, key) {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		name, _ := pm["name"].(string)
		val, ok := pm["value"].(string)
		if !ok || val == "" || isErased(val) {
			continue
		}
		rule := ""
		if e, ok := d.dropParam(name); ok {
			rule = "param:" + e
		} else if d.generic && secretishName(name) && !trivialValue(val) {
			rule = "detector:" + detGeneric
		}
		if rule == "" {
			continue
		}
		w.push(strconv.Itoa(i))
		w.push("value")
		pm["value"] = w.r.erase(val)
		w.find(rule)
		w.remember(val)
		w.pop()
		w.pop()
		changed = true
	}
	w.pop()
	return changed
}

// harBody redacts obj["text"] (the current pointer) by the body rules and
// caps it; it reports whether the text changed and whether it was capped.
func (w *scrubber) harBody(obj map[string]any, request bool) (changed, truncated bool) {
	text, ok := obj["text"].(string)
	if !ok || text == "" {
		return false, false
	}
	w.fixed = w.ptr()
	defer func() { w.fixed = "" }()
	mime, _ := obj["mimeType"].(string)
	if e, drop := w.r.det.dropMime(mime); drop {
		obj["text"] = ""
		w.find("body-mime:" + e)
		return true, false
	}
	enc, _ := obj["encoding"].(string)
	b64 := strings.EqualFold(strings.TrimSpace(enc), "base64")
	body := text
	if b64 {
		raw, err := decodeBase64(text)
		if err != nil {
			// Undecodable means unscannable: fail closed.
			obj["text"] = ""
			w.find("body:undecodable")
			return true, false
		}
		body = string(raw)
	} else if enc != "" {
		obj["text"] = ""
		w.find("body:unknown-encoding")
		return true, false
	}
	nb, ch := w.harBodyText(body, mime, request)
	if len(nb) > event.MaxHARBody {
		nb = capUTF8(nb, event.MaxHARBody)
		truncated, ch = true, true
	}
	if !ch {
		return false, false
	}
	if b64 {
		obj["text"] = base64.StdEncoding.EncodeToString([]byte(nb))
	} else {
		obj["text"] = nb
	}
	return true, truncated
}

// socketMessage redacts a WebSocket message's data (the current pointer)
// as a body: text (opcode 1) by the body rules, JSON by key, a message the
// page sent like a request body; binary is base64, scanned decoded. Then
// it is capped at event.MaxHARBody and the message marked _truncated.
func (w *scrubber) socketMessage(msg map[string]any) (changed, truncated bool) {
	data, ok := msg["data"].(string)
	if !ok || data == "" {
		return false, false
	}
	w.push("data")
	w.fixed = w.ptr()
	defer func() { w.fixed = ""; w.pop() }()
	send := msg["type"] == "send"
	op, _ := msg["opcode"].(float64)
	if n, ok := msg["opcode"].(interface{ String() string }); ok {
		f, _ := strconv.ParseFloat(n.String(), 64)
		op = f
	}
	text := data
	if op != 1 {
		raw, err := decodeBase64(data)
		if err != nil {
			msg["data"] = ""
			w.find("body:undecodable")
			return true, false
		}
		text = string(raw)
	}
	nt, ch := w.harBodyText(text, "", send)
	if len(nt) > event.MaxHARBody {
		nt = capUTF8(nt, event.MaxHARBody)
		ch, truncated = true, true
		msg["_truncated"] = true
	}
	if !ch {
		return false, false
	}
	if op != 1 {
		nt = base64.StdEncoding.EncodeToString([]byte(nt))
	}
	msg["data"] = nt
	return true, truncated
}

// harBodyText scrubs a whole (decoded) body.
func (w *scrubber) harBodyText(body, mime string, request bool) (string, bool) {
	lm := strings.ToLower(mime)
	trimmed := strings.TrimLeft(body, " \t\r\n\ufeff")
	if strings.Contains(lm, "json") || strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
		if v, err := decodeJSON([]byte(body)); err == nil {
			w.paramKeys = request
			nv, ch := w.walk(v)
			w.paramKeys = false
			if !ch {
				return body, false
			}
			out, err := marshalJSON(nv)
			if err != nil {
				w.find("body:unencodable")
				return "", true
			}
			return string(out), true
		}
	}
	changed := false
	if request && strings.Contains(lm, "x-www-form-urlencoded") {
		if nb, ch := w.form(body, true); ch {
			body, changed = nb, true
		}
	}
	if nb, ch := w.str(body); ch {
		body, changed = nb, true
	}
	return body, changed
}

// decodeBase64 accepts standard and URL alphabets, padded or not, with line
// breaks.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n ") {
		s = strings.NewReplacer("\r", "", "\n", "", " ", "").Replace(s)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err == nil {
		return b, nil
	}
	for _, e := range []*base64.Encoding{base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err2 := e.DecodeString(s); err2 == nil {
			return b, nil
		}
	}
	return nil, err
}

// capUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence.
func capUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for k := 0; k < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); k++ {
		cut--
	}
	return s[:cut]
}
