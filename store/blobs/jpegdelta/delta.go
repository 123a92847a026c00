package jpegdelta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// A delta is
//
//	"JD\x01" | uvarint n | the frame's n bytes before its scan (markers,
//	tables, SOS) | uvarint n | its n bytes after the scan (EOI) |
//	the MCU map: one bit per MCU in scan order, least significant bit
//	first, set for an MCU coded here | the coded MCUs' blocks, entropy-
//	coded with the frame's tables as in a scan (DC predicted from the
//	block before in scan order, whether coded here or taken from the
//	base), without stuffing, each run of consecutive coded MCUs starting
//	on a byte and padded with ones
//
// Starting each run on a byte makes identical MCUs (a page's flat
// background) identical bytes, which the compressor the delta is kept
// in finds.
const magic = "JD\x01"

// Frame is a parsed JPEG that this package rebuilds byte for byte from
// its coefficients.
type Frame struct {
	f    *frame
	size int
}

// Parse decodes data's coefficients, and checks that they entropy-code
// back to data; ErrNotApplicable when data is not a JPEG this package
// takes, or does not come back exactly.
func Parse(data []byte) (*Frame, error) {
	f, err := parse(data)
	if err != nil {
		return nil, err
	}
	again, err := f.encode(len(data))
	if err != nil || !bytes.Equal(again, data) {
		return nil, ErrNotApplicable
	}
	f.entropyBytes = nil // only the coefficients are needed now
	return &Frame{f: f, size: len(data)}, nil
}

// Looks reports whether data starts as a JPEG does: a cheap test before
// Parse.
func Looks(data []byte) bool {
	return len(data) > 4 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF
}

// Delta returns the delta that rebuilds frame from base, or
// ErrNotApplicable when their geometries differ. The delta is checked:
// it rebuilds frame.
func Delta(frame, base *Frame) ([]byte, error) {
	f, b := frame.f, base.f
	if !sameGeometry(f, b) {
		return nil, ErrNotApplicable
	}
	out := append([]byte(magic), binary.AppendUvarint(nil, uint64(len(f.header)))...)
	out = append(out, f.header...)
	out = binary.AppendUvarint(out, uint64(len(f.trailer)))
	out = append(out, f.trailer...)
	n := f.mcus()
	mapAt := len(out)
	out = append(out, make([]byte, (n+7)/8)...)
	w := &bitWriter{out: out}
	preds := make([]int32, len(f.comps))
	prev := false
	for m := range n {
		if sameMCU(f, b, m) {
			f.mcuRuns(m, func(ci, _, hi int) { preds[ci] = lastDC(f, ci, hi) })
			prev = false
			continue
		}
		w.out[mapAt+m/8] |= 1 << (m % 8)
		if !prev {
			w.align()
		}
		prev = true
		err := f.eachBlock(m, func(ci int, blk []int16) error {
			return encodeBlock(w, f.comps[ci], blk, &preds[ci])
		})
		if err != nil {
			return nil, ErrNotApplicable
		}
	}
	w.align()
	delta := w.out
	// The check: the delta, read as Apply reads it, gives the frame's
	// coefficients, which Parse found to code back to its bytes.
	check, err := rebuildFrame(delta, b)
	if err != nil || !sameCoefficients(check, f) || !bytes.Equal(check.header, f.header) || !bytes.Equal(check.trailer, f.trailer) {
		return nil, ErrNotApplicable
	}
	return delta, nil
}

// Encode returns the delta that rebuilds data from base: Parse of both,
// then Delta.
func Encode(data, base []byte) ([]byte, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	b, err := Parse(base)
	if err != nil {
		return nil, err
	}
	return Delta(f, b)
}

func sameCoefficients(a, b *frame) bool {
	if len(a.comps) != len(b.comps) {
		return false
	}
	for i, c := range a.comps {
		if !slices.Equal(c.coef, b.comps[i].coef) {
			return false
		}
	}
	return true
}

// Decode returns the JPEG that delta rebuilds from base; one larger than
// maxSize is refused.
func Decode(delta, base []byte, maxSize int) ([]byte, error) {
	b, err := Open(base)
	if err != nil {
		return nil, err
	}
	f, err := Apply(delta, b)
	if err != nil {
		return nil, err
	}
	return f.Bytes(maxSize)
}

// Open decodes the coefficients of base, a JPEG that some delta was made
// against (its bytes known good: it is not checked to code back exactly,
// as Parse does).
func Open(base []byte) (*Frame, error) {
	b, err := parse(base)
	if err != nil {
		return nil, fmt.Errorf("%w: its base: %v", ErrDamaged, err)
	}
	b.entropyBytes = nil
	return &Frame{f: b, size: len(base)}, nil
}

// Apply returns the frame delta rebuilds from base, in coefficients: a
// chain of deltas is applied one after another without coding the frames
// between (Bytes codes the last).
func Apply(delta []byte, base *Frame) (*Frame, error) {
	f, err := rebuildFrame(delta, base.f)
	if err != nil {
		return nil, err
	}
	return &Frame{f: f, size: base.size}, nil
}

// Bytes entropy-codes the frame: its JPEG. One larger than maxSize is
// refused (ErrDamaged) as soon as it is.
func (fr *Frame) Bytes(maxSize int) ([]byte, error) {
	out, err := fr.f.encodeAtMost(fr.size+64, maxSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return out, nil
}

// Header is the frame's bytes before its scan: what a delta against it
// most likely repeats (quantization and Huffman tables).
func (fr *Frame) Header() []byte { return fr.f.header }

// Coefficients is how many bytes the frame's coefficients take in memory.
func (fr *Frame) Coefficients() int {
	n := 0
	for _, c := range fr.f.comps {
		n += 2 * len(c.coef)
	}
	return n
}

func parse(data []byte) (*frame, error) {
	f, err := parseHeader(data, false)
	if err != nil {
		return nil, err
	}
	// Each block takes at least two bits (its DC and its end), so a
	// small file cannot name a huge frame and make its reader allocate
	// for it.
	blocks := 0
	for _, c := range f.comps {
		blocks += c.bw * c.bh
	}
	if blocks > 4*len(f.entropyBytes)+64 {
		return nil, ErrNotApplicable
	}
	if err := f.decode(); err != nil {
		return nil, err
	}
	return f, nil
}

func sameGeometry(a, b *frame) bool {
	if a.width != b.width || a.height != b.height || len(a.comps) != len(b.comps) {
		return false
	}
	for i, c := range a.comps {
		if c.h != b.comps[i].h || c.v != b.comps[i].v {
			return false
		}
	}
	return true
}

// lastDC is the DC of the block that ends at hi in component ci: the
// predictor of the component's next block, after a run of an MCU taken
// from the base.
func lastDC(f *frame, ci, hi int) int32 { return int32(f.comps[ci].coef[hi-64]) }

// sameMCU reports whether MCU m of f and b (of the same geometry) holds
// the same coefficients.
func sameMCU(f, b *frame, m int) bool {
	same := true
	f.mcuRuns(m, func(ci, lo, hi int) {
		same = same && slices.Equal(f.comps[ci].coef[lo:hi], b.comps[ci].coef[lo:hi])
	})
	return same
}

// rebuildFrame reads delta against b: the frame's header, trailer and
// coefficients.
func rebuildFrame(delta []byte, b *frame) (*frame, error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrDamaged, why) }
	if !bytes.HasPrefix(delta, []byte(magic)) {
		return nil, bad("no magic")
	}
	rest := delta[len(magic):]
	take := func() ([]byte, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, false
		}
		out := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return out, true
	}
	header, ok := take()
	if !ok {
		return nil, bad("its header")
	}
	trailer, ok := take()
	if !ok {
		return nil, bad("its trailer")
	}
	f, err := parseHeader(header, true)
	if err != nil {
		return nil, bad("its header does not parse")
	}
	f.trailer = trailer
	if !sameGeometry(f, b) {
		return nil, bad("its geometry is not its base's")
	}
	n := f.mcus()
	if len(rest) < (n+7)/8 {
		return nil, bad("its MCU map")
	}
	mcuMap := rest[:(n+7)/8]
	f.alloc()
	r := &bitReader{data: rest[(n+7)/8:]}
	preds := make([]int32, len(f.comps))
	prev := false
	for m := range n {
		if mcuMap[m/8]&(1<<(m%8)) == 0 {
			f.mcuRuns(m, func(ci, lo, hi int) {
				copy(f.comps[ci].coef[lo:hi], b.comps[ci].coef[lo:hi])
				preds[ci] = lastDC(f, ci, hi)
			})
			prev = false
			continue
		}
		if !prev {
			r.align()
		}
		prev = true
		err := f.eachBlock(m, func(ci int, blk []int16) error {
			return decodeBlock(r, f.comps[ci], blk, &preds[ci])
		})
		if err != nil || r.exhausted() {
			return nil, bad("its coded MCUs")
		}
	}
	return f, nil
}
