package recorder

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"os"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// The frames under testdata/frames are Chromium's own JPEGs (headless
// Page.captureScreenshot, quality 70 as the screencast's, a 320×160
// viewport) of one small page: a heading, a "Gift code" field and a
// hidden 2×2 box, in these states:
//
//	page      the page as loaded
//	block     a 40×20 box in an empty corner painted 2 levels off the
//	          background: other bytes, nothing a reviewer can see
//	faint     the whole background 1 level darker: other bytes; JPEG's
//	          ringing at the heading's edges moves 7 pixels past the noise
//	one-char  "G" typed in the field
//	dot       the 2×2 box painted dark
//	caret-a/b the field focused, the caret's two blink phases
func readFrame(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/frames/" + name + ".jpg")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPixelsDiffering is the frame-equality rule on real frames: a
// visible change, however small (one character, a 2×2 dot, the caret's
// blink), is a difference; bytes that differ with no pixel past JPEG's
// noise are not.
func TestPixelsDiffering(t *testing.T) {
	page := decodeJPEG(readFrame(t, "page"))
	if page == nil {
		t.Fatal("page.jpg does not decode")
	}
	for _, c := range []struct {
		a, b   string
		differ bool
		in     image.Rectangle // where the change is (for one that differs)
	}{
		{"page", "block", false, image.Rectangle{}},
		// Not visible, but past the noise at the heading's edges: the
		// rule errs toward sending.
		{"page", "faint", true, image.Rect(0, 0, 320, 160)},
		{"page", "one-char", true, image.Rect(12, 60, 220, 90)},
		{"page", "dot", true, image.Rect(256, 16, 266, 26)},
		{"caret-a", "caret-b", true, image.Rect(12, 55, 40, 85)},
		{"page", "caret-a", true, image.Rect(0, 50, 230, 95)},
	} {
		a, b := readFrame(t, c.a), readFrame(t, c.b)
		if bytes.Equal(a, b) {
			t.Fatalf("%s and %s are the same bytes: the case tests nothing", c.a, c.b)
		}
		n, box := PixelsDiffering(decodeJPEG(a), decodeJPEG(b))
		t.Logf("%s → %s: %d pixels past the noise, in %v", c.a, c.b, n, box)
		if same := SamePixels(decodeJPEG(a), decodeJPEG(b)); same != (n == 0) {
			t.Errorf("%s → %s: SamePixels %v, PixelsDiffering %d", c.a, c.b, same, n)
		}
		if c.differ != (n > 0) {
			t.Errorf("%s → %s: %d pixels differ; want a difference: %v", c.a, c.b, n, c.differ)
		}
		if n > 0 && !box.In(c.in) {
			t.Errorf("%s → %s: the difference is at %v, outside %v", c.a, c.b, box, c.in)
		}
	}
	if n, box := PixelsDiffering(page, page); n != 0 || !box.Empty() {
		t.Errorf("a frame against itself: %d pixels in %v", n, box)
	}
}

// TestSameAsLast is what the recorder does with each frame: a changed one
// is sent as it is; one showing the same pixels is left out in the step
// the last was sent in, and in a later step (or with other masks or
// another cursor) sent with the last frame's bytes, so it is stored once.
// A visible change right after a skipped frame is still sent.
func TestSameAsLast(t *testing.T) {
	f := &frames{sentStep: -1}
	frame := func(name string, masks []event.Rect, cursor *event.Point) event.Frame {
		return event.Frame{Mime: "image/jpeg", Image: readFrame(t, name), Masks: masks, Cursor: cursor}
	}
	page := readFrame(t, "page")
	mask := []event.Rect{{X: 10, Y: 60, W: 210, H: 30}}
	for i, c := range []struct {
		fr   event.Frame
		step int
		want []byte // nil: skipped
	}{
		{frame("page", nil, nil), 1, page},                                     // the first frame
		{frame("block", nil, nil), 1, nil},                                     // the same pixels, same step
		{frame("page", nil, nil), 1, nil},                                      // the same bytes, same step
		{frame("block", nil, nil), 2, page},                                    // a new step needs its frame: the last one's bytes
		{frame("block", mask, nil), 2, page},                                   // new masks go with it
		{frame("block", mask, &event.Point{X: 5, Y: 5}), 2, page},              // so does a new cursor position
		{frame("dot", mask, &event.Point{X: 5, Y: 5}), 2, readFrame(t, "dot")}, // a 2×2 change is sent
		{frame("caret-a", nil, nil), 3, readFrame(t, "caret-a")},
		{frame("caret-b", nil, nil), 3, readFrame(t, "caret-b")}, // the caret's blink is a change
		{frame("caret-a", nil, nil), 3, readFrame(t, "caret-a")},
		{frame("faint", nil, nil), 3, readFrame(t, "faint")},
		{frame("page", nil, nil), 3, page},
		{frame("block", nil, nil), 3, nil},
		{frame("one-char", nil, nil), 3, readFrame(t, "one-char")}, // one character typed
	} {
		got, skip := f.sameAsLast(c.fr, c.step)
		switch {
		case c.want == nil && !skip:
			t.Errorf("frame %d: sent (%d bytes), want it left out", i, len(got))
		case c.want != nil && skip:
			t.Errorf("frame %d: left out, want it sent", i)
		case c.want != nil && !bytes.Equal(got, c.want):
			t.Errorf("frame %d: sent other bytes than wanted (%d, want %d)", i, len(got), len(c.want))
		}
	}
}

// BenchmarkSameAsLast measures what the frame rule costs the recorder per
// screencast frame at the demo's 1280×800 viewport (a picture tiled from
// testdata/frames/page.jpg, encoded at the screencast's quality 70): a
// frame with other bytes is decoded and compared with the last one's
// pixels. It reports that cost as a share of one core at the screencast's
// most, 5 frames a second.
func BenchmarkSameAsLast(b *testing.B) {
	tile, err := jpeg.Decode(bytes.NewReader(readFrame(b, "page")))
	if err != nil {
		b.Fatal(err)
	}
	enc := func(mark bool) []byte {
		img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
		for y := 0; y < 800; y += 160 {
			for x := 0; x < 1280; x += 320 {
				draw.Draw(img, image.Rect(x, y, x+320, y+160), tile, image.Point{}, draw.Src)
			}
		}
		if mark { // a caret-sized change
			draw.Draw(img, image.Rect(640, 400, 642, 420), image.NewUniform(color.Black), image.Point{}, draw.Src)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 70}); err != nil {
			b.Fatal(err)
		}
		return buf.Bytes()
	}
	a, c := enc(false), enc(true)
	f := &frames{sentStep: -1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		img := a
		if i%2 == 1 {
			img = c
		}
		if _, skip := f.sameAsLast(event.Frame{Mime: "image/jpeg", Image: img}, 1); skip {
			b.Fatal("a changed frame was left out")
		}
	}
	perFrame := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perFrame*1e3, "ms/frame")
	b.ReportMetric(perFrame*5, "cores-at-5fps")
}
