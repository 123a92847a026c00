package redact

import (
	"bytes"
	"unicode/utf8"
)

// RuleUTF8 names the replacement of invalid UTF-8 and lone surrogate
// escapes in the redaction report.
const RuleUTF8 = "utf8:replaced"

// SanitizeJSON replaces, in raw JSON, every byte sequence that is not
// UTF-8 and every \u escape of a lone surrogate (a high one not followed by
// a low one, or a low one alone) with U+FFFD, and returns the result and
// how many it replaced (0: b itself). Real pages emit lone surrogates, so
// an event carrying one is kept, not refused; what is stored is text every
// reader decodes the same way.
func SanitizeJSON(b []byte) ([]byte, int) {
	if utf8.Valid(b) && !hasSurrogateEscape(b) {
		return b, 0
	}
	out := make([]byte, 0, len(b)+8)
	n := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c == '\\' && i+1 < len(b) {
			if b[i+1] != 'u' || i+6 > len(b) {
				out = append(out, c, b[i+1])
				i += 2
				continue
			}
			u, ok := hex4(b[i+2 : i+6])
			switch {
			case ok && u >= 0xD800 && u <= 0xDBFF:
				if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					if l, ok := hex4(b[i+8 : i+12]); ok && l >= 0xDC00 && l <= 0xDFFF {
						out = append(out, b[i:i+12]...)
						i += 12
						continue
					}
				}
				out = append(out, `\ufffd`...)
				n++
			case ok && u >= 0xDC00 && u <= 0xDFFF:
				out = append(out, `\ufffd`...)
				n++
			default:
				out = append(out, b[i:i+6]...)
			}
			i += 6
			continue
		}
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
			n++
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out, n
}

// hasSurrogateEscape: a \uD800–\uDFFF escape (in either case) may be in b.
func hasSurrogateEscape(b []byte) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u`))
		if j < 0 || i+j+3 > len(b) {
			return false
		}
		i += j + 2
		if (b[i] == 'd' || b[i] == 'D') && i+1 < len(b) {
			switch b[i+1] {
			case '8', '9', 'a', 'b', 'c', 'd', 'e', 'f', 'A', 'B', 'C', 'D', 'E', 'F':
				return true
			}
		}
	}
}

func hex4(h []byte) (rune, bool) {
	var v rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
