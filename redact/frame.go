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

	"github.com/flightrec/flightrec/event"
)

// MaskColor is the colour mask rectangles are painted with.
var MaskColor = color.RGBA{R: 0, G: 0, B: 0, A: 255}

// JPEGQuality is the quality masked JPEG frames are re-encoded at.
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
		err = jpeg.Encode(&buf, out, &jpeg.Options{Quality: JPEGQuality})
	} else {
		err = (&png.Encoder{CompressionLevel: png.DefaultCompression}).Encode(&buf, out)
	}
	if err != nil {
		return Result{}, fmt.Errorf("redact: re-encoding a masked %s: %w", ch, err)
	}
	return Result{Image: buf.Bytes(), Findings: findings}, nil
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
