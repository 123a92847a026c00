package playback

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPageOf: pages end after a line where one ends in them, else at a
// rune boundary; the pages together are the text, each within the limit.
func TestPageOf(t *testing.T) {
	text := "line one\nline two\n" + strings.Repeat("é", 30) + "\nend"
	var got []string
	for off := 0; off >= 0; {
		var p string
		p, off = pageOf(text, off, 16)
		if len(p) > 16 || !utf8.ValidString(p) || p == "" {
			t.Fatalf("page %q: over the limit, split a rune, or empty", p)
		}
		got = append(got, p)
	}
	if strings.Join(got, "") != text {
		t.Errorf("the pages %q do not make the text", got)
	}
	if got[0] != "line one\n" || got[1] != "line two\n" {
		t.Errorf("pages %q: want the first two cut at their line ends", got[:2])
	}
	if p, next := pageOf(text, 0, len(text)); p != text || next != -1 {
		t.Errorf("a text that fits: %q, next %d", p, next)
	}
}
