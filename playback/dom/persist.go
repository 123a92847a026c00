package dom

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// A finished recording's checkpoint set is kept in the store (a derived
// blob, playback/domkeep.go), so that the first view after a restart
// reads the set's head and one checkpoint instead of replaying the whole
// recording. Its binary form:
//
//	set     = "FRCP" | uvarint format | uvarint headLen | head | sha256(head) | section{n}
//	head    = uvarint every | uvarint through | uvarint lastSeq | varint lastStep |
//	          uvarint events | uvarint kept | uvarint ignored | uvarint malformed |
//	          varint skipped | uvarint nodes |
//	          uvarint n | (uvarint seq | uvarint stateLen | uvarint blockLen | sha256(state | block)){n} |
//	          uvarint m | (varint step | uvarint last | uvarint upto){m}
//	section = state | block
//
// states and blocks are as a set keeps them in memory (zstd of the state
// form in encode.go, of the event blocks in seal). Opening a stored set
// reads and verifies the head only (tens of bytes a checkpoint and a few a
// step, so a few kilobytes even for a long recording); a seek reads the
// one section it restores, at its offset, and checks it against its
// digest before decompressing anything, so the first view costs the same
// whatever the recording's length, and a flipped bit anywhere is an error
// (ErrStored: the set is rebuilt), never another page. through is what
// the caller read the recording through (Cache's cursor), kept so a
// restored set is not filled again.

const setMagic = "FRCP"

// SetFormat is the version of the stored form, the state form (encode.go)
// and the block form (seal) together: a change to any of them bumps it,
// and a set stored under another version is rebuilt (ErrSetFormat), not
// read. 2: the head apart and digested, sections read one at a time.
const SetFormat = 2

// ErrSetFormat is wrapped by OpenCheckpoints for a set stored under
// another format version: not damage, just a set to build again.
var ErrSetFormat = errors.New("dom: stored checkpoint set has another format version")

// ErrStored is wrapped for a stored set, or a section of one, that cannot
// be read or does not match its digest: the set is not to be trusted, and
// is to be built again from the recording.
var ErrStored = errors.New("dom: stored checkpoint set is damaged or unreadable")

// firstRead is what OpenCheckpoints reads first: the head of a set of a
// few thousand checkpoints or steps, in one read.
const firstRead = 64 << 10

// maxHead bounds a head's length, so a damaged length never makes a
// reader allocate more (a million steps' marks fit).
const maxHead = 64 << 20

// stored is where a restored checkpoint's state and block are in the
// stored set, and their digest; state and block are read on first use.
type stored struct {
	off                int64
	stateLen, blockLen int
	sum                [sha256.Size]byte
}

// ReadAt reads len(p) bytes of a stored set at offset off (a blob's
// ReaderAt, opened per call, so a cached set holds no file open).
type ReadAt func(off int64, p []byte) error

// Marshal seals the set (its events since the last checkpoint become that
// checkpoint's block, and the live state a checkpoint) and returns its
// stored form, through being what the recording was read through.
func (c *Checkpoints) Marshal(through uint64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seal()
	var h []byte
	u := func(v uint64) { h = binary.AppendUvarint(h, v) }
	v := func(x int64) { h = binary.AppendVarint(h, x) }
	u(uint64(c.every))
	u(through)
	u(c.lastSeq)
	v(int64(c.lastStep))
	u(uint64(c.stats.Events))
	u(uint64(c.stats.Kept))
	u(uint64(c.stats.Ignored))
	u(uint64(c.stats.Malformed))
	v(c.skippedLocked())
	u(uint64(c.nodesLocked()))
	u(uint64(len(c.cps)))
	var body []byte
	for _, cp := range c.cps {
		state, block, err := c.sections(cp)
		if err != nil {
			return nil, err
		}
		u(cp.seq)
		u(uint64(len(state)))
		u(uint64(len(block)))
		sum := sha256.New()
		sum.Write(state)
		sum.Write(block)
		h = sum.Sum(h)
		body = append(append(body, state...), block...)
	}
	u(uint64(len(c.steps)))
	for _, s := range c.steps {
		v(int64(s.step))
		u(s.last)
		u(s.upto)
	}
	b := append([]byte(setMagic), binary.AppendUvarint(nil, SetFormat)...)
	b = binary.AppendUvarint(b, uint64(len(h)))
	b = append(b, h...)
	hs := sha256.Sum256(h)
	b = append(b, hs[:]...)
	return append(b, body...), nil
}

// UnmarshalCheckpoints restores a set from its stored form in memory:
// OpenCheckpoints over b.
func UnmarshalCheckpoints(b []byte) (*Checkpoints, uint64, error) {
	return OpenCheckpoints(int64(len(b)), func(off int64, p []byte) error {
		if off < 0 || off+int64(len(p)) > int64(len(b)) {
			return fmt.Errorf("read of %d bytes at %d past the end (%d)", len(p), off, len(b))
		}
		copy(p, b[off:])
		return nil
	})
}

// OpenCheckpoints restores a set from its stored form of size bytes, read
// with read, and returns the seq through which the recording had been
// read. It reads and verifies the head only; each checkpoint's state and
// block are read with read when a seek first needs them, and checked
// against their digest (ErrStored if they do not match), so read must
// stay usable while the set is. The live state is not decoded (a seek
// restores a checkpoint of its own); it is restored from the last
// checkpoint should the set be extended. A set of another format version
// is ErrSetFormat; one that does not check out, ErrStored.
func OpenCheckpoints(size int64, read ReadAt) (*Checkpoints, uint64, error) {
	bad := func(why string) (*Checkpoints, uint64, error) {
		return nil, 0, fmt.Errorf("%w: %s", ErrStored, why)
	}
	first := make([]byte, min(size, firstRead))
	if err := read(0, first); err != nil {
		return bad(err.Error())
	}
	if len(first) < len(setMagic) || string(first[:len(setMagic)]) != setMagic {
		return bad("no magic")
	}
	r := setReader{b: first[len(setMagic):]}
	if f := r.u(); r.bad || f != SetFormat {
		return nil, 0, fmt.Errorf("%w (%d, this server reads %d)", ErrSetFormat, f, SetFormat)
	}
	headLen := r.u()
	start := int64(len(first) - len(r.b)) // where the head begins
	if r.bad || headLen > maxHead || start+int64(headLen)+sha256.Size > size {
		return bad("head length")
	}
	body := start + int64(headLen) + sha256.Size // where the sections begin
	hb := first[start:min(int64(len(first)), body)]
	if int64(len(hb)) < int64(headLen)+sha256.Size {
		hb = make([]byte, headLen+sha256.Size)
		if err := read(start, hb); err != nil {
			return bad(err.Error())
		}
	}
	head := hb[:headLen]
	if sum := sha256.Sum256(head); !bytes.Equal(sum[:], hb[headLen:]) {
		return bad("the head does not match its digest")
	}
	r = setReader{b: head}
	every := r.u()
	if every == 0 || every > 1<<20 {
		return bad("interval")
	}
	c := &Checkpoints{every: int(every), gap: max(1, int(every)/4), read: read}
	through := r.u()
	c.lastSeq = r.u()
	c.lastStep = int(r.v())
	c.started = c.lastSeq > 0
	c.stats.Events = int64(r.u())
	c.stats.Kept = int64(r.u())
	c.stats.Ignored = int64(r.u())
	c.stats.Malformed = int64(r.u())
	c.restoredSkipped = r.v()
	c.restoredNodes = int(r.u())
	n := r.u()
	if r.bad || n == 0 || n > uint64(len(r.b)) { // a checkpoint takes bytes
		return bad("checkpoint count")
	}
	c.cps = make([]*checkpoint, 0, n)
	off := body
	for range n {
		cp := &checkpoint{seq: r.u(), stored: &stored{off: off}}
		sl, bl := r.u(), r.u()
		if r.bad || len(r.b) < sha256.Size || sl == 0 || sl > uint64(size) || bl > uint64(size) {
			return bad("checkpoint entry")
		}
		copy(cp.stored.sum[:], r.b)
		r.b = r.b[sha256.Size:]
		cp.stored.stateLen, cp.stored.blockLen = int(sl), int(bl)
		off += int64(sl + bl)
		// Seqs rise from the first checkpoint's 0, the empty page, so that
		// every seek finds one at or before it.
		if off > size || (len(c.cps) == 0) != (cp.seq == 0) ||
			(len(c.cps) > 0 && cp.seq <= c.cps[len(c.cps)-1].seq) {
			return bad("checkpoint entry")
		}
		c.cps = append(c.cps, cp)
	}
	// The last checkpoint is the end of the set: no events follow it; and
	// the sections fill the rest of the set.
	if c.cps[len(c.cps)-1].stored.blockLen != 0 || off != size {
		return bad("sections")
	}
	m := r.u()
	if r.bad || m > uint64(len(r.b)) {
		return bad("step count")
	}
	c.steps = make([]stepMark, 0, m)
	for range m {
		c.steps = append(c.steps, stepMark{step: int(r.v()), last: r.u(), upto: r.u()})
	}
	if r.bad || len(r.b) != 0 {
		return bad("step marks")
	}
	return c, through, nil
}

// sections returns checkpoint cp's state and block: as held for a set
// built in memory (the caller holds c.mu), read from the stored set and
// verified on first use for a restored one.
func (c *Checkpoints) sections(cp *checkpoint) (state, block []byte, err error) {
	if cp.stored == nil {
		return cp.state, cp.block, nil
	}
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	if cp.state != nil {
		return cp.state, cp.block, nil
	}
	s := cp.stored
	b := make([]byte, s.stateLen+s.blockLen)
	if err := c.read(s.off, b); err != nil {
		return nil, nil, fmt.Errorf("%w: checkpoint at seq %d: %v", ErrStored, cp.seq, err)
	}
	if sha256.Sum256(b) != s.sum {
		return nil, nil, fmt.Errorf("%w: checkpoint at seq %d does not match its digest", ErrStored, cp.seq)
	}
	cp.state, cp.block = b[:s.stateLen:s.stateLen], b[s.stateLen:]
	if s.blockLen == 0 {
		cp.block = nil
	}
	c.loadedBytes.Add(int64(len(b)))
	return cp.state, cp.block, nil
}

// restoreLive decodes the last checkpoint as the live state of a restored
// set, before an event is added to it. The caller holds c.mu.
func (c *Checkpoints) restoreLive() error {
	if c.live != nil {
		return nil
	}
	last := c.cps[len(c.cps)-1]
	state, _, err := c.sections(last)
	if err != nil {
		return err
	}
	raw, err := decompress(state)
	if err != nil {
		return fmt.Errorf("dom: checkpoint at seq %d: %w", last.seq, err)
	}
	d, err := decodeState(raw)
	if err != nil {
		return err
	}
	c.live, c.liveSize = d, int64(len(raw))
	return nil
}
func (c *Checkpoints) skippedLocked() int64 {
	if c.live == nil {
		return c.restoredSkipped
	}
	return c.live.skipped
}

func (c *Checkpoints) nodesLocked() int {
	if c.live == nil {
		return c.restoredNodes
	}
	return c.live.Nodes()
}

type setReader struct {
	b   []byte
	bad bool
}

func (r *setReader) u() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *setReader) v() int64 {
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *setReader) bytes() []byte {
	l := r.u()
	if r.bad || l > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	p := r.b[:l:l]
	r.b = r.b[l:]
	return p
}
