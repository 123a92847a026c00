package webm

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// recording is a synthetic recording: frames, one chapter per step.
type recording struct {
	start, end int64
	frames     []Frame
	chapters   []Chapter
}

const (
	synthW, synthH = 1280, 800
	// t0 is the synthetic recording's first instant: not a round number,
	// so an offset lost in a conversion shows.
	t0 = int64(1_700_000_000_123_456_789)
)

// stepColor is step k's background: each step's pictures are told apart
// by it, through lossy encoding.
func stepColor(k int) color.RGBA {
	palette := []color.RGBA{
		{235, 235, 235, 255}, {250, 215, 160, 255}, {170, 215, 250, 255},
		{190, 240, 180, 255}, {240, 185, 230, 255}, {250, 250, 160, 255},
		{200, 190, 250, 255}, {160, 240, 235, 255},
	}
	return palette[k%len(palette)]
}

// synth builds a recording of about dur with steps chapters whose starts
// are irregular, frames about 5 a second at irregular times (and one at
// each step's start, as the recorder's step screenshot is), each a
// 1280×800 JPEG with the step's background, a big step number, lines of
// "text", a moving box, and a cursor position.
func synth(t testing.TB, dur time.Duration, steps int, seed uint64) recording {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	rec := recording{start: t0, end: t0 + int64(dur)}
	// Chapter starts: step 1 at the start, the others spread unevenly.
	starts := []int64{t0}
	for k := 1; k < steps; k++ {
		base := t0 + int64(dur)*int64(k)/int64(steps)
		jitter := int64(dur) / int64(steps) / 3
		starts = append(starts, base+rng.Int64N(2*jitter)-jitter+int64(rng.IntN(1000))*1000)
	}
	for k, s := range starts {
		end := rec.end
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		rec.chapters = append(rec.chapters, Chapter{
			Step: k + 1, Title: fmt.Sprintf("Step %d: do thing «%c»", k+1, 'A'+k), Start: s, End: end,
		})
	}
	// Frames: the first 37 ms in (so the video begins before any frame),
	// then every 120–280 ms, plus one at each later step's start.
	times := []int64{t0 + 37_000_000}
	for {
		next := times[len(times)-1] + int64(120+rng.IntN(160))*1e6
		if next >= rec.end {
			break
		}
		times = append(times, next)
	}
	times = append(times, starts[1:]...)
	slices.Sort(times)
	times = slices.Compact(times)
	stepAt := func(ts int64) int {
		k := 0
		for i, s := range starts {
			if ts >= s {
				k = i
			}
		}
		return k + 1
	}
	for _, ts := range times {
		k := stepAt(ts)
		cur := image.Pt(200+int((ts-t0)/3e6)%800, 150+int((ts-t0)/7e6)%500)
		rec.frames = append(rec.frames, Frame{
			Time:   ts,
			Image:  synthJPEG(t, k, ts-t0, cur),
			Cursor: &cur,
		})
	}
	return rec
}

// synthImage draws the picture of step k at offset ns.
func synthImage(k int, offset int64, _ image.Point) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, synthW, synthH))
	draw.Draw(img, img.Bounds(), &image.Uniform{stepColor(k)}, image.Point{}, draw.Src)
	fill := func(r image.Rectangle, c color.RGBA) {
		draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
	}
	fill(image.Rect(0, 0, synthW, 56), color.RGBA{40, 50, 70, 255})
	// Lines of "words".
	rng := rand.New(rand.NewPCG(uint64(k), 1))
	for line := range 14 {
		x := 80
		y := 420 + line*26
		for x < 1100 {
			w := 20 + rng.IntN(70)
			fill(image.Rect(x, y, x+w, y+12), color.RGBA{50, 50, 60, 255})
			x += w + 10
		}
	}
	// A box moving 300 px/s.
	bx := 100 + int(offset/int64(time.Second/300))%1000
	fill(image.Rect(bx, 300, bx+120, 380), color.RGBA{30, 90, 200, 255})
	drawNumber(img, k, image.Pt(900, 90), 24, color.RGBA{20, 20, 20, 255})
	return img
}

func synthJPEG(t testing.TB, k int, offset int64, cur image.Point) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, synthImage(k, offset, cur), &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// drawNumber draws n in seven-segment digits of stroke s at p.
func drawNumber(img *image.RGBA, n int, p image.Point, s int, c color.RGBA) {
	segs := map[rune]string{
		'0': "abcdef", '1': "bc", '2': "abdeg", '3': "abcdg", '4': "bcfg",
		'5': "acdfg", '6': "acdefg", '7': "abc", '8': "abcdefg", '9': "abcdfg",
	}
	w, h := 4*s, 7*s
	for i, d := range fmt.Sprint(n) {
		x := p.X + i*(w+2*s)
		for _, sg := range segs[d] {
			var r image.Rectangle
			switch sg {
			case 'a':
				r = image.Rect(x, p.Y, x+w, p.Y+s)
			case 'b':
				r = image.Rect(x+w-s, p.Y, x+w, p.Y+h/2)
			case 'c':
				r = image.Rect(x+w-s, p.Y+h/2, x+w, p.Y+h)
			case 'd':
				r = image.Rect(x, p.Y+h-s, x+w, p.Y+h)
			case 'e':
				r = image.Rect(x, p.Y+h/2, x+s, p.Y+h)
			case 'f':
				r = image.Rect(x, p.Y, x+s, p.Y+h/2)
			case 'g':
				r = image.Rect(x, p.Y+h/2-s/2, x+w, p.Y+h/2+s/2)
			}
			draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
		}
	}
}

// encodeFile encodes rec (restricted to opt's span when set) into a file
// in t.TempDir and returns its path and bytes.
func encodeFile(t testing.TB, rec recording, opt Options) (string, []byte) {
	t.Helper()
	if opt.Start == 0 {
		opt.Start, opt.End = rec.start, rec.end
	}
	var b bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Encode(ctx, opt, slices.Values(rec.frames), rec.chapters, &b); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	path := filepath.Join(t.TempDir(), "video.webm")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b.Bytes()
}

// shownAt is the frame an output frame at video time at (ns) shows: the
// newest at or before it, else the first.
func shownAt(frames []Frame, start, at int64) Frame {
	best := frames[0]
	for _, f := range frames {
		if f.Time <= start+at {
			best = f
		}
	}
	return best
}
