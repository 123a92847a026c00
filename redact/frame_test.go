package redact

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/policy"
)

// testImage is a smooth, colourful picture (JPEG keeps it well) with no
// pixel near black.
func testImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{R: uint8(90 + x*120/w), G: uint8(200 - y*80/h), B: 160, A: 255})
		}
	}
	return img
}

func encodeImage(t testing.TB, img image.Image, mime string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	if mime == "image/png" {
		err = png.Encode(&buf, img)
	} else {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func frameEvent(t testing.TB, seq uint64, kind event.Kind, mime string, img []byte, w, h int, masks []event.Rect) *event.Decoded {
	t.Helper()
	data := obj{"mime": mime, "image": img, "width": w, "height": h}
	if masks != nil {
		data["masks"] = masks
	}
	if kind == event.KindScreenshot {
		data["reason"] = "failure"
	}
	return decoded(t, seq, kind, mustJSON(t, data))
}

func decodeBytes(t testing.TB, b []byte) image.Image {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("result image does not decode: %v", err)
	}
	return img
}

func near(c color.Color, want color.Color, tol int) bool {
	r1, g1, b1, _ := c.RGBA()
	r2, g2, b2, _ := want.RGBA()
	d := func(a, b uint32) bool {
		x := int(a>>8) - int(b>>8)
		return x <= tol && x >= -tol
	}
	return d(r1, r2) && d(g1, g2) && d(b1, b2)
}

// inside samples points spread over a rectangle (corners included).
func inside(r image.Rectangle) []image.Point {
	var pts []image.Point
	for _, fx := range []int{0, 1, 2, 3, 4} {
		for _, fy := range []int{0, 1, 2, 3, 4} {
			pts = append(pts, image.Pt(r.Min.X+(r.Dx()-1)*fx/4, r.Min.Y+(r.Dy()-1)*fy/4))
		}
	}
	return pts
}

func TestFrameMaskJPEGAndPNG(t *testing.T) {
	masks := []event.Rect{{X: 40, Y: 300, W: 320, H: 32}, {X: 901, Y: 97, W: 50, H: 45}}
	for _, tc := range []struct {
		mime      string
		kind      event.Kind
		tolInside int
		tolOut    int
	}{
		{"image/jpeg", event.KindFrame, 8, 12},
		{"image/png", event.KindScreenshot, 0, 0},
	} {
		t.Run(tc.mime, func(t *testing.T) {
			r, err := New(testPlan(), nil)
			if err != nil {
				t.Fatal(err)
			}
			orig := encodeImage(t, testImage(1280, 800), tc.mime)
			origImg := decodeBytes(t, orig)
			res, err := r.Redact(frameEvent(t, 1, tc.kind, tc.mime, orig, 1280, 800, masks))
			if err != nil {
				t.Fatal(err)
			}
			if res.Image == nil || res.Drop || res.Data != nil {
				t.Fatalf("result %+v", res)
			}
			format := "jpeg"
			if tc.mime == "image/png" {
				format = "png"
			}
			out, gotFormat, err := image.Decode(bytes.NewReader(res.Image))
			if err != nil || gotFormat != format {
				t.Fatalf("re-encoded as %q, want %q (%v)", gotFormat, format, err)
			}
			if out.Bounds() != origImg.Bounds() {
				t.Fatalf("size changed: %v", out.Bounds())
			}
			for i, m := range masks {
				rect := image.Rect(m.X, m.Y, m.X+m.W, m.Y+m.H)
				for _, p := range inside(rect) {
					if c := out.At(p.X, p.Y); !near(c, MaskColor, tc.tolInside) {
						t.Fatalf("mask %d: pixel %v = %v, want mask colour", i, p, c)
					}
				}
				if len(res.Findings) != len(masks) || res.Findings[i] != (Finding{Rule: "frame:mask", Channel: string(tc.kind), Pointer: "/masks/" + string(rune('0'+i))}) {
					t.Errorf("findings %+v", res.Findings)
				}
			}
			for _, p := range []image.Point{{5, 5}, {600, 500}, {1270, 790}, {40, 260}, {380, 316}, {901, 170}} {
				if !near(out.At(p.X, p.Y), origImg.At(p.X, p.Y), tc.tolOut) {
					t.Errorf("pixel %v outside the masks changed: %v → %v", p, origImg.At(p.X, p.Y), out.At(p.X, p.Y))
				}
			}
		})
	}
}

func TestFrameMaskScaledAndClipped(t *testing.T) {
	r, err := New(testPlan(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// masks are in a 640×400 space; the image is 1280×800 (device pixels)
	orig := encodeImage(t, testImage(1280, 800), "image/png")
	masks := []event.Rect{{X: 20, Y: 150, W: 160, H: 16}, {X: 600, Y: 380, W: 500, H: 500}, {X: -50, Y: -50, W: 60, H: 60}}
	res, err := r.Redact(frameEvent(t, 1, event.KindFrame, "image/png", orig, 640, 400, masks))
	if err != nil {
		t.Fatal(err)
	}
	out := decodeBytes(t, res.Image)
	for _, rect := range []image.Rectangle{
		image.Rect(40, 300, 360, 332),    // first mask, scaled ×2
		image.Rect(1200, 760, 1280, 800), // second, clipped at the corner
		image.Rect(0, 0, 20, 20),         // third, clipped at the origin
	} {
		for _, p := range inside(rect) {
			if c := out.At(p.X, p.Y); !near(c, MaskColor, 0) {
				t.Fatalf("pixel %v = %v, want mask colour", p, c)
			}
		}
	}
	for _, p := range []image.Point{{39, 316}, {360, 316}, {200, 299}, {200, 332}, {21, 21}, {1199, 700}} {
		if c := out.At(p.X, p.Y); near(c, MaskColor, 8) {
			t.Errorf("pixel %v outside the scaled masks was painted", p)
		}
	}
	if len(res.Findings) != 3 {
		t.Errorf("findings %+v", res.Findings)
	}
}

func TestFrameDropUnmaskedWhileMaskedFieldShows(t *testing.T) {
	rc := newRecorder(t, nil)
	img := encodeImage(t, testImage(64, 40), "image/jpeg")
	frame := func(seq uint64, kind event.Kind) Result {
		res, err := rc.r.Redact(frameEvent(t, seq, kind, "image/jpeg", img, 64, 40, nil))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := frame(100, event.KindFrame); res.Changed() || res.Findings != nil {
		t.Fatalf("no masked field yet: %+v", res)
	}
	rc.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	for _, kind := range []event.Kind{event.KindFrame, event.KindScreenshot} {
		res := frame(101, kind)
		if !res.Drop || len(res.Findings) != 1 || res.Findings[0].Rule != "frame:dropped-unmasked" || res.Findings[0].Channel != string(kind) {
			t.Errorf("%s: %+v, want dropped", kind, res)
		}
	}
	// a frame that brings its masks is kept (and painted)
	res, err := rc.r.Redact(frameEvent(t, 102, event.KindFrame, "image/jpeg", img, 64, 40, []event.Rect{{X: 1, Y: 1, W: 5, H: 5}}))
	if err != nil || res.Drop || res.Image == nil {
		t.Errorf("masked frame: %+v %v", res, err)
	}
	// the plan may keep unmasked frames
	p := testPlan()
	p.DropUnmaskedFrames = false
	rc2 := newRecorder(t, func(q *policy.Plan) { *q = *p })
	rc2.send(fullSnapshot(t, page(elem(10, "input", obj{"type": "password"}))))
	if res, _ := rc2.r.Redact(frameEvent(t, 103, event.KindFrame, "image/jpeg", img, 64, 40, nil)); res.Changed() {
		t.Errorf("plan keeps unmasked frames, got %+v", res)
	}
}

func TestFrameUndecodableFailsClosed(t *testing.T) {
	r, err := New(testPlan(), nil)
	if err != nil {
		t.Fatal(err)
	}
	good := encodeImage(t, testImage(64, 40), "image/jpeg")
	bomb := pngClaimingSize(t, 100000, 100000)
	for name, img := range map[string][]byte{
		"garbage":   []byte("definitely not an image, just bytes"),
		"truncated": good[:len(good)/2],
		"bomb":      bomb,
		"gif":       []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
	} {
		res, err := r.Redact(frameEvent(t, 1, event.KindScreenshot, "image/jpeg", img, 64, 40, []event.Rect{{X: 1, Y: 1, W: 5, H: 5}}))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Drop || res.Image != nil || len(res.Findings) != 1 || res.Findings[0].Rule != "frame:undecodable" || res.Findings[0].Channel != "screenshot" {
			t.Errorf("%s: %+v, want dropped as undecodable", name, res)
		}
	}
}

// pngClaimingSize is a tiny PNG whose header claims w×h.
func pngClaimingSize(t testing.TB, w, h uint32) []byte {
	b := encodeImage(t, image.NewGray(image.Rect(0, 0, 1, 1)), "image/png")
	// signature (8), IHDR length (4), "IHDR" (4), width, height …, CRC over type+data
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// TestFrameMaskKeepsSourceQuality re-encodes a masked frame of Chromium's
// own (testdata/chromium-q70.jpg: a headless Page.captureScreenshot at the
// screencast's quality 70 of a page with a heading and a text field) with
// the frame's own quantization tables: fewer bytes than at JPEGQuality,
// and no more pixels outside the mask's blocks moved past JPEG's noise
// (12 of 255) than re-encoding at JPEGQuality moves.
func TestFrameMaskKeepsSourceQuality(t *testing.T) {
	src, err := os.ReadFile("testdata/chromium-q70.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if q := sourceQuality(src); q != 70 {
		t.Fatalf("sourceQuality of Chromium's quality-70 frame = %d", q)
	}
	if q := sourceQuality(encodeImage(t, testImage(64, 40), "image/jpeg")); q != 90 {
		t.Errorf("sourceQuality of Go's quality-90 JPEG = %d", q)
	}
	if q := sourceQuality([]byte("\xff\xd8\xff\xdb\x00")); q != 0 {
		t.Errorf("sourceQuality of a torn header = %d", q)
	}
	r, err := New(testPlan(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mask := event.Rect{X: 10, Y: 60, W: 210, H: 30}
	res, err := r.Redact(frameEvent(t, 1, event.KindFrame, "image/jpeg", src, 320, 160, []event.Rect{mask}))
	if err != nil || res.Image == nil {
		t.Fatalf("%+v %v", res, err)
	}
	if quantTables(res.Image) != quantTables(src) {
		t.Error("the masked frame was re-encoded with other quantization tables than its own")
	}
	orig := decodeBytes(t, src)
	masked := maskRect(mask, 1, 1, jpegBlock, 320, 160)
	moved := func(b []byte) int {
		out, n := decodeBytes(t, b), 0
		for y := 0; y < 160; y++ {
			for x := 0; x < 320; x++ {
				if !image.Pt(x, y).In(masked) && !near(out.At(x, y), orig.At(x, y), 12) {
					n++
				}
			}
		}
		return n
	}
	painted, _ := paintMasks(orig, 320, 160, []event.Rect{mask}, true, "frame")
	var fixed bytes.Buffer
	if err := jpeg.Encode(&fixed, painted, &jpeg.Options{Quality: JPEGQuality}); err != nil {
		t.Fatal(err)
	}
	own, atFixed := moved(res.Image), moved(fixed.Bytes())
	t.Logf("%d bytes from Chromium; masked at its own quality %d bytes, %d pixels moved; at %d: %d bytes, %d pixels moved",
		len(src), len(res.Image), own, JPEGQuality, fixed.Len(), atFixed)
	if own > atFixed || own > 4 {
		t.Errorf("re-encoded at its own quality, %d pixels outside the mask moved past the noise (at %d: %d)", own, JPEGQuality, atFixed)
	}
	if len(res.Image) >= fixed.Len() {
		t.Errorf("re-encoded at its own quality: %d bytes, at %d: %d", len(res.Image), JPEGQuality, fixed.Len())
	}
}
