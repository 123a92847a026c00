package objblobs

// Garbage collection on a bucket several nodes write to. A node's sweep
// cannot see what the other nodes are doing in memory, so everything a
// sweep must respect is written to the bucket first:
//
//   - Hold records. Before a batch stores (or reuses) blobs for a
//     recording, its node writes holds/<recording>/<kind>/<node>-<n>: the
//     digests of the batch. The records of an open recording stay until
//     the recording is published (its meta.json and ROOT under
//     recordings/), when the node that sealed it removes them; derived
//     blobs' records stay until the recording is removed. So a blob an
//     open recording on any node uses is named by a hold record, and one
//     a finished recording uses is named by its published manifest. This
//     is the "hold record per batch" of issue 20, not a grace period: an
//     open recording may live for hours, longer than any grace period,
//     and its log (the only other place its references are) is on its
//     node's disk.
//   - The condemned set. A hold record written after a sweep listed the
//     holds is not seen by that sweep, and the batch may reuse a blob the
//     sweep found dead (the frames of a new recording repeat those of a
//     removed one). So a sweep first writes the set of blobs it is about to
//     delete (gc/condemned, with a new epoch), waits Grace, lists the holds
//     again and spares every blob named there; only then does it delete.
//     A writer, after writing its hold record, looks at a view of
//     gc/condemned fetched less than Grace/2 before, and stores a
//     condemned blob again (in a pack of its own, under a key no sweep
//     has condemned) instead of reusing it. Either the sweep's second
//     listing saw the writer's hold, or the hold was written after it,
//     more than Grace after the condemned set was: then the writer's view
//     was fetched after the set was written, and it rescued the blob.
//   - One sweeper at a time, under a Lease; it renews the lease before it
//     deletes and stops when the lease is lost.
//
// The order of a sweep is: list the objects (BeginSweep), list the holds,
// then (the caller) mark the published recordings' references; a writer
// does the reverse: hold, store, publish, release the hold. An object
// listed was stored after its hold was written, so the listing of holds
// sees the hold, unless it was released, and then the recording was
// published before, and the mark sees it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/lease"
	"github.com/flightrec/flightrec/store/objstore"
)

// Key prefixes and keys of the collection's records.
const (
	holdPrefix   = "holds/"
	condemnedKey = "gc/condemned"
	leaseKey     = "gc/lease"
)

// DefaultGrace is how long a sweep waits between condemning blobs and
// deleting them. Every node sharing a bucket must use the same (or a
// shorter one than the sweeper's): a writer refreshes its view of the
// condemned set when it is older than half of its own Grace.
const DefaultGrace = 10 * time.Second

// Options tune a Store. The zero value is the default.
type Options struct {
	// Node names this node in its hold records and packs (default: a
	// random name). Two nodes sharing a bucket must not share one.
	Node string
	// Grace is the wait between condemning and deleting (DefaultGrace).
	Grace time.Duration
	// Lease keeps sweeps to one at a time across the nodes (default: the
	// lease object gc/lease in the store, NewObjectLease).
	Lease Lease
	// Refs lists what a finished recording's manifest references
	// (store.ManifestRefs): a sweep spares the blobs of recordings
	// published while it waited. Without it, a sweep during which a
	// recording was published deletes nothing.
	Refs func(manifest []byte) ([]cid.Cid, error)
	// RecordingObjects names what else a recording keeps in the store
	// beside its published files (cluster mode's lease, batches, seal and
	// documents: ingest.ClusterObjects): a key, or every key under a
	// prefix ending in "/". RemoveRecordingFiles removes them too, so a
	// removed recording leaves nothing of itself in the bucket.
	RecordingObjects func(id string) []string
}

func (o Options) withDefaults() Options {
	if o.Node == "" {
		o.Node = randHex(6)
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	return o
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Lease is the right to sweep, held by one node at a time.
type Lease interface {
	// Acquire takes the lease, or answers ErrLeaseHeld while another
	// holder's is in force.
	Acquire(ctx context.Context) error
	// Renew extends the lease; an error means it is no longer held (and
	// nothing may be deleted on its strength).
	Renew(ctx context.Context) error
	// Release gives the lease up.
	Release(ctx context.Context) error
}

// ErrLeaseHeld: another node is sweeping.
var ErrLeaseHeld = errors.New("another node holds the sweep lease")

// NewObjectLease is a Lease kept in one object of obj (key), through
// store/lease: conditional writes, an epoch, and an expiry judged by the
// nodes' clocks, which must agree to well within ttl. holder names this
// holder; a lease not renewed within ttl may be taken by another.
func NewObjectLease(obj objstore.Store, key, holder string, ttl time.Duration) Lease {
	dir, name := path.Split(key)
	return &objLease{leases: lease.New(obj, strings.TrimSuffix(dir, "/"), time.Now), name: name, holder: holder, ttl: ttl}
}

type objLease struct {
	leases       *lease.Leases
	name, holder string
	ttl          time.Duration

	mu   sync.Mutex
	held lease.Lease // the last write of ours
}

// errLeaseLost: the lease was taken over (it expired) or released.
var errLeaseLost = errors.New("the sweep lease was lost")

func (l *objLease) Acquire(ctx context.Context) error {
	got, err := l.leases.Acquire(ctx, l.name, l.holder, l.ttl)
	if errors.Is(err, lease.ErrHeld) {
		return fmt.Errorf("%w (%v)", ErrLeaseHeld, err)
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.held = got
	l.mu.Unlock()
	return nil
}

func (l *objLease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	got, err := l.leases.Renew(ctx, l.held, l.ttl)
	if errors.Is(err, lease.ErrLost) {
		return errLeaseLost
	}
	if err != nil {
		return err
	}
	l.held = got
	return nil
}

func (l *objLease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.leases.Release(ctx, l.held)
	if errors.Is(err, lease.ErrLost) {
		return nil
	}
	return err
}

func (s *Store) lease() Lease {
	if s.opts.Lease != nil {
		return s.opts.Lease
	}
	// A sweep holds the lease through its grace wait and deletions.
	return NewObjectLease(s.obj, leaseKey, s.opts.Node+"-"+s.incarnation, 4*s.opts.Grace+time.Minute)
}

// HoldFor writes a hold record for recording naming cids: a sweep on any
// node keeps them until ReleaseHolds(recording, kind). kind groups the
// records released together ("batch": those a seal makes redundant,
// "derived": those that last as long as the recording). Call it before
// storing the blobs.
func (s *Store) HoldFor(recording, kind string, cids []cid.Cid) error {
	if len(cids) == 0 {
		return nil
	}
	buf := make([]byte, 0, 32*len(cids))
	for _, c := range cids {
		d, _, err := name(c)
		if err != nil {
			return err
		}
		buf = append(buf, d[:]...)
	}
	key := fmt.Sprintf("%s%s/%s/%s-%s-%d", holdPrefix, recording, kind, s.opts.Node, s.incarnation, s.seq.Add(1))
	if _, err := s.obj.Put(context.Background(), key, bytes.NewReader(buf), int64(len(buf)), objstore.PutOptions{}); err != nil {
		return fmt.Errorf("store: hold blobs of %s: %w", recording, err)
	}
	return nil
}

// ReleaseHolds removes the hold records of recording of kind (every kind
// when kind is "").
func (s *Store) ReleaseHolds(recording, kind string) error {
	prefix := holdPrefix + recording + "/"
	if kind != "" {
		prefix += kind + "/"
	}
	ctx := context.Background()
	for info, err := range s.obj.List(ctx, prefix) {
		if err != nil {
			return err
		}
		if err := s.obj.Delete(ctx, info.Key); err != nil {
			return fmt.Errorf("store: release holds of %s: %w", recording, err)
		}
	}
	return nil
}

// Held reports whether any hold record of recording remains.
func (s *Store) Held(recording string) (bool, error) {
	for _, err := range s.obj.List(context.Background(), holdPrefix+recording+"/") {
		return err == nil, err
	}
	return false, nil
}

// holds reads every hold record: the digests they name.
func (s *Store) holds(ctx context.Context) (map[[32]byte]bool, error) {
	out := map[[32]byte]bool{}
	for info, err := range s.obj.List(ctx, holdPrefix) {
		if err != nil {
			return nil, err
		}
		b, _, err := objstore.ReadAll(ctx, s.obj, info.Key)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // released since the listing: the recording was published
		}
		if err != nil {
			return nil, err
		}
		for i := 0; i+32 <= len(b); i += 32 {
			out[[32]byte(b[i:])] = true
		}
	}
	return out, nil
}

// condDoc is gc/condemned.
type condDoc struct {
	Epoch   int64    `json:"epoch"`
	Digests []string `json:"digests"` // hex sha-256
}

// condView is a node's copy of gc/condemned.
type condView struct {
	mu      sync.Mutex
	fetched time.Time // when the GET that read it began
	epoch   int64
	set     map[[32]byte]bool
}

// condemned returns the condemned set, fetched again when this node's
// copy is older than Grace/2. When the epoch changed (a sweep ran), the
// pack index forgets the packs the sweep removed.
func (s *Store) condemned(ctx context.Context) (condSnap, error) {
	v := &s.cond
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.fetched.IsZero() && time.Since(v.fetched) < s.opts.Grace/2 {
		return condSnap{v.epoch, v.set}, nil
	}
	start := time.Now()
	var d condDoc
	b, _, err := objstore.ReadAll(ctx, s.obj, condemnedKey)
	switch {
	case errors.Is(err, objstore.ErrNotExist):
	case err != nil:
		return condSnap{}, fmt.Errorf("store: reading the condemned blobs: %w", err)
	default:
		if err := json.Unmarshal(b, &d); err != nil {
			return condSnap{}, fmt.Errorf("store: %s: %w", condemnedKey, err)
		}
	}
	if !v.fetched.IsZero() && d.Epoch != v.epoch {
		if err := s.reload(ctx, true); err != nil {
			return condSnap{}, err
		}
	}
	set := make(map[[32]byte]bool, len(d.Digests))
	for _, h := range d.Digests {
		if raw, err := hex.DecodeString(h); err == nil && len(raw) == 32 {
			set[[32]byte(raw)] = true
		}
	}
	v.fetched, v.epoch, v.set = start, d.Epoch, set
	return condSnap{d.Epoch, set}, nil
}

// condSnap is a view of the condemned set.
type condSnap struct {
	epoch int64
	set   map[[32]byte]bool
}

// rescues says whether blob d must be stored again rather than reused: the
// sweep of the view's epoch condemned it, and this node has not stored it
// again since.
func (s *Store) rescues(c condSnap, d [32]byte) bool {
	if !c.set[d] {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.rescued[d]
	return !ok || e != c.epoch
}

// rescue stores blobs a sweep has condemned in a new pack under a key of
// this node's own (no sweep condemned it), and points the index at it.
func (s *Store) rescue(ctx context.Context, c condSnap, ds [][32]byte, datas [][]byte) error {
	ents := make([]entry, len(ds))
	for i := range ds {
		ents[i] = entry{d: ds[i], raw: int64(len(datas[i]))}
	}
	if _, err := s.putPack(ctx, ents, storedForms(ents, datas), true); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		s.rescued[d] = c.epoch
	}
	return nil
}

// putPack writes a pack of ents, whose stored forms are stored, under a
// key no other pack has (its digest, this node's name and a sequence
// number) and indexes it, over the places of its blobs known so far when
// over.
func (s *Store) putPack(ctx context.Context, ents []entry, stored [][]byte, over bool) (string, error) {
	body := encodePack(ents, stored)
	sum := sha256.Sum256(body)
	key := fmt.Sprintf("%s%x-%s-%s-%d", packPrefix, sum[:8], s.opts.Node, s.incarnation, s.seq.Add(1))
	if _, err := s.obj.Put(ctx, key, bytes.NewReader(body), int64(len(body)), objstore.PutOptions{CreateOnly: true}); err != nil {
		return "", fmt.Errorf("store: put pack of %d blobs: %w", len(ents), err)
	}
	if over {
		s.addPack(key, ents, true)
	} else {
		s.addPack(key, ents)
	}
	return key, nil
}

// sweep is one collection (blobs.Sweeper). BeginSweep takes the lease,
// lists the objects, then the holds; Collect decides, condemns, waits,
// spares what was held meanwhile, and deletes.
type sweep struct {
	s     *Store
	lease Lease
	err   error // from BeginSweep; ErrLeaseHeld: another node sweeps
	held  bool
	// loose: the loose objects of each blob, one or both of its forms
	// (plain, compressed), as listed.
	loose map[[32]byte][]objectRef
	packs map[string][]entry
	sizes map[string]int64
	holds map[[32]byte]bool
	// published: the ROOT objects listed after the holds, key to ETag.
	published map[string]string
}

type objectRef struct {
	key  string
	size int64
}

// BeginSweep starts a sweep: it takes the sweep lease (when another node
// holds it, the sweep collects nothing), lists the packs and loose blobs,
// then reads the hold records. The caller's mark phase (the references of
// every recording kept, the published ones included) must start after it
// returns.
func (s *Store) BeginSweep() blobs.Sweeper {
	ctx := context.Background()
	sw := &sweep{s: s, lease: s.lease()}
	if sw.err = sw.lease.Acquire(ctx); sw.err != nil {
		return sw
	}
	sw.held = true
	sw.err = sw.list(ctx)
	return sw
}

func (sw *sweep) list(ctx context.Context) error {
	s := sw.s
	sw.packs, sw.sizes, sw.loose = map[string][]entry{}, map[string]int64{}, map[[32]byte][]objectRef{}
	for info, err := range s.obj.List(ctx, packPrefix) {
		if err != nil {
			return err
		}
		s.mu.RLock()
		ents, ok := s.packs[info.Key]
		s.mu.RUnlock()
		if !ok {
			var err error
			if ents, err = s.readHeader(ctx, info.Key, info.Size); errors.Is(err, blobs.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			s.addPack(info.Key, ents)
		}
		sw.packs[info.Key], sw.sizes[info.Key] = ents, info.Size
	}
	for info, err := range s.obj.List(ctx, loosePrefix) {
		if err != nil {
			return err
		}
		// <cid> and <cid>.zst are the same blob: a sweep that finds it
		// dead deletes both (those listed here: a form written after
		// this listing is its writer's, held before it was written).
		if _, d, _, ok := parseLooseKey(info.Key); ok {
			sw.loose[d] = append(sw.loose[d], objectRef{key: info.Key, size: info.Size})
		}
	}
	var err error
	if sw.holds, err = s.holds(ctx); err != nil {
		return err
	}
	// After the holds: a recording whose holds were released since is
	// published, and listed here or by the caller's mark.
	sw.published, err = s.published(ctx)
	return err
}

// published lists the published recordings' ROOT objects: key to ETag.
func (s *Store) published(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for info, err := range s.obj.List(ctx, recordingPrefix) {
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(info.Key, "/ROOT") {
			if info.ETag == "" {
				st, err := s.obj.Stat(ctx, info.Key)
				if errors.Is(err, objstore.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, err
				}
				info.ETag = st.ETag
			}
			out[info.Key] = info.ETag
		}
	}
	return out, nil
}

// spareNewlyPublished adds to held what the recordings published (or
// published again) since BeginSweep reference: their holds may have been
// released after the caller's mark and before the second listing of the
// holds. It reports false when it cannot tell (no Options.Refs, or a
// manifest it cannot parse): then nothing is deleted.
func (sw *sweep) spareNewlyPublished(ctx context.Context, held map[[32]byte]bool) (bool, error) {
	s := sw.s
	now, err := s.published(ctx)
	if err != nil {
		return false, err
	}
	for key, etag := range now {
		if sw.published[key] == etag {
			continue
		}
		if s.opts.Refs == nil {
			return false, nil
		}
		b, _, err := objstore.ReadAll(ctx, s.obj, key)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // removed again
		}
		if err != nil {
			return false, err
		}
		root, err := blobs.ParseCID(strings.TrimSpace(string(b)))
		if err != nil {
			return false, nil
		}
		r, err := s.Open(root)
		if err != nil {
			return false, err
		}
		man, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return false, err
		}
		refs, err := s.opts.Refs(man)
		if err != nil {
			return false, nil
		}
		for _, c := range refs {
			if d, _, err := name(c); err == nil {
				held[d] = true
			}
		}
	}
	return true, nil
}

// Touched: the object store's sweep keeps what hold records name instead.
func (sw *sweep) Touched(cid.Cid) bool { return false }

// End releases the sweep lease.
func (sw *sweep) End() {
	if sw.held {
		sw.held = false
		sw.lease.Release(context.Background())
	}
}

// Elsewhere is ErrLeaseHeld (naming the holder) when another node holds
// the sweep lease: this sweep collects nothing, and a caller that removes
// recordings before collecting (retention) leaves that to the holder, so
// that one node at a time sweeps the deployment.
func (sw *sweep) Elsewhere() error {
	if errors.Is(sw.err, ErrLeaseHeld) {
		return sw.err
	}
	return nil
}

// Collect deletes every blob listed at BeginSweep that live does not
// keep and no hold record names: loose objects (both forms of a blob
// when both were listed), packs all of whose blobs are dead, and packs at
// least half of whose bytes are dead (their live blobs copied first into
// a new pack). A pack's bytes, here and in the report's Freed, are its
// stored bytes, and so are a loose object's: what the bucket holds, a
// blob kept compressed counted compressed.
func (sw *sweep) Collect(live func(cid.Cid) bool, progress func(done, total int)) (blobs.CollectReport, error) {
	var rep blobs.CollectReport
	if errors.Is(sw.err, ErrLeaseHeld) {
		return rep, nil // another node sweeps the bucket
	}
	if sw.err != nil {
		return rep, fmt.Errorf("store: sweep: %w", sw.err)
	}
	s := sw.s
	ctx := context.Background()
	dead := map[[32]byte]bool{}
	isDead := func(d [32]byte) bool {
		if v, ok := dead[d]; ok {
			return v
		}
		v := !sw.holds[d] && !live(blobs.FromDigest(d[:]))
		dead[d] = v
		return v
	}
	condemned := map[[32]byte]bool{}
	var looseGone [][]objectRef
	var looseDs [][32]byte
	for d, forms := range sw.loose {
		if isDead(d) {
			condemned[d] = true
			looseGone, looseDs = append(looseGone, forms), append(looseDs, d)
		} else {
			rep.Kept++
		}
	}
	type plan struct {
		key     string
		dead    []entry
		rewrite string // the new pack holding the live ones ("" when none)
	}
	var plans []plan
	for key, ents := range sw.packs {
		var deadN, total int64 // stored bytes
		var deadEnts, liveEnts []entry
		for _, e := range ents {
			total += e.n
			if isDead(e.d) {
				deadN += e.n
				deadEnts = append(deadEnts, e)
			} else {
				liveEnts = append(liveEnts, e)
			}
		}
		if len(deadEnts) == 0 || deadN*2 < total {
			rep.Kept += len(ents)
			continue
		}
		p := plan{key: key, dead: deadEnts}
		if len(liveEnts) > 0 {
			nk, err := sw.copyLive(ctx, key, liveEnts)
			if err != nil {
				return rep, err
			}
			p.rewrite = nk
		}
		rep.Kept += len(liveEnts)
		for _, e := range deadEnts {
			condemned[e.d] = true
		}
		plans = append(plans, p)
	}
	if len(condemned) == 0 {
		return rep, nil
	}
	if s.hook != nil {
		s.hook("condemning")
	}
	if err := sw.condemn(ctx, condemned); err != nil {
		return rep, err
	}
	if s.hook != nil {
		s.hook("condemned")
	}
	time.Sleep(s.opts.Grace)
	held, err := s.holds(ctx)
	if err != nil {
		return rep, fmt.Errorf("store: sweep: %w", err)
	}
	// A batch's holds are released once its recording is published: one
	// published since the caller's mark names its blobs there instead.
	if ok, err := sw.spareNewlyPublished(ctx, held); err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("store: sweep: %w", err)
		}
		return rep, err
	}
	if s.hook != nil {
		s.hook("holds-listed-again")
	}
	if err := sw.lease.Renew(ctx); err != nil {
		return rep, fmt.Errorf("store: sweep stopped before deleting: %w", err)
	}
	total, done := len(looseGone)+len(plans), 0
	step := func() {
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	removed := map[[32]byte]bool{}
	for i, forms := range looseGone {
		if d := looseDs[i]; !held[d] {
			for _, o := range forms {
				if err := s.obj.Delete(ctx, o.key); err != nil {
					return rep, fmt.Errorf("store: sweep: %w", err)
				}
				rep.DiskFreed += o.size
				rep.Freed += o.size
			}
			removed[d] = true
		} else {
			rep.Kept++
		}
		step()
	}
	for _, p := range plans {
		spared := false
		for _, e := range p.dead {
			spared = spared || held[e.d]
		}
		victim := p.key
		if spared {
			// A batch reused a blob of it meanwhile: keep it whole, and
			// drop the copy of its live blobs instead.
			rep.Kept += len(p.dead)
			victim = p.rewrite
		} else {
			rep.DiskFreed += sw.sizes[p.key]
			for _, e := range p.dead {
				rep.Freed += e.n
				removed[e.d] = true
			}
		}
		if victim != "" {
			if err := s.obj.Delete(ctx, victim); err != nil {
				return rep, fmt.Errorf("store: sweep: %w", err)
			}
		}
		if !spared && p.rewrite != "" {
			s.mu.RLock()
			rep.DiskFreed -= packBytes(s.packs[p.rewrite])
			s.mu.RUnlock()
		}
		step()
	}
	rep.Removed = len(removed)
	if err := s.reload(ctx, true); err != nil {
		return rep, err
	}
	s.saveSnapshot(ctx)
	return rep, nil
}

// packBytes is the size of a pack of ents (of version 2, as every pack
// putPack writes).
func packBytes(ents []entry) int64 {
	n := int64(headerFixed) + int64(len(ents))*entryBytes
	for _, e := range ents {
		n += e.n
	}
	return n
}

// copyLive writes the live entries of pack key into a new pack and returns
// its key. Every entry is checked against its digest on the way (a
// compressed one decoded to be), and copied as it is stored: compressed
// or not, with its size.
func (sw *sweep) copyLive(ctx context.Context, key string, ents []entry) (string, error) {
	s := sw.s
	rc, _, err := s.obj.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("store: sweep: pack %s: %w", key, err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return "", fmt.Errorf("store: sweep: pack %s: %w", key, err)
	}
	stored := make([][]byte, len(ents))
	out := make([]entry, len(ents))
	for i, e := range ents {
		if e.off+e.n > int64(len(body)) {
			return "", fmt.Errorf("store: sweep: pack %s: entry at %d: %w", key, e.off, blobs.ErrBlobCorrupt)
		}
		stored[i] = body[e.off : e.off+e.n]
		blob := stored[i]
		if e.z {
			if blob, err = blobs.DecompressPacked(stored[i], e.raw); err != nil {
				return "", fmt.Errorf("store: sweep: pack %s: entry at %d: %w: %w", key, e.off, blobs.ErrBlobCorrupt, err)
			}
		}
		if sha256.Sum256(blob) != e.d {
			return "", fmt.Errorf("store: sweep: pack %s: entry at %d: %w", key, e.off, blobs.ErrBlobCorrupt)
		}
		out[i] = entry{d: e.d, n: e.n, raw: e.raw, z: e.z}
	}
	return s.putPack(ctx, out, stored, false)
}

// condemn publishes the condemned set under the next epoch.
func (sw *sweep) condemn(ctx context.Context, set map[[32]byte]bool) error {
	hexes := make([]string, 0, len(set))
	for d := range set {
		hexes = append(hexes, hex.EncodeToString(d[:]))
	}
	_, err := objstore.Update(ctx, sw.s.obj, condemnedKey, func(old []byte, exists bool) ([]byte, error) {
		var d condDoc
		if exists {
			if err := json.Unmarshal(old, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", condemnedKey, err)
			}
		}
		return json.Marshal(condDoc{Epoch: d.Epoch + 1, Digests: hexes})
	})
	if err != nil {
		return fmt.Errorf("store: sweep: condemning: %w", err)
	}
	return nil
}

// Hold is the local store's in-process bracket; here it does nothing: a
// sweep on any node keeps what hold records name (HoldFor), written before
// the blobs are stored.
func (s *Store) Hold() (release func()) { return func() {} }
