package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unsafe"
)

// This file holds what the HAR and text redactors share: the generic JSON
// walk (decode into map[string]any with UseNumber so unknown members and
// number spellings survive, erase, re-encode only on change), string
// scrubbing (URLs, detectors, known values), and the fast path's checks on
// an event's raw JSON.
//
// The walk is over decoded values, not over internal/jsonspan's spans as
// the DOM redactor's is: a HAR or text event that redaction changes is
// stored re-encoded from the decoded tree (members in sorted order, the
// canonical spellings canonKeys gives the members redaction reads), and
// moving it to spans would change the stored bytes of every such event.
// Its string scrubbing (scrubber.str) is the one the DOM redactor's
// string pass calls.

// scrubber redacts one event (or one body inside it): it carries the
// current JSON pointer and the findings.
type scrubber struct {
	r        *Redactor
	channel  string
	findings []Finding
	path     []string
	// fixed, when set, is the pointer of every finding: a body is one
	// string member, and a pointer cannot reach inside it.
	fixed string
	// paramKeys makes DropParams count as secret keys (a request's JSON
	// body is its parameters).
	paramKeys bool
	// ptrCache is ptr() for the current path while cached.
	ptrCache string
	cached   bool
}

func (w *scrubber) push(tok string) { w.path = append(w.path, tok); w.cached = false }
func (w *scrubber) pop()            { w.path = w.path[:len(w.path)-1]; w.cached = false }

func (w *scrubber) ptr() string {
	if w.fixed != "" {
		return w.fixed
	}
	if w.cached {
		return w.ptrCache
	}
	var b strings.Builder
	for _, t := range w.path {
		b.WriteByte('/')
		b.WriteString(PointerEscape(t))
	}
	w.ptrCache, w.cached = b.String(), true
	return w.ptrCache
}

// find records a finding at the current pointer.
func (w *scrubber) find(rule string) {
	w.findings = append(w.findings, Finding{Rule: rule, Channel: w.channel, Pointer: w.ptr()})
}

// remember adds an erased value to the recording's known values, with its
// trimmed and percent-decoded spellings.
func (w *scrubber) remember(v string) {
	v = strings.TrimSpace(v)
	if v == "" || strings.Contains(Erased, v) || isErased(v) {
		return
	}
	w.r.known.add(v)
	if strings.ContainsAny(v, "%+") {
		if dec, err := url.QueryUnescape(v); err == nil && dec != v && !strings.Contains(Erased, dec) {
			w.r.known.add(dec)
		}
	}
}

// str scrubs one string value.
func (w *scrubber) str(s string) (string, bool) { return w.strDepth(s, 0) }

func (w *scrubber) strDepth(s string, depth int) (string, bool) {
	changed := false
	if ns, ok := w.urls(s, depth); ok {
		s, changed = ns, true
	}
	if sp := w.r.det.scan(s); sp != nil {
		var b strings.Builder
		b.Grow(len(s))
		last := 0
		for _, x := range sp {
			b.WriteString(s[last:x.start])
			v := s[x.start:x.end]
			b.WriteString(w.r.erase(v))
			w.find("detector:" + x.rule)
			w.remember(v)
			last = x.end
		}
		b.WriteString(s[last:])
		s, changed = b.String(), true
	}
	if ns, ok := w.r.replaceKnown(s); ok {
		s, changed = ns, true
		w.find("known-value")
	}
	return s, changed
}

// walk scrubs a decoded JSON value in place (maps and slices are modified;
// the returned value replaces scalars).
func (w *scrubber) walk(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		return w.str(x)
	case map[string]any:
		return w.eachChild(x, w.member)
	case []any:
		return w.eachChild(x, func(_ string, c any) (any, bool) { return w.walk(c) })
	case json.Number:
		// A card number sent as a JSON number.
		if w.r.det.card && len(x) >= 13 && scanCard(string(x), nil) != nil {
			w.find("detector:" + detCard)
			w.remember(x.String())
			return w.r.erase(x.String()), true
		}
	}
	return v, false
}

// eachChild calls f on each member of an object (in key order) or element
// of an array, with the pointer at it, and stores what f changes. Any other
// v is returned unchanged.
func (w *scrubber) eachChild(v any, f func(key string, c any) (any, bool)) (any, bool) {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			w.push(k)
			if nv, ok := f(k, x[k]); ok {
				x[k], changed = nv, true
			}
			w.pop()
		}
	case []any:
		for i := range x {
			w.push(strconv.Itoa(i))
			if nv, ok := f("", x[i]); ok {
				x[i], changed = nv, true
			}
			w.pop()
		}
	}
	return v, changed
}

// member scrubs one object member: a secret key's value is erased whole
// (rule "json-key:<key>"), a secret-looking key's string value too (rule
// "detector:generic"); anything else is walked.
func (w *scrubber) member(k string, v any) (any, bool) {
	if v == nil {
		return v, false
	}
	if rule, ok := w.keyRule(k); ok {
		return w.eraseValue(v, rule)
	}
	if s, ok := v.(string); ok && w.r.det.generic && !trivialValue(s) && secretishName(k) {
		return w.eraseValue(v, "detector:"+detGeneric)
	}
	return w.walk(v)
}

// keyRule names the rule erasing a member's value: "json-key:<key>" for a
// SecretKey, "param:<name>" for a DropParam in a request body.
func (w *scrubber) keyRule(k string) (string, bool) {
	if e, ok := w.r.det.secretKey(k); ok {
		return "json-key:" + e, true
	}
	if w.paramKeys {
		if e, ok := w.r.det.dropParam(k); ok {
			return "param:" + e, true
		}
	}
	return "", false
}

// eraseValue replaces a value wholesale with the erased marker, remembering
// its strings. Empty strings, null and booleans are left alone.
func (w *scrubber) eraseValue(v any, rule string) (any, bool) {
	var plain string
	switch x := v.(type) {
	case nil, bool:
		return v, false
	case string:
		if x == "" || isErased(x) {
			return v, false
		}
		plain = x
	case json.Number:
		plain = x.String()
	default:
		b, err := marshalJSON(v)
		if err != nil {
			return Erased, true // cannot happen for decoded JSON; fail closed
		}
		plain = string(b)
		w.rememberLeaves(v)
	}
	w.find(rule)
	w.remember(plain)
	return w.r.erase(plain), true
}

// rememberLeaves adds every string and number inside v to the known values.
func (w *scrubber) rememberLeaves(v any) {
	switch x := v.(type) {
	case string:
		w.remember(x)
	case json.Number:
		w.remember(x.String())
	case map[string]any:
		for _, e := range x {
			w.rememberLeaves(e)
		}
	case []any:
		for _, e := range x {
			w.rememberLeaves(e)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// decodeJSON decodes b keeping numbers as json.Number; trailing data is an
// error.
// decodeObject decodes an event's data, which must be a JSON object, for
// the generic walks; anything else is errBadData.
func decodeObject(b []byte) (map[string]any, error) {
	v, err := decodeJSON(b)
	if err != nil {
		return nil, errBadData
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errBadData
	}
	return m, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	return v, nil
}

type jsonErr string

func (e jsonErr) Error() string { return string(e) }

const errTrailing = jsonErr("trailing data after JSON value")

// marshalJSON encodes v without HTML escaping (so "&" in a URL stays "&").
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// --- the fast path: checks on raw JSON ---

// bytesString views b as a string without copying; the caller must not
// modify b while the string is in use.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// rawNeedsWork reports whether anything in an event's raw JSON could need
// redaction: a detector's match, a URL parameter to drop, userinfo, a
// secret key, a known value, or an escape or encoding the other checks
// cannot see through. False means the event is clean as it is.
func (r *Redactor) rawNeedsWork(raw []byte) bool {
	s := bytesString(raw)
	if rawEscapeHides(s) || rawPercentHides(s) {
		return true
	}
	if r.det.foundRaw(s) {
		return true
	}
	if rawDropParam(r.det, s) || rawUserinfo(s) {
		return true
	}
	return r.knownIn(s)
}

// rawEscapeHides: a \u escape of a printable ASCII character (other than
// & < > ' which Go and others escape routinely, and which start no
// secret), or an escaped '/', could hide what the checks look for.
func rawEscapeHides(s string) bool {
	if strings.Contains(s, `\/`) {
		return true
	}
	for i := 0; ; {
		j := strings.Index(s[i:], `\u`)
		if j < 0 {
			return false
		}
		j += i
		if j+6 > len(s) {
			return true
		}
		h := s[j+2 : j+6]
		if h[0] == '0' && h[1] == '0' {
			switch strings.ToLower(h[2:]) {
			case "26", "3c", "3e", "27":
			default:
				if v, err := strconv.ParseUint(h[2:], 16, 8); err != nil || (v >= 0x20 && v < 0x7f) {
					return true
				}
			}
		}
		i = j + 2
	}
}

// rawPercentHides: a percent-encoded '=', '&', '#', '?', '@', ':' or '%'
// may carry a URL (and its parameters) inside a parameter's value; an
// encoded space ("%20" or '+') after a digit may separate a card's digit
// groups.
func rawPercentHides(s string) bool {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '+')
		if j < 0 {
			break
		}
		j += i
		if j > 0 && j+1 < len(s) && isDigitB(s[j-1]) && isDigitB(s[j+1]) {
			return true
		}
		i = j + 1
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '%')
		if j < 0 {
			return false
		}
		j += i
		if j+3 > len(s) {
			return false
		}
		switch s[j+1] {
		case '2':
			switch s[j+2] {
			case '3', '5', '6': // # % &
				return true
			case '0':
				if j > 0 && isDigitB(s[j-1]) {
					return true
				}
			}
		case '3':
			switch s[j+2] {
			case 'a', 'A', 'd', 'D', 'f', 'F': // : = ?
				return true
			}
		case '4':
			if s[j+2] == '0' { // @
				return true
			}
		}
		i = j + 1
	}
}

// rawDropParam: a "?name=", "&name=", "#name=" with a name in DropParams.
func rawDropParam(d *detectors, s string) bool {
	if len(d.dropParams) == 0 {
		return false
	}
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '=')
		if j < 0 {
			return false
		}
		eq := i + j
		if p, ok := paramAt(s, eq); ok {
			if _, drop := d.dropParam(s[p.nameSt:eq]); drop && paramValueEnd(s, p.valSt) > p.valSt {
				return true
			}
		}
		i = eq + 1
	}
	return false
}

// rawUserinfo: a "scheme://…@" authority.
func rawUserinfo(s string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], "://")
		if j < 0 {
			return false
		}
		end, at := authorityAt(s, i+j)
		if at > i+j+3 {
			return true
		}
		i = end
	}
}

// encodedForms are the spellings of v, other than v, it may take in raw
// JSON: JSON-escaped (also as JSON inside a JSON string), percent-encoded
// ("%20" and "+" for a space) and base64 (standard and URL alphabets, at
// the three alignments: base64Forms).
func encodedForms(v string) []string {
	var out []string
	add := func(f string) {
		if f != v {
			for _, o := range out {
				if o == f {
					return
				}
			}
			out = append(out, f)
		}
	}
	q, _ := marshalJSON(v)
	esc := string(q[1 : len(q)-1])
	add(esc)
	q2, _ := marshalJSON(esc)
	add(string(q2[1 : len(q2)-1]))
	hq, _ := json.Marshal(v) // with HTML escaping
	add(string(hq[1 : len(hq)-1]))
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	for _, f := range base64Forms(v) {
		add(f)
	}
	return out
}

// errCaseDuplicate: two members whose names differ only in case. encoding/json
// (the typed payload, Go readers) and JSON.parse (the player) would read
// different ones, so the event is refused rather than half-redacted.
var errCaseDuplicate = errors.New("redact: event data has members whose names differ only in case")

// canonKeys gives the members redaction reads by name their canonical
// spelling. encoding/json matches member names case-insensitively, so
// {"Request":…} validates as a HAR request and Go readers see it as one:
// redaction must treat it as one too, and after renaming, every reader
// agrees on what it holds.
func canonKeys(m map[string]any, names ...string) error {
	var renames [][2]string
	for k := range m {
		for _, n := range names {
			if k == n || !strings.EqualFold(k, n) {
				continue
			}
			if _, dup := m[n]; dup {
				return errCaseDuplicate
			}
			for _, r := range renames {
				if r[1] == n {
					return errCaseDuplicate
				}
			}
			renames = append(renames, [2]string{k, n})
		}
	}
	for _, r := range renames {
		m[r[1]] = m[r[0]]
		delete(m, r[0])
	}
	return nil
}

// canonEach applies canonKeys to each object in the array m[key].
func canonEach(m map[string]any, key string, names ...string) error {
	a, _ := m[key].([]any)
	for _, e := range a {
		if o, ok := e.(map[string]any); ok {
			if err := canonKeys(o, names...); err != nil {
				return err
			}
		}
	}
	return nil
}
