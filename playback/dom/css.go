package dom

import (
	"html"
	"strings"
	"unicode/utf8"

	"github.com/flightrec/flightrec/internal/jsonspan"
)

// URLs. A recorded value is checked the way a browser's URL parser would
// read its scheme, not as written: character references decoded (a value
// can carry them literally), ASCII whitespace and control characters
// removed wherever they are (browsers drop tabs and newlines anywhere and
// controls and spaces at the ends; dropping more only makes the check
// stricter), lowercased. "java\tscript:", " JaVaScRiPt:" and
// "&#106;avascript:" all read as "javascript:". The one allowance, a
// raster data: image, is read as strictly as a browser reads it
// (browserPrefix): dropping more there would let more through.

// urlPrefix returns at most max bytes of v as a URL parser reads it.
func urlPrefix(v string, max int) string {
	if strings.IndexByte(v, '&') >= 0 {
		v = html.UnescapeString(v)
	}
	var buf [64]byte
	b := buf[:0]
	if max > len(buf) {
		max = len(buf)
	}
	for i := 0; i < len(v) && len(b) < max; i++ {
		c := v[i]
		if c <= ' ' || c == 0x7f {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// browserPrefix is urlPrefix for an allowance (rasterURL): it must not be
// more lenient than the browser, so it drops only what a URL parser
// drops, controls and spaces at the start and tabs and newlines anywhere.
// "data:image/p\x00ng," is not a PNG to a browser, whatever urlPrefix
// makes of it.
func browserPrefix(v string, max int) string {
	if strings.IndexByte(v, '&') >= 0 {
		v = html.UnescapeString(v)
	}
	v = strings.TrimLeft(v, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	var buf [64]byte
	b := buf[:0]
	max = min(max, len(buf))
	for i := 0; i < len(v) && len(b) < max; i++ {
		c := v[i]
		if c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// rasterURL reports whether v is a data: URL of a raster image as a
// browser reads it.
func rasterURL(v string) bool { return rasterData(browserPrefix(v, 48)) }

// rasterTypes are the data: image types kept: raster formats only, since
// an SVG image is a document that can carry script and references.
var rasterTypes = [...]string{"png", "jpeg", "jpg", "gif", "webp", "avif", "bmp", "apng", "x-icon", "vnd.microsoft.icon"}

// rasterData reports whether a urlPrefix is a data: URL of a raster image.
func rasterData(p string) bool {
	rest, ok := strings.CutPrefix(p, "data:image/")
	if !ok {
		return false
	}
	for _, t := range rasterTypes {
		if after, ok := strings.CutPrefix(rest, t); ok && after != "" && (after[0] == ';' || after[0] == ',') {
			return true
		}
	}
	return false
}

// dangerousURL reports whether v, in any attribute, would run script or
// load a document inline when followed: a script scheme, or a data: URL
// that is not a raster image.
func dangerousURL(v string) bool {
	p := urlPrefix(v, 48)
	switch {
	case strings.HasPrefix(p, "javascript:"), strings.HasPrefix(p, "vbscript:"), strings.HasPrefix(p, "livescript:"):
		return true
	case strings.HasPrefix(p, "data:"):
		return !rasterURL(v)
	}
	return false
}

// fragmentURL reports a same-document reference ("#id"), which fetches
// nothing: SVG gradients, clip paths and <use> need them.
func fragmentURL(v string) bool {
	v = strings.TrimLeft(v, " \t\n\f\r")
	return strings.HasPrefix(v, "#")
}

// CSS. sanitizeCSS reads style-sheet or declaration text token by token,
// close enough to CSS Syntax Level 3 that what it sees as a URL is what a
// browser sees: comments, strings and escapes are understood, so that
// "u\72l(", "@\69mport" or a url( hidden behind a quote in a comment are
// caught. It keeps every byte it does not change. What it changes:
//   - url(...) becomes none, unless it is a raster data: image or a
//     fragment reference (then it is written back, re-quoted);
//   - src(), image-set(), image(), cross-fade(), element() and IE's
//     expression() become none (their strings are URLs, or they run script);
//   - @import rules become a space;
//   - comments become a space;
//   - no "<" survives (it becomes the escape \3c), so the text cannot close
//     the <style> element it is written into.

var cssURLFuncs = map[string]bool{
	"src": true, "image-set": true, "-webkit-image-set": true, "image": true,
	"cross-fade": true, "-webkit-cross-fade": true, "element": true, "-moz-element": true,
	"expression": true,
}

func sanitizeCSS(s string) string {
	if !strings.ContainsAny(s, "(@<") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = cssCommentEnd(s, i)
			b.WriteByte(' ')
		case c == '"' || c == '\'':
			j := cssStringEnd(s, i)
			b.WriteString(s[i:j])
			i = j
		case c == '@':
			if cssIdentStart(s, i+1) {
				name, j := cssIdent(s, i+1)
				if strings.EqualFold(name, "import") {
					// A space in its place, so that what was on either
					// side cannot join into a new token ("ur" + "l(").
					b.WriteByte(' ')
					i = cssSkipStatement(s, j)
					continue
				}
				b.WriteString(s[i:j])
				i = j
				continue
			}
			b.WriteByte(c)
			i++
		case cssIdentStart(s, i):
			name, j := cssIdent(s, i)
			if j < len(s) && s[j] == '(' {
				ln := strings.ToLower(name)
				if ln == "url" {
					val, ok, k := cssURL(s, j)
					// Judged as CSS reads it, and as it is written
					// (writeCSSString): a NUL is U+FFFD, so "p\x00ng" is
					// not "png" (urlPrefix drops control bytes).
					val = strings.ReplaceAll(val, "\x00", "\uFFFD")
					if ok && (fragmentURL(val) || rasterURL(val)) {
						b.WriteString(`url("`)
						writeCSSString(&b, val)
						b.WriteString(`")`)
					} else {
						b.WriteString("none")
					}
					i = k
					continue
				}
				if cssURLFuncs[ln] {
					b.WriteString("none")
					i = cssSkipParens(s, j)
					continue
				}
			}
			b.WriteString(s[i:j])
			i = j
		case c == '\\' && i+1 < len(s):
			// An escape that starts no identifier (a backslash before a
			// newline): keep it with the next byte, which must not be read
			// as the start of a string.
			b.WriteString(s[i : i+2])
			i += 2
		default:
			b.WriteByte(c)
			i++
		}
	}
	return strings.ReplaceAll(b.String(), "<", `\3c `)
}

func isHex(c byte) bool { return jsonspan.Unhex(c) >= 0 }

func cssNewline(c byte) bool { return c == '\n' || c == '\r' || c == '\f' }

// cssValidEscape reports whether s[i] is a backslash that starts an escape.
func cssValidEscape(s string, i int) bool {
	return i+1 < len(s) && s[i] == '\\' && !cssNewline(s[i+1])
}

func cssNameStart(c byte) bool {
	return c >= 0x80 || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func cssNameChar(c byte) bool { return cssNameStart(c) || c == '-' || ('0' <= c && c <= '9') }

// cssIdentStart reports whether an identifier starts at s[i]. A leading
// "-" is always taken as one: reading "-x" as an identifier where CSS reads
// something else only makes the check stricter.
func cssIdentStart(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return cssNameStart(c) || c == '-' || cssValidEscape(s, i)
}

// cssIdent consumes an identifier at s[i] and returns its value (escapes
// decoded; only its first 64 bytes, which is enough to compare names) and
// the index after it.
func cssIdent(s string, i int) (string, int) {
	var buf [64]byte
	name := buf[:0]
	put := func(r rune) {
		if len(name) < cap(name)-utf8.UTFMax {
			name = utf8.AppendRune(name, r)
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case cssNameChar(c):
			put(rune(c))
			i++
		case cssValidEscape(s, i):
			r, n := cssEscape(s, i)
			put(r)
			i += n
		default:
			return string(name), i
		}
	}
	return string(name), i
}

// cssEscape decodes the escape at s[i] (a backslash not before a newline)
// and returns the code point and the bytes it took.
func cssEscape(s string, i int) (rune, int) {
	j := i + 1
	if !isHex(s[j]) {
		r, n := utf8.DecodeRuneInString(s[j:])
		return r, 1 + n
	}
	var r rune
	k := j
	for k < len(s) && k < j+6 && isHex(s[k]) {
		r = r<<4 | jsonspan.Unhex(s[k])
		k++
	}
	if k < len(s) {
		switch s[k] {
		case ' ', '\t', '\n', '\f':
			k++
		case '\r':
			k++
			if k < len(s) && s[k] == '\n' {
				k++
			}
		}
	}
	if r == 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
		r = utf8.RuneError
	}
	return r, k - i
}

// cssStringEnd returns the index after the string starting at s[i]: after
// its closing quote, or at the newline that makes it a bad string, or at
// the end.
func cssStringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == q:
			return j + 1
		case c == '\\':
			j++
			if j < len(s) && s[j] == '\r' && j+1 < len(s) && s[j+1] == '\n' {
				j++
			}
		case cssNewline(c):
			return j
		}
	}
	return len(s)
}

// cssUnescape decodes the body of a string or unquoted URL.
func cssUnescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		if cssNewline(s[i+1]) { // a line continuation
			i += 2
			if s[i-1] == '\r' && i < len(s) && s[i] == '\n' {
				i++
			}
			continue
		}
		r, n := cssEscape(s, i)
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// cssURL reads the argument of the url( at s[open] and returns its value,
// whether it is well formed, and the index after the closing parenthesis.
func cssURL(s string, open int) (string, bool, int) {
	i := open + 1
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || cssNewline(s[i])) {
		i++
	}
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		j := cssStringEnd(s, i)
		end := cssSkipParens(s, open)
		if j <= i+1 || s[j-1] != s[i] {
			return "", false, end
		}
		val := cssUnescape(s[i+1 : j-1])
		if end <= j || s[end-1] != ')' || strings.TrimSpace(s[j:end-1]) != "" {
			return "", false, end
		}
		return val, true, end
	}
	start := i
	for i < len(s) {
		c := s[i]
		switch {
		case c == ')':
			return cssUnescape(s[start:i]), true, i + 1
		case c == ' ' || c == '\t' || cssNewline(c):
			k := i
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || cssNewline(s[k])) {
				k++
			}
			if k < len(s) && s[k] == ')' {
				return cssUnescape(s[start:i]), true, k + 1
			}
			return "", false, cssBadURLEnd(s, k)
		case c == '"' || c == '\'' || c == '(' || c < 0x20 || c == 0x7f:
			return "", false, cssBadURLEnd(s, i)
		case c == '\\':
			if !cssValidEscape(s, i) {
				return "", false, cssBadURLEnd(s, i)
			}
			_, n := cssEscape(s, i)
			i += n
		default:
			i++
		}
	}
	return "", false, len(s) // unterminated
}

// cssBadURLEnd skips the rest of a bad url token: to after the next ")"
// that is not escaped, as CSS does.
func cssBadURLEnd(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ')':
			return i + 1
		case cssValidEscape(s, i):
			_, n := cssEscape(s, i)
			i += n
		default:
			i++
		}
	}
	return len(s)
}

// cssSkipParens returns the index after the parenthesis matching s[open],
// skipping strings, comments and escapes.
func cssSkipParens(s string, open int) int {
	depth := 0
	for i := open; i < len(s); {
		switch c := s[i]; {
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			i++
			if depth == 0 {
				return i
			}
		case c == '"' || c == '\'':
			i = cssStringEnd(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = cssCommentEnd(s, i)
		case c == '\\':
			i += 2
		default:
			i++
		}
	}
	return len(s)
}

// cssCommentEnd returns the end of the comment that starts at s[i] ("/*"),
// or len(s) for one never closed.
func cssCommentEnd(s string, i int) int {
	if k := strings.Index(s[i+2:], "*/"); k >= 0 {
		return i + k + 4
	}
	return len(s)
}

// cssSkipStatement returns the end of the at-rule whose prelude starts at
// s[i]: after its ";" or its block, or at the "}" that closes the block it
// sits in.
func cssSkipStatement(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == ';':
			return i + 1
		case c == '}':
			return i
		case c == '{':
			depth := 0
			for i < len(s) {
				switch s[i] {
				case '{':
					depth++
				case '}':
					depth--
					if depth == 0 {
						return i + 1
					}
				case '"', '\'':
					i = cssStringEnd(s, i) - 1
				case '\\':
					i++
				}
				i++
			}
			return len(s)
		case c == '(':
			i = cssSkipParens(s, i)
		case c == '"' || c == '\'':
			i = cssStringEnd(s, i)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			i = cssCommentEnd(s, i)
		case c == '\\':
			i += 2
		default:
			i++
		}
	}
	return len(s)
}

// writeCSSString writes v as the body of a double-quoted CSS string, with
// every character that could end it, or close a <style>, escaped.
func writeCSSString(b *strings.Builder, v string) {
	const hexd = "0123456789abcdef"
	for _, r := range v {
		if r == 0 {
			// CSS has no NUL: a raw one and the escape \0 both read as
			// U+FFFD, so write that and a second reading agrees.
			r = '\uFFFD'
		}
		switch {
		case r == '"' || r == '\\' || r == '<' || r < 0x20 || r == 0x7f:
			b.WriteByte('\\')
			if r >= 0x10 {
				b.WriteByte(hexd[r>>4])
			}
			b.WriteByte(hexd[r&0xf])
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
}
