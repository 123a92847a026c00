package bundle

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"sort"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/log"
)

// A bundle is one file holding a finished recording: its manifest and
// every blob the manifest references, verifiable offline and importable
// into another data directory under the same root CID. It is a CARv1
// archive, so standard IPFS tooling reads it:
//
//	bundle  = uvarint(len(header)) | header | section*
//	header  = DAG-CBOR {"roots": [root], "version": 1}
//	section = uvarint(len(cid) + len(data)) | cid | data
//
// uvarint is the unsigned LEB128 varint of multiformats (minimal, at most 9
// bytes). The header is the canonical DAG-CBOR encoding of a map with two
// keys, "roots" before "version" (keys sort by encoded length, then
// bytewise): one root, the recording's root CID as a link (CBOR tag 42 on
// a byte string holding 0x00, the identity multibase prefix, then the
// CID's bytes), and the unsigned integer 1. It is always these 58 bytes:
//
//	a2 65 "roots" 81 d8 2a 58 25 00 <36 CID bytes> 67 "version" 01
//
// Every cid is binary CIDv1, raw codec, sha2-256 (36 bytes: 01 55 12 20
// and the 32-byte digest) and data is the block whose sha2-256 digest it
// carries. The sections are, each CID once: the manifest (the root; its
// bytes exactly as sealed), then the log segments in manifest order, then
// the manifest's blobs in manifest order (a CID already written is not
// written again).
//
// VerifyBundle requires the header and the root section first; it
// accepts the other sections in any order, but each exactly once, and
// none the manifest does not list. It re-hashes every section and checks
// the manifest against the segments' records (see VerifyBundle).
const (
	// MaxBundleHeader bounds a bundle's header (a flightrec header is 58
	// bytes).
	MaxBundleHeader = 1 << 20
	// MaxBundleSection bounds one section (CID and data): a longer one is
	// refused before anything is read or allocated.
	MaxBundleSection = 1 << 30
	// MaxProblems stops a verification that found this many.
	MaxProblems = 100
	// CIDLen is the length of a binary flightrec CID.
	CIDLen = 36
)

// cidPrefix starts every binary flightrec CID: version 1, raw codec,
// sha2-256, 32 bytes.
var cidPrefix = [4]byte{0x01, 0x55, 0x12, 0x20}

// ErrBadBundle is returned (wrapped) for a bundle that fails
// verification (ReadBundleManifest, and the store's ImportBundle, which
// then installs nothing).
var ErrBadBundle = errors.New("bundle failed verification")

// BundleReport is what VerifyBundle read and found.
type BundleReport struct {
	Root      string `json:"root"`      // from the header
	Recording string `json:"recording"` // from the manifest
	Blocks    int    `json:"blocks"`    // sections read, the manifest included
	Segments  int    `json:"segments"`  // log segment sections checked
	Blobs     int    `json:"blobs"`     // blob sections checked
	Events    int64  `json:"events"`    // log records decoded
	Bytes     int64  `json:"bytes"`     // bundle bytes read
	// Gaps are the seqs the manifest declares lost (a repaired
	// recording): accepted, and stated.
	Gaps     []Gap     `json:"gaps,omitempty"`
	Problems []Problem `json:"problems"`
}

// OK reports whether nothing was found wrong.
func (r *BundleReport) OK() bool { return len(r.Problems) == 0 }

// Header is the CARv1 header of a bundle whose root is c (see the
// format above).
func Header(c cid.Cid) []byte {
	b := []byte{0xa2, 0x65, 'r', 'o', 'o', 't', 's', 0x81, 0xd8, 0x2a, 0x58, 1 + CIDLen, 0x00}
	b = append(b, c.Bytes()...)
	return append(b, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01)
}

// VerifyBundle reads a bundle from r, streaming (it holds the manifest and
// one segment's bookkeeping in memory, never a blob), and reports what is
// wrong with it. It checks:
//
//   - the header: canonical, version 1, exactly one root, a flightrec CID;
//   - every section: a flightrec CID (CIDv1, raw, sha2-256) whose digest
//     its data has; no section over MaxBundleSection; no truncation;
//   - the first section is the root and parses as a version 1 Manifest of
//     a valid recording id, whose segments ascend in seq and add up to
//     its events and last seq, whose seqs run from 1 without a hole but
//     for the gaps it declares (a repaired recording: stated in the
//     report's Gaps), and whose blobs are sorted and distinct;
//   - every segment and blob the manifest lists is present exactly once,
//     and nothing else is;
//   - every segment decodes as log records (NewSegmentReader), in
//     ascending seq, its count, first and last seq, and length those of
//     its manifest entry; every record's blob is among the manifest's
//     blobs, and every listed blob is some record's, of the size the
//     records say; the manifest's counts per kind, steps and bytes are
//     those of the records.
//
// Problems are reported, never panicked on; verification stops at damage
// that leaves nothing further checkable (a bad header or root section,
// truncation, a broken length) and after 100 problems. The error is for a
// failure to read r, not for what r holds.
func VerifyBundle(r io.Reader) (*BundleReport, error) {
	v := newBundleScan(r, nil)
	if err := v.run(); err != nil {
		return v.rep, err
	}
	return v.rep, nil
}

// ReadBundleManifest reads a bundle's header and root section only and
// returns the root and the manifest's bytes, checked against the root.
// VerifyBundle checks the rest.
func ReadBundleManifest(r io.Reader) (root string, manifest []byte, err error) {
	v := newBundleScan(r, nil)
	v.manifestOnly = true
	if err := v.run(); err != nil {
		return "", nil, err
	}
	if v.manRaw == nil || !v.rep.OK() {
		what := "no manifest"
		if len(v.rep.Problems) > 0 {
			what = v.rep.Problems[0].What
		}
		return "", nil, fmt.Errorf("%w: %s", ErrBadBundle, what)
	}
	return v.rep.Root, v.manRaw, nil
}

// blockRole is what the manifest says a CID is.
type blockRole struct {
	seg    int  // 1-based segment ordinal, 0 if not a segment
	blob   bool // listed in the manifest's blobs
	seen   bool
	size   int64 // data length, once seen
	hashed bool  // its data matched its CID
}

// segCheck is what one segment section held.
type segCheck struct {
	problems []string
	records  int64
	steps    map[int]struct{}
	counts   map[event.Kind]int64
	claims   map[string]int64 // blob CID → the size its records say
	conflict []string         // CIDs whose records disagree on the size
}

// Sink receives verified blocks while Import reads.
type Sink struct {
	// Manifest is called once the root section is checked; an error
	// stops the import.
	Manifest func(m *Manifest, root string) error
	// Block is called with each section once its hash is checked.
	Block func(c cid.Cid, segment bool, data []byte) error
}

// Import reads a bundle from r, verifying it as VerifyBundle does and
// handing sink each block once its hash is checked. It returns the report,
// and the manifest (parsed and raw) for a bundle whose report is OK. The
// error is for a failure to read r or one sink returned.
func Import(r io.Reader, sink *Sink) (rep *BundleReport, m *Manifest, raw []byte, err error) {
	v := newBundleScan(r, sink)
	if err := v.run(); err != nil {
		return v.rep, nil, nil, err
	}
	return v.rep, v.man, v.manRaw, nil
}

type bundleScan struct {
	r            *countingReader
	rep          *BundleReport
	sink         *Sink // nil: verify only, streaming
	manifestOnly bool
	stopped      bool

	root   cid.Cid
	man    *Manifest
	manRaw []byte
	roles  map[string]*blockRole
	blobs  map[string]bool // the manifest's blobs

	// What the records of the segments checked so far say.
	segsOK     bool                 // every segment present, hashed and decoded without problems
	refs       map[string]int64     // blob CID → the size its records give
	sizeClash  map[string]bool      // blobs whose records disagree on the size
	counts     map[event.Kind]int64 // records by kind
	steps      map[int]struct{}     // distinct steps
	structural bool                 // the manifest alone has a problem

	h   hash.Hash
	buf []byte // section data (import), reused
}

func newBundleScan(r io.Reader, sink *Sink) *bundleScan {
	return &bundleScan{
		r:    &countingReader{r: bufio.NewReaderSize(r, 64<<10)},
		rep:  &BundleReport{Problems: []Problem{}},
		sink: sink, segsOK: true, h: sha256.New(),
		refs: map[string]int64{}, sizeClash: map[string]bool{},
		counts: map[event.Kind]int64{}, steps: map[int]struct{}{},
	}
}

// problem records one; it stops the scan at the limit.
func (v *bundleScan) problem(c, format string, args ...any) {
	if v.stopped {
		return
	}
	if len(v.rep.Problems) >= MaxProblems-1 {
		v.rep.Problems = append(v.rep.Problems, Problem{Recording: v.rep.Recording,
			What: fmt.Sprintf("stopped after %d problems", MaxProblems-1)})
		v.stopped = true
		return
	}
	v.rep.Problems = append(v.rep.Problems, Problem{Recording: v.rep.Recording, CID: c, What: fmt.Sprintf(format, args...)})
}

// fatal records a problem after which nothing can be checked.
func (v *bundleScan) fatal(c, format string, args ...any) {
	v.problem(c, format, args...)
	v.stopped = true
}

// countingReader counts the bytes consumed from a buffered reader.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

var errVarint = errors.New("malformed varint")

// uvarint reads a minimal multiformats unsigned varint (at most 9 bytes).
// It returns io.EOF if r ends before its first byte, io.ErrUnexpectedEOF
// inside it.
func (v *bundleScan) uvarint() (uint64, error) {
	var x uint64
	for i := 0; i < 9; i++ {
		b, err := v.r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, errVarint // not minimal
			}
			return x, nil
		}
	}
	return 0, errVarint
}

func isShortRead(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

func (v *bundleScan) run() error {
	defer func() { v.rep.Bytes = v.r.n }()
	if err := v.header(); err != nil || v.stopped {
		return err
	}
	for !v.stopped {
		at := v.r.n
		n, err := v.uvarint()
		switch {
		case err == io.EOF:
			if v.rep.Blocks == 0 {
				v.fatal("", "no sections: the bundle holds no manifest")
			}
			v.finish()
			return nil
		case err == io.ErrUnexpectedEOF:
			v.fatal("", "truncated: the bundle ends inside a section length at offset %d", at)
			return nil
		case errors.Is(err, errVarint):
			v.fatal("", "malformed section length at offset %d", at)
			return nil
		case err != nil:
			return fmt.Errorf("store: read bundle: %w", err)
		case n > MaxBundleSection:
			v.fatal("", "section at offset %d claims %d bytes, over the %d-byte limit", at, n, MaxBundleSection)
			return nil
		}
		if err := v.section(at, int64(n)); err != nil {
			return err
		}
		if v.manifestOnly && v.rep.Blocks > 0 {
			return nil
		}
	}
	return nil
}

func (v *bundleScan) header() error {
	n, err := v.uvarint()
	switch {
	case err == io.EOF:
		v.fatal("", "empty file: no CAR header")
		return nil
	case err == io.ErrUnexpectedEOF:
		v.fatal("", "truncated: the bundle ends inside the header length")
		return nil
	case errors.Is(err, errVarint):
		v.fatal("", "malformed header length")
		return nil
	case err != nil:
		return fmt.Errorf("store: read bundle: %w", err)
	case n == 0 || n > MaxBundleHeader:
		v.fatal("", "header length %d out of range (1 to %d bytes)", n, MaxBundleHeader)
		return nil
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(v.r, hdr); err != nil {
		if isShortRead(err) {
			v.fatal("", "truncated: the bundle ends inside its %d-byte header", n)
			return nil
		}
		return fmt.Errorf("store: read bundle: %w", err)
	}
	root, err := parseBundleHeader(hdr)
	if err != nil {
		v.fatal("", "header: %v", err)
		return nil
	}
	v.root = root
	v.rep.Root = root.String()
	return nil
}

// parseBundleHeader decodes a CARv1 header and returns its one root; it
// accepts only the canonical encoding flightrec writes.
func parseBundleHeader(b []byte) (cid.Cid, error) {
	d := cborDec{b: b}
	maj, n := d.head()
	if d.err == nil && maj != 5 {
		d.err = errors.New("not a CBOR map")
	}
	var (
		version          uint64
		roots            [][]byte
		hasVer, hasRoots bool
	)
	for i := uint64(0); d.err == nil && i < n; i++ {
		key := d.text()
		if d.err != nil {
			break
		}
		switch key {
		case "version":
			if hasVer {
				d.err = errors.New(`"version" twice`)
				break
			}
			hasVer = true
			var m byte
			m, version = d.head()
			if d.err == nil && m != 0 {
				d.err = errors.New(`"version" is not an unsigned integer`)
			}
		case "roots":
			if hasRoots {
				d.err = errors.New(`"roots" twice`)
				break
			}
			hasRoots = true
			m, k := d.head()
			if d.err == nil && m != 4 {
				d.err = errors.New(`"roots" is not an array`)
			}
			if d.err == nil && k > uint64(len(d.b)-d.i) {
				d.err = errors.New("truncated CBOR")
			}
			for j := uint64(0); d.err == nil && j < k; j++ {
				if m, tag := d.head(); d.err == nil && (m != 6 || tag != 42) {
					d.err = errors.New("a root is not a CID link (CBOR tag 42)")
					break
				}
				lb := d.bytes()
				if d.err == nil && (len(lb) == 0 || lb[0] != 0) {
					d.err = errors.New("a root link lacks the 0x00 multibase prefix")
				}
				if d.err == nil {
					roots = append(roots, lb[1:])
				}
			}
		default:
			d.err = fmt.Errorf("unexpected field %q", key)
		}
	}
	if d.err == nil && d.i != len(d.b) {
		d.err = fmt.Errorf("%d bytes after the CBOR map", len(d.b)-d.i)
	}
	switch {
	case d.err != nil:
		return cid.Undef, d.err
	case !hasVer:
		return cid.Undef, errors.New(`no "version"`)
	case version != 1:
		return cid.Undef, fmt.Errorf("CAR version %d, want 1", version)
	case !hasRoots || len(roots) != 1:
		return cid.Undef, fmt.Errorf("%d roots, want exactly one", len(roots))
	}
	rb := roots[0]
	if len(rb) != CIDLen || [4]byte(rb[:4]) != cidPrefix {
		return cid.Undef, errors.New("the root is not a CIDv1 raw sha2-256")
	}
	c := blobs.FromDigest(rb[4:])
	if !bytes.Equal(Header(c), b) {
		return cid.Undef, errors.New("not in canonical DAG-CBOR form")
	}
	return c, nil
}

// cborDec decodes the few CBOR items a CARv1 header holds. The first
// error sticks.
type cborDec struct {
	b   []byte
	i   int
	err error
}

// head reads an item's initial byte and argument (definite lengths only).
func (d *cborDec) head() (major byte, arg uint64) {
	if d.err != nil {
		return 0, 0
	}
	if d.i >= len(d.b) {
		d.err = errors.New("truncated CBOR")
		return 0, 0
	}
	ib := d.b[d.i]
	d.i++
	major, info := ib>>5, ib&31
	var n int
	switch {
	case info < 24:
		return major, uint64(info)
	case info == 24:
		n = 1
	case info == 25:
		n = 2
	case info == 26:
		n = 4
	case info == 27:
		n = 8
	default:
		d.err = fmt.Errorf("unsupported CBOR item 0x%02x", ib)
		return 0, 0
	}
	if len(d.b)-d.i < n {
		d.err = errors.New("truncated CBOR")
		return 0, 0
	}
	for _, c := range d.b[d.i : d.i+n] {
		arg = arg<<8 | uint64(c)
	}
	d.i += n
	return major, arg
}

func (d *cborDec) bytes() []byte {
	m, n := d.head()
	if d.err == nil && m != 2 {
		d.err = errors.New("not a CBOR byte string")
	}
	return d.take(n)
}

func (d *cborDec) text() string {
	m, n := d.head()
	if d.err == nil && m != 3 {
		d.err = errors.New("a map key is not a CBOR text string")
	}
	return string(d.take(n))
}

func (d *cborDec) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.i) {
		d.err = errors.New("truncated CBOR")
		return nil
	}
	out := d.b[d.i : d.i+int(n)]
	d.i += int(n)
	return out
}

// section reads one section of n bytes that started at offset at.
func (v *bundleScan) section(at, n int64) error {
	first := v.rep.Blocks == 0
	v.rep.Blocks++
	if n < CIDLen {
		if first {
			v.fatal("", "the first section (offset %d) is %d bytes, too short for a CID", at, n)
			return nil
		}
		v.problem("", "section at offset %d is %d bytes, too short for a flightrec CID", at, n)
		return v.skip(at, n)
	}
	var cb [CIDLen]byte
	if _, err := io.ReadFull(v.r, cb[:]); err != nil {
		if isShortRead(err) {
			v.fatal("", "truncated: the bundle ends inside the CID of the section at offset %d", at)
			return nil
		}
		return fmt.Errorf("store: read bundle: %w", err)
	}
	if [4]byte(cb[:4]) != cidPrefix {
		if first {
			v.fatal("", "the first section's CID (offset %d) is not a CIDv1 raw sha2-256", at)
			return nil
		}
		v.problem("", "section at offset %d: its CID is not a CIDv1 raw sha2-256", at)
		return v.skip(at, n-CIDLen)
	}
	c := blobs.FromDigest(cb[4:])
	cs := c.String()
	size := n - CIDLen
	if first {
		return v.rootSection(at, c, size)
	}
	role := v.roles[cs]
	switch {
	case role == nil:
		v.problem(cs, "block not listed in the manifest (section at offset %d)", at)
		return v.skip(at, size)
	case role.seen:
		v.problem(cs, "block appears twice (again at offset %d)", at)
		return v.skip(at, size)
	}
	role.seen, role.size = true, size
	if role.blob {
		v.rep.Blobs++
	}
	if role.seg > 0 {
		v.rep.Segments++
		return v.segment(at, c, role, size)
	}
	return v.blob(at, c, role, size)
}

// skip discards the rest of a section.
func (v *bundleScan) skip(at, n int64) error {
	got, err := io.CopyN(io.Discard, v.r, n)
	if err != nil {
		if isShortRead(err) {
			v.fatal("", "truncated: the section at offset %d is %d bytes short", at, n-got)
			return nil
		}
		return fmt.Errorf("store: read bundle: %w", err)
	}
	return nil
}

// readData reads a section's data into v.buf (growing it as data arrives).
func (v *bundleScan) readData(at, n int64) ([]byte, bool, error) {
	var err error
	v.buf, err = log.ReadN(v.r, v.buf[:0], int(n))
	if err != nil {
		if isShortRead(err) {
			v.fatal("", "truncated: the bundle ends inside the section at offset %d", at)
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("store: read bundle: %w", err)
	}
	data := v.buf
	if cap(v.buf) > 16<<20 {
		v.buf = nil // do not keep a rare huge buffer
	}
	return data, true, nil
}

func (v *bundleScan) matches(c cid.Cid, sum []byte) bool {
	d, _ := blobs.Digest(c)
	return bytes.Equal(d, sum)
}

func (v *bundleScan) rootSection(at int64, c cid.Cid, size int64) error {
	if c != v.root {
		v.fatal(c.String(), "the first section is not the root %s", v.rep.Root)
		return nil
	}
	data, ok, err := v.readData(at, size)
	if !ok {
		return err
	}
	sum := sha256.Sum256(data)
	if !v.matches(c, sum[:]) {
		v.fatal(v.rep.Root, "manifest bytes do not match the root CID")
		return nil
	}
	v.manRaw = bytes.Clone(data)
	var m Manifest
	if err := json.Unmarshal(v.manRaw, &m); err != nil {
		v.fatal(v.rep.Root, "the root is not a manifest: %v", err)
		return nil
	}
	v.man = &m
	if !v.checkManifest() || v.manifestOnly {
		return nil
	}
	if v.sink != nil {
		return v.sink.Manifest(v.man, v.rep.Root)
	}
	return nil
}

// checkManifest checks what the manifest says of itself and builds the
// roles of the blocks to come. It reports false if nothing more can be
// checked.
func (v *bundleScan) checkManifest() bool {
	m := v.man
	if m.Version != 1 {
		v.fatal(v.rep.Root, "manifest version %d, want 1", m.Version)
		return false
	}
	if !layout.ValidRecordingID(m.Recording.ID) {
		v.fatal(v.rep.Root, "the manifest's recording id is not a flightrec id")
		return false
	}
	v.rep.Recording = m.Recording.ID
	bad := func(format string, args ...any) {
		v.structural = true
		v.problem(v.rep.Root, "manifest: "+format, args...)
	}
	v.rep.Gaps = m.Gaps
	for i, g := range m.Gaps {
		if g.From < 1 || g.To != 0 && g.To < g.From || i > 0 && (m.Gaps[i-1].To == 0 || g.From <= m.Gaps[i-1].To) {
			bad("gap %d (seqs %d–%d) is not a range after the one before", i+1, g.From, g.To)
		}
	}
	v.roles = make(map[string]*blockRole, len(m.Segments)+len(m.Blobs))
	v.blobs = make(map[string]bool, len(m.Blobs))
	var events int64
	var prev uint64
	for i, seg := range m.Segments {
		if _, err := blobs.ParseCID(seg.CID); err != nil {
			v.fatal(v.rep.Root, "manifest: segment %d: not a flightrec CID", i+1)
			return false
		}
		if v.roles[seg.CID] != nil || seg.CID == v.rep.Root {
			bad("segment %d is listed twice", i+1)
			continue
		}
		v.roles[seg.CID] = &blockRole{seg: i + 1}
		switch {
		case seg.Records < 1:
			bad("segment %d has %d records", i+1, seg.Records)
		case seg.FirstSeq < 1 || seg.LastSeq < seg.FirstSeq || seg.LastSeq-seg.FirstSeq < uint64(seg.Records-1):
			bad("segment %d: seqs %d..%d cannot hold %d records", i+1, seg.FirstSeq, seg.LastSeq, seg.Records)
		case i > 0 && seg.FirstSeq <= prev:
			bad("segment %d starts at seq %d, not after %d", i+1, seg.FirstSeq, prev)
		case !SeqsFollow(m.Gaps, prev, seg.FirstSeq):
			bad("segment %d starts at seq %d after %d, and no declared gap covers the seqs between", i+1, seg.FirstSeq, prev)
		}
		if seg.Bytes < log.SegmentHeaderLen {
			bad("segment %d: %d bytes", i+1, seg.Bytes)
		}
		prev = seg.LastSeq
		events += seg.Records
	}
	if events != m.Events {
		bad("%d events, its segments hold %d", m.Events, events)
	}
	if m.LastSeq != prev {
		bad("last seq %d, its last segment ends at %d", m.LastSeq, prev)
	}
	for i, b := range m.Blobs {
		if _, err := blobs.ParseCID(b); err != nil {
			v.fatal(v.rep.Root, "manifest: blob %d: not a flightrec CID", i+1)
			return false
		}
		if i > 0 && b <= m.Blobs[i-1] {
			bad("blobs are not sorted and distinct (at %d)", i+1)
		}
		v.blobs[b] = true
		if r := v.roles[b]; r != nil {
			r.blob = true
		} else if b != v.rep.Root {
			v.roles[b] = &blockRole{blob: true}
		}
	}
	return !v.stopped
}

// segment checks a log segment section: its hash, then its records
// against its manifest entry.
func (v *bundleScan) segment(at int64, c cid.Cid, role *blockRole, size int64) error {
	ref := v.man.Segments[role.seg-1]
	var (
		chk    segCheck
		hashOK bool
		data   []byte
	)
	if v.sink != nil {
		var ok bool
		var err error
		if data, hashOK, ok, err = v.readChecked(at, c, size); !ok {
			return err
		}
		if hashOK {
			chk = v.decodeSegment(bytes.NewReader(data), role.seg)
		}
	} else {
		lr := &io.LimitedReader{R: v.r, N: size}
		v.h.Reset()
		tee := io.TeeReader(lr, v.h)
		chk = v.decodeSegment(tee, role.seg)
		if _, err := io.Copy(io.Discard, tee); err != nil {
			return fmt.Errorf("store: read bundle: %w", err)
		}
		if lr.N > 0 {
			v.fatal(c.String(), "truncated: the bundle ends inside segment %d (section at offset %d)", role.seg, at)
			return nil
		}
		hashOK = v.matches(c, v.h.Sum(nil))
	}
	if !hashOK {
		v.segsOK = false
		v.problem(c.String(), "segment %d: bytes do not match the CID", role.seg)
		return nil
	}
	role.hashed = true
	cs := c.String()
	if size != ref.Bytes {
		chk.problems = append(chk.problems, fmt.Sprintf("segment %d is %d bytes, the manifest says %d", role.seg, size, ref.Bytes))
	}
	if chk.records != ref.Records {
		chk.problems = append(chk.problems, fmt.Sprintf("segment %d holds %d records, the manifest says %d", role.seg, chk.records, ref.Records))
	}
	for _, p := range chk.problems {
		v.problem(cs, "%s", p)
	}
	if len(chk.problems) > 0 {
		v.segsOK = false
	}
	v.rep.Events += chk.records
	for k, n := range chk.counts {
		v.counts[k] += n
	}
	for st := range chk.steps {
		v.steps[st] = struct{}{}
	}
	for b, n := range chk.claims {
		if old, ok := v.refs[b]; ok && old != n {
			v.sizeClash[b] = true
		}
		v.refs[b] = n
	}
	for _, b := range chk.conflict {
		v.sizeClash[b] = true
	}
	if v.sink != nil && v.rep.OK() {
		return v.sink.Block(c, true, data)
	}
	return nil
}

// readChecked reads a section's data whole (an import keeps it) and says
// whether it hashes to c; ok false ends the scan as readData says.
func (v *bundleScan) readChecked(at int64, c cid.Cid, size int64) (data []byte, hashOK, ok bool, err error) {
	if data, ok, err = v.readData(at, size); !ok {
		return nil, false, false, err
	}
	sum := sha256.Sum256(data)
	return data, v.matches(c, sum[:]), true, nil
}

// decodeSegment reads segment ord's records from r (which it may leave
// unread past a problem).
func (v *bundleScan) decodeSegment(r io.Reader, ord int) segCheck {
	ref := v.man.Segments[ord-1]
	chk := segCheck{steps: map[int]struct{}{}, counts: map[event.Kind]int64{}, claims: map[string]int64{}}
	sr := log.NewSegmentReader(r)
	var last uint64
	for {
		rec, _, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			chk.problems = append(chk.problems, fmt.Sprintf("segment %d: %v", ord, err))
			return chk
		}
		if len(chk.problems) >= MaxProblems {
			return chk
		}
		switch {
		case chk.records == 0 && rec.Seq != ref.FirstSeq:
			chk.problems = append(chk.problems, fmt.Sprintf("segment %d starts at seq %d, the manifest says %d", ord, rec.Seq, ref.FirstSeq))
		case chk.records > 0 && rec.Seq <= last:
			chk.problems = append(chk.problems, fmt.Sprintf("segment %d: seq %d after %d", ord, rec.Seq, last))
		case chk.records > 0 && !SeqsFollow(v.man.Gaps, last, rec.Seq):
			chk.problems = append(chk.problems, fmt.Sprintf("segment %d: seq %d after %d, and no declared gap covers the seqs between", ord, rec.Seq, last))
		}
		chk.records++
		last = rec.Seq
		chk.counts[rec.Kind]++
		chk.steps[rec.Step] = struct{}{}
		rec.EachBlob(func(c string, size int64) {
			if !v.blobs[c] {
				chk.problems = append(chk.problems, fmt.Sprintf("segment %d: seq %d references a blob the manifest does not list", ord, rec.Seq))
				return
			}
			if old, ok := chk.claims[c]; ok && old != size {
				chk.conflict = append(chk.conflict, c)
			}
			chk.claims[c] = size
		})
	}
	if chk.records > 0 && last != ref.LastSeq {
		chk.problems = append(chk.problems, fmt.Sprintf("segment %d ends at seq %d, the manifest says %d", ord, last, ref.LastSeq))
	}
	return chk
}

func (v *bundleScan) blob(at int64, c cid.Cid, role *blockRole, size int64) error {
	var hashOK bool
	var data []byte
	if v.sink != nil {
		var ok bool
		var err error
		if data, hashOK, ok, err = v.readChecked(at, c, size); !ok {
			return err
		}
	} else {
		v.h.Reset()
		got, err := io.CopyN(v.h, v.r, size)
		if err != nil {
			if isShortRead(err) {
				v.fatal(c.String(), "truncated: the bundle ends inside a blob (section at offset %d, %d bytes short)", at, size-got)
				return nil
			}
			return fmt.Errorf("store: read bundle: %w", err)
		}
		hashOK = v.matches(c, v.h.Sum(nil))
	}
	if !hashOK {
		v.problem(c.String(), "blob bytes do not match the CID")
		return nil
	}
	role.hashed = true
	if v.sink != nil && v.rep.OK() {
		return v.sink.Block(c, false, data)
	}
	return nil
}

// finish checks, at the end of the bundle, what needs every section.
func (v *bundleScan) finish() {
	if v.man == nil || v.stopped {
		return
	}
	m := v.man
	var missing []string
	for cs, r := range v.roles {
		if !r.seen {
			missing = append(missing, cs)
		}
	}
	sort.Strings(missing)
	for _, cs := range missing {
		r := v.roles[cs]
		if r.seg > 0 {
			v.segsOK = false
			v.problem(cs, "segment %d is missing", r.seg)
		} else {
			v.problem(cs, "blob is missing")
		}
	}
	if !v.segsOK || v.structural {
		return // what the records say cannot be compared
	}
	for _, b := range m.Blobs {
		claim, ok := v.refs[b]
		switch {
		case !ok:
			v.problem(b, "listed blob that no event references")
		case v.sizeClash[b]:
			v.problem(b, "events disagree on the blob's size")
		default:
			if r := v.roles[b]; r != nil && r.hashed && r.size != claim {
				v.problem(b, "blob is %d bytes, its events say %d", r.size, claim)
			}
		}
	}
	if !maps.Equal(v.counts, m.Counts) {
		v.problem(v.rep.Root, "manifest: event counts by kind differ from the records'")
	}
	if len(v.steps) != m.Steps {
		v.problem(v.rep.Root, "manifest: %d steps, the records have %d", m.Steps, len(v.steps))
	}
	bytesTotal := int64(0)
	for _, seg := range m.Segments {
		bytesTotal += seg.Bytes
	}
	for _, n := range v.refs {
		bytesTotal += n
	}
	if bytesTotal != m.Bytes {
		v.problem(v.rep.Root, "manifest: %d bytes, its segments and blobs hold %d", m.Bytes, bytesTotal)
	}
}

// Write writes the bundle of finished recording id to w: its manifest raw
// (parsed as m) under root, then every segment and blob m lists, each
// once, read with open and re-hashed on the way (a blob held damaged fails
// the export rather than shipping). It streams: only the manifest is held
// in memory. On error, w holds a partial bundle the caller discards.
func Write(w io.Writer, id, root string, raw []byte, m *Manifest, open func(cid.Cid) (blobs.BlobReader, error)) error {
	rc, _ := blobs.ParseCID(root)
	bw := bufio.NewWriterSize(w, 256<<10)
	hdr := Header(rc)
	bw.Write(binary.AppendUvarint(nil, uint64(len(hdr))))
	bw.Write(hdr)
	bw.Write(binary.AppendUvarint(nil, uint64(CIDLen+len(raw))))
	bw.Write(rc.Bytes())
	bw.Write(raw)
	written := map[string]bool{root: true}
	h := sha256.New()
	put := func(cs string) error {
		if written[cs] {
			return nil
		}
		written[cs] = true
		c, err := blobs.ParseCID(cs)
		if err != nil {
			return fmt.Errorf("store: manifest %s lists %q: %w", root, cs, err)
		}
		f, err := open(c)
		if err != nil {
			return fmt.Errorf("store: bundle of %s: %w", id, err)
		}
		defer f.Close()
		n := f.Size()
		if n > MaxBundleSection-CIDLen {
			return fmt.Errorf("store: blob %s is %d bytes, over the bundle section limit", cs, n)
		}
		bw.Write(binary.AppendUvarint(nil, uint64(CIDLen+n)))
		bw.Write(c.Bytes())
		h.Reset()
		if _, err := io.CopyN(io.MultiWriter(bw, h), f, n); err != nil {
			return fmt.Errorf("store: bundle of %s: blob %s: %w", id, cs, err)
		}
		if d, _ := blobs.Digest(c); !bytes.Equal(h.Sum(nil), d) {
			return fmt.Errorf("store: bundle of %s: blob %s does not match its CID (run flightrec verify)", id, cs)
		}
		return nil
	}
	for _, seg := range m.Segments {
		if err := put(seg.CID); err != nil {
			return err
		}
	}
	for _, b := range m.Blobs {
		if err := put(b); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store: bundle of %s: %w", id, err)
	}
	return nil
}
