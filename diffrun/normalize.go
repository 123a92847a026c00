package diffrun

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Placeholders the normalizers write in place of dynamic parts.
const (
	phID    = "{id}"    // an all-digit path segment or sub-token, a numeric query value
	phUUID  = "{uuid}"  // an RFC 4122-shaped UUID
	phHash  = "{hash}"  // a hex run of 8+ characters with digits and letters
	phToken = "{token}" // a long random-looking token
	phPort  = "{port}"  // the port of a loopback host (ephemeral in tests)
	phNum   = "{n}"     // a number of 4+ digits, a decimal, a line or column
	phHex   = "{hex}"   // 0x… addresses and hex runs in text
	masked  = "[masked]"
)

// cacheBusters are query parameters dropped from URL templates: they only
// defeat caches.
var cacheBusters = map[string]bool{
	"_": true, "t": true, "ts": true, "v": true, "cb": true, "nocache": true, "no_cache": true,
	"cachebust": true, "cache_bust": true, "cachebuster": true, "bust": true, "_t": true, "_ts": true,
	"timestamp": true, "time": true, "rnd": true, "rand": true, "random": true, "nonce": true, "_dc": true,
}

// Template returns the template of a URL: the scheme and host are kept
// (lowercased, without user info or a default port; a loopback host's port
// becomes {port}, since test servers listen on ephemeral ports); path
// segments and their sub-tokens (split at - _ . ~ , ; : = +) that are ids
// ({id}), UUIDs ({uuid}), hex hashes ({hash}) or long random-looking tokens
// ({token}) become placeholders; query parameters that bust caches (_, t,
// ts, v, cb, nocache, …) or whose value is a timestamp or random-looking are
// dropped, the others are kept with their values templated and sorted by
// name; the fragment is dropped. data: URLs keep only their media type.
//
// Template never fails and is idempotent: Template(Template(u)) ==
// Template(u).
func Template(raw string) string {
	s := raw
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	rest := s
	if i := strings.Index(s, "://"); i > 0 && isScheme(s[:i]) {
		scheme := strings.ToLower(s[:i])
		after := s[i+3:]
		j := strings.IndexAny(after, "/?")
		if j < 0 {
			j = len(after)
		}
		b.WriteString(scheme)
		b.WriteString("://")
		b.WriteString(normHost(after[:j], scheme))
		rest = after[j:]
		if rest == "" || rest[0] == '?' {
			b.WriteByte('/')
		}
	} else if strings.HasPrefix(s, "//") {
		after := s[2:]
		j := strings.IndexAny(after, "/?")
		if j < 0 {
			j = len(after)
		}
		b.WriteString("//")
		b.WriteString(normHost(after[:j], ""))
		rest = after[j:]
		if rest == "" || rest[0] == '?' {
			b.WriteByte('/')
		}
	} else if i := strings.IndexByte(s, ':'); i > 0 && isScheme(s[:i]) && !strings.ContainsAny(s[:i], "/?") {
		// An opaque URL: about:blank, data:text/html;…, blob:…, javascript:…
		scheme := strings.ToLower(s[:i])
		switch scheme {
		case "about":
			return strings.ToLower(s)
		case "data":
			mt := s[i+1:]
			if j := strings.IndexAny(mt, ";,"); j >= 0 {
				mt = mt[:j]
			}
			return "data:" + strings.ToLower(strings.TrimSpace(mt))
		case "blob":
			return "blob:" + Template(s[i+1:])
		}
		return scheme + ":"
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	if hasQuery {
		path = strings.TrimRightFunc(path, unicode.IsSpace)
	}
	templatePath(&b, path)
	if hasQuery {
		templateQuery(&b, query)
	}
	return b.String()
}

// PathTemplate is the path of u's template: no scheme, host or query.
func PathTemplate(raw string) string {
	_, rest := splitOrigin(Template(raw))
	path, _, _ := strings.Cut(rest, "?")
	return path
}

// splitOrigin splits a template into its scheme://host and the rest.
func splitOrigin(t string) (origin, rest string) {
	i := strings.Index(t, "://")
	if i < 0 {
		if strings.HasPrefix(t, "//") {
			i = 0
		} else {
			return "", t
		}
	}
	j := strings.IndexByte(t[i+3:], '/')
	if j < 0 {
		return t, ""
	}
	return t[:i+3+j], t[i+3+j:]
}

func isScheme(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// normHost lowercases a host, drops user info and a default port, and
// replaces a loopback host's port by {port}.
func normHost(h, scheme string) string {
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		h = h[i+1:]
	}
	h = strings.TrimRight(strings.ToLower(h), ":")
	name, port := h, ""
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i >= 0 {
			name, port = h[:i+1], strings.TrimPrefix(h[i+1:], ":")
		}
	} else if strings.Count(h, ":") > 1 {
		return h // not host:port (an unbracketed IPv6 address or worse): as is
	} else if i := strings.IndexByte(h, ':'); i >= 0 {
		name, port = h[:i], h[i+1:]
	}
	switch {
	case port == "":
		return name
	case scheme == "http" && port == "80", scheme == "https" && port == "443",
		scheme == "ws" && port == "80", scheme == "wss" && port == "443":
		return name
	case isLoopback(name):
		return name + ":" + phPort
	}
	return name + ":" + port
}

func isLoopback(name string) bool {
	return name == "localhost" || name == "[::1]" || name == "0.0.0.0" ||
		strings.HasPrefix(name, "127.") || strings.HasSuffix(name, ".localhost")
}

func templatePath(b *strings.Builder, path string) {
	for i := 0; ; i++ {
		seg, more, found := strings.Cut(path, "/")
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(normSegment(seg))
		if !found {
			return
		}
		path = more
	}
}

// normSegment templates one path segment: whole-segment ids, UUIDs,
// hashes and tokens first, then UUIDs inside it, then each sub-token.
func normSegment(seg string) string {
	switch {
	case seg == "":
		return ""
	case allDigits(seg):
		return phID
	case isUUID(seg):
		return phUUID
	case isHexHash(seg):
		return phHash
	case isToken(seg):
		return phToken
	}
	if !strings.ContainsAny(seg, "0123456789") {
		return seg // nothing dynamic without digits (cheap exit)
	}
	seg = replaceUUIDs(seg)
	var b strings.Builder
	b.Grow(len(seg))
	start := 0
	for i := 0; i <= len(seg); i++ {
		if i < len(seg) && !isSegSep(seg[i]) {
			continue
		}
		tok := seg[start:i]
		switch {
		case tok == "":
		case allDigits(tok):
			b.WriteString(phID)
		case isHexHash(tok):
			b.WriteString(phHash)
		case isToken(tok):
			b.WriteString(phToken)
		default:
			b.WriteString(tok)
		}
		if i < len(seg) {
			b.WriteByte(seg[i])
		}
		start = i + 1
	}
	return b.String()
}

func isSegSep(c byte) bool {
	switch c {
	case '-', '_', '.', '~', ',', ';', ':', '=', '+':
		return true
	}
	return false
}

func templateQuery(b *strings.Builder, q string) {
	type kv struct{ k, v string }
	var kept []kv
	for part := range strings.SplitSeq(q, "&") {
		part = strings.TrimSpace(part)
		if part == "" || part[0] == '=' {
			continue // no name
		}
		k, v, hasV := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if cacheBusters[strings.ToLower(k)] {
			continue
		}
		if !hasV {
			kept = append(kept, kv{k, "\x00"})
			continue
		}
		switch {
		case v == "":
		case isUUID(v):
			v = phUUID
		case isTimestampValue(v), isHexHash(v), isToken(v), isRandomish(v):
			continue
		case allDigits(v):
			v = phID
		default:
			v = normSegment(v)
		}
		kept = append(kept, kv{k, v})
	}
	if len(kept) == 0 {
		return
	}
	slices.SortStableFunc(kept, func(x, y kv) int { return strings.Compare(x.k, y.k) })
	b.WriteByte('?')
	for i, p := range kept {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		if p.v != "\x00" {
			b.WriteByte('=')
			b.WriteString(p.v)
		}
	}
}

// isTimestampValue: unix seconds, milliseconds or nanoseconds (10+
// digits, possibly with a fraction), or an ISO 8601 date-time.
func isTimestampValue(v string) bool {
	d := 0
	for d < len(v) && isDigit(v[d]) {
		d++
	}
	if d >= 10 && (d == len(v) || v[d] == '.' && allDigits(v[d+1:])) {
		return true
	}
	// 2024-05-01T10:00:00Z, also percent-encoded colons.
	return len(v) >= 19 && d == 4 && v[4] == '-' && isDigit(v[5]) && v[7] == '-' && (v[10] == 'T' || v[10] == 't' || v[10] == ' ' || v[10] == '+')
}

// isRandomish: 12+ characters of base64url mixing upper case, lower case
// and digits (a nonce), which no hand-written value looks like.
func isRandomish(v string) bool {
	if len(v) < 12 {
		return false
	}
	var up, lo, dg bool
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'A' && c <= 'Z':
			up = true
		case c >= 'a' && c <= 'z':
			lo = true
		case isDigit(c):
			dg = true
		case c == '-' || c == '_' || c == '%':
		default:
			return false
		}
	}
	return up && lo && dg
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isHex(c byte) bool    { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
func isAlnum(c byte) bool  { return isDigit(c) || isLetter(c) }

func allDigits(s string) bool { return allOf(s, isDigit) }

// allOf says whether s is not empty and every byte of it is ok.
func allOf(s string, ok func(byte) bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// isHexHash: 8+ hex characters with at least one digit and one letter.
func isHexHash(s string) bool {
	if len(s) < 8 {
		return false
	}
	var dg, lt bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			dg = true
		case isHex(c):
			lt = true
		default:
			return false
		}
	}
	return dg && lt
}

// isToken: 16+ letters and digits with both (an alphanumeric id or key),
// or 20+ characters of base64url mixing cases and digits.
func isToken(s string) bool {
	if len(s) < 16 {
		return false
	}
	var up, lo, dg, other bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			up = true
		case c >= 'a' && c <= 'z':
			lo = true
		case isDigit(c):
			dg = true
		case c == '-' || c == '_':
			other = true
		default:
			return false
		}
	}
	if !other {
		return dg && (up || lo)
	}
	return len(s) >= 20 && up && lo && dg
}

// isUUID: 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	return len(s) == 36 && uuidAt(s, 0)
}

func uuidAt(s string, i int) bool {
	if len(s)-i < 36 {
		return false
	}
	for k := 0; k < 36; k++ {
		c := s[i+k]
		switch k {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

func replaceUUIDs(s string) string {
	if len(s) < 36 {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i+36 <= len(s); i++ {
		if (i == 0 || !isHex(s[i-1])) && uuidAt(s, i) && (i+36 == len(s) || !isHex(s[i+36])) {
			b.WriteString(s[last:i])
			b.WriteString(phUUID)
			last = i + 36
			i += 35
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// NormalizeText normalizes a console message or an error message: URLs
// become their templates; UUIDs, 0x addresses, hex hashes and long tokens
// become placeholders; numbers of 4+ digits, decimals (versions, IPs) and
// numbers after a colon (line:column, ports, times) become {n}, while
// shorter numbers (an HTTP status) stay; whitespace runs collapse to one
// space. It is idempotent.
func NormalizeText(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || plainText(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
			space = true
			i++
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		prevAlnum := i > 0 && isAlnum(s[i-1])
		// Not after '}': a placeholder may end there ("{n}ws://…" was
		// "1234ws://…", no URL).
		if !prevAlnum && isLetter(c) && (i == 0 || s[i-1] != '}') {
			if n := urlLen(s[i:]); n > 0 {
				b.WriteString(Template(s[i : i+n]))
				i += n
				continue
			}
		}
		if !isAlnum(c) {
			b.WriteByte(c)
			i++
			continue
		}
		if !prevAlnum && isHex(c) && uuidAt(s, i) && (i+36 == len(s) || !isAlnum(s[i+36])) {
			b.WriteString(phUUID)
			i += 36
			continue
		}
		// A word: a maximal run of letters and digits.
		j := i
		for j < len(s) && isAlnum(s[j]) {
			j++
		}
		word := s[i:j]
		switch {
		case len(word) > 2 && word[0] == '0' && word[1]|0x20 == 'x' && isHexRun(word[2:]):
			b.WriteString(phHex)
		case allDigits(word):
			// A decimal run: 1.25, 10.0.0.1, 1.2.3
			k := j
			for k+1 < len(s) && s[k] == '.' && isDigit(s[k+1]) {
				k++
				for k < len(s) && isDigit(s[k]) {
					k++
				}
			}
			if k > j || len(word) >= 4 || i > 0 && s[i-1] == ':' {
				b.WriteString(phNum)
			} else {
				b.WriteString(word)
			}
			j = k
		case isHexHash(word):
			b.WriteString(phHex)
		case isToken(word):
			b.WriteString(phToken)
		default:
			// digits then a unit: 1234ms, 30s
			d := 0
			for d < len(word) && isDigit(word[d]) {
				d++
			}
			if d >= 4 || d > 0 && i > 0 && s[i-1] == ':' {
				b.WriteString(phNum)
				b.WriteString(word[d:])
			} else {
				b.WriteString(word)
			}
		}
		i = j
	}
	return b.String()
}

// plainText reports whether NormalizeText would leave s as it is: no
// digits (every placeholder's pattern needs one; a UUID of hex letters
// only is left as text), no URL, single spaces only.
func plainText(s string) bool {
	if strings.Contains(s, "://") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			return false
		case c == ' ':
			if i > 0 && s[i-1] == ' ' {
				return false
			}
		case c < ' ':
			return false
		}
	}
	return true
}

func isHexRun(s string) bool { return allOf(s, isHex) }

// urlLen is the length of the absolute URL s starts with, or 0.
func urlLen(s string) int {
	i := strings.Index(s, "://")
	if i <= 0 || i > 16 {
		return 0
	}
	switch strings.ToLower(s[:i]) {
	case "http", "https", "ws", "wss", "file", "chrome-extension":
	default:
		return 0
	}
	n := i + 3
	for n < len(s) {
		switch s[n] {
		case ' ', '\t', '\n', '\r', '"', '\'', '`', '<', '>', ')', ']', '|', '^', '\\', '#':
			return n
		}
		n++
	}
	return n
}

// snapLine is one line of an interactive snapshot, normalized: Key is the
// element's role and quoted name (what it is), Rest its states and value
// (how it is), Actionable whether it had a ref (or has an actionable role).
type snapLine struct {
	Key, Rest  string
	Actionable bool
}

// actionableRoles mirror the recorder's: the roles that get a ref.
var actionableRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "menuitem": true, "menuitemcheckbox": true, "menuitemradio": true,
	"tab": true, "switch": true, "slider": true, "spinbutton": true, "treeitem": true, "option": true,
}

// NormalizeSnapshot normalizes an interactive snapshot line by line: refs
// (@eN, different in every recording) are removed, redaction placeholders
// ([redacted], [redacted:<hmac>], [masked]) become [masked], names and
// values go through NormalizeText, and every number left in a name becomes
// {n} (a name's numbers are data: "Order #123", "3 items"). Indentation is
// kept.
func NormalizeSnapshot(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	first := true
	for line := range strings.SplitSeq(text, "\n") {
		if !first {
			b.WriteByte('\n')
		}
		first = false
		trimmed := strings.TrimLeft(line, " \t")
		b.WriteString(line[:len(line)-len(trimmed)])
		if l, ok := parseSnapLine(trimmed); ok {
			b.WriteString(l.Key)
			if l.Rest != "" {
				b.WriteByte(' ')
				b.WriteString(l.Rest)
			}
		}
	}
	return b.String()
}

// parseSnapLines parses an interactive snapshot into normalized lines.
// cache, when not nil, keeps lines already parsed (by their text without
// the ref: a page's lines repeat from step to step).
func parseSnapLines(text string, cache map[string]snapLine) []snapLine {
	if text == "" {
		return nil
	}
	out := make([]snapLine, 0, strings.Count(text, "\n")+1)
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimRight(strings.TrimLeft(line, " \t"), " \t\r")
		bare, ref := stripRefs(line)
		if bare == "" {
			continue
		}
		if l, ok := cache[bare]; ok {
			l.Actionable = l.Actionable || ref
			out = append(out, l)
			continue
		}
		l, _ := parseBare(bare)
		if cache != nil {
			cache[bare] = l
		}
		l.Actionable = l.Actionable || ref
		out = append(out, l)
	}
	return out
}

func parseSnapLine(line string) (snapLine, bool) {
	line = strings.TrimRight(line, " \t\r")
	bare, ref := stripRefs(line)
	if bare == "" {
		return snapLine{}, false
	}
	l, ok := parseBare(bare)
	l.Actionable = l.Actionable || ref
	return l, ok
}

// parseBare parses a line without its ref; Actionable is from the role.
func parseBare(line string) (snapLine, bool) {
	var l snapLine
	role, rest, _ := strings.Cut(line, " ")
	if actionableRoles[role] {
		l.Actionable = true
	}
	key := role
	if strings.HasPrefix(rest, `"`) {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			var name string
			if !strings.ContainsRune(q, '\\') {
				name = q[1 : len(q)-1]
			} else {
				name, _ = strconv.Unquote(q)
			}
			if n := maskDigits(NormalizeText(equalizeMasks(name))); n == name && !strings.ContainsRune(q, '\\') {
				key = line[:len(role)+1+len(q)]
			} else {
				key = role + " " + strconv.Quote(n)
			}
			rest = strings.TrimSpace(rest[len(q):])
		}
	}
	l.Key = key
	if rest != "" {
		l.Rest = normSnapRest(rest)
	}
	return l, true
}

// maskDigits replaces every run of digits by {n}: in an element's name a
// number is data (an order number, a count, a page), not identity.
func maskDigits(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		b.WriteString(phNum)
	}
	return b.String()
}

// stripRefs removes a trailing " @eN" ref, reporting whether there was one.
func stripRefs(line string) (string, bool) {
	i := strings.LastIndexByte(line, ' ')
	tok := line[i+1:]
	if len(tok) > 2 && tok[0] == '@' && tok[1] == 'e' && allDigits(tok[2:]) {
		if i < 0 {
			return "", true
		}
		return strings.TrimRight(line[:i], " \t"), true
	}
	return line, false
}

// normSnapRest normalizes a line's states and value="…".
func normSnapRest(rest string) string {
	i := strings.Index(rest, `value="`)
	if i < 0 {
		return NormalizeText(rest)
	}
	head := rest[:i]
	tail := rest[i+len("value="):]
	q, err := strconv.QuotedPrefix(tail)
	if err != nil {
		return NormalizeText(equalizeMasks(rest))
	}
	v, _ := strconv.Unquote(q)
	out := NormalizeText(head)
	if out != "" {
		out += " "
	}
	out += "value=" + strconv.Quote(NormalizeText(equalizeMasks(v)))
	if more := strings.TrimSpace(tail[len(q):]); more != "" {
		out += " " + NormalizeText(more)
	}
	return out
}

// equalizeMasks rewrites every redaction placeholder as [masked].
func equalizeMasks(s string) string {
	if !strings.Contains(s, "[redacted") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "[redacted")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(masked)
		s = s[i+j+1:]
	}
}

// normSelector normalizes a CSS selector for a step signature: whitespace
// collapsed, dynamic ids templated like URL sub-tokens.
func normSelector(sel string) string {
	return NormalizeText(sel)
}
