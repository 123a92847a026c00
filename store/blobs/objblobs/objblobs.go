// Package objblobs is a blob store (blobs.Store) over an object store
// (objstore.Store: S3, or a directory of objects), what `serve --blobs
// s3://…` stores blobs in. Its objects, under the store's prefix:
//
//	loose/<shard>/<cid>       one blob larger than PackMaxBlob, or put alone
//	loose/<shard>/<cid>.zst   the same, kept in the seekable zstd form
//	                          (loose.go) because that saves a tenth
//	packs/<sha256 hex>        a pack: many small blobs written with one PUT
//
// All are content-addressed and written create-only, so two nodes
// writing the same blob write the same key and neither overwrites the
// other. A pack object is self-describing (see packFormat): its header
// holds the digest, offset and stored length of every blob in it, and the
// blob's size and whether it is kept compressed, so the index of which
// pack holds which CID is rebuilt by reading the headers of the packs
// listed under packs/, by this node at open and by any other node that
// shares the bucket. A blob in a pack is read with one ranged GET (and
// decompressed when it is kept compressed).
//
// Ack rule: Put, PutMany and PutFile return only after the object store
// answered the PUT (S3's acknowledgement is its durability); a failure
// (objstore.ErrUnavailable when the store cannot be reached) returns an
// error and nothing is acknowledged on its strength.
package objblobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/objbackend"
	"github.com/flightrec/flightrec/store/objstore"
)

// Key prefixes of the two kinds of object.
const (
	loosePrefix = "loose/"
	packPrefix  = "packs/"
)

// packFormat: a pack object is (integers big-endian)
//
//	magic "FRPACK2\n" (8 bytes)
//	count uint32
//	count entries of 57 bytes:
//	    digest [32]byte   sha2-256 of the blob (uncompressed)
//	    offset uint64     of the stored bytes, from the object's start
//	    stored uint64     length of the stored bytes
//	    raw    uint64     the blob's size; at most blobs.PackMaxBlob when
//	                      compressed (a plain entry, such as a rescued
//	                      blob of any size, is bounded by its object)
//	    flags  uint8      bit 0 (flagZstd): the stored bytes are the
//	                      blob's zstd frame (blobs.CompressPacked); else
//	                      they are the blob, and raw == stored. Other
//	                      bits are zero.
//	the stored bytes, at their offsets
//
// The flag, not raw != stored, says how an entry is kept, so an entry is
// never read by guessing; a header whose entries break these rules (a
// flag unknown, a compressed entry above PackMaxBlob, a plain entry with raw != stored,
// bytes outside the object) is damaged, as a bad magic is.
//
// Version 1, what the previous version wrote and is still read (its
// blobs are all plain), is
//
//	magic "FRPACK1\n", count uint32,
//	count entries of: digest [32]byte, offset uint64, length uint64
//
// The header comes first so that a reader rebuilding the index reads a
// prefix of the object, not its whole. Packs written now, a sweep's
// rewrites included, are version 2, which a node of the previous version
// cannot read (bad magic): the nodes sharing a bucket are upgraded before
// any of them writes.
const (
	packMagic    = "FRPACK2\n"
	packMagicV1  = "FRPACK1\n"
	entryBytes   = 32 + 8 + 8 + 8 + 1
	entryBytesV1 = 32 + 8 + 8
	headerFixed  = len(packMagic) + 4
	flagZstd     = 1 << 0
	// headerGuess is how much of a pack's start the index rebuild reads
	// in its first GET: the whole header of a pack of up to ~1100 blobs.
	headerGuess = 64 << 10
)

// loc is where a packed blob lies, and how it is kept.
type loc struct {
	pack   string // key of the pack object
	off, n int64  // the stored bytes
	raw    int64  // the blob's size
	z      bool   // the stored bytes are the blob's zstd frame
}

// Store is a blob store over an object store.
type Store struct {
	obj objstore.Store
	raw objbackend.Backend // the loose blobs

	opts Options
	// incarnation tells this opening's hold records and packs from those
	// of the same node's earlier runs; seq numbers them.
	incarnation string
	seq         atomic.Int64

	mu    sync.RWMutex
	index map[[32]byte]loc   // packed blobs
	packs map[string][]entry // pack keys whose headers are in index, with their entries
	// rescued: the blobs this node stored again after the sweep of that
	// epoch condemned them (gc.go).
	rescued map[[32]byte]int64
	// reloadMu serializes index reloads (a miss reloads: another node may
	// have packed the blob since, or a sweep moved it).
	reloadMu sync.Mutex

	// cond is this node's view of the last sweep's condemned set (gc.go).
	cond condView
	hook func(step string) // tests: called at each step of a sweep
	// headerReads counts the pack headers read (tests: a snapshot spares
	// them).
	headerReads atomic.Int64
}

var _ blobs.Store = (*Store)(nil)

// Open opens the blob store kept in obj with the default Options.
func Open(ctx context.Context, obj objstore.Store) (*Store, error) {
	return OpenWith(ctx, obj, Options{})
}

// OpenWith opens the blob store kept in obj and loads its pack index from
// the packs' headers. An unreachable store fails (objstore.ErrUnavailable).
func OpenWith(ctx context.Context, obj objstore.Store, opts Options) (*Store, error) {
	return openWith(ctx, obj, opts, nil)
}

// openWith is OpenWith with a test's hook, called at each step of a
// sweep (gc.go).
func openWith(ctx context.Context, obj objstore.Store, opts Options, hook func(step string)) (*Store, error) {
	s := &Store{obj: obj, hook: hook, raw: objbackend.Backend{Store: obj}, opts: opts.withDefaults(),
		incarnation: randHex(4), index: map[[32]byte]loc{}, packs: map[string][]entry{}, rescued: map[[32]byte]int64{}}
	s.loadSnapshot(ctx)
	before := s.headerReads.Load()
	if err := s.reload(ctx, true); err != nil {
		return nil, fmt.Errorf("store: blobs on %s: %w", obj, err)
	}
	if s.headerReads.Load() > before {
		// The next node to open reads these headers from the snapshot.
		s.saveSnapshot(ctx)
	}
	return s, nil
}

// snapshotKey holds the pack index, so that opening reads one object and
// lists packs/ rather than read every pack's header. It is a cache: any
// node writes it, the last write wins, and a reader trusts it only for
// the packs still listed (and reads the headers of the others).
const snapshotKey = "index/packs"

// maxSnapshotEntry bounds an entry a snapshot names, which no object's
// size bounds: a reader allocates that much for it. Packed blobs are at
// most blobs.PackMaxBlob, but a rescue packs a condemned blob whole (a
// sealed segment, an outlined payload), and those stay far below it.
const maxSnapshotEntry = 256 << 20

// snapshot format: "FRIDX2\n", then per pack: key length uint16, key,
// count uint32, count entries as in a version-2 pack header. A snapshot
// of version 1 ("FRIDX1\n", entries as in a version-1 header), which
// names version-1 packs only, is still read.
const (
	snapshotMagic   = "FRIDX2\n"
	snapshotMagicV1 = "FRIDX1\n"
)

// saveSnapshot writes the pack index; a failure only costs the next
// opening its header reads.
func (s *Store) saveSnapshot(ctx context.Context) {
	s.mu.RLock()
	var b bytes.Buffer
	b.WriteString(snapshotMagic)
	for key, ents := range s.packs {
		b.Write(binary.BigEndian.AppendUint16(nil, uint16(len(key))))
		b.WriteString(key)
		b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(ents))))
		for _, e := range ents {
			b.Write(appendEntry(nil, e))
		}
	}
	s.mu.RUnlock()
	s.obj.Put(ctx, snapshotKey, bytes.NewReader(b.Bytes()), int64(b.Len()), objstore.PutOptions{})
}

// loadSnapshot indexes the packs the snapshot holds; reload then forgets
// those no longer listed. A missing snapshot loads nothing, a damaged one
// the packs before the damage.
func (s *Store) loadSnapshot(ctx context.Context) {
	b, _, err := objstore.ReadAll(ctx, s.obj, snapshotKey)
	if err != nil {
		return
	}
	parseSnapshot(b, func(key string, ents []entry) { s.addPack(key, ents) })
}

// parseSnapshot calls add with each pack a snapshot names, up to the end
// or the first damage. An entry is checked as far as it can be without
// its pack's size: what it names lies within what a pack can hold
// (a reader reads no more than PackMaxBlob for it).
func parseSnapshot(b []byte, add func(key string, ents []entry)) {
	var size int
	switch {
	case bytes.HasPrefix(b, []byte(snapshotMagic)):
		size = entryBytes
	case bytes.HasPrefix(b, []byte(snapshotMagicV1)):
		size = entryBytesV1
	default:
		return
	}
	b = b[len(snapshotMagic):]
	for len(b) >= 2 {
		kl := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+kl+4 {
			return
		}
		key := string(b[2 : 2+kl])
		count := int(binary.BigEndian.Uint32(b[2+kl:]))
		b = b[2+kl+4:]
		if count < 0 || len(b)/size < count || !strings.HasPrefix(key, packPrefix) {
			return
		}
		ents := make([]entry, count)
		for i := range ents {
			e, err := parseEntry(b[i*size:(i+1)*size], int64(headerFixed), math.MaxInt64)
			if err != nil || e.n > maxSnapshotEntry {
				return
			}
			ents[i] = e
		}
		b = b[count*size:]
		add(key, ents)
	}
}

// String names the object store (never a credential).
func (s *Store) String() string { return s.obj.String() }

// reload reads the header of every pack not yet indexed. With prune it
// also forgets the packs no longer listed (a sweep removed them) and
// places their blobs in the packs that still hold them.
func (s *Store) reload(ctx context.Context, prune bool) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	listed := map[string]bool{}
	for info, err := range s.obj.List(ctx, packPrefix) {
		if err != nil {
			return err
		}
		listed[info.Key] = true
		s.mu.RLock()
		_, known := s.packs[info.Key]
		s.mu.RUnlock()
		if known {
			continue
		}
		ents, err := s.readHeader(ctx, info.Key, info.Size)
		s.headerReads.Add(1)
		if errors.Is(err, blobs.ErrNotFound) {
			delete(listed, info.Key) // removed since the listing
			continue
		}
		if err != nil {
			return err
		}
		s.addPack(info.Key, ents)
	}
	if prune {
		s.prune(listed)
	}
	return nil
}

// prune forgets every pack not in listed and rebuilds the index from the
// packs kept.
func (s *Store) prune(listed map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := false
	for key := range s.packs {
		if !listed[key] {
			delete(s.packs, key)
			gone = true
		}
	}
	if !gone {
		return
	}
	s.index = make(map[[32]byte]loc, len(s.index))
	for key, ents := range s.packs {
		for _, e := range ents {
			if _, ok := s.index[e.d]; !ok {
				s.index[e.d] = e.in(key)
			}
		}
	}
}

// entry is a pack header's entry.
type entry struct {
	d      [32]byte
	off, n int64 // the stored bytes
	raw    int64 // the blob's size (n, unless z)
	z      bool  // the stored bytes are the blob's zstd frame
}

// in is where e lies in pack key.
func (e entry) in(key string) loc { return loc{pack: key, off: e.off, n: e.n, raw: e.raw, z: e.z} }

// appendEntry appends e in the version-2 layout (packFormat).
func appendEntry(b []byte, e entry) []byte {
	b = append(b, e.d[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.off))
	b = binary.BigEndian.AppendUint64(b, uint64(e.n))
	b = binary.BigEndian.AppendUint64(b, uint64(e.raw))
	var flags byte
	if e.z {
		flags |= flagZstd
	}
	return append(b, flags)
}

// parseEntry reads one entry of a header, of version 2 when it is
// entryBytes long, else of version 1 (entryBytesV1), and checks that its
// stored bytes lie between the header's end (hlen) and the object's
// (size), and that it follows packFormat's rules.
func parseEntry(p []byte, hlen, size int64) (entry, error) {
	var e entry
	copy(e.d[:], p[:32])
	off, n := binary.BigEndian.Uint64(p[32:]), binary.BigEndian.Uint64(p[40:])
	// Compared as unsigned, so that no sum overflows: an entry of a
	// damaged header never names more than the object holds.
	if off < uint64(hlen) || off > uint64(size) || n > uint64(size)-off {
		return e, errors.New("lies outside the object")
	}
	e.off, e.n, e.raw = int64(off), int64(n), int64(n)
	if len(p) == entryBytesV1 {
		return e, nil
	}
	raw, flags := binary.BigEndian.Uint64(p[48:]), p[56]
	switch {
	case flags&^flagZstd != 0:
		return e, fmt.Errorf("unknown flags %#x", flags)
	case flags&flagZstd != 0 && raw > blobs.PackMaxBlob:
		// A plain entry is bounded by its object (a rescue packs a
		// condemned blob of any size); a compressed one by what a
		// reader may decompress it to.
		return e, fmt.Errorf("a compressed blob of %d bytes, more than a pack holds", raw)
	case flags&flagZstd == 0 && raw != n:
		return e, fmt.Errorf("a plain blob of %d bytes stored in %d", raw, n)
	}
	e.raw, e.z = int64(raw), flags&flagZstd != 0
	return e, nil
}

// parseHeader reads the header of a pack object of size bytes from p, a
// prefix of it. When p is too short to hold the whole header it returns
// need, the header's length, for the caller to read that much and call
// again. It allocates no more than p's length allows, whatever the
// header says.
func parseHeader(p []byte, size int64) (ents []entry, need int64, err error) {
	if len(p) < headerFixed || int64(len(p)) > size {
		return nil, 0, errors.New("not a pack (bad magic)")
	}
	var eb int64
	switch string(p[:len(packMagic)]) {
	case packMagic:
		eb = entryBytes
	case packMagicV1:
		eb = entryBytesV1
	default:
		return nil, 0, errors.New("not a pack (bad magic)")
	}
	count := int64(binary.BigEndian.Uint32(p[len(packMagic):]))
	hlen := int64(headerFixed) + count*eb
	if hlen > size {
		return nil, 0, fmt.Errorf("header of %d entries exceeds the object", count)
	}
	if hlen > int64(len(p)) {
		return nil, hlen, nil
	}
	ents = make([]entry, count)
	for i := range ents {
		at := int64(headerFixed) + int64(i)*eb
		if ents[i], err = parseEntry(p[at:at+eb], hlen, size); err != nil {
			return nil, 0, fmt.Errorf("entry %d: %w", i, err)
		}
	}
	return ents, 0, nil
}

// readHeader reads a pack's header.
func (s *Store) readHeader(ctx context.Context, key string, size int64) ([]entry, error) {
	p := make([]byte, min(size, headerGuess))
	if err := s.raw.GetRange(ctx, key, 0, p); err != nil {
		return nil, err
	}
	ents, need, err := parseHeader(p, size)
	if err == nil && need > 0 {
		p = make([]byte, need)
		if err := s.raw.GetRange(ctx, key, 0, p); err != nil {
			return nil, err
		}
		ents, _, err = parseHeader(p, size)
	}
	if err != nil {
		return nil, fmt.Errorf("store: pack %s: %w", key, err)
	}
	return ents, nil
}

// addPack indexes a pack's entries; a blob already indexed elsewhere keeps
// its first place, unless over (a rescue: the other place is condemned).
func (s *Store) addPack(key string, ents []entry, over ...bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.packs[key] = ents
	for _, e := range ents {
		if _, ok := s.index[e.d]; !ok || len(over) > 0 {
			s.index[e.d] = e.in(key)
		}
	}
}

func (s *Store) has(d [32]byte) (loc, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.index[d]
	return l, ok
}

// name checks that c is a CID this store could have made and returns its
// digest and string.
func name(c cid.Cid) ([32]byte, string, error) {
	var d [32]byte
	if !c.Defined() || c.Version() != 1 || c.Type() != cid.Raw {
		return d, "", blobs.ErrBadCID
	}
	dm, err := multihash.Decode(c.Hash())
	if err != nil || dm.Code != multihash.SHA2_256 || len(dm.Digest) != 32 {
		return d, "", blobs.ErrBadCID
	}
	copy(d[:], dm.Digest)
	return d, c.String(), nil
}

// PutSeekable stores data as Put does, its compressed form's frames
// ending at cuts (a sealed segment's record ends), so that a read of one
// record decodes one frame.
func (s *Store) PutSeekable(data []byte, cuts []int64) (cid.Cid, bool, error) {
	return s.put(data, cuts)
}

// Put stores data as a loose object (one PUT; a batch goes to a pack with
// PutMany), kept compressed when that saves a tenth (loose.go).
func (s *Store) Put(data []byte) (cid.Cid, bool, error) { return s.put(data, nil) }

func (s *Store) put(data []byte, cuts []int64) (cid.Cid, bool, error) {
	ctx := context.Background()
	d := sha256.Sum256(data)
	c := blobs.FromDigest(d[:])
	cond, err := s.condemned(ctx)
	if err != nil {
		return c, false, err
	}
	if s.rescues(cond, d) {
		return c, true, s.rescue(ctx, cond, [][32]byte{d}, [][]byte{data})
	}
	if _, ok := s.has(d); ok {
		return c, false, nil
	}
	created, err := s.putLooseData(ctx, c, data, cuts)
	return c, created, err
}

// PutMany stores a batch: blobs up to blobs.PackMaxBlob not yet indexed go
// into one new pack object (one PUT), each compressed when that saves
// space (blobs.CompressPacked), larger ones loose (compressed when that
// saves space: loose.go). A batch of one new blob is a loose object.
func (s *Store) PutMany(datas [][]byte) ([]cid.Cid, error) {
	ctx := context.Background()
	cond, err := s.condemned(ctx)
	if err != nil {
		return nil, err
	}
	cids := make([]cid.Cid, len(datas))
	var ents []entry
	var packed [][]byte
	var one int // the index of the only packed blob, when only one
	var loose []int
	var rescueDs [][32]byte
	var rescued [][]byte
	seen := map[[32]byte]bool{}
	for i, data := range datas {
		d := sha256.Sum256(data)
		cids[i] = blobs.FromDigest(d[:])
		if seen[d] {
			continue
		}
		seen[d] = true
		if s.rescues(cond, d) {
			rescueDs, rescued = append(rescueDs, d), append(rescued, data)
			continue
		}
		if _, ok := s.has(d); ok {
			continue
		}
		if len(data) > blobs.PackMaxBlob {
			loose = append(loose, i)
			continue
		}
		ents = append(ents, entry{d: d, raw: int64(len(data))})
		packed = append(packed, data)
		one = i
	}
	for _, i := range loose {
		if _, err := s.putLooseData(ctx, cids[i], datas[i], nil); err != nil {
			return nil, err
		}
	}
	if len(rescued) > 0 {
		if err := s.rescue(ctx, cond, rescueDs, rescued); err != nil {
			return nil, err
		}
	}
	if len(ents) == 0 {
		return cids, nil
	}
	if len(ents) == 1 {
		// A pack of one is a loose object with a header.
		if _, err := s.putLooseData(ctx, cids[one], packed[0], nil); err != nil {
			return nil, err
		}
		return cids, nil
	}
	body := encodePack(ents, storedForms(ents, packed))
	sum := sha256.Sum256(body)
	key := packPrefix + hex.EncodeToString(sum[:])
	_, err = s.obj.Put(ctx, key, bytes.NewReader(body), int64(len(body)), objstore.PutOptions{CreateOnly: true})
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return nil, fmt.Errorf("store: put pack of %d blobs: %w", len(ents), err)
	}
	s.addPack(key, ents)
	return cids, nil
}

// storedForms returns the form each blob of datas is packed in, and sets
// its entry's stored length and compressed flag (ents[i].raw is the
// blob's size).
func storedForms(ents []entry, datas [][]byte) [][]byte {
	stored := make([][]byte, len(datas))
	for i, data := range datas {
		stored[i], ents[i].z = blobs.CompressPacked(data)
		ents[i].n = int64(len(stored[i]))
	}
	return stored
}

// encodePack lays out a pack (version 2) of the stored forms of its
// blobs, filling in the entries' offsets; ents' n, raw and z must be set.
func encodePack(ents []entry, stored [][]byte) []byte {
	hlen := int64(headerFixed) + int64(len(ents))*entryBytes
	total := hlen
	for _, d := range stored {
		total += int64(len(d))
	}
	body := make([]byte, 0, total)
	body = append(body, packMagic...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(ents)))
	off := hlen
	for i := range ents {
		ents[i].off = off
		body = appendEntry(body, ents[i])
		off += ents[i].n
	}
	for _, d := range stored {
		body = append(body, d...)
	}
	return body
}

// PutFile stores the file at src as a loose object, streamed and plain (a
// built video, which does not compress), and removes src once stored (as
// the local store moves it into place); when the blob was already stored,
// in either form, or on an error, src is left for the caller.
func (s *Store) PutFile(src string) (cid.Cid, bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return cid.Undef, false, fmt.Errorf("store: put blob: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return cid.Undef, false, fmt.Errorf("store: put blob: %w", err)
	}
	c := blobs.FromDigest(h.Sum(nil))
	ctx := context.Background()
	cond, err := s.condemned(ctx)
	if err != nil {
		return c, false, err
	}
	if d, _, _ := name(c); s.rescues(cond, d) {
		data, err := os.ReadFile(src)
		if err != nil {
			return c, false, fmt.Errorf("store: put blob: %w", err)
		}
		if err := s.rescue(ctx, cond, [][32]byte{d}, [][]byte{data}); err != nil {
			return c, false, err
		}
		f.Close()
		os.Remove(src)
		return c, true, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return cid.Undef, false, fmt.Errorf("store: put blob: %w", err)
	}
	created, err := s.putLoose(ctx, c.String(), false, f, n)
	if err != nil || !created {
		return c, false, err
	}
	f.Close()
	os.Remove(src)
	return c, true, nil
}

// Open opens blob c: a packed blob is read with one ranged GET (and
// decompressed when kept compressed) and checked against c; a loose one
// is read by ranges (and its frames decoded when kept compressed, a small
// one read whole and checked against c: loose.go).
func (s *Store) Open(c cid.Cid) (blobs.BlobReader, error) { return s.open(c, false) }

func (s *Store) open(c cid.Cid, retried bool) (blobs.BlobReader, error) {
	d, key, err := name(c)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if l, ok := s.has(d); ok {
		p := make([]byte, l.n)
		if err := s.raw.GetRange(ctx, l.pack, l.off, p); err != nil {
			if errors.Is(err, blobs.ErrNotFound) && !retried {
				// A sweep rewrote the pack: its live blobs are in another.
				if rerr := s.reload(ctx, true); rerr != nil {
					return nil, rerr
				}
				return s.open(c, true)
			}
			return nil, fmt.Errorf("blob %s (pack %s): %w", key, l.pack, err)
		}
		if l.z {
			if p, err = blobs.DecompressPacked(p, l.raw); err != nil {
				// The frame's checksum or size caught the damage.
				return nil, fmt.Errorf("blob %s (pack %s, offset %d): %w: %w", key, l.pack, l.off, blobs.ErrBlobCorrupt, err)
			}
		}
		if sha256.Sum256(p) != d {
			return nil, fmt.Errorf("blob %s (pack %s, offset %d): %w", key, l.pack, l.off, blobs.ErrBlobCorrupt)
		}
		return blobs.MemBlob{Reader: bytes.NewReader(p)}, nil
	}
	r, err := s.openLoose(ctx, d, key)
	if errors.Is(err, blobs.ErrNotFound) && !retried {
		if rerr := s.reload(ctx, true); rerr != nil {
			return nil, rerr
		}
		return s.open(c, true)
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", key, err)
	}
	return r, nil
}

// Stat returns blob c's size (uncompressed).
func (s *Store) Stat(c cid.Cid) (int64, error) { return s.stat(c, false) }

func (s *Store) stat(c cid.Cid, retried bool) (int64, error) {
	d, key, err := name(c)
	if err != nil {
		return 0, err
	}
	if l, ok := s.has(d); ok {
		return l.raw, nil
	}
	ctx := context.Background()
	n, err := s.statLoose(ctx, key)
	if errors.Is(err, blobs.ErrNotFound) && !retried {
		if rerr := s.reload(ctx, true); rerr != nil {
			return 0, rerr
		}
		return s.stat(c, true)
	}
	if err != nil {
		return 0, fmt.Errorf("blob %s: %w", key, err)
	}
	return n, nil
}

// Delete removes a loose blob, both forms when both are there; a packed
// one is blobs.ErrPacked.
func (s *Store) Delete(c cid.Cid) error {
	d, key, err := name(c)
	if err != nil {
		return err
	}
	if _, ok := s.has(d); ok {
		return fmt.Errorf("blob %s: %w", key, blobs.ErrPacked)
	}
	if err := s.deleteLoose(context.Background(), key); err != nil {
		return fmt.Errorf("blob %s: %w", key, err)
	}
	return nil
}

// Walk calls fn with every packed blob, then every loose one (once, when
// both its forms are there), and each blob's size (uncompressed). The
// size of a blob kept compressed is in its seek table: one ranged GET of
// the object's end per compressed loose blob (two when it is longer than
// tailRead), so a walk of a bucket of many costs as many reads.
func (s *Store) Walk(fn func(c cid.Cid, size int64) error) error {
	s.mu.RLock()
	ents := make([]entry, 0, len(s.index))
	for d, l := range s.index {
		ents = append(ents, entry{d: d, raw: l.raw})
	}
	s.mu.RUnlock()
	for _, e := range ents {
		if err := fn(blobs.FromDigest(e.d[:]), e.raw); err != nil {
			return err
		}
	}
	ctx := context.Background()
	seen := map[[32]byte]bool{}
	return s.raw.List(ctx, loosePrefix, func(key string, size int64) error {
		c, d, compressed, ok := parseLooseKey(key)
		if !ok || seen[d] {
			return nil // not a blob's name, or its other form was reported
		}
		if s.isPacked(d) {
			return nil // reported with the packs
		}
		if compressed {
			var err error
			size, err = s.compressedSize(ctx, c.String(), size)
			if errors.Is(err, blobs.ErrNotFound) {
				return nil // deleted while walking
			}
			if err != nil {
				return fmt.Errorf("store: walk blobs: %w", err)
			}
		}
		seen[d] = true
		return fn(c, size)
	})
}

func (s *Store) isPacked(d [32]byte) bool { _, ok := s.has(d); return ok }

// PackDamage: a packed blob is checked against its CID on every read,
// after its zstd frame is decoded when it is kept compressed (Open
// answers blobs.ErrBlobCorrupt); no damage is tracked here.
func (s *Store) PackDamage() ([]blobs.PackDamage, map[string]blobs.PackDamage) {
	return nil, nil
}

// StoredBytes is the size of every object of the store, by listing: what
// the bucket holds (packed and loose blobs kept compressed counted
// compressed).
func (s *Store) StoredBytes() (int64, error) {
	var total int64
	for _, prefix := range []string{packPrefix, loosePrefix} {
		for info, err := range s.obj.List(context.Background(), prefix) {
			if err != nil {
				return 0, err
			}
			total += info.Size
		}
	}
	return total, nil
}

// Close closes the object store when it holds something open (a Local
// store's lock).
func (s *Store) Close() error {
	if c, ok := s.obj.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// recordingPrefix keeps what a reader needs of each finished recording
// beside the blobs (meta.json, ROOT): recordings/<id>/<name>.
const recordingPrefix = "recordings/"

// PutRecordingFile stores a finished recording's file for other nodes,
// replacing what was there (a reseal changes meta.json and ROOT).
func (s *Store) PutRecordingFile(id, name string, data []byte) error {
	key := recordingPrefix + id + "/" + name
	if _, err := s.obj.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		return fmt.Errorf("store: publish %s: %w", key, err)
	}
	return nil
}

// SideFile reads the file name kept beside recording id for every node
// (share links, comments, views): nil when there is none.
func (s *Store) SideFile(id, name string) ([]byte, error) {
	b, _, err := objstore.ReadAll(context.Background(), s.obj, recordingPrefix+id+"/"+name)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// UpdateSideFile changes the file name beside recording id by
// read-modify-write on its ETag (objstore.Update): two nodes changing it
// at once both keep their change.
func (s *Store) UpdateSideFile(id, name string, change func(old []byte) ([]byte, error)) error {
	_, err := objstore.Update(context.Background(), s.obj, recordingPrefix+id+"/"+name,
		func(old []byte, _ bool) ([]byte, error) { return change(old) })
	return err
}

// RecordingIDs lists the recordings whose ROOT is published, sorted.
func (s *Store) RecordingIDs() ([]string, error) {
	var ids []string
	for info, err := range s.obj.List(context.Background(), recordingPrefix) {
		if err != nil {
			return nil, err
		}
		id, file, ok := strings.Cut(strings.TrimPrefix(info.Key, recordingPrefix), "/")
		if ok && file == "ROOT" {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// RemoveRecordingFiles removes what PutRecordingFile stored for recording
// id, ROOT first (a recording without ROOT is not published), then every
// hold record of it.
func (s *Store) RemoveRecordingFiles(id string) error {
	ctx := context.Background()
	if err := s.obj.Delete(ctx, recordingPrefix+id+"/ROOT"); err != nil {
		return fmt.Errorf("store: unpublish %s: %w", id, err)
	}
	if err := objstore.DeleteUnder(ctx, s.obj, recordingPrefix+id+"/", nil); err != nil {
		return fmt.Errorf("store: unpublish %s: %w", id, err)
	}
	if s.opts.RecordingObjects != nil {
		for _, name := range s.opts.RecordingObjects(id) {
			if err := s.removeObjects(ctx, name); err != nil {
				return fmt.Errorf("store: remove %s's objects: %w", id, err)
			}
		}
	}
	return s.ReleaseHolds(id, "")
}

// removeObjects removes key, or every key under it when it ends in "/"
// (a missing one is not an error).
func (s *Store) removeObjects(ctx context.Context, key string) error {
	if !strings.HasSuffix(key, "/") {
		if err := s.obj.Delete(ctx, key); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return err
		}
		return nil
	}
	return objstore.DeleteUnder(ctx, s.obj, key, nil)
}

// RecordingFile reads a file PutRecordingFile stored; a missing one is
// blobs.ErrNotFound.
func (s *Store) RecordingFile(id, name string) ([]byte, error) {
	key := recordingPrefix + id + "/" + name
	data, _, err := objstore.ReadAll(context.Background(), s.obj, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, blobs.ErrNotFound)
	}
	return data, err
}
