package dom

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// Event is one dom event of a recording: its seq, its step, and its data,
// the rrweb event as stored.
type Event struct {
	Seq  uint64
	Step int
	Data []byte
}

// DefaultEvery is the checkpoint interval NewCheckpoints takes for every
// <= 0: the most events a seek replays. At a few microseconds an event it
// keeps a seek's replay around a millisecond or two, well under the cost of
// rendering a page of a few thousand nodes, while a checkpoint (a
// compressed page) costs less memory than the events it covers.
const DefaultEvery = 256

// ErrOrder is wrapped by Add for an event whose seq is not above every
// seq added before: a checkpoint set is built in seq order, once.
var ErrOrder = errors.New("dom: event out of seq order")

// Checkpoints is a recording's DOM states, kept so that the state at any
// seq costs one checkpoint restored plus at most Every events replayed,
// however long the recording: rrweb players seek by replaying from the
// last full snapshot, which is what makes a late seek slow.
//
// It is built in one pass over the recording's dom events in seq order
// (Add), and extended the same way while a recording is open. It keeps
// the state every Every events, and also at the end of every step that
// kept at least Every/4 events, so that the states before and after a
// step — what a step view shows — need no replay at all but for short
// steps, whose replay is short; that adds at most one checkpoint per
// Every/4 events. It keeps the events between checkpoints too,
// compressed, so a seek needs nothing from the store. Events that cannot
// change the DOM (mouse moves, scrolls and the like, most of an rrweb
// stream) are not kept, nor counted towards Every.
//
// It is safe for concurrent use: At calls run in parallel with each other;
// Add excludes them only while it applies one event.
type Checkpoints struct {
	mu    sync.RWMutex
	every int
	gap   int

	cps       []*checkpoint
	live      *Doc // the state after every event added
	tail      []tailEvent
	tailBytes int64
	lastSeq   uint64
	lastStep  int
	started   bool
	stepKept  int // events kept since the current step began
	steps     []stepMark

	sealed   int64 // bytes of states and blocks
	liveSize int64 // the live state's encoded size at the last checkpoint
	stats    Stats

	// A set restored from its stored form (persist.go) has no live
	// state until an event is added; these stand in for its counts.
	restoredSkipped int64
	restoredNodes   int
	// read reads a restored set's stored form: its checkpoints' states
	// and blocks are read on first use (sections), under loadMu, which
	// also guards them once read; loadedBytes is what they hold.
	read        ReadAt
	loadMu      sync.Mutex
	loadedBytes atomic.Int64

	endMu  sync.Mutex
	end    []byte // the live state encoded, for seeks past the last checkpoint
	endSeq uint64
}

// checkpoint is the state after every event with seq ≤ seq, and the kept
// events that follow it up to the next checkpoint.
type checkpoint struct {
	seq   uint64
	state []byte // zstd(encode(Doc))
	block []byte // zstd(events), once the next checkpoint exists
	// stored, for a restored set, is where state and block are in the
	// stored form; they are nil until read (persist.go).
	stored *stored
}

type tailEvent struct {
	seq  uint64
	data []byte
}

// stepMark is, for one step number, the last seq of an event with that
// step, and upto, the last seq of an event with any step ≤ it.
type stepMark struct {
	step       int
	last, upto uint64
}

// Stats describes a checkpoint set.
type Stats struct {
	Events      int64 // events added
	Kept        int64 // events that can change the DOM, kept for replay
	Ignored     int64 // events the DOM does not depend on (mouse, scroll, ...)
	Malformed   int64 // events Add refused as malformed
	Checkpoints int   // states kept
	Bytes       int64 // as Bytes
	Skipped     int64 // the live state's unknown-node references (Doc.Skipped)
	Nodes       int   // the live state's nodes
}

var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err)
		}
		return e
	})
	zdec = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
		if err != nil {
			panic(err)
		}
		return d
	})
)

func compress(b []byte) []byte { return zenc().EncodeAll(b, make([]byte, 0, len(b)/4+64)) }

func decompress(b []byte) ([]byte, error) { return zdec().DecodeAll(b, nil) }

// NewCheckpoints returns an empty set that keeps a state every every
// events (DefaultEvery when every <= 0).
func NewCheckpoints(every int) *Checkpoints {
	if every <= 0 {
		every = DefaultEvery
	}
	c := &Checkpoints{every: every, gap: max(1, every/4), live: NewDoc()}
	first := &checkpoint{state: compress(c.live.encode(nil))}
	c.cps = []*checkpoint{first}
	c.sealed = int64(len(first.state))
	return c
}

// Every is the checkpoint interval.
func (c *Checkpoints) Every() int { return c.every }

// Add applies the next dom event of the recording. Its seq must be above
// every seq added before (else ErrOrder). A malformed event (ErrMalformed)
// is refused, counted and changes nothing; the set stays usable, so a
// caller may log the error and go on with the next event.
func (c *Checkpoints) Add(e Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Seq <= c.lastSeq {
		return fmt.Errorf("%w: seq %d after %d", ErrOrder, e.Seq, c.lastSeq)
	}
	if err := c.restoreLive(); err != nil {
		return err
	}
	// The first event of a new step closes the previous one: keep the
	// state there if that is not too soon after the last checkpoint.
	if c.started && e.Step != c.lastStep {
		if c.stepKept >= c.gap {
			c.seal()
		}
		c.stepKept = 0
	}
	c.lastSeq, c.lastStep, c.started = e.Seq, e.Step, true
	c.noteStep(e.Step, e.Seq)
	c.stats.Events++
	keep, err := c.live.apply(e.Data)
	if err != nil {
		c.stats.Malformed++
		return fmt.Errorf("dom: seq %d: %w", e.Seq, err)
	}
	if !keep {
		c.stats.Ignored++
		return nil
	}
	c.stats.Kept++
	c.stepKept++
	c.live.seq = e.Seq
	c.tail = append(c.tail, tailEvent{e.Seq, bytes.Clone(e.Data)})
	c.tailBytes += int64(len(e.Data)) + int64(unsafe.Sizeof(tailEvent{}))
	if len(c.tail) >= c.every {
		c.seal()
	}
	return nil
}

// seal compresses the events since the last checkpoint into its block and
// keeps the live state as a new checkpoint. The tail slice is replaced,
// never reused, since At may still be reading the old one.
func (c *Checkpoints) seal() {
	if len(c.tail) == 0 {
		return
	}
	cur := c.cps[len(c.cps)-1]
	var blk []byte
	prev := cur.seq
	for _, t := range c.tail {
		blk = binary.AppendUvarint(blk, t.seq-prev)
		blk = binary.AppendUvarint(blk, uint64(len(t.data)))
		blk = append(blk, t.data...)
		prev = t.seq
	}
	// A restored checkpoint's block is guarded by loadMu (persist.go).
	c.loadMu.Lock()
	cur.block = compress(blk)
	c.loadMu.Unlock()
	raw := c.live.encode(nil)
	next := &checkpoint{seq: prev, state: compress(raw)}
	c.cps = append(c.cps, next)
	c.sealed += int64(len(cur.block)) + int64(len(next.state))
	c.liveSize = int64(len(raw))
	c.tail, c.tailBytes = nil, 0
}

func (c *Checkpoints) noteStep(step int, seq uint64) {
	i := sort.Search(len(c.steps), func(i int) bool { return c.steps[i].step >= step })
	if i == len(c.steps) || c.steps[i].step != step {
		c.steps = append(c.steps, stepMark{})
		copy(c.steps[i+1:], c.steps[i:])
		c.steps[i] = stepMark{step: step}
	}
	c.steps[i].last = seq
	// seq is above every seq before it, so it is the last of every step
	// from this one on.
	for k := i; k < len(c.steps); k++ {
		c.steps[k].upto = seq
	}
}

// LastSeq is the seq of the last event added (0 before any).
func (c *Checkpoints) LastSeq() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lastSeq
}

// SeqAfterStep is the seq of the last event added whose step is ≤ n, or
// 0 when there is none. "After step n" is the state after that event:
// everything up to it in seq order, which, since steps do not decrease
// along a recording in practice, is every event of the steps up to n and
// none of a later one. Should a step number come back after a higher one,
// the events between are included too: a state is a prefix of the stream,
// never a selection. "Before step n" is after step n-1.
func (c *Checkpoints) SeqAfterStep(n int) uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.steps), func(i int) bool { return c.steps[i].step > n })
	if i == 0 {
		return 0
	}
	return c.steps[i-1].upto
}

// AfterStep is the state after step n: At(SeqAfterStep(n)).
func (c *Checkpoints) AfterStep(n int) (*Doc, error) { return c.At(c.SeqAfterStep(n)) }

// BeforeStep is the state before step n, after every event of a lower
// step: AfterStep(n-1).
func (c *Checkpoints) BeforeStep(n int) (*Doc, error) {
	if n == math.MinInt {
		return c.At(0)
	}
	return c.AfterStep(n - 1)
}

// At returns the state after every event added with seq ≤ seq, as a Doc
// of the caller's own. It restores the nearest checkpoint at or before seq
// and replays the kept events after it, at most Every.
func (c *Checkpoints) At(seq uint64) (*Doc, error) {
	c.mu.RLock()
	i := sort.Search(len(c.cps), func(i int) bool { return c.cps[i].seq > seq }) - 1
	cp := c.cps[i]
	var tail []tailEvent
	var state, block []byte
	if cp.stored == nil { // a restored one's are read below, under loadMu
		state, block = cp.state, cp.block
	}
	if i == len(c.cps)-1 {
		tail = c.tail
		if n := len(tail); n > 0 && seq >= tail[n-1].seq {
			// At or past the last event: copy the live state rather than
			// replay the tail.
			snap := c.endState()
			c.mu.RUnlock()
			return decodeState(snap)
		}
	}
	c.mu.RUnlock()
	if cp.stored != nil {
		var err error
		if state, block, err = c.sections(cp); err != nil {
			return nil, err
		}
	}

	raw, err := decompress(state)
	if err != nil {
		return nil, fmt.Errorf("dom: checkpoint at seq %d: %w", cp.seq, err)
	}
	d, err := decodeState(raw)
	if err != nil {
		return nil, err
	}
	replay := func(s uint64, data []byte) error {
		if _, err := d.apply(data); err != nil {
			return fmt.Errorf("dom: replaying seq %d: %w", s, err)
		}
		d.seq = s
		return nil
	}
	if block == nil {
		for _, t := range tail {
			if t.seq > seq {
				break
			}
			if err := replay(t.seq, t.data); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	blk, err := decompress(block)
	if err != nil {
		return nil, fmt.Errorf("dom: events after seq %d: %w", cp.seq, err)
	}
	s := cp.seq
	for len(blk) > 0 {
		delta, n := binary.Uvarint(blk)
		if n <= 0 {
			return nil, errState
		}
		blk = blk[n:]
		size, n := binary.Uvarint(blk)
		if n <= 0 || size > uint64(len(blk)-n) {
			return nil, errState
		}
		data := blk[n : n+int(size)]
		blk = blk[n+int(size):]
		s += delta
		if s > seq {
			break
		}
		if err := replay(s, data); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// endState returns the live state encoded, encoding it once per seq. The
// caller holds c.mu for reading, so the live state does not change.
func (c *Checkpoints) endState() []byte {
	c.endMu.Lock()
	defer c.endMu.Unlock()
	if c.end == nil || c.endSeq != c.lastSeq {
		c.end = c.live.encode(nil) // a new slice: earlier ones may be in use
		c.endSeq = c.lastSeq
	}
	return c.end
}

// Bytes is the memory the set holds, for a cache to bound itself by: the
// compressed states and events, the events since the last checkpoint, an
// estimate of the live state, and the step index.
func (c *Checkpoints) Bytes() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bytesLocked()
}

func (c *Checkpoints) bytesLocked() int64 {
	c.endMu.Lock()
	end := int64(len(c.end))
	c.endMu.Unlock()
	live := c.liveSize
	if c.live != nil {
		live += int64(cap(c.live.nodes)) * int64(unsafe.Sizeof(node{})+16)
	}
	return c.sealed + c.loadedBytes.Load() + c.tailBytes + live + end +
		int64(len(c.cps))*int64(unsafe.Sizeof(checkpoint{})+8) +
		int64(cap(c.steps))*int64(unsafe.Sizeof(stepMark{}))
}

// Stats describes the set.
func (c *Checkpoints) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := c.stats
	s.Checkpoints = len(c.cps)
	s.Bytes = c.bytesLocked()
	s.Skipped = c.skippedLocked()
	s.Nodes = c.nodesLocked()
	return s
}
