package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/layout"
)

func openTestStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := OpenStore(dir, LogOptions{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var idClock = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newID() string {
	idClock = idClock.Add(time.Millisecond)
	return NewRecordingID(idClock)
}

// record makes a recording whose events carry blobs (put as one ingest
// batch per event group, so they are packed; every other group is one
// event naming several blobs), and finishes it if asked.
// It returns its id.
func record(t testing.TB, s *Store, blobs [][]byte, finish bool) string {
	t.Helper()
	id := newID()
	meta := RecordingMeta{ID: id, Project: "p", CreatedAt: idClock.UnixNano()}
	if err := s.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := s.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(1)
	for i := 0; i < len(blobs); i += 3 {
		batch := blobs[i:min(i+3, len(blobs))]
		cids, err := s.Blobs.PutMany(batch)
		if err != nil {
			t.Fatal(err)
		}
		var recs []Record
		if i/3%2 == 1 {
			// Every other batch is one record naming all its blobs, as a
			// video chunk names the GOPs it completed.
			rec := Record{Seq: seq, TS: int64(seq), Kind: event.KindVideo,
				Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%0*d"}`, seq, 230*len(batch), 0))}
			for j, c := range cids {
				rec.Blobs = append(rec.Blobs, BlobRef{CID: c.String(), Size: int64(len(batch[j]))})
			}
			if _, err := lg.Append([]Record{rec}); err != nil {
				t.Fatal(err)
			}
			seq++
			continue
		}
		for j, c := range cids {
			recs = append(recs, Record{
				Seq: seq, TS: int64(seq), Kind: event.KindFrame, CID: c.String(), BlobSize: int64(len(batch[j])),
				Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%0200d"}`, seq, 0)),
			})
			seq++
		}
		if _, err := lg.Append(recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	if finish {
		meta.Verdict, meta.FinishedAt = "pass", meta.CreatedAt+1
		if _, err := s.Seal(meta); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func cidStrings(datas [][]byte) []string {
	var out []string
	for _, d := range datas {
		out = append(out, SumString(d))
	}
	return sortedDistinct(out)
}

func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return nil
	})
	return n
}

func TestRemoveRecording(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	fin := record(t, s, blobsOf(t, 7, 900), true)
	open := record(t, s, blobsOf(t, 4, 900), false)
	keep := record(t, s, blobsOf(t, 2, 900), true)
	// Other files in the directory (pins, a plan) go too.
	if err := os.WriteFile(filepath.Join(s.recDir(fin), "pins"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ := s.Root(fin)
	for _, id := range []string{fin, open} {
		want := treeBytes(t, s.recDir(id))
		freed, err := s.RemoveRecording(id)
		if err != nil || freed != want || want == 0 {
			t.Fatalf("remove %s: freed %d (want %d), %v", id, freed, want, err)
		}
		if _, err := os.Stat(s.recDir(id)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: directory still there: %v", id, err)
		}
		// Idempotent.
		if freed, err := s.RemoveRecording(id); freed != 0 || err != nil {
			t.Fatalf("second remove: %d %v", freed, err)
		}
		if _, err := s.Meta(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("meta of a removed recording: %v", err)
		}
		if _, err := s.References(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("references of a removed recording: %v", err)
		}
	}
	if ids, _ := s.IDs(); !slices.Equal(ids, []string{keep}) {
		t.Fatalf("IDs after removal: %v", ids)
	}
	// Blobs are a sweep's business: the manifest is still there.
	if _, err := s.ReadManifest(root); err != nil {
		t.Fatalf("manifest blob gone with its recording: %v", err)
	}
	if _, err := s.RemoveRecording("../../etc"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("invalid id: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "recordings")); len(ents) != 1 {
		t.Fatalf("recordings dir holds %d entries, want 1", len(ents))
	}

	// A crash after the rename, before the tree was gone: the recording is
	// gone already, and OpenStore (or RemoveRecording) finishes.
	tomb := filepath.Join(dir, "recordings", removingPrefix+keep)
	if err := os.Rename(s.recDir(keep), tomb); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.IDs(); len(ids) != 0 {
		t.Fatalf("a half-removed recording is listed: %v", ids)
	}
	s.Close()
	s2 := openTestStore(t, dir)
	defer s2.Close()
	if _, err := os.Stat(tomb); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open left a removal unfinished: %v", err)
	}
	if freed, err := s2.RemoveRecording(keep); freed != 0 || err != nil {
		t.Fatalf("remove after recovery: %d %v", freed, err)
	}
}

func TestReferences(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	shared := randBytes(t, 500)
	blobs := append(blobsOf(t, 20, 700), shared, shared)
	open := record(t, s, blobs, false)
	got, err := s.References(open)
	if err != nil {
		t.Fatal(err)
	}
	if want := cidStrings(blobs); !slices.Equal(got, want) {
		t.Fatalf("open: %d refs, want %d", len(got), len(want))
	}

	fin := record(t, s, blobs, true)
	got, err = s.References(fin)
	if err != nil {
		t.Fatal(err)
	}
	m, root, err := s.Manifest(fin)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Segments) < 2 {
		t.Fatalf("want several segments, got %d", len(m.Segments))
	}
	want := append([]string{root}, cidStrings(blobs)...)
	for _, seg := range m.Segments {
		want = append(want, seg.CID)
	}
	if want = sortedDistinct(want); !slices.Equal(got, want) {
		t.Fatalf("finished: refs %v\nwant %v", got, want)
	}

	// Opened, nothing appended yet: no log directory, no references.
	empty := newID()
	if err := s.Create(RecordingMeta{ID: empty, Project: "p"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.References(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty recording: %v %v", got, err)
	}
	if _, err := s.References(newID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing recording: %v", err)
	}
	if _, err := s.References("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("invalid id: %v", err)
	}
}

// liveSet is a mark set.
type liveSet map[string]bool

func (l liveSet) has(c cid.Cid) bool { return l[c.String()] }

func mark(t testing.TB, s *Store) liveSet {
	t.Helper()
	ids, err := s.IDs()
	if err != nil {
		t.Fatal(err)
	}
	live := liveSet{}
	for _, id := range ids {
		refs, err := s.References(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			live[r] = true
		}
	}
	return live
}

// where says where each blob is: "loose", "packed" or "active".
func where(t testing.TB, b *blobs.FSBlobs, c cid.Cid) []string {
	t.Helper()
	var out []string
	if n, ok := b.PackOf(c); ok {
		if n == b.CurrentPack() {
			out = append(out, "active")
		} else {
			out = append(out, "packed")
		}
	}
	tree := layout.BlobTree{Dir: b.Dir()}
	for _, p := range []string{tree.Loose(c.String()), tree.LooseCompressed(c.String())} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, "loose")
		}
	}
	return out
}

// packFiles lists the pack directory of the blob directory dir.
func packFiles(t testing.TB, dir string) []string {
	t.Helper()
	return blobstest.Names(t, layout.BlobTree{Dir: dir}.Packs())
}

func mustVerify(t testing.TB, s *Store) {
	t.Helper()
	rep, err := s.Verify(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %+v", rep.Problems)
	}
}

// TestCollect: dead loose and packed blobs go, live ones stay, the freed
// bytes are the dead blobs' sizes, and the pack being filled is left as it
// is.
func TestCollect(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	fsBlobs(t, s).SetPackBytes(16 << 10) // roll every few batches
	keep1 := record(t, s, blobsOf(t, 30, 1500), true)
	gone1 := record(t, s, blobsOf(t, 30, 1500), true)
	keep2 := record(t, s, blobsOf(t, 12, 1500), false)
	// Loose blobs nothing references, and one a kept recording shares.
	orphans := blobsOf(t, 5, 3000)
	for _, o := range orphans {
		if _, _, err := s.Blobs.Put(o); err != nil {
			t.Fatal(err)
		}
	}
	// The last batch fills the active pack with dead blobs.
	gone2 := record(t, s, blobsOf(t, 2, 1000), true)
	_ = keep1
	_ = keep2
	goneRefs := map[string]bool{}
	for _, id := range []string{gone1, gone2} {
		refs, err := s.References(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			goneRefs[r] = true
		}
		if _, err := s.RemoveRecording(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range orphans {
		goneRefs[SumString(o)] = true
	}
	activeN := fsBlobs(t, s).CurrentPack()
	activeBefore, err := os.ReadFile(layout.Of(dir).Blobs().Pack(activeN))
	if err != nil {
		t.Fatal(err)
	}

	sw := s.Blobs.BeginSweep()
	live := mark(t, s)
	// What should go: dead blobs that are loose or in full packs.
	var wantFreed int64
	wantRemoved := map[string]bool{}
	var inActive []cid.Cid
	all := map[string]int64{}
	s.Blobs.Walk(func(c cid.Cid, n int64) error { all[c.String()] = n; return nil })
	wantKept := 0
	var packedFreed int64
	// The active pack holds dead blobs, so it is finished and collected
	// like a full one: every copy is examined.
	for cs, n := range all {
		c, _ := ParseCID(cs)
		if live[cs] {
			wantKept += len(where(t, fsBlobs(t, s), c))
			continue
		}
		if !goneRefs[cs] {
			t.Fatalf("blob %s is neither live nor of a removed recording", cs)
		}
		for _, w := range where(t, fsBlobs(t, s), c) {
			if w == "active" {
				inActive = append(inActive, c)
			}
			wantFreed += n
			wantRemoved[cs] = true
			if w != "loose" {
				packedFreed += n
			}
		}
	}
	if len(inActive) == 0 || len(wantRemoved) < 40 {
		t.Fatalf("fixture: %d dead blobs in the active pack, %d elsewhere", len(inActive), len(wantRemoved))
	}
	var calls, total int
	rep, err := sw.Collect(live.has, func(done, tot int) { calls, total = done, tot })
	sw.End()
	if err != nil {
		t.Fatal(err)
	}
	if calls != total || total == 0 {
		t.Fatalf("progress ended at %d of %d", calls, total)
	}
	if rep.Removed != len(wantRemoved) || rep.Freed != wantFreed {
		t.Fatalf("removed %d blobs, %d bytes; want %d, %d", rep.Removed, rep.Freed, len(wantRemoved), wantFreed)
	}
	if rep.Kept != wantKept {
		t.Fatalf("kept %d, want %d", rep.Kept, wantKept)
	}

	check := func(s *Store, activeStays bool) {
		t.Helper()
		for cs := range live {
			c, _ := ParseCID(cs)
			if _, err := s.Blobs.Stat(c); err != nil {
				t.Fatalf("live blob %s: %v", cs, err)
			}
		}
		for cs := range wantRemoved {
			c, _ := ParseCID(cs)
			if _, err := s.Blobs.Stat(c); !errors.Is(err, ErrNotFound) {
				t.Fatalf("dead blob %s still there: %v", cs, err)
			}
		}
		if activeStays {
			for _, c := range inActive {
				if _, err := s.Blobs.Stat(c); err != nil {
					t.Fatalf("a dead blob of the active pack went: %v", err)
				}
			}
		}
		mustVerify(t, s)
	}
	if rep.PackBytesBefore-rep.PackBytesAfter <= packedFreed {
		t.Fatalf("pack bytes %d → %d, for %d bytes of dead packed blobs (plus their headers)", rep.PackBytesBefore, rep.PackBytesAfter, packedFreed)
	}
	check(s, false)
	// The active pack was finished and rewritten without its dead blobs.
	if _, err := os.Stat(layout.Of(dir).Blobs().Pack(activeN)); !errors.Is(err, fs.ErrNotExist) || len(activeBefore) == 0 {
		t.Fatalf("the active pack with dead blobs is still there: %v", err)
	}
	s.Close()

	s2 := openTestStore(t, dir)
	defer s2.Close()
	check(s2, false)
	// A second sweep finds nothing more in the full packs.
	sw = s2.Blobs.BeginSweep()
	rep2, err := sw.Collect(mark(t, s2).has, nil)
	sw.End()
	if err != nil || rep2.Removed != 0 {
		t.Fatalf("second sweep: %+v %v", rep2, err)
	}
	if rep2.Kept != len(live) {
		t.Fatalf("second sweep kept %d, want %d", rep2.Kept, len(live))
	}
}

// TestCollectCrash stops a collection at each step of a repack (as a
// crash would) and reopens: every live blob is readable, verify passes,
// and a new sweep finishes the job.
func TestCollectCrash(t *testing.T) {
	for _, kind := range []string{"random", "similar", "frames"} {
		for _, step := range []string{"pack-written", "pack-renamed", "idx-written", "swapped", "old-idx-removed"} {
			for _, nth := range []int{1, 2} { // a repacked pack, then the all-dead one
				if nth == 2 && step != "swapped" && step != "old-idx-removed" {
					continue // only a rewrite has these steps
				}
				t.Run(fmt.Sprintf("%s/%s#%d", kind, step, nth), func(t *testing.T) { collectCrash(t, kind, step, nth) })
			}
		}
	}
}

// collectCrash is one case of TestCollectCrash: blobs of kind "random"
// (kept as they are), "similar" (kept as deltas, each against the one
// before, so that a live blob's base is often a dead one), or "frames"
// (JPEGs kept so as JPEG deltas).
func collectCrash(t *testing.T, kind, step string, nth int) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	fsBlobs(t, s).SetPackBytes(8 << 10)
	// Pack 1 holds blobs of both; pack 2 only gone's;
	// the active pack keep's last ones.
	keep := blobsOf(t, 6, 1500)
	gone := blobsOf(t, 9, 1500)
	switch kind {
	case "similar":
		all := blobstest.Similar(t, 15, 1500)
		keep, gone = all[:6], all[6:]
		fsBlobs(t, s).SetPackBytes(1 << 10)
	case "frames":
		all := blobstest.Frames(t, 15, 96, 64, false, 15)
		keep, gone = all[:6], all[6:]
		fsBlobs(t, s).SetPackBytes(1 << 10)
	}
	mixed := [][]byte{keep[0], gone[0], keep[1], gone[1], keep[2], gone[2]}
	putAll(t, s.Blobs, mixed)
	putAll(t, s.Blobs, gone[3:])
	putAll(t, s.Blobs, keep[3:])
	ids := []string{record(t, s, keep, true), record(t, s, gone, true)}
	if fp, _ := fsBlobs(t, s).FullPacks(); len(fp) < 2 {
		t.Fatalf("fixture: full packs %v", fp)
	}
	if kind == "similar" && !fsBlobs(t, s).IsDelta(Sum(keep[1])) {
		t.Fatal("fixture: keep[1] is not a delta (against gone[0], which dies)")
	}
	if kind == "frames" && !fsBlobs(t, s).IsJPEGDelta(Sum(keep[1])) {
		t.Fatal("fixture: keep[1] is not a JPEG delta (against gone[0], which dies)")
	}
	if _, err := s.RemoveRecording(ids[1]); err != nil {
		t.Fatal(err)
	}
	sw := s.Blobs.BeginSweep()
	live := mark(t, s)
	seen := 0
	fsBlobs(t, s).SetGCHook(func(at string) error {
		if at == step {
			if seen++; seen == nth {
				return errors.New("crash")
			}
		}
		return nil
	})
	_, err := sw.Collect(live.has, nil)
	sw.End()
	if !errors.Is(err, blobs.ErrGCHook) {
		t.Fatalf("collect did not stop at %s: %v", step, err)
	}
	s.Close()

	s2 := openTestStore(t, dir)
	defer s2.Close()
	for _, d := range keep {
		if got := readBlob(t, s2.Blobs, Sum(d)); !bytes.Equal(got, d) {
			t.Fatal("a live blob differs after the crash")
		}
	}
	mustVerify(t, s2)
	sw = s2.Blobs.BeginSweep()
	live = mark(t, s2)
	if _, err := sw.Collect(live.has, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	for _, d := range gone {
		if _, err := s2.Blobs.Stat(Sum(d)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("dead blob survived two sweeps: %v", err)
		}
	}
	for cs := range live {
		c, _ := ParseCID(cs)
		if _, err := s2.Blobs.Stat(c); err != nil {
			t.Fatalf("live %s: %v", cs, err)
		}
	}
	mustVerify(t, s2)
	for _, f := range packFiles(t, filepath.Join(dir, "blobs")) {
		if f[0] == '.' {
			t.Fatalf("temporary %s left", f)
		}
	}
}

// TestCollectConcurrentIngest runs a collection while 8 writers put fresh
// batches, dedup'd blobs that are dead (resurrecting them) and live ones,
// and readers read live blobs: nothing put during the sweep and nothing
// live is lost, and no live read fails.
func TestCollectConcurrentIngest(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	fsBlobs(t, s).SetPackBytes(24 << 10)
	keepID := record(t, s, blobsOf(t, 60, 1200), true)
	dead := blobsOf(t, 90, 1200)
	goneID := record(t, s, dead, true)
	deadLoose := blobsOf(t, 20, 700)
	for _, d := range deadLoose {
		if _, _, err := s.Blobs.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RemoveRecording(goneID); err != nil {
		t.Fatal(err)
	}
	_ = keepID
	sw := s.Blobs.BeginSweep()
	live := mark(t, s)
	var liveCIDs []cid.Cid
	for cs := range live {
		c, _ := ParseCID(cs)
		liveCIDs = append(liveCIDs, c)
	}
	sort.Slice(liveCIDs, func(i, j int) bool { return liveCIDs[i].String() < liveCIDs[j].String() })

	const writers = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		put       [][]byte // everything put during the sweep
		collected = make(chan struct{})
		failed    = make(chan struct{})
		failOnce  sync.Once
		tick      = make(chan struct{}) // a writer finished a batch (if someone listens)
		errs      = make(chan error, 2*writers)
	)
	fail := func(err error) {
		errs <- err
		failOnce.Do(func() { close(failed) })
	}
	// While the first pack is being rewritten (copied, not yet swapped),
	// let the writers do some batches, some of which put dead blobs of
	// that pack again: the swap must see those touches.
	hooked := false
	fsBlobs(t, s).SetGCHook(func(step string) error {
		if step != "pack-written" || hooked {
			return nil
		}
		hooked = true
		for i := 0; i < 3*writers; i++ {
			select {
			case <-tick:
			case <-failed:
				return nil
			}
		}
		return nil
	})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-collected:
					if i >= 10 {
						return
					}
				case <-failed:
					return
				default:
				}
				fresh := blobsOf(t, 3, 800+w)
				batch := append(fresh, dead[(w*11+i*7)%len(dead)])
				var err error
				if i%3 == 2 {
					for _, d := range batch {
						if _, _, err = s.Blobs.Put(d); err != nil {
							break
						}
					}
				} else {
					_, err = s.Blobs.PutMany(batch)
				}
				if err == nil && i%4 == 1 {
					_, _, err = s.Blobs.Put(deadLoose[(w+i)%len(deadLoose)])
					batch = append(batch, deadLoose[(w+i)%len(deadLoose)])
				}
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				put = append(put, batch...)
				mu.Unlock()
				for _, d := range batch {
					if got, err := readAll(s.Blobs, Sum(d)); err != nil || !bytes.Equal(got, d) {
						fail(fmt.Errorf("writer %d: a blob just put: %v", w, err))
						return
					}
				}
				select {
				case tick <- struct{}{}:
				default:
				}
			}
		}(w)
		wg.Add(1)
		go func(w int) { // a reader of live blobs
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-collected:
					return
				case <-failed:
					return
				default:
				}
				c := liveCIDs[i%len(liveCIDs)]
				got, err := readAll(s.Blobs, c)
				if err != nil || !Sum(got).Equals(c) {
					fail(fmt.Errorf("reader: live blob %s: %v", c, err))
					return
				}
			}
		}(w)
	}
	rep, err := sw.Collect(live.has, nil)
	close(collected)
	if !hooked {
		t.Fatal("fixture: no pack was rewritten")
	}
	wg.Wait()
	sw.End()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Removed == 0 {
		t.Fatal("nothing collected")
	}
	check := func(s *Store) {
		t.Helper()
		for _, d := range put {
			if got := readBlob(t, s.Blobs, Sum(d)); !bytes.Equal(got, d) {
				t.Fatal("a blob put during the sweep differs")
			}
		}
		for _, c := range liveCIDs {
			if _, err := s.Blobs.Stat(c); err != nil {
				t.Fatalf("live blob lost: %v", err)
			}
		}
		mustVerify(t, s)
	}
	check(s)
	s.Close()
	s2 := openTestStore(t, dir)
	defer s2.Close()
	check(s2)
}

func readAll(b blobs.Store, c cid.Cid) ([]byte, error) {
	r, err := b.Open(c)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// The blob helpers the blob store's tests use too (store/blobs/blobstest).
func randBytes(t testing.TB, n int) []byte { t.Helper(); return blobstest.Rand(t, n) }

func blobsOf(t testing.TB, n, size int) [][]byte { t.Helper(); return blobstest.RandMany(t, n, size) }

func putAll(t testing.TB, b blobs.Store, datas [][]byte) []cid.Cid {
	t.Helper()
	return blobstest.PutMany(t, b.PutMany, datas)
}

func readBlob(t testing.TB, b blobs.Store, c cid.Cid) []byte {
	t.Helper()
	return blobstest.Read(t, b.Open, c)
}

// fsBlobs is s's blob store as the local one, for the seams only it has.
func fsBlobs(t testing.TB, s *Store) *blobs.FSBlobs {
	t.Helper()
	b, ok := s.Blobs.(*blobs.FSBlobs)
	if !ok {
		t.Fatalf("the store's blobs are a %T, not local", s.Blobs)
	}
	return b
}
