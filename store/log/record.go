package log

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
)

// Record is one stored event: the envelope's fields, the blob it carries,
// its index summary and its stored payload. It is what a log frame holds.
type Record struct {
	Seq      uint64
	TS       int64
	Step     int
	Kind     event.Kind
	CID      string // the blob this event carries, "" if none
	BlobSize int64  // that blob's size
	Summary  event.Summary
	Data     json.RawMessage // the stored payload JSON (binaries already replaced by CIDs)
	// Redactions lists what redaction erased or masked in this event (rule,
	// channel, JSON pointer — never a value). The recording's redaction
	// report is derived from them.
	Redactions []Redaction
	// Blobs are further blobs the event carries besides CID: the GOPs a
	// video chunk completed (one chunk may complete several, each stored
	// as its own blob so identical GOPs are stored once). The manifest,
	// bundles and garbage collection count them as the event's blobs.
	Blobs []BlobRef
	// Outlined is the large part of Data kept as a blob of its own (a
	// HAR body, a FullSnapshot's tree, a snapshot's text), so identical
	// ones across runs are stored once; nil when Data is stored whole.
	// A decoded record's Data lacks those bytes until Inline puts them
	// back (the store facade does so for every reader).
	Outlined *Outlined
	// inlined says Data holds the outlined bytes (Outline or Inline set
	// it): AppendBinary then cuts them out again.
	inlined bool
}

// Outlined names the bytes cut from a record's Data: the blob CID (of
// exactly those bytes) of Size bytes, which belong at byte At of the
// stored Data.
type Outlined struct {
	CID  string
	Size int64
	At   int64
}

// Outline marks Data[at:at+size] as kept in blob c (the CID of exactly
// those bytes). Data stays whole in memory; the record is encoded without
// those bytes, as long as Data still holds them there.
func (r *Record) Outline(c string, at, size int64) {
	r.Outlined, r.inlined = &Outlined{CID: c, Size: size, At: at}, true
}

// Inline puts the outlined bytes (blob, read by the caller from
// Outlined.CID) back into Data, so the record reads as it was appended.
func (r *Record) Inline(blob []byte) error {
	o := r.Outlined
	if o == nil || r.inlined {
		return nil
	}
	if int64(len(blob)) != o.Size {
		return fmt.Errorf("%w: outlined blob %s has %d bytes, the record says %d", ErrBadRecord, o.CID, len(blob), o.Size)
	}
	data := make(json.RawMessage, 0, len(r.Data)+len(blob))
	data = append(append(append(data, r.Data[:o.At]...), blob...), r.Data[o.At:]...)
	r.Data, r.inlined = data, true
	return nil
}

// stored is what the log keeps of r: Data without the outlined bytes, and
// the outline. Data changed since it was outlined or inlined (a reseal's
// redaction) no longer holds the blob's bytes at At: it is kept whole.
func (r *Record) stored() ([]byte, *Outlined) {
	o := r.Outlined
	if o == nil || !r.inlined {
		return r.Data, o
	}
	if o.At < 0 || o.At+o.Size > int64(len(r.Data)) || blobs.SumString(r.Data[o.At:o.At+o.Size]) != o.CID {
		return r.Data, nil
	}
	return append(append([]byte(nil), r.Data[:o.At]...), r.Data[o.At+o.Size:]...), o
}

// EachBlob calls fn for every blob r names: CID, then Blobs, then the
// outlined part of Data.
func (r *Record) EachBlob(fn func(cid string, size int64)) {
	if r.CID != "" {
		fn(r.CID, r.BlobSize)
	}
	for _, b := range r.Blobs {
		fn(b.CID, b.Size)
	}
	if r.Outlined != nil {
		fn(r.Outlined.CID, r.Outlined.Size)
	}
}

// BlobRef is one blob a record names, with its size.
type BlobRef struct {
	CID  string
	Size int64
}

// Redaction is one erased or masked value's rule, channel and location.
type Redaction struct {
	Rule    string `json:"rule"`
	Channel string `json:"channel"`
	Pointer string `json:"pointer"`
}

// Record format versions: 2 adds the redactions after Data, 3 the further
// blobs after those, 4 the outlined part of Data after those. A record is
// written in the lowest version that holds it (no redactions and no
// further blobs: 1; redactions only: 2), so each record still has exactly
// one encoding.
const (
	recordV1 = 1
	recordV2 = 2
	recordV3 = 3
	recordV4 = 4
)

// ErrBadRecord is returned (wrapped) for bytes that are not an encoded
// Record.
var ErrBadRecord = errors.New("malformed log record")

// AppendBinary appends r's encoding to b and returns the extended slice.
//
// Format version 1, in order (uvarint and varint as in encoding/binary,
// always minimal; a string is a uvarint byte length then the bytes):
//
//	byte     version = 1
//	uvarint  Seq
//	varint   TS
//	varint   Step
//	string   Kind
//	string   CID
//	varint   BlobSize
//	string   Summary.URL
//	string   Summary.Method
//	varint   Summary.Status
//	string   Summary.Level
//	string   Summary.Text
//	string   Summary.Action
//	string   Summary.Outcome
//	string   Summary.ErrorCode
//	string   Data
//
// Version 2 (written when there are redactions) continues with
//
//	uvarint  count (≥ 1)
//	count ×  (string Rule, string Channel, string Pointer)
//
// Version 3 (written when there are further blobs) continues as version 2
// does, but with a redaction count that may be 0, then
//
//	uvarint  count (≥ 1)
//	count ×  (string CID, varint Size)
//
// Version 4 (written when part of Data is outlined) continues as version
// 3 does, but with a blob count that may be 0, then
//
//	string   Outlined.CID (not empty)
//	varint   Outlined.Size (≥ 1)
//	varint   Outlined.At (0 ≤ At ≤ the stored Data's length)
//
// and its Data is the stored Data: without the outlined bytes.
//
// Nothing else follows. Every Record encodes, and every encoding decodes
// back to an equal Record; DecodeRecord accepts exactly the bytes
// AppendBinary produces, so decode∘encode is the identity on bytes too.
func (r *Record) AppendBinary(b []byte) []byte {
	s := &r.Summary
	data, outlined := r.stored()
	switch {
	case outlined != nil:
		b = append(b, recordV4)
	case len(r.Blobs) > 0:
		b = append(b, recordV3)
	case len(r.Redactions) > 0:
		b = append(b, recordV2)
	default:
		b = append(b, recordV1)
	}
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendVarint(b, r.TS)
	b = binary.AppendVarint(b, int64(r.Step))
	b = appendString(b, string(r.Kind))
	b = appendString(b, r.CID)
	b = binary.AppendVarint(b, r.BlobSize)
	b = appendString(b, s.URL)
	b = appendString(b, s.Method)
	b = binary.AppendVarint(b, int64(s.Status))
	b = appendString(b, s.Level)
	b = appendString(b, s.Text)
	b = appendString(b, s.Action)
	b = appendString(b, s.Outcome)
	b = appendString(b, s.ErrorCode)
	b = binary.AppendUvarint(b, uint64(len(data)))
	b = append(b, data...)
	if len(r.Redactions) > 0 || len(r.Blobs) > 0 || outlined != nil {
		b = binary.AppendUvarint(b, uint64(len(r.Redactions)))
		for _, x := range r.Redactions {
			b = appendString(b, x.Rule)
			b = appendString(b, x.Channel)
			b = appendString(b, x.Pointer)
		}
	}
	if len(r.Blobs) > 0 || outlined != nil {
		b = binary.AppendUvarint(b, uint64(len(r.Blobs)))
		for _, x := range r.Blobs {
			b = appendString(b, x.CID)
			b = binary.AppendVarint(b, x.Size)
		}
	}
	if o := outlined; o != nil {
		b = appendString(b, o.CID)
		b = binary.AppendVarint(b, o.Size)
		b = binary.AppendVarint(b, o.At)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Envelope is the event r stores, as the playback API serves it.
func (r *Record) Envelope() event.Envelope {
	return event.Envelope{Seq: r.Seq, TS: r.TS, Step: r.Step, Kind: r.Kind, Data: r.Data}
}

// DecodeRecord decodes one record encoded by AppendBinary. It returns an
// error wrapping ErrBadRecord for anything else (unknown version, truncated
// input, trailing bytes, non-minimal varints, out-of-range numbers) and
// never panics.
//
// Aliasing rule: the result never refers to p. Strings are copied (a known
// Kind is the package constant, no copy) and Data is copied once, so the
// caller may reuse p as soon as DecodeRecord returns; SegmentReader relies
// on this to reuse its read buffer. (ReadRecordAt, which owns a fresh
// buffer per call, lets Data alias that buffer instead of copying it.)
func DecodeRecord(p []byte) (Record, error) {
	return decodeRecord(p, false)
}

// decodeRecord decodes p; with own set, the caller hands p over and Data
// may alias it.
func decodeRecord(p []byte, own bool) (Record, error) {
	var r Record
	d := decoder{p: p}
	if len(p) == 0 {
		return r, fmt.Errorf("%w: empty", ErrBadRecord)
	}
	v := d.byte()
	if v < recordV1 || v > recordV4 {
		return r, fmt.Errorf("%w: unknown format version %d", ErrBadRecord, v)
	}
	r.Seq = d.uvarint()
	r.TS = d.varint()
	r.Step = d.int()
	r.Kind = internKind(d.bytes())
	r.CID = string(d.bytes())
	r.BlobSize = d.varint()
	s := &r.Summary
	s.URL = string(d.bytes())
	s.Method = string(d.bytes())
	s.Status = d.int()
	s.Level = string(d.bytes())
	s.Text = string(d.bytes())
	s.Action = string(d.bytes())
	s.Outcome = string(d.bytes())
	s.ErrorCode = string(d.bytes())
	if data := d.bytes(); len(data) > 0 {
		if own {
			r.Data = data[:len(data):len(data)]
		} else {
			r.Data = append(json.RawMessage(nil), data...)
		}
	}
	if v >= recordV2 {
		n := d.uvarint()
		// Version 2 has at least one redaction; each takes ≥ 3 bytes.
		if (n == 0 && v == recordV2) || n > uint64(len(d.p)) {
			d.fail("bad redaction count")
		} else if n > 0 {
			r.Redactions = make([]Redaction, 0, n)
			for i := uint64(0); i < n && d.err == ""; i++ {
				r.Redactions = append(r.Redactions, Redaction{
					Rule: string(d.bytes()), Channel: string(d.bytes()), Pointer: string(d.bytes())})
			}
		}
	}
	if v >= recordV3 && d.err == "" {
		n := d.uvarint()
		if (n == 0 && v == recordV3) || n > uint64(len(d.p)) { // each blob takes ≥ 2 bytes
			d.fail("bad blob count")
		} else if n > 0 {
			r.Blobs = make([]BlobRef, 0, n)
			for i := uint64(0); i < n && d.err == ""; i++ {
				r.Blobs = append(r.Blobs, BlobRef{CID: string(d.bytes()), Size: d.varint()})
			}
		}
	}
	if v == recordV4 && d.err == "" {
		o := Outlined{CID: string(d.bytes()), Size: d.varint(), At: d.varint()}
		if d.err == "" && (o.CID == "" || o.Size < 1 || o.At < 0 || o.At > int64(len(r.Data))) {
			d.fail("bad outlined part")
		}
		r.Outlined = &o
	}
	if d.err != "" {
		return Record{}, fmt.Errorf("%w: %s at byte %d", ErrBadRecord, d.err, len(p)-len(d.p))
	}
	if len(d.p) != 0 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(d.p))
	}
	return r, nil
}

// internKind returns the package constant for a known kind, so decoding the
// common case allocates nothing.
func internKind(b []byte) event.Kind {
	for _, k := range event.Kinds {
		if string(k) == string(b) {
			return k
		}
	}
	return event.Kind(b)
}

// decoder reads the fields of a record; after the first failure every read
// returns a zero value and err says what went wrong.
type decoder struct {
	p   []byte
	err string
}

func (d *decoder) fail(why string) {
	if d.err == "" {
		d.err = why
	}
	d.p = nil
}

func (d *decoder) byte() byte {
	if len(d.p) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.p)
	switch {
	case n == 0:
		d.fail("truncated varint")
		return 0
	case n < 0:
		d.fail("varint overflows 64 bits")
		return 0
	case n > 1 && d.p[n-1] == 0:
		// A multi-byte varint whose last byte is zero has a shorter
		// spelling; only the minimal one is accepted, so that every
		// record has exactly one encoding.
		d.fail("non-minimal varint")
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("integer out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.p)) {
		d.fail("truncated string")
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}
