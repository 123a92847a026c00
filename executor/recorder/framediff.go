package recorder

import (
	"bytes"
	"image"
	"image/jpeg"
)

// FrameNoise is the most a decoded pixel's luma or chroma (0…255) may move
// between two screencast frames and still show the same thing: JPEG at the
// screencast's quality moves a pixel of an unchanged page by a few levels
// when the block around it is encoded again, and anything a reviewer can
// see (a caret, a character, a border, a fade's step) moves it by tens.
const FrameNoise = 12

// PixelsDiffering counts the pixels of a and b (of equal bounds) whose
// colour differs by more than FrameNoise, and the rectangle around them
// (empty when none does). Two YCbCr images of the same layout (what JPEG
// decodes to) are compared on their planes; others on RGB, scaled alike.
func PixelsDiffering(a, b image.Image) (int, image.Rectangle) {
	if a.Bounds() != b.Bounds() {
		return a.Bounds().Dx() * a.Bounds().Dy(), a.Bounds().Union(b.Bounds())
	}
	if ya, ok := a.(*image.YCbCr); ok {
		if yb, ok := b.(*image.YCbCr); ok && ya.SubsampleRatio == yb.SubsampleRatio {
			return ycbcrDiffering(ya, yb)
		}
	}
	n, box := 0, image.Rectangle{}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if absDiff(r1>>8, r2>>8) > FrameNoise || absDiff(g1>>8, g2>>8) > FrameNoise || absDiff(b1>>8, b2>>8) > FrameNoise {
				n++
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return n, box
}

func ycbcrDiffering(a, b *image.YCbCr) (int, image.Rectangle) {
	n, box := 0, image.Rectangle{}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		first, last := -1, -1
		for x := r.Min.X; x < r.Max.X; x++ {
			ia, ib := a.YOffset(x, y), b.YOffset(x, y)
			ca, cb := a.COffset(x, y), b.COffset(x, y)
			if absDiff(uint32(a.Y[ia]), uint32(b.Y[ib])) > FrameNoise ||
				absDiff(uint32(a.Cb[ca]), uint32(b.Cb[cb])) > FrameNoise ||
				absDiff(uint32(a.Cr[ca]), uint32(b.Cr[cb])) > FrameNoise {
				n++
				if first < 0 {
					first = x
				}
				last = x
			}
		}
		if first >= 0 {
			box = box.Union(image.Rect(first, y, last+1, y+1))
		}
	}
	return n, box
}

// SamePixels says whether no pixel of a and b differs past FrameNoise, as
// PixelsDiffering(a, b) == 0, but stops at the first one that does and
// compares two JPEGs' planes row by row (a byte loop, no per-pixel
// offsets): the recorder asks it of every frame.
func SamePixels(a, b image.Image) bool {
	ya, oka := a.(*image.YCbCr)
	yb, okb := b.(*image.YCbCr)
	if !oka || !okb || ya.Rect != yb.Rect || ya.SubsampleRatio != yb.SubsampleRatio {
		n, _ := PixelsDiffering(a, b)
		return n == 0
	}
	r := ya.Rect
	for y := r.Min.Y; y < r.Max.Y; y++ {
		ia, ib := ya.YOffset(r.Min.X, y), yb.YOffset(r.Min.X, y)
		if !planeRowSame(ya.Y[ia:ia+r.Dx()], yb.Y[ib:ib+r.Dx()]) {
			return false
		}
	}
	// Every chroma sample covers at least one pixel of r: its first and
	// last (r.Max exclusive) pixel bound the samples to compare.
	for y := r.Min.Y; y < r.Max.Y; y++ {
		ca0, cb0 := ya.COffset(r.Min.X, y), yb.COffset(r.Min.X, y)
		n := ya.COffset(r.Max.X-1, y) - ca0 + 1
		if !planeRowSame(ya.Cb[ca0:ca0+n], yb.Cb[cb0:cb0+n]) || !planeRowSame(ya.Cr[ca0:ca0+n], yb.Cr[cb0:cb0+n]) {
			return false
		}
	}
	return true
}

func planeRowSame(a, b []byte) bool {
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d > FrameNoise || d < -FrameNoise {
			return false
		}
	}
	return true
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// decodeJPEG decodes a screencast frame; nil when it is not a JPEG.
func decodeJPEG(b []byte) image.Image {
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return img
}
