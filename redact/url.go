package redact

import (
	"net/url"
	"strings"
)

// This file scrubs URLs wherever they appear in a string: a whole HAR URL,
// a Location header, or a URL inside a console message. It edits in place,
// so a URL keeps every byte redaction does not change (parameter order,
// encoding, other parameters):
//
//   - "scheme://user:pass@host": the userinfo is erased (rule "userinfo");
//   - "?name=value", "&name=value", ";name=value": a value whose name is one
//     of the plan's DropParams is erased, keeping the name (rule
//     "param:<name>"); after a '#', the same in the fragment (rule
//     "fragment:<name>"), so "#access_token=…&id_token=…" is scrubbed;
//   - a percent-encoded value (a URL inside a URL: redirect_uri=https%3A…)
//     is decoded, scrubbed like any string (parameters, detectors, known
//     values), and re-encoded if anything changed.
//
// An erased value is replaced raw, so the secret survives in no encoding.

// paramStop ends a parameter name looking back from its '='.
func paramNameStop(c byte) bool {
	switch c {
	case '?', '&', '#', ';', '=', ' ', '\t', '\n', '\r', '"', '\'', '<', '>', '\\', '/', ',', '(', ')', '{', '}':
		return true
	}
	return false
}

// paramValueStop ends a parameter value.
func paramValueStop(c byte) bool {
	switch c {
	case '&', '#', ' ', '\t', '\n', '\r', '"', '\'', '<', '>', '\\':
		return true
	}
	return false
}

// urlParam is one "name=value" found after '?', '&', '#' or ';'.
type urlParam struct {
	nameSt, valSt int
}

// paramAt examines the '=' at eq. It recognises a name preceded by one of
// ? & # ; — and, in raw JSON, by the escape \u0026 ('&').
func paramAt(s string, eq int) (urlParam, bool) {
	j := eq - 1
	for j >= 0 && !paramNameStop(s[j]) {
		j--
	}
	p := urlParam{nameSt: j + 1, valSt: eq + 1}
	if j < 0 || p.nameSt == eq {
		return p, false
	}
	switch s[j] {
	case '?', '&', '#', ';':
	case '\\':
		if !strings.HasPrefix(s[p.nameSt:], "u0026") || p.nameSt+5 >= eq {
			return p, false
		}
		p.nameSt += 5
	default:
		return p, false
	}
	return p, true
}

// paramValueEnd returns the end of the value starting at i.
func paramValueEnd(s string, i int) int {
	for i < len(s) && !paramValueStop(s[i]) {
		i++
	}
	return i
}

// fragTracker answers "is position i in a URL fragment" for increasing i in
// one pass: a '#' starts a fragment, a space or quote ends the URL.
type fragTracker struct {
	pos  int
	frag bool
}

func (f *fragTracker) at(s string, i int) bool {
	for ; f.pos < i; f.pos++ {
		switch s[f.pos] {
		case '#':
			f.frag = true
		case ' ', '\t', '\n', '\r', '"', '\'', '<', '>':
			f.frag = false
		}
	}
	return f.frag
}

// authorityAt returns the authority of a URL whose "://" is at p: its end,
// and the index of its last '@' (-1 if none).
func authorityAt(s string, p int) (end, at int) {
	at = -1
	end = p + 3
	for end < len(s) {
		c := s[end]
		if c == '/' || c == '?' || c == '#' || c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
			c == '"' || c == '\'' || c == '<' || c == '>' || c == '\\' {
			break
		}
		if c == '@' {
			at = end
		}
		end++
	}
	return end, at
}

// uedit replaces s[st:en] with repl.
type uedit struct {
	st, en int
	repl   string
}

func applyEdits(s string, edits []uedit) string {
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, e := range edits {
		if e.st < last { // overlapping: the earlier edit already covers it
			continue
		}
		b.WriteString(s[last:e.st])
		b.WriteString(e.repl)
		last = e.en
	}
	b.WriteString(s[last:])
	return b.String()
}

// isErased reports whether v is already a redaction marker.
func isErased(v string) bool {
	return strings.HasPrefix(v, "[redacted") || strings.HasPrefix(v, "%5Bredacted")
}

// urls scrubs the URLs and URL parameters in s (see the file comment).
func (w *scrubber) urls(s string, depth int) (string, bool) {
	if len(s) < 4 {
		return s, false
	}
	eq := strings.IndexByte(s, '=')
	sch := strings.Index(s, "://")
	if eq < 0 && sch < 0 {
		return s, false
	}
	var edits []uedit
	d := w.r.det
	for sch >= 0 {
		end, at := authorityAt(s, sch)
		if at > sch+3 {
			ui := s[sch+3 : at]
			if !isErased(ui) {
				edits = append(edits, uedit{sch + 3, at, w.r.erase(ui)})
				w.find("userinfo")
				if c := strings.IndexByte(ui, ':'); c >= 0 {
					w.remember(ui[c+1:])
				} else {
					w.remember(ui)
				}
			}
		}
		n := strings.Index(s[end:], "://")
		if n < 0 {
			break
		}
		sch = end + n
	}
	var ft fragTracker
	for eq >= 0 {
		p, ok := paramAt(s, eq)
		next := eq + 1
		if ok {
			name := s[p.nameSt : p.valSt-1]
			valEn := paramValueEnd(s, p.valSt)
			v := s[p.valSt:valEn]
			if entry, drop := d.dropParam(name); drop {
				if v != "" && !isErased(v) {
					edits = append(edits, uedit{p.valSt, valEn, w.r.erase(v)})
					if ft.at(s, p.nameSt) {
						w.find("fragment:" + entry)
					} else {
						w.find("param:" + entry)
					}
					w.remember(v)
				}
			} else if depth < 3 && strings.ContainsAny(v, "%+") {
				if dec, err := url.QueryUnescape(v); err == nil && dec != v {
					if ns, changed := w.strDepth(dec, depth+1); changed {
						edits = append(edits, uedit{p.valSt, valEn, url.QueryEscape(ns)})
					}
				}
			}
			next = max(next, valEn)
		}
		if next >= len(s) {
			break
		}
		n := strings.IndexByte(s[next:], '=')
		if n < 0 {
			break
		}
		eq = next + n
	}
	if len(edits) == 0 {
		return s, false
	}
	sortEdits(edits)
	return applyEdits(s, edits), true
}

func sortEdits(e []uedit) {
	for i := 1; i < len(e); i++ { // insertion sort: a handful of edits
		for j := i; j > 0 && e[j].st < e[j-1].st; j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
}

// form scrubs an application/x-www-form-urlencoded body: values of names in
// DropParams (and, with keys, SecretKeys) are erased keeping the raw name;
// other values are decoded, scrubbed as strings and re-encoded if changed.
func (w *scrubber) form(text string, keys bool) (string, bool) {
	var edits []uedit
	d := w.r.det
	for pos := 0; pos <= len(text); {
		end := strings.IndexByte(text[pos:], '&')
		if end < 0 {
			end = len(text)
		} else {
			end += pos
		}
		pair := text[pos:end]
		if eq := strings.IndexByte(pair, '='); eq > 0 {
			rawName, rawVal := pair[:eq], pair[eq+1:]
			vst := pos + eq + 1
			name := rawName
			if n, err := url.QueryUnescape(rawName); err == nil {
				name = n
			}
			val := rawVal
			if v, err := url.QueryUnescape(rawVal); err == nil {
				val = v
			}
			rule := ""
			if e, ok := d.dropParam(name); ok {
				rule = "param:" + e
			} else if e, ok := d.secretKey(name); ok && keys {
				rule = "json-key:" + e
			} else if d.generic && secretishName(name) && !trivialValue(val) {
				rule = "detector:generic"
			}
			switch {
			case rule != "":
				if rawVal != "" && !isErased(val) {
					edits = append(edits, uedit{vst, end, w.r.erase(val)})
					w.find(rule)
					w.remember(val)
				}
			default:
				if ns, changed := w.strDepth(val, 1); changed {
					edits = append(edits, uedit{vst, end, url.QueryEscape(ns)})
				}
			}
		}
		pos = end + 1
	}
	if len(edits) == 0 {
		return text, false
	}
	return applyEdits(text, edits), true
}

// secretishName applies the generic detector's key test to a name.
func secretishName(name string) bool {
	var buf [64]byte
	k, ok := normKeyBuf(buf[:], name)
	return ok && len(k) >= 3 && secretish(k)
}
