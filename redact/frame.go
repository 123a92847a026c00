package redact

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math"
	"strconv"
	"sync"

	"github.com/flightrec/flightrec/event"
)

// MaskColor is the colour mask rectangles are painted with.
var MaskColor = color.RGBA{R: 0, G: 0, B: 0, A: 255}

// JPEGQuality is the quality a masked JPEG frame is re-encoded at when its
// own quality cannot be read from its quantization tables (sourceQuality).
const JPEGQuality = 85

// maxFramePixels bounds a frame's decoded size (a decompression bomb is
// refused as undecodable, before it allocates).
const maxFramePixels = 64 << 20

// jpegBlock is the JPEG encoder's MCU size (4:2:0 chroma): a JPEG mask is
// rounded out to it so no block mixes masked and unmasked pixels, which
// keeps the mask solid after lossy re-encoding.
const jpegBlock = 16

// redactFrame paints a frame's or screenshot's mask rectangles, or drops an
// unmasked one while a masked field is on the page.
func (r *Redactor) redactFrame(d *event.Decoded) (Result, error) {
	var f *event.Frame
	switch p := d.Payload.(type) {
	case *event.Frame:
		f = p
	case *event.Screenshot:
		f = &p.Frame
	default:
		return Result{}, fmt.Errorf("redact: %s event without a frame payload", d.Kind)
	}
	ch := string(d.Kind)
	undecodable := Result{Drop: true, Findings: []Finding{{Rule: "frame:undecodable", Channel: ch, Pointer: "/image"}}}
	if len(f.Masks) == 0 {
		// Bytes that are not a JPEG or PNG of sane dimensions are dropped
		// with or without masks: a "frame" can carry anything, and only an
		// image is what the player shows. The header and dimensions are
		// cheap to read; a full decode is left to masked frames.
		if _, err := frameConfig(f.Image); err != nil {
			return undecodable, nil
		}
		if r.plan.DropUnmaskedFrames && r.dom.maskedOnPage() {
			return Result{Drop: true, Findings: []Finding{{Rule: "frame:dropped-unmasked", Channel: ch, Pointer: "/image"}}}, nil
		}
		return Result{}, nil
	}
	img, err := decodeFrame(f.Image)
	if err != nil {
		return undecodable, nil
	}
	// Re-encode as the declared mime, so what is stored is what it says.
	isJPEG := f.Mime == "image/jpeg"
	out, findings := paintMasks(img, f.Width, f.Height, f.Masks, isJPEG, ch)
	var buf bytes.Buffer
	if isJPEG {
		q := sourceQuality(f.Image)
		if q == 0 {
			q = JPEGQuality
		}
		err = jpeg.Encode(&buf, out, &jpeg.Options{Quality: q})
	} else {
		err = (&png.Encoder{CompressionLevel: png.DefaultCompression}).Encode(&buf, out)
	}
	if err != nil {
		return Result{}, fmt.Errorf("redact: re-encoding a masked %s: %w", ch, err)
	}
	return Result{Image: buf.Bytes(), Findings: findings}, nil
}

// sourceQuality is the quality (1…100) whose standard quantization tables
// (the IJG tables scaled, as libjpeg's and Go's encoders scale them: a
// browser's screencast JPEGs) JPEG b was encoded with, or 0 when its
// tables are other ones. A masked frame is re-encoded at its own quality:
// an unmasked block's coefficients are already multiples of those steps
// and come back nearly unchanged, while a finer quality only spends bytes
// copying the first encoding's artifacts, and moves more pixels doing so
// (TestFrameMaskKeepsSourceQuality).
func sourceQuality(b []byte) int {
	t := quantTables(b)
	if t == "" {
		return 0
	}
	return qualityOfTables()[t]
}

// qualityOfTables maps the quantization tables Go's encoder writes at each
// quality to that quality (the first, where two qualities round alike).
var qualityOfTables = sync.OnceValue(func() map[string]int {
	m := map[string]int{}
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for q := 1; q <= 100; q++ {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
			continue
		}
		if t := quantTables(buf.Bytes()); t != "" && m[t] == 0 {
			m[t] = q
		}
	}
	return m
})

// quantTables is JPEG b's 8-bit quantization tables, each as its id and 64
// steps in zigzag order, in the order defined, read from the markers
// before the first scan; "" when b is no JPEG, its markers do not parse,
// or a table has 16-bit steps.
func quantTables(b []byte) string {
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return ""
	}
	var out []byte
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xff {
			return ""
		}
		m := b[i+1]
		if m == 0xff { // fill byte
			i++
			continue
		}
		if m == 0xda || m == 0xd9 { // start of scan, end of image
			break
		}
		n := int(b[i+2])<<8 | int(b[i+3])
		if n < 2 || i+2+n > len(b) {
			return ""
		}
		if m == 0xdb {
			for seg := b[i+4 : i+2+n]; len(seg) > 0; seg = seg[65:] {
				if len(seg) < 65 || seg[0]>>4 != 0 {
					return ""
				}
				out = append(out, seg[:65]...)
			}
		}
		i += 2 + n
	}
	return string(out)
}

// CheckImage reports whether b is a JPEG or PNG with sane dimensions, as
// every stored frame and screenshot must be (audit scan reads it).
func CheckImage(b []byte) error {
	_, err := frameConfig(b)
	return err
}

// frameConfig reads a JPEG's or PNG's header and dimensions, refusing
// other formats and images too large to decode safely.
func frameConfig(b []byte) (image.Config, error) {
	var cfg image.Config
	var err error
	switch {
	case bytes.HasPrefix(b, []byte("\xff\xd8")):
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(b))
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		cfg, err = png.DecodeConfig(bytes.NewReader(b))
	default:
		return cfg, fmt.Errorf("not a JPEG or PNG image")
	}
	if err != nil {
		return cfg, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxFramePixels {
		return cfg, fmt.Errorf("image size out of bounds")
	}
	return cfg, nil
}

// decodeFrame decodes a JPEG or PNG whose header frameConfig accepts.
func decodeFrame(b []byte) (image.Image, error) {
	if _, err := frameConfig(b); err != nil {
		return nil, err
	}
	if bytes.HasPrefix(b, []byte("\xff\xd8")) {
		return jpeg.Decode(bytes.NewReader(b))
	}
	return png.Decode(bytes.NewReader(b))
}

// paintMasks copies img and paints each rectangle, given in a width×height
// coordinate space, scaled to the image's actual size and clipped to it.
func paintMasks(img image.Image, width, height int, masks []event.Rect, roundOut bool, ch string) (*image.RGBA, []Finding) {
	b := img.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(out, out.Bounds(), img, b.Min, draw.Src)
	sx, sy := 1.0, 1.0
	if width > 0 && height > 0 {
		sx, sy = float64(b.Dx())/float64(width), float64(b.Dy())/float64(height)
	}
	fill := image.NewUniform(MaskColor)
	findings := make([]Finding, 0, len(masks))
	block := 1
	if roundOut {
		block = jpegBlock
	}
	for i, m := range masks {
		draw.Draw(out, maskRect(m, sx, sy, block, b.Dx(), b.Dy()), fill, image.Point{}, draw.Src)
		findings = append(findings, Finding{Rule: "frame:mask", Channel: ch, Pointer: "/masks/" + strconv.Itoa(i)})
	}
	return out, findings
}

// maskRect is mask m in a width×height picture: scaled by sx and sy,
// rounded outward to whole blocks of block pixels (1: to whole pixels) so
// a mask never shrinks and, re-encoded, no codec block mixes masked and
// unmasked pixels, and clipped to the picture (possibly empty).
func maskRect(m event.Rect, sx, sy float64, block, width, height int) image.Rectangle {
	// Float arithmetic: X+W cannot overflow.
	k := float64(block)
	x0 := math.Floor(math.Floor(float64(m.X)*sx)/k) * k
	y0 := math.Floor(math.Floor(float64(m.Y)*sy)/k) * k
	x1 := math.Ceil(math.Ceil((float64(m.X)+float64(m.W))*sx)/k) * k
	y1 := math.Ceil(math.Ceil((float64(m.Y)+float64(m.H))*sy)/k) * k
	return image.Rect(frameClamp(x0, width), frameClamp(y0, height), frameClamp(x1, width), frameClamp(y1, height))
}

func frameClamp(v float64, max int) int {
	switch {
	case math.IsNaN(v) || v <= 0:
		return 0
	case v >= float64(max):
		return max
	}
	return int(v)
}

// redactVideo learns a video event's masks for the GOPs completed later.
// The chunk's bytes are ingest's (it parses them into GOPs and calls
// RedactGOP for each), so the event itself is stored unchanged.
func (r *Redactor) redactVideo(d *event.Decoded) (Result, error) {
	v, ok := d.Payload.(*event.Video)
	if !ok {
		return Result{}, fmt.Errorf("redact: video event without a video payload")
	}
	if err := r.vmasks.add(v.Masks, true); err != nil {
		return Result{}, err
	}
	return Result{}, nil
}
