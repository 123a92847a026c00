package dom

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A finished recording's checkpoint set is kept in the store (a derived
// blob, playback/domview.go), so that the first view after a restart
// reads one blob and restores one checkpoint instead of replaying the
// whole recording. Its binary form:
//
//	set   = "FRCP" | uvarint format | uvarint every | uvarint through |
//	        uvarint lastSeq | varint lastStep |
//	        uvarint events | uvarint kept | uvarint ignored | uvarint malformed |
//	        varint skipped | uvarint nodes |
//	        uvarint n | (uvarint seq | bytes state | bytes block){n} |
//	        uvarint m | (varint step | uvarint last | uvarint upto){m}
//	bytes = uvarint length | bytes
//
// states and blocks are as a set keeps them in memory (zstd of the state
// form in encode.go, of the event blocks in seal), so restoring copies
// them and decompresses nothing until a seek. through is what the caller
// read the recording through (Cache's cursor), kept so a restored set is
// not filled again.

const setMagic = "FRCP"

// SetFormat is the version of the stored form, the state form (encode.go)
// and the block form (seal) together: a change to any of them bumps it,
// and a set stored under another version is rebuilt (ErrSetFormat), not
// read.
const SetFormat = 1

// ErrSetFormat is wrapped by UnmarshalCheckpoints for a set stored under
// another format version: not damage, just a set to build again.
var ErrSetFormat = errors.New("dom: stored checkpoint set has another format version")

// errSet is a stored set that does not decode.
var errSet = errors.New("dom: corrupt stored checkpoint set")

// Marshal seals the set (its events since the last checkpoint become that
// checkpoint's block, and the live state a checkpoint) and returns its
// stored form, through being what the recording was read through.
func (c *Checkpoints) Marshal(through uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seal()
	b := []byte(setMagic)
	u := func(v uint64) { b = binary.AppendUvarint(b, v) }
	v := func(x int64) { b = binary.AppendVarint(b, x) }
	by := func(p []byte) { u(uint64(len(p))); b = append(b, p...) }
	u(SetFormat)
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
	for _, cp := range c.cps {
		u(cp.seq)
		by(cp.state)
		by(cp.block)
	}
	u(uint64(len(c.steps)))
	for _, s := range c.steps {
		v(int64(s.step))
		u(s.last)
		u(s.upto)
	}
	return b
}

// UnmarshalCheckpoints restores a set from its stored form, and returns
// the seq through which the recording had been read. The live state is
// not decoded (a seek restores a checkpoint of its own); it is restored
// from the last checkpoint should the set be extended. A set of another
// format version is ErrSetFormat; one that does not decode, another error.
func UnmarshalCheckpoints(b []byte) (*Checkpoints, uint64, error) {
	r := setReader{b: b}
	if len(b) < len(setMagic) || string(b[:len(setMagic)]) != setMagic {
		return nil, 0, errSet
	}
	r.b = b[len(setMagic):]
	if f := r.u(); r.bad || f != SetFormat {
		return nil, 0, fmt.Errorf("%w (%d, this server reads %d)", ErrSetFormat, f, SetFormat)
	}
	every := r.u()
	if every == 0 || every > 1<<20 {
		return nil, 0, errSet
	}
	c := &Checkpoints{every: int(every), gap: max(1, int(every)/4)}
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
		return nil, 0, errSet
	}
	c.cps = make([]*checkpoint, 0, n)
	for range n {
		cp := &checkpoint{seq: r.u(), state: r.bytes(), block: r.bytes()}
		// Seqs rise from the first checkpoint's 0, the empty page, so that
		// every seek finds one at or before it.
		if r.bad || len(cp.state) == 0 || (len(c.cps) == 0) != (cp.seq == 0) ||
			(len(c.cps) > 0 && cp.seq <= c.cps[len(c.cps)-1].seq) {
			return nil, 0, errSet
		}
		if len(cp.block) == 0 {
			cp.block = nil
		}
		c.cps = append(c.cps, cp)
		c.sealed += int64(len(cp.state) + len(cp.block))
	}
	// The last checkpoint is the end of the set: no events follow it.
	if c.cps[len(c.cps)-1].block != nil {
		return nil, 0, errSet
	}
	m := r.u()
	if r.bad || m > uint64(len(r.b)) {
		return nil, 0, errSet
	}
	c.steps = make([]stepMark, 0, m)
	for range m {
		c.steps = append(c.steps, stepMark{step: int(r.v()), last: r.u(), upto: r.u()})
	}
	if r.bad || len(r.b) != 0 {
		return nil, 0, errSet
	}
	return c, through, nil
}

// restoreLive decodes the last checkpoint as the live state of a restored
// set, before an event is added to it. The caller holds c.mu.
func (c *Checkpoints) restoreLive() error {
	if c.live != nil {
		return nil
	}
	last := c.cps[len(c.cps)-1]
	raw, err := decompress(last.state)
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
