// Package jpegdelta keeps a baseline JPEG as a lossless delta against
// another of the same geometry: the MCUs whose DCT coefficients differ
// from the base's, entropy-coded with the frame's own Huffman tables, and
// a map of which they are. The frame is rebuilt by decoding the base's
// coefficients, putting the delta's MCUs over them, and entropy-coding
// the whole scan again with the frame's tables: byte for byte the JPEG it
// was made from, which Encode checks before it returns a delta.
//
// Why coefficients and not bytes: consecutive screencast frames of a page
// differ in a few MCUs (a caret, a field's text), but a JPEG's entropy-
// coded data is a bit stream, so everything after the first changed MCU
// is shifted by some bits and shares no bytes with the frame before. A
// byte delta (zstd with the base as its dictionary) saves only the prefix
// up to the first change; this saves every MCU that did not change.
//
// Only what Chromium and libjpeg write is taken: baseline (SOF0) or
// extended sequential Huffman (SOF1) 8-bit frames with one interleaved
// scan of every component and no restart intervals. Anything else is
// ErrNotApplicable, and its caller keeps the frame as it was.
package jpegdelta

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrNotApplicable is returned by Encode for a blob that is not a JPEG
// this package can rebuild exactly, or whose base does not match it.
var ErrNotApplicable = errors.New("jpegdelta: not applicable")

// ErrDamaged is returned by Decode for a delta that does not decode.
var ErrDamaged = errors.New("jpegdelta: damaged delta")

// maxBlocks bounds the 8×8 blocks of a frame (64 coefficients of 2 bytes
// each: 32 MiB), and so what a crafted header can make a reader allocate;
// Chromium's 800×500 screencast frames have about 9,400.
const maxBlocks = 1 << 18

type huffTable struct {
	// decoding: the canonical code's bounds per length
	maxCode [18]int32 // -1: no code of that length
	valPtr  [17]int32
	minCode [17]int32
	vals    []byte
	// lut maps the next lutBits bits to a code of at most that many
	// bits: its length<<8 | its symbol (0: a longer code).
	lut [1 << lutBits]uint16
	// encoding
	code [256]uint16
	size [256]uint8
}

const lutBits = 9

func buildHuff(counts []byte, vals []byte) (*huffTable, error) {
	h := &huffTable{vals: vals}
	code, k := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		n := int32(counts[l-1])
		if code+n > 1<<l {
			return nil, fmt.Errorf("bad Huffman table")
		}
		h.valPtr[l] = k
		h.minCode[l] = code
		if n == 0 {
			h.maxCode[l] = -1
		} else {
			h.maxCode[l] = code + n - 1
			for i := int32(0); i < n; i++ {
				s := vals[k+i]
				h.code[s] = uint16(code + i)
				h.size[s] = uint8(l)
				if l <= lutBits {
					at := int(code+i) << (lutBits - l)
					for x := range 1 << (lutBits - l) {
						h.lut[at+x] = uint16(l)<<8 | uint16(s)
					}
				}
			}
		}
		code += n
		k += n
		code <<= 1
	}
	h.maxCode[17] = 1 << 30
	return h, nil
}

type component struct {
	id     byte
	h, v   int
	dc, ac *huffTable
	bw, bh int // blocks per row and column of the MCU grid
	coef   []int16
}

// frame is a parsed JPEG: its bytes before and after the entropy-coded
// scan, the geometry, and (once decoded) every block's coefficients in
// zigzag order.
type frame struct {
	header       []byte // the bytes before the entropy-coded data
	trailer      []byte // ... and after it
	width        int
	height       int
	comps        []*component
	mcux, mcuy   int
	interleaved  bool
	entropyBytes []byte // the scan's data without stuffing
}

// parseHeader reads data's markers up to and including the SOS, and
// (unless headerOnly: data ends with the SOS) finds the end of the scan's
// entropy-coded data.
func parseHeader(data []byte, headerOnly bool) (*frame, error) {
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return nil, ErrNotApplicable
	}
	f := &frame{}
	var dc, ac [4]*huffTable
	sof := false
	i := 2
	for {
		if i+4 > len(data) || data[i] != 0xFF {
			return nil, ErrNotApplicable
		}
		m := data[i+1]
		if m == 0xFF { // fill byte
			i++
			continue
		}
		l := int(data[i+2])<<8 | int(data[i+3])
		if l < 2 || i+2+l > len(data) {
			return nil, ErrNotApplicable
		}
		seg := data[i+4 : i+2+l]
		i += 2 + l
		switch {
		case m == 0xC0 || m == 0xC1:
			if sof || len(seg) < 6 || seg[0] != 8 {
				return nil, ErrNotApplicable
			}
			sof = true
			f.height = int(seg[1])<<8 | int(seg[2])
			f.width = int(seg[3])<<8 | int(seg[4])
			n := int(seg[5])
			if f.width == 0 || f.height == 0 || n < 1 || n > 4 || len(seg) != 6+3*n {
				return nil, ErrNotApplicable
			}
			for c := range n {
				hv := seg[7+3*c]
				comp := &component{id: seg[6+3*c], h: int(hv >> 4), v: int(hv & 15)}
				if comp.h < 1 || comp.h > 4 || comp.v < 1 || comp.v > 4 {
					return nil, ErrNotApplicable
				}
				f.comps = append(f.comps, comp)
			}
		case m == 0xC4:
			for len(seg) > 0 {
				if len(seg) < 17 {
					return nil, ErrNotApplicable
				}
				tc, th := seg[0]>>4, seg[0]&15
				total := 0
				for _, c := range seg[1:17] {
					total += int(c)
				}
				if tc > 1 || th > 3 || total > 256 || len(seg) < 17+total {
					return nil, ErrNotApplicable
				}
				h, err := buildHuff(seg[1:17], seg[17:17+total])
				if err != nil {
					return nil, ErrNotApplicable
				}
				if tc == 0 {
					dc[th] = h
				} else {
					ac[th] = h
				}
				seg = seg[17+total:]
			}
		case m == 0xDD: // DRI
			if len(seg) != 2 || seg[0]|seg[1] != 0 {
				return nil, ErrNotApplicable
			}
		case m == 0xDA:
			if !sof || len(seg) < 1 {
				return nil, ErrNotApplicable
			}
			n := int(seg[0])
			if n != len(f.comps) || len(seg) != 4+2*n {
				return nil, ErrNotApplicable
			}
			for c := range n {
				comp := f.comps[c]
				if seg[1+2*c] != comp.id {
					return nil, ErrNotApplicable
				}
				td, ta := seg[2+2*c]>>4, seg[2+2*c]&15
				if td > 3 || ta > 3 || dc[td] == nil || ac[ta] == nil {
					return nil, ErrNotApplicable
				}
				comp.dc, comp.ac = dc[td], ac[ta]
			}
			// Baseline spectral selection and approximation.
			if seg[1+2*n] != 0 || seg[2+2*n] != 63 || seg[3+2*n] != 0 {
				return nil, ErrNotApplicable
			}
			if err := f.layout(); err != nil {
				return nil, err
			}
			f.header = data[:i]
			if headerOnly {
				if i != len(data) {
					return nil, ErrNotApplicable
				}
				return f, nil
			}
			return f, f.findScanEnd(data, i)
		case m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			return nil, ErrNotApplicable // progressive, lossless, arithmetic
		case m == 0xD8 || m == 0xD9 || (m >= 0xD0 && m <= 0xD7) || m == 0x01:
			return nil, ErrNotApplicable
		}
	}
}

func (f *frame) layout() error {
	hmax, vmax := 1, 1
	for _, c := range f.comps {
		hmax, vmax = max(hmax, c.h), max(vmax, c.v)
	}
	f.interleaved = len(f.comps) > 1
	blocks := 0
	if f.interleaved {
		f.mcux = (f.width + 8*hmax - 1) / (8 * hmax)
		f.mcuy = (f.height + 8*vmax - 1) / (8 * vmax)
		for _, c := range f.comps {
			c.bw, c.bh = f.mcux*c.h, f.mcuy*c.v
			blocks += c.bw * c.bh
		}
	} else {
		c := f.comps[0]
		// A single component's scan runs over its own blocks, not the
		// MCU grid.
		w := (f.width*c.h + hmax - 1) / hmax
		h := (f.height*c.v + vmax - 1) / vmax
		c.bw, c.bh = (w+7)/8, (h+7)/8
		f.mcux, f.mcuy = c.bw, c.bh
		blocks = c.bw * c.bh
	}
	if blocks > maxBlocks {
		return ErrNotApplicable
	}
	return nil
}

// mcus is the number of MCUs in the scan.
func (f *frame) mcus() int { return f.mcux * f.mcuy }

// findScanEnd finds where the entropy-coded data ends (the first marker
// that is not a stuffed 0xFF), and unstuffs it.
func (f *frame) findScanEnd(d []byte, start int) error {
	out := make([]byte, 0, len(d)-start)
	i := start
	for i < len(d) {
		b := d[i]
		if b != 0xFF {
			out = append(out, b)
			i++
			continue
		}
		if i+1 < len(d) && d[i+1] == 0x00 {
			out = append(out, 0xFF)
			i += 2
			continue
		}
		break
	}
	if i >= len(d) {
		return ErrNotApplicable // no EOI
	}
	f.trailer = d[i:]
	f.entropyBytes = out
	return nil
}

// bitReader reads the unstuffed entropy-coded bits; past the end it reads
// ones (what a scan is padded with), and counts them so that a decode
// that ran past the data is refused.
type bitReader struct {
	data []byte
	pos  int
	acc  uint64
	n    uint
	over int
}

func (r *bitReader) fill() {
	for r.n <= 56 {
		var b byte = 0xFF
		if r.pos < len(r.data) {
			b = r.data[r.pos]
			r.pos++
		} else {
			r.over++
		}
		r.acc |= uint64(b) << (56 - r.n)
		r.n += 8
	}
}

func (r *bitReader) bits(s uint) int32 {
	if s == 0 {
		return 0
	}
	if r.n < s {
		r.fill()
	}
	v := int32(r.acc >> (64 - s))
	r.acc <<= s
	r.n -= s
	return v
}

func (r *bitReader) decode(h *huffTable) (byte, error) {
	if r.n < 16 {
		r.fill()
	}
	if e := h.lut[r.acc>>(64-lutBits)]; e != 0 {
		l := uint(e >> 8)
		r.acc <<= l
		r.n -= l
		return byte(e), nil
	}
	code := int32(0)
	for l := 1; l <= 16; l++ {
		code = code<<1 | int32(r.acc>>63)
		r.acc <<= 1
		r.n--
		if code <= h.maxCode[l] {
			k := h.valPtr[l] + code - h.minCode[l]
			if int(k) >= len(h.vals) {
				return 0, ErrNotApplicable
			}
			return h.vals[k], nil
		}
	}
	return 0, ErrNotApplicable
}

// exhausted reports whether the reader has read past its data (beyond
// the padding of its last byte).
func (r *bitReader) exhausted() bool {
	// over counts bytes fed past the end; those still unread in acc are
	// fine.
	return r.over > 0 && uint(r.over)*8 > r.n
}

func extend(v int32, s uint) int32 {
	if s == 0 {
		return 0
	}
	if v < 1<<(s-1) {
		return v - (1 << s) + 1
	}
	return v
}

// decodeBlock reads one block's coefficients (zigzag order) into b; dc is
// the component's DC predictor, updated.
func decodeBlock(r *bitReader, c *component, b []int16, pred *int32) error {
	s, err := r.decode(c.dc)
	if err != nil {
		return err
	}
	if s > 15 {
		return ErrNotApplicable
	}
	*pred += extend(r.bits(uint(s)), uint(s))
	if *pred < -32768 || *pred > 32767 {
		return ErrNotApplicable
	}
	b[0] = int16(*pred)
	for k := 1; k < 64; {
		rs, err := r.decode(c.ac)
		if err != nil {
			return err
		}
		run, size := int(rs>>4), uint(rs&15)
		if size == 0 {
			if run != 15 {
				break
			}
			k += 16
			continue
		}
		k += run
		if k > 63 {
			return ErrNotApplicable
		}
		b[k] = int16(extend(r.bits(size), size))
		k++
	}
	return nil
}

// blockAt calls fn for each block of MCU m: its component and the block's
// coefficients.
func (f *frame) eachBlock(m int, fn func(ci int, b []int16) error) (err error) {
	f.mcuRuns(m, func(ci, lo, hi int) {
		for i := lo; i < hi && err == nil; i += 64 {
			err = fn(ci, f.comps[ci].coef[i:i+64])
		}
	})
	return err
}

// mcuRuns calls fn for each run of consecutive coefficients that MCU m
// holds in component ci's array (a row of its blocks in the MCU).
func (f *frame) mcuRuns(m int, fn func(ci, lo, hi int)) {
	if !f.interleaved {
		fn(0, m*64, m*64+64)
		return
	}
	mx, my := m%f.mcux, m/f.mcux
	for ci, c := range f.comps {
		for y := range c.v {
			lo := ((my*c.v+y)*c.bw + mx*c.h) * 64
			fn(ci, lo, lo+c.h*64)
		}
	}
}

func (f *frame) alloc() {
	for _, c := range f.comps {
		c.coef = make([]int16, c.bw*c.bh*64)
	}
}

// decode decodes every block of f's scan.
func (f *frame) decode() error {
	f.alloc()
	r := &bitReader{data: f.entropyBytes}
	preds := make([]int32, len(f.comps))
	for m := range f.mcus() {
		err := f.eachBlock(m, func(ci int, b []int16) error {
			return decodeBlock(r, f.comps[ci], b, &preds[ci])
		})
		if err != nil {
			return err
		}
		if r.exhausted() {
			return ErrNotApplicable
		}
	}
	return nil
}

// bitWriter writes entropy-coded bits, stuffing a zero after each 0xFF
// when stuff is set, and pads the last byte with ones.
type bitWriter struct {
	out   []byte
	acc   uint64
	n     uint
	stuff bool
}

func (w *bitWriter) put(code uint32, size uint) {
	if size == 0 {
		return
	}
	w.acc |= uint64(code&(1<<size-1)) << (64 - w.n - size)
	w.n += size
	if w.n >= 32 {
		w.flush(32)
	}
}

// flush writes the accumulator's first bits (a multiple of 8, at most
// what it holds).
func (w *bitWriter) flush(bits uint) {
	for ; bits > 0; bits -= 8 {
		b := byte(w.acc >> 56)
		w.out = append(w.out, b)
		if b == 0xFF && w.stuff {
			w.out = append(w.out, 0)
		}
		w.acc <<= 8
		w.n -= 8
	}
}

// align pads to a byte boundary with ones, and writes out every whole
// byte.
func (w *bitWriter) align() {
	if pad := (8 - w.n%8) % 8; pad > 0 {
		w.put(1<<pad-1, pad)
	}
	w.flush(w.n)
}

func magnitude(v int32) (bitsOut uint32, s uint) {
	a := v
	if a < 0 {
		a = -a
		v--
	}
	s = uint(bits.Len32(uint32(a)))
	return uint32(v) & (1<<s - 1), s
}

func encodeBlock(w *bitWriter, c *component, b []int16, pred *int32) error {
	diff := int32(b[0]) - *pred
	*pred = int32(b[0])
	v, s := magnitude(diff)
	if c.dc.size[s] == 0 {
		return ErrNotApplicable
	}
	w.put(uint32(c.dc.code[s])<<s|v, uint(c.dc.size[s])+s)
	run := 0
	for k := 1; k < 64; k++ {
		if b[k] == 0 {
			run++
			continue
		}
		for run > 15 {
			if c.ac.size[0xF0] == 0 {
				return ErrNotApplicable
			}
			w.put(uint32(c.ac.code[0xF0]), uint(c.ac.size[0xF0]))
			run -= 16
		}
		v, s := magnitude(int32(b[k]))
		sym := byte(run<<4) | byte(s)
		if s > 15 || c.ac.size[sym] == 0 {
			return ErrNotApplicable
		}
		w.put(uint32(c.ac.code[sym])<<s|v, uint(c.ac.size[sym])+s)
		run = 0
	}
	if run > 0 {
		if c.ac.size[0] == 0 {
			return ErrNotApplicable
		}
		w.put(uint32(c.ac.code[0]), uint(c.ac.size[0]))
	}
	return nil
}

// encode writes f's whole file: its bytes before the scan, the scan
// entropy-coded from its coefficients, and its bytes after.
func (f *frame) encode(sizeHint int) ([]byte, error) {
	return f.encodeAtMost(sizeHint, 1<<62)
}

var errTooLarge = errors.New("larger than its bound")

// encodeAtMost is encode, refusing a file larger than limit as soon as
// it is.
func (f *frame) encodeAtMost(sizeHint, limit int) ([]byte, error) {
	w := &bitWriter{out: append(make([]byte, 0, min(sizeHint, limit)), f.header...), stuff: true}
	preds := make([]int32, len(f.comps))
	for m := range f.mcus() {
		err := f.eachBlock(m, func(ci int, b []int16) error {
			return encodeBlock(w, f.comps[ci], b, &preds[ci])
		})
		if err != nil {
			return nil, err
		}
		if len(w.out) > limit {
			return nil, errTooLarge
		}
	}
	w.align()
	out := append(w.out, f.trailer...)
	if len(out) > limit {
		return nil, errTooLarge
	}
	return out, nil
}

// align drops the rest of the byte being read.
func (r *bitReader) align() {
	d := r.n % 8
	r.acc <<= d
	r.n -= d
}
