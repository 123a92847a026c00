package webm

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"image/png"
)

// maxSide is VP8's largest frame side (14 bits).
const maxSide = 16383

// decodeImage decodes a JPEG or PNG by its signature (the stored frame's
// mime type is not at hand, and the bytes are the truth).
func decodeImage(b []byte) (image.Image, error) {
	switch {
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return jpeg.Decode(bytes.NewReader(b))
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return png.Decode(bytes.NewReader(b))
	}
	return nil, errors.New("not a JPEG or PNG image")
}

// canvasSize is the video's size for a first picture of w×h: rounded up
// to even sides, which 4:2:0 chroma wants (the extra row or column is
// black).
func canvasSize(w, h int) (int, int, error) {
	if w <= 0 || h <= 0 || w > maxSide || h > maxSide {
		return 0, 0, fmt.Errorf("webm: frame size %dx%d outside 1…%d", w, h, maxSide)
	}
	return w + w&1, h + h&1, nil
}

// compose draws src onto dst, the video's canvas, and the cursor at cur
// (src pixels) when set. A picture of the canvas's size is copied; a
// smaller one (the viewport lost a scrollbar's width) is drawn at the top
// left on black, so its text stays sharp and the cursor's coordinates
// stay right; a larger one is scaled down to fit, keeping its aspect
// ratio, and the cursor with it.
func compose(dst *image.RGBA, src image.Image, cur *image.Point) {
	sb := src.Bounds()
	db := dst.Bounds()
	scaled := sb.Dx() > db.Dx() || sb.Dy() > db.Dy()
	if sb.Dx() != db.Dx() || sb.Dy() != db.Dy() {
		clear(dst.Pix)
		for i := 3; i < len(dst.Pix); i += 4 {
			dst.Pix[i] = 0xff
		}
	}
	var at *image.Point
	if cur != nil {
		p := *cur
		at = &p
	}
	if !scaled {
		draw.Draw(dst, sb.Sub(sb.Min), src, sb.Min, draw.Src)
	} else {
		num, den := db.Dx(), sb.Dx() // scale = num/den
		if db.Dy()*sb.Dx() < db.Dx()*sb.Dy() {
			num, den = db.Dy(), sb.Dy()
		}
		w, h := max(1, sb.Dx()*num/den), max(1, sb.Dy()*num/den)
		scaleInto(dst, image.Rect(0, 0, w, h), toRGBA(src))
		if at != nil {
			at.X, at.Y = at.X*num/den, at.Y*num/den
		}
	}
	if at != nil {
		drawCursor(dst, *at)
	}
}

// toRGBA returns src as an *image.RGBA whose bounds start at (0, 0).
func toRGBA(src image.Image) *image.RGBA {
	if m, ok := src.(*image.RGBA); ok && m.Bounds().Min == (image.Point{}) {
		return m
	}
	b := src.Bounds()
	m := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(m, m.Bounds(), src, b.Min, draw.Src)
	return m
}

// scaleInto downscales src into r of dst by averaging, for each
// destination pixel, the source pixels its area covers (a box filter:
// text shrunk a little stays legible, where nearest-neighbour drops
// strokes).
func scaleInto(dst *image.RGBA, r image.Rectangle, src *image.RGBA) {
	sw, sh := src.Bounds().Dx(), src.Bounds().Dy()
	dw, dh := r.Dx(), r.Dy()
	for y := range dh {
		y0, y1 := y*sh/dh, max((y+1)*sh/dh, y*sh/dh+1)
		for x := range dw {
			x0, x1 := x*sw/dw, max((x+1)*sw/dw, x*sw/dw+1)
			var s [4]int
			for sy := y0; sy < y1; sy++ {
				row := src.Pix[sy*src.Stride:]
				for sx := x0; sx < x1; sx++ {
					p := row[sx*4 : sx*4+4]
					s[0] += int(p[0])
					s[1] += int(p[1])
					s[2] += int(p[2])
					s[3] += int(p[3])
				}
			}
			n := (y1 - y0) * (x1 - x0)
			o := dst.PixOffset(r.Min.X+x, r.Min.Y+y)
			for c := range 4 {
				dst.Pix[o+c] = uint8(s[c] / n)
			}
		}
	}
}
