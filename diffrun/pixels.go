package diffrun

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // frames are JPEG (screencast) …
	_ "image/png"  // … or PNG (screenshots)
)

// pixelDelta is the per-pixel threshold: a pixel changed when its YIQ
// colour distance exceeds this share of the largest possible (as
// pixelmatch measures it; 0.1 ignores JPEG noise and anti-aliasing).
const pixelDelta = 0.1

// maxYIQDelta is the largest squared YIQ distance between two colours.
const maxYIQDelta = 35215.0

// frameImage is a decoded frame, or why it could not be.
type frameImage struct {
	img image.Image
	err error
}

func (d *differ) frame(cid string) *frameImage {
	if d.frameCache == nil {
		d.frameCache = map[string]*frameImage{}
	}
	if f, ok := d.frameCache[cid]; ok {
		return f
	}
	f := &frameImage{}
	b, err := d.o.Frame(cid)
	if err == nil {
		f.img, _, err = image.Decode(bytes.NewReader(b))
	}
	f.err = err
	// Keep at most a couple of frames: each side's frames are visited in
	// order, so older ones are not needed again.
	if len(d.frameCache) >= 4 {
		clear(d.frameCache)
	}
	d.frameCache[cid] = f
	return f
}

// pixels compares the steps' last frames: more than PixelThreshold of
// the pixels changed, or another size. Never material by itself: pages
// render differently (fonts, animations, data) without the runs
// diverging.
func (d *differ) pixels(diffs []Difference, x, y *Step) []Difference {
	if d.o.Frame == nil || x.FrameCID == "" || y.FrameCID == "" || x.FrameCID == y.FrameCID {
		return diffs
	}
	fa, fb := d.frame(x.FrameCID), d.frame(y.FrameCID)
	if fa.err != nil || fb.err != nil {
		d.frameErrors++
		return diffs
	}
	ba, bb := fa.img.Bounds(), fb.img.Bounds()
	if ba.Dx() != bb.Dx() || ba.Dy() != bb.Dy() {
		return append(diffs, Difference{ChannelPixels, "size",
			fmt.Sprintf("frame size %d×%d → %d×%d", ba.Dx(), ba.Dy(), bb.Dx(), bb.Dy()), false})
	}
	r := ChangedRatio(fa.img, fb.img)
	if r > d.o.PixelThreshold {
		diffs = append(diffs, Difference{ChannelPixels, "frame",
			fmt.Sprintf("%.1f%% of pixels changed", 100*r), false})
	}
	return diffs
}

// ChangedRatio is the share of pixels whose perceptual colour distance
// between a and b exceeds 10% of the largest possible (YIQ, as pixelmatch
// measures it). The images must have the same size; otherwise it is 1.
func ChangedRatio(a, b image.Image) float64 {
	ra, rb := a.Bounds(), b.Bounds()
	w, h := ra.Dx(), ra.Dy()
	if w != rb.Dx() || h != rb.Dy() {
		return 1
	}
	if w == 0 || h == 0 {
		return 0
	}
	limit := maxYIQDelta * pixelDelta * pixelDelta
	changed := 0
	ya, oka := a.(*image.YCbCr)
	yb, okb := b.(*image.YCbCr)
	if oka && okb {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				pa := ya.YCbCrAt(ra.Min.X+x, ra.Min.Y+y)
				pb := yb.YCbCrAt(rb.Min.X+x, rb.Min.Y+y)
				if pa == pb {
					continue
				}
				r1, g1, b1 := color.YCbCrToRGB(pa.Y, pa.Cb, pa.Cr)
				r2, g2, b2 := color.YCbCrToRGB(pb.Y, pb.Cb, pb.Cr)
				if yiq(float64(r1), float64(g1), float64(b1), float64(r2), float64(g2), float64(b2)) > limit {
					changed++
				}
			}
		}
		return float64(changed) / float64(w*h)
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r1, g1, b1, a1 := a.At(ra.Min.X+x, ra.Min.Y+y).RGBA()
			r2, g2, b2, a2 := b.At(rb.Min.X+x, rb.Min.Y+y).RGBA()
			if r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2 {
				continue
			}
			if yiq(onWhite(r1, a1), onWhite(g1, a1), onWhite(b1, a1),
				onWhite(r2, a2), onWhite(g2, a2), onWhite(b2, a2)) > limit {
				changed++
			}
		}
	}
	return float64(changed) / float64(w*h)
}

// onWhite composites a premultiplied 16-bit channel of alpha al onto
// white, in 8-bit units.
func onWhite(c, al uint32) float64 {
	return (float64(c) + float64(0xffff-al)) / 257
}

// yiq is the squared YIQ distance of two RGB colours (pixelmatch's
// colorDelta without its sign).
func yiq(r1, g1, b1, r2, g2, b2 float64) float64 {
	y := (r1-r2)*0.29889531 + (g1-g2)*0.58662247 + (b1-b2)*0.11448223
	i := (r1-r2)*0.59597799 - (g1-g2)*0.27417610 - (b1-b2)*0.32180189
	q := (r1-r2)*0.21147017 - (g1-g2)*0.52261711 + (b1-b2)*0.31114694
	return 0.5053*y*y + 0.299*i*i + 0.1957*q*q
}
