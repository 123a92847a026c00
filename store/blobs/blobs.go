package blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/flightrec/flightrec/store/layout"
)

// Blobs is a content-addressed blob store: a blob's name is the CID of its
// bytes (CIDv1, raw codec, sha2-256), so identical bytes are stored once.
type Blobs interface {
	// Put stores data durably and returns its CID; created is false when
	// the blob was already there (nothing is rewritten).
	Put(data []byte) (c cid.Cid, created bool, err error)
	// PutMany stores a batch durably and returns the CIDs in input order.
	PutMany(datas [][]byte) ([]cid.Cid, error)
	// Open opens a blob for reading; a missing blob is ErrNotFound.
	Open(c cid.Cid) (BlobReader, error)
	// Stat returns a blob's size; a missing blob is ErrNotFound.
	Stat(c cid.Cid) (int64, error)
	// Delete removes a blob; a missing blob is ErrNotFound.
	Delete(c cid.Cid) error
	// Walk calls fn for every blob, in no particular order, stopping at
	// the first error fn returns (and returning it).
	Walk(fn func(c cid.Cid, size int64) error) error
}

// SequencePutter is a blob store that can keep a blob against the one a
// sequence showed before it (FSBlobs.PutManyAfter); the object store's
// packs keep no deltas and do not implement it.
type SequencePutter interface {
	PutManyAfter(prev cid.Cid, datas [][]byte) ([]cid.Cid, error)
}

// Store is what the store facade needs of a blob store: the
// content-addressed operations, the holds and sweeps of garbage
// collection, and what verify and metrics read. FSBlobs is the local one
// (loose files and packs under a directory); an object-store one (issue
// 20) implements it over a Backend.
type Store interface {
	Blobs
	// PutFile stores the file at src by moving it into place (a built
	// video); created is false when the blob was already stored.
	PutFile(src string) (c cid.Cid, created bool, err error)
	// PutSeekable stores data as Put does, under the CID of data, but
	// kept compressed in frames that end only at cuts (see zseek.go);
	// Open reads it back as the uncompressed bytes.
	PutSeekable(data []byte, cuts []int64) (c cid.Cid, created bool, err error)
	// Hold brackets storing blobs and then referencing them: a sweep
	// beginning meanwhile waits for its release (see gc.go).
	Hold() (release func())
	// BeginSweep starts a sweep (see gc.go).
	BeginSweep() Sweeper
	// PackDamage lists the damaged regions of packs and the blobs found
	// corrupt in them, by CID.
	PackDamage() (regions []PackDamage, corrupt map[string]PackDamage)
	// StoredBytes is the space the blobs take.
	StoredBytes() (int64, error)
	// Close releases what the store holds open.
	Close() error
}

// Sweeper is one sweep of garbage collection: Collect removes what is
// stored, not live and not touched since BeginSweep; End lets the next
// sweep begin.
type Sweeper interface {
	Collect(live func(cid.Cid) bool, progress func(done, total int)) (CollectReport, error)
	Touched(c cid.Cid) bool
	End()
}

// BlobReader reads one blob.
type BlobReader interface {
	io.ReadSeekCloser
	io.ReaderAt
	Size() int64
}

// FSBlobs keeps blobs as files:
//
//	DIR/<shard>/<cid>
//
// where <cid> is the canonical base32 string ("bafkrei…", 59 characters)
// and <shard> is the two characters before its last one ("next-to-last/2",
// as go-ds-flatfs shards). The start of every sha2-256 CIDv1 string is the
// same constant prefix, and the last character carries only 3 bits of the
// digest, so the two before it are uniformly distributed: 1024 shards that
// fill evenly.
//
// A blob is written to DIR/<shard>/.tmp-<random> (a name that never parses
// as a CID), fsynced, renamed to its final name, and the shard directory is
// fsynced; a new shard directory is made durable by fsyncing DIR. A file
// with a CID name is therefore always complete. OpenFSBlobs removes
// temporaries a crash left behind, so one data directory must be opened by
// one process at a time.
type FSBlobs struct {
	dir string
	raw Local // the loose blobs, by key "<shard>/<cid>"

	mu      sync.Mutex
	flights map[string]*flight // blobs being written or deleted, by CID string
	shards  sync.Map           // shard name → struct{}: directories known durable
	shardMu sync.Mutex         // serializes making shard directories
	packs   *packs             // blobs that came in batches (see packs.go)

	// Garbage collection (gc.go). gcMu guards sweep and gen; it is never
	// held while taking another lock except by Collect, which takes it
	// inside packs.mu (lock order: packs.mu, then gcMu).
	gcMu     sync.Mutex
	sweep    *Sweep        // the sweep in progress, nil when none
	gen      *holdGen      // the current generation of puts and holds
	sweepSem chan struct{} // one sweep at a time

	// readOnly is set by a read-only open: no write, and nothing on disk
	// tidied (see openFSBlobs).
	readOnly bool
}

var _ Store = (*FSBlobs)(nil)

// flight is one goroutine's claim on a CID while it writes or deletes it;
// others wanting the same CID wait for done and then look again, so a Put
// that finds a blob in flight returns only once it is durable.
type flight struct{ done chan struct{} }

// blobWorkers bounds the goroutines of one PutMany (writes and fsyncs).
const blobWorkers = 16

const tmpPrefix = layout.TempPrefix

// OpenFSBlobs opens (creating if needed) a blob directory. It removes
// temporary files a crash left behind and fsyncs every shard directory, so
// that a blob a crashed process renamed but never made durable is durable
// before this process reports it as present.
func OpenFSBlobs(dir string) (*FSBlobs, error) { return openFSBlobs(dir, false) }

// OpenFSBlobsReadOnly opens a blob directory without creating, removing,
// fsyncing or preallocating anything, for a reader beside a process that
// may be writing.
func OpenFSBlobsReadOnly(dir string) (*FSBlobs, error) { return openFSBlobs(dir, true) }

// openFSBlobs opens a blob directory; readOnly opens it without creating,
// removing, fsyncing or preallocating anything, for a reader beside a
// process that may be writing.
func openFSBlobs(dir string, readOnly bool) (*FSBlobs, error) {
	b := &FSBlobs{dir: dir, raw: Local{Dir: dir}, flights: map[string]*flight{}, gen: newHoldGen(), sweepSem: make(chan struct{}, 1), readOnly: readOnly}
	if readOnly {
		var err error
		if b.packs, err = openPacksReadOnly(layout.BlobTree{Dir: dir}.Packs()); err != nil {
			return nil, err
		}
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: blobs: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: blobs: %w", err)
	}
	var shards []string
	for _, e := range ents {
		if e.IsDir() && isShardName(e.Name()) {
			shards = append(shards, e.Name())
		}
	}
	err = parallel(len(shards), blobWorkers, func(i int) error {
		sd := layout.BlobTree{Dir: dir}.Shard(shards[i])
		f, err := os.Open(sd)
		if err != nil {
			return err
		}
		defer f.Close()
		for {
			names, err := f.Readdirnames(1024)
			for _, n := range names {
				if strings.HasPrefix(n, tmpPrefix) {
					if err := os.Remove(filepath.Join(sd, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
		b.shards.Store(shards[i], struct{}{})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: blobs: open %s: %w", dir, err)
	}
	if err := layout.SyncDir(dir); err != nil {
		return nil, err
	}
	if b.packs, err = openPacks(layout.BlobTree{Dir: dir}.Packs(), 0); err != nil {
		return nil, err
	}
	return b, nil
}

// Close closes the pack being filled.
func (b *FSBlobs) Close() error { return b.packs.close() }

// PackCut reports the bytes cut from a torn pack tail at open (never
// acknowledged).
func (b *FSBlobs) PackCut() int64 { return b.packs.cut }

func digestOf(c cid.Cid) ([32]byte, bool) {
	var d [32]byte
	dm, err := multihash.Decode(c.Hash())
	if err != nil || dm.Code != multihash.SHA2_256 || len(dm.Digest) != 32 {
		return d, false
	}
	copy(d[:], dm.Digest)
	return d, true
}

// Dir is the blob directory.
func (b *FSBlobs) Dir() string { return b.dir }

func isShardName(s string) bool {
	return len(s) == 2 && isBase32(s[0]) && isBase32(s[1])
}

func isBase32(c byte) bool { return c >= 'a' && c <= 'z' || c >= '2' && c <= '7' }

// shardOf is the shard of a canonical CID string: next-to-last/2.
func shardOf(s string) string { return layout.ShardOf(s) }

// tree names the blob directory's paths.
func (b *FSBlobs) tree() layout.BlobTree { return layout.BlobTree{Dir: b.dir} }

// name checks that c is a CID this store could have made and returns its
// string, shard and path. Only such CIDs reach the filesystem: their
// strings are fixed-length lowercase base32, so no path escapes dir.
func (b *FSBlobs) name(c cid.Cid) (key, shard, path string, err error) {
	if !c.Defined() || c.Version() != 1 || c.Type() != cid.Raw {
		return "", "", "", ErrBadCID
	}
	if dm, err := multihash.Decode(c.Hash()); err != nil || dm.Code != multihash.SHA2_256 || dm.Length != 32 {
		return "", "", "", ErrBadCID
	}
	key = c.String()
	shard = shardOf(key)
	return key, shard, b.tree().Loose(key), nil
}

// Put stores data and returns its CID. It returns once the blob is durable;
// created is false if it was already stored.
func (b *FSBlobs) Put(data []byte) (cid.Cid, bool, error) { return b.put(data, false, nil) }

// put stores one blob: as it is, or (seekable) kept compressed in frames
// ending at cuts when that saves space (PutSeekable).
func (b *FSBlobs) put(data []byte, seekable bool, cuts []int64) (cid.Cid, bool, error) {
	if b.readOnly {
		return cid.Undef, false, ErrReadOnly
	}
	d := sha256.Sum256(data)
	c := FromDigest(d[:])
	// Touch d for a sweep in progress before looking for it (gc.go).
	defer b.enter([][32]byte{d})()
	if _, packed := b.packs.has(d); packed {
		return c, false, nil
	}
	p := pending{c: c, data: data}
	if seekable {
		if _, err := b.Stat(c); err == nil {
			return c, false, nil // stored, in either form
		}
		// Compress only what shrinks by a tenth or more: the rest
		// (already compressed media) is kept as it is.
		if enc := EncodeSeekable(data, cuts); int64(len(enc)) <= int64(len(data))*9/10 {
			back, err := DecodeSeekable(enc)
			if err != nil || !bytes.Equal(back, data) {
				return cid.Undef, false, fmt.Errorf("store: put blob %s: the compressed form does not decode to it (%v)", c, err)
			}
			p = pending{c: c, data: enc, zst: true}
		}
	}
	created, err := b.putBatch([]pending{p})
	if err != nil {
		return cid.Undef, false, err
	}
	return c, created[0], nil
}

// PutMany stores a batch and returns the CIDs in input order. It returns
// once every blob is durable. Hashing, writing and fsyncing the temporary
// files run on a bounded pool of goroutines; then every distinct shard
// directory is fsynced once. Duplicates within the batch are written once.
func (b *FSBlobs) PutMany(datas [][]byte) ([]cid.Cid, error) {
	return b.putMany(datas, nil)
}

// PutManyAfter is PutMany for a batch that continues a sequence of
// frames (an ingest batch's blobs, in the order its recording showed
// them), prev being the sequence's blob before the batch (cid.Undef: none
// known). A new JPEG is then kept, when that pays, as a delta against the
// JPEG shown before it, not only against the blob packed before it (most
// often another recording's, or another run's page): see docs/design.md,
// JPEG deltas. What is stored is the same blobs either way.
func (b *FSBlobs) PutManyAfter(prev cid.Cid, datas [][]byte) ([]cid.Cid, error) {
	var d [32]byte // none: the zero digest, which no blob has
	if prev.Defined() {
		d, _ = digestOf(prev)
	}
	return b.putMany(datas, &d)
}

func (b *FSBlobs) putMany(datas [][]byte, prev *[32]byte) ([]cid.Cid, error) {
	if b.readOnly {
		return nil, ErrReadOnly
	}
	cids := make([]cid.Cid, len(datas))
	ds := make([][32]byte, len(datas))
	if err := parallel(len(datas), blobWorkers, func(i int) error {
		ds[i] = sha256.Sum256(datas[i])
		cids[i] = FromDigest(ds[i][:])
		return nil
	}); err != nil {
		return nil, err
	}
	// Touch every digest for a sweep in progress before looking for any
	// of them (gc.go).
	defer b.enter(ds)()
	// Blobs up to PackMaxBlob go to a pack with one write and one fsync;
	// larger ones are stored loose.
	var packD [][32]byte
	var packData [][]byte
	seen := make(map[cid.Cid]struct{}, len(datas))
	var loose []pending
	for i, c := range cids {
		if _, dup := seen[c]; dup {
			continue
		}
		seen[c] = struct{}{}
		if len(datas[i]) <= PackMaxBlob {
			packD, packData = append(packD, ds[i]), append(packData, datas[i])
		} else {
			loose = append(loose, pending{c: c, data: datas[i]})
		}
	}
	if len(packD) > 0 {
		if err := b.packs.put(packD, packData, prev); err != nil {
			return nil, err
		}
	}
	if len(loose) > 0 {
		if _, err := b.putBatch(loose); err != nil {
			return nil, err
		}
	}
	return cids, nil
}

type pending struct {
	c    cid.Cid
	data []byte
	// zst: data is the seekable compressed form, stored as <cid>.zst.
	zst bool
	// src, when set, is a file holding the blob's size bytes, moved into
	// place instead of data being written (PutFile).
	src  string
	size int64
}

// PutFile stores the file at src as a blob by moving it into place, never
// reading it into memory: a built video may be hundreds of megabytes. src
// must be on the blob store's filesystem (a temporary under the data
// directory) and must not change while this runs. created is false when the
// blob was already stored; then, or on an error, src is left where it was
// for the caller to remove.
func (b *FSBlobs) PutFile(src string) (cid.Cid, bool, error) {
	if b.readOnly {
		return cid.Undef, false, ErrReadOnly
	}
	f, err := os.Open(src)
	if err != nil {
		return cid.Undef, false, fmt.Errorf("store: put blob: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return cid.Undef, false, fmt.Errorf("store: put blob: %w", err)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	c := FromDigest(d[:])
	defer b.enter([][32]byte{d})()
	if _, packed := b.packs.has(d); packed {
		return c, false, nil
	}
	created, err := b.putBatch([]pending{{c: c, src: src, size: n}})
	if err != nil {
		return cid.Undef, false, err
	}
	return c, created[0], nil
}

// putBatch stores distinct blobs and reports which it created. It claims
// each CID; one another goroutine has in flight is retried after that
// flight lands (never waiting while holding claims, so two batches cannot
// deadlock).
func (b *FSBlobs) putBatch(batch []pending) ([]bool, error) {
	created := make([]bool, len(batch))
	idx := make([]int, len(batch))
	for i := range idx {
		idx[i] = i
	}
	for len(idx) > 0 {
		var mine []int
		var waits []*flight
		var later []int
		b.mu.Lock()
		for _, i := range idx {
			key := batch[i].c.String()
			if f := b.flights[key]; f != nil {
				waits = append(waits, f)
				later = append(later, i)
				continue
			}
			b.flights[key] = &flight{done: make(chan struct{})}
			mine = append(mine, i)
		}
		b.mu.Unlock()

		err := b.write(batch, mine, created)

		b.mu.Lock()
		for _, i := range mine {
			key := batch[i].c.String()
			close(b.flights[key].done)
			delete(b.flights, key)
		}
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
		for _, f := range waits {
			<-f.done
		}
		idx = later
	}
	return created, nil
}

// write stores batch[i] for i in which (claimed by the caller): the files
// are written, fsynced and renamed on a bounded pool, then every shard
// directory that got a new name is fsynced once, in parallel.
func (b *FSBlobs) write(batch []pending, which []int, created []bool) error {
	dirty := make([]bool, len(which))
	err := parallel(len(which), blobWorkers, func(j int) error {
		p := &batch[which[j]]
		key, shard, path, err := b.name(p.c)
		if err != nil {
			return err
		}
		if p.zst {
			path = b.tree().LooseCompressed(key)
		}
		size := int64(len(p.data))
		if p.src != "" {
			size = p.size
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
			return nil // already stored: never rewritten
		}
		if !p.zst {
			if fi, err := os.Lstat(b.tree().LooseCompressed(key)); err == nil && fi.Mode().IsRegular() {
				return nil // already stored compressed (PutSeekable)
			}
		}
		// Missing, or (only after outside damage) the wrong size: write
		// it; the rename replaces a damaged file atomically.
		if err := b.ensureShard(shard); err != nil {
			return err
		}
		if p.src != "" {
			err = moveInto(p.src, path)
		} else {
			err = writeTemp(filepath.Dir(path), path, p.data)
		}
		if err != nil {
			return err
		}
		created[which[j]] = true
		dirty[j] = true
		return nil
	})
	// Fsync the directories of what was renamed even after a failure:
	// once this batch's claims are released, a Put that finds those files
	// reports them as stored.
	var dirs []string
	seen := map[string]bool{}
	for j, i := range which {
		if dirty[j] {
			if sh := shardOf(batch[i].c.String()); !seen[sh] {
				seen[sh] = true
				dirs = append(dirs, b.tree().Shard(sh))
			}
		}
	}
	if serr := parallel(len(dirs), blobWorkers, func(i int) error { return layout.SyncDir(dirs[i]) }); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("store: put blob: %w", err)
	}
	return nil
}

// writeTemp writes data to a temporary file in dir, fsyncs it and renames
// it to path. The caller fsyncs dir.
func writeTemp(dir, path string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o444); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// moveInto makes the file at src read-only and durable and renames it to
// path. The caller fsyncs path's directory.
func moveInto(src, path string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(src, 0o444)
	}
	if err != nil {
		return err
	}
	return os.Rename(src, path)
}

// ensureShard makes a shard directory exist durably.
func (b *FSBlobs) ensureShard(shard string) error {
	if _, ok := b.shards.Load(shard); ok {
		return nil
	}
	b.shardMu.Lock()
	defer b.shardMu.Unlock()
	if _, ok := b.shards.Load(shard); ok {
		return nil
	}
	err := os.Mkdir(b.tree().Shard(shard), 0o755)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// Whether we made it or found it (made by a crashed process, maybe
	// not yet durable), fsync the parent once.
	if err := layout.SyncDir(b.dir); err != nil {
		return err
	}
	b.shards.Store(shard, struct{}{})
	return nil
}

// fileBlob is an open blob file.
type fileBlob struct {
	*os.File
	size int64
}

func (f *fileBlob) Size() int64 { return f.size }

// Open opens blob c for reading.
func (b *FSBlobs) Open(c cid.Cid) (BlobReader, error) { return b.open(c, false) }

func (b *FSBlobs) open(c cid.Cid, retried bool) (BlobReader, error) {
	key, _, _, err := b.name(c)
	if err != nil {
		return nil, err
	}
	if d, ok := digestOf(c); ok {
		for try := 0; ; try++ {
			loc, packed := b.packs.has(d)
			if !packed {
				break // loose, or not stored
			}
			r, err := b.packs.open(loc)
			if errors.Is(err, ErrNotFound) && try < 3 {
				// A repack moved the blob and removed the pack we
				// looked it up in (gc.go): the index says where it
				// went, or that it is gone.
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("blob %s: %w", key, err)
			}
			return r, nil
		}
	}
	r, err := b.raw.Get(context.Background(), looseKey(key))
	if errors.Is(err, ErrNotFound) {
		r, err = b.openCompressed(key)
	}
	if errors.Is(err, ErrNotFound) {
		if b.reloadOnMiss(retried) {
			return b.open(c, true)
		}
		return nil, b.missing(c, key)
	}
	if err != nil {
		return nil, fmt.Errorf("store: blob %s: %w", key, err)
	}
	return r, nil
}

// openCompressed opens the loose blob key kept compressed; a missing one
// is ErrNotFound.
func (b *FSBlobs) openCompressed(key string) (BlobReader, error) {
	f, err := b.raw.Get(context.Background(), looseKey(key)+layout.CompressedSuffix)
	if err != nil {
		return nil, err
	}
	s, err := OpenSeekable(f, f.Size(), f)
	if err != nil {
		f.Close()
		if errors.Is(err, ErrBadSeekable) {
			// Never served: answered as a corrupt blob is.
			return nil, fmt.Errorf("blob %s: %w: %w", key, ErrBlobCorrupt, err)
		}
		return nil, fmt.Errorf("blob %s: %w", key, err)
	}
	return s, nil
}

// PutSeekable stores data under its CID, kept compressed (zseek.go) when
// that saves space. The compressed form is decoded and compared before it
// is written, so a compressor fault can never put other bytes under the
// CID. A blob already stored in either form is not rewritten.
func (b *FSBlobs) PutSeekable(data []byte, cuts []int64) (cid.Cid, bool, error) {
	return b.put(data, true, cuts)
}

// looseKey is the backend key of the loose blob whose CID string is key.
func looseKey(key string) string { return shardOf(key) + "/" + key }

// ErrBlobCorrupt is returned for a packed blob whose bytes do not match its
// CID: it is never served.
var ErrBlobCorrupt = errors.New("blob is corrupt: its stored bytes do not match its CID")

// missing says why blob c is neither packed nor loose: corrupt in a pack,
// or not stored.
func (b *FSBlobs) missing(c cid.Cid, key string) error {
	d, _ := digestOf(c)
	if loc, bad := b.packs.corruptAt(d); bad {
		return fmt.Errorf("blob %s (pack %d, offset %d): %w", key, loc.pack, loc.off, ErrBlobCorrupt)
	}
	return fmt.Errorf("blob %s: %w", key, ErrNotFound)
}

// reloadOnMiss is a read-only store's second look for a blob it did not
// find: a writer beside it may have packed the blob since it loaded the
// pack index, so it loads the index again. It reports whether to look
// again.
func (b *FSBlobs) reloadOnMiss(retried bool) bool {
	if !b.readOnly || retried {
		return false
	}
	b.packs.reload()
	return true
}

// Stat returns the size of blob c.
func (b *FSBlobs) Stat(c cid.Cid) (int64, error) { return b.stat(c, false) }

func (b *FSBlobs) stat(c cid.Cid, retried bool) (int64, error) {
	key, _, _, err := b.name(c)
	if err != nil {
		return 0, err
	}
	if d, ok := digestOf(c); ok {
		if loc, packed := b.packs.has(d); packed {
			return loc.raw, nil
		}
	}
	size, err := b.raw.Stat(context.Background(), looseKey(key))
	if errors.Is(err, ErrNotFound) {
		var r BlobReader
		if r, err = b.openCompressed(key); err == nil {
			size = r.Size()
			r.Close()
		}
	}
	if errors.Is(err, ErrNotFound) {
		if b.reloadOnMiss(retried) {
			return b.stat(c, true)
		}
		return 0, b.missing(c, key)
	}
	if err != nil {
		return 0, fmt.Errorf("store: blob %s: %w", key, err)
	}
	return size, nil
}

// Delete removes blob c durably. A Put of the same bytes running at the
// same time is ordered before or after it, never interleaved; deciding that
// no recording still needs the blob is the caller's (retention's) job.
func (b *FSBlobs) Delete(c cid.Cid) error {
	if b.readOnly {
		return ErrReadOnly
	}
	key, _, _, err := b.name(c)
	if err != nil {
		return err
	}
	if d, ok := digestOf(c); ok {
		if _, packed := b.packs.has(d); packed {
			// A packed blob's space comes back when a sweep repacks the
			// pack without it (Sweep.Collect); until then it stays
			// readable.
			return fmt.Errorf("blob %s: %w", key, ErrPacked)
		}
	}
	defer b.claim(key)()
	err = b.raw.Delete(context.Background(), looseKey(key))
	// Both forms go: a plain Put and a PutSeekable racing may have left
	// both.
	zerr := b.raw.Delete(context.Background(), looseKey(key)+layout.CompressedSuffix)
	switch {
	case zerr != nil && !errors.Is(zerr, ErrNotFound):
		err = zerr // a failure to remove either is reported
	case zerr == nil && errors.Is(err, ErrNotFound):
		err = nil // only the compressed form was there
	}
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("blob %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: delete blob %s: %w", key, err)
	}
	return nil
}

// claim waits until no other goroutine has key in flight, claims it, and
// returns the function that releases it.
func (b *FSBlobs) claim(key string) (release func()) {
	for {
		b.mu.Lock()
		f := b.flights[key]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			b.flights[key] = f
			b.mu.Unlock()
			break
		}
		b.mu.Unlock()
		<-f.done
	}
	return func() {
		b.mu.Lock()
		close(b.flights[key].done)
		delete(b.flights, key)
		b.mu.Unlock()
	}
}

// ErrPacked is returned by Delete for a blob that lives in a pack.
var ErrPacked = errors.New("blob is packed; it is removed by repacking")

// Walk calls fn with every blob and its size: packed blobs, then loose
// ones shard by shard. Files that
// are not blobs (temporaries, stray names, misplaced CIDs) are skipped.
func (b *FSBlobs) Walk(fn func(c cid.Cid, size int64) error) error {
	if err := b.packs.each(func(d [32]byte, n int64) error { return fn(FromDigest(d[:]), n) }); err != nil {
		return err
	}
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		return fmt.Errorf("store: walk blobs: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || !isShardName(e.Name()) {
			continue
		}
		files, err := os.ReadDir(b.tree().Shard(e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: walk blobs: %w", err)
		}
		for _, f := range files {
			c, compressed, ok := looseName(f, e.Name())
			if !ok {
				continue
			}
			var size int64
			if compressed {
				r, err := b.openCompressed(c.String())
				if errors.Is(err, ErrNotFound) {
					continue // deleted while walking
				}
				if err != nil {
					return fmt.Errorf("store: walk blobs: %w", err)
				}
				size = r.Size()
				r.Close()
			} else {
				fi, err := f.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue // deleted while walking
				}
				if err != nil {
					return fmt.Errorf("store: walk blobs: %w", err)
				}
				size = fi.Size()
			}
			if err := fn(c, size); err != nil {
				return err
			}
		}
	}
	return nil
}

// looseName parses the name of a file in shard directory shard as a loose
// blob's: its CID and whether it is kept compressed. Temporaries, stray
// names and misplaced CIDs are not blobs.
func looseName(f fs.DirEntry, shard string) (c cid.Cid, compressed, ok bool) {
	n := f.Name()
	if !f.Type().IsRegular() || strings.HasPrefix(n, ".") {
		return cid.Undef, false, false
	}
	n, compressed = strings.CutSuffix(n, layout.CompressedSuffix)
	if len(n) < 4 || shardOf(n) != shard {
		return cid.Undef, false, false
	}
	c, err := ParseCID(n)
	return c, compressed, err == nil
}

// parallel runs fn(0..n-1) on at most workers goroutines (inline when n is
// 1) and returns the first error; after an error no new index starts.
func parallel(n, workers int, fn func(i int) error) error {
	if n == 0 {
		return nil
	}
	if n == 1 {
		return fn(0)
	}
	workers = min(workers, n)
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
