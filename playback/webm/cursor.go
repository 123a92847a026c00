package webm

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"sync"
)

// The agent's pointer is drawn in a colour no ordinary pointer has, so a
// viewer tells the agent's position from anything the page draws, with a
// white outline and a soft dark edge that keep it visible on light and dark
// pages alike. Screencast frames never contain the real pointer, so this
// is the only one in the video.
var (
	cursorFill    = color.NRGBA{R: 255, G: 40, B: 120, A: 255}
	cursorOutline = color.NRGBA{R: 255, G: 255, B: 255, A: 255}
	cursorShadow  = color.NRGBA{R: 0, G: 0, B: 0, A: 140}
)

// cursorShape is the arrow, tip at (0, 0), in CSS px: the familiar
// left-leaning pointer with a tail, about 26 px tall once scaled.
var cursorShape = [][2]float64{
	{0, 0}, {0, 17}, {4.2, 13}, {7, 19.5}, {9.8, 18.3}, {7.1, 12}, {12.5, 12},
}

const (
	cursorScale  = 1.35
	cursorMargin = 3 // px around the shape's box for the outline and edge
)

var (
	cursorOnce   sync.Once
	cursorSprite *image.RGBA // tip at (cursorMargin, cursorMargin)
	cursorProbe  image.Point // an interior pixel of the fill, relative to the tip
)

// cursorImage renders the pointer once, antialiased by 4×4 supersampling
// of the signed distance to the arrow's outline: inside by more than the
// outline width is fill, near the edge white, just outside a fading shadow.
func cursorImage() (*image.RGBA, image.Point) {
	cursorOnce.Do(func() {
		poly := make([][2]float64, len(cursorShape))
		maxX, maxY := 0.0, 0.0
		for i, p := range cursorShape {
			poly[i] = [2]float64{p[0] * cursorScale, p[1] * cursorScale}
			maxX, maxY = math.Max(maxX, poly[i][0]), math.Max(maxY, poly[i][1])
		}
		w := int(math.Ceil(maxX)) + 2*cursorMargin
		h := int(math.Ceil(maxY)) + 2*cursorMargin
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		const ss = 4
		deepest := 0.0
		for y := range h {
			for x := range w {
				var r, g, b, a float64
				for sy := range ss {
					for sx := range ss {
						px := float64(x-cursorMargin) + (float64(sx)+0.5)/ss
						py := float64(y-cursorMargin) + (float64(sy)+0.5)/ss
						d := signedDistance(poly, px, py)
						var c color.NRGBA
						switch {
						case d < -1.6:
							c = cursorFill
						case d < 0.3:
							c = cursorOutline
						case d < 1.6:
							c = cursorShadow
							c.A = uint8(float64(c.A) * (1.6 - d) / 1.3)
						default:
							continue
						}
						al := float64(c.A) / 255
						r += float64(c.R) * al
						g += float64(c.G) * al
						b += float64(c.B) * al
						a += al
					}
				}
				n := float64(ss * ss)
				img.SetRGBA(x, y, color.RGBA{
					R: uint8(r/n + 0.5), G: uint8(g/n + 0.5), B: uint8(b/n + 0.5), A: uint8(a/n*255 + 0.5),
				})
				if d := -signedDistance(poly, float64(x-cursorMargin)+0.5, float64(y-cursorMargin)+0.5); d > deepest {
					deepest = d
					cursorProbe = image.Pt(x-cursorMargin, y-cursorMargin)
				}
			}
		}
		cursorSprite = img
	})
	return cursorSprite, cursorProbe
}

// drawCursor draws the pointer with its tip at p on dst.
func drawCursor(dst *image.RGBA, p image.Point) {
	sprite, _ := cursorImage()
	r := sprite.Bounds().Add(p).Sub(image.Pt(cursorMargin, cursorMargin))
	draw.Draw(dst, r, sprite, image.Point{}, draw.Over)
}

// signedDistance is the distance from (x, y) to the polygon's outline,
// negative inside (even-odd rule).
func signedDistance(poly [][2]float64, x, y float64) float64 {
	best := math.Inf(1)
	inside := false
	for i := range poly {
		a, b := poly[i], poly[(i+1)%len(poly)]
		dx, dy := b[0]-a[0], b[1]-a[1]
		t := ((x-a[0])*dx + (y-a[1])*dy) / (dx*dx + dy*dy)
		t = math.Max(0, math.Min(1, t))
		ex, ey := a[0]+t*dx-x, a[1]+t*dy-y
		best = math.Min(best, math.Hypot(ex, ey))
		if (a[1] > y) != (b[1] > y) && x < a[0]+(y-a[1])*dx/dy {
			inside = !inside
		}
	}
	if inside {
		return -best
	}
	return best
}
