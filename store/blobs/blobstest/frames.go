package blobstest

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"testing"
)

// Frames returns n JPEG screencast-like frames of w×h pixels: one page
// (a light background, blocks of "text" in a few colours) on which each
// frame changes a small region (a caret, a character typed), so that
// consecutive frames share most of their MCUs but, past the first that
// changed, few of their bytes. gray makes them one-component JPEGs.
// seed fixes the page.
func Frames(t testing.TB, n, w, h int, gray bool, seed uint64) [][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	page := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			page.Set(x, y, color.RGBA{250, 250, 248, 255})
		}
	}
	ink := []color.RGBA{{20, 20, 30, 255}, {40, 90, 200, 255}, {200, 40, 40, 255}}
	for range w * h / 400 {
		x, y := r.IntN(max(1, w-6)), r.IntN(max(1, h-10))
		c := ink[r.IntN(len(ink))]
		for dy := range 2 + r.IntN(8) {
			for dx := range 1 + r.IntN(5) {
				if x+dx < w && y+dy < h {
					page.Set(x+dx, y+dy, c)
				}
			}
		}
	}
	out := make([][]byte, n)
	for i := range out {
		// The region that changes: a "character" typed along a line.
		x0, y0 := (i*7)%max(1, w-8), (h/3+i/max(1, w/7)*12)%max(1, h-10)
		for dy := range 9 {
			for dx := range 5 {
				if x0+dx < w && y0+dy < h {
					page.Set(x0+dx, y0+dy, ink[(i+dx+dy)%len(ink)])
				}
			}
		}
		var img image.Image = page
		if gray {
			g := image.NewGray(page.Bounds())
			for y := range h {
				for x := range w {
					g.Set(x, y, page.At(x, y))
				}
			}
			img = g
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
			t.Fatal(err)
		}
		out[i] = buf.Bytes()
	}
	return out
}
