package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/bundle"
)

// testBlobs returns n deterministic blobs of 1 to max bytes; the last one
// repeats the first, so two events share a blob.
func testBlobs(seed uint64, n, most int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, 1+rng.IntN(most))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = b
	}
	if n > 1 {
		out[n-1] = out[0]
	}
	return out
}

func exportBundle(t testing.TB, s *Store, id string) []byte {
	t.Helper()
	var buf bytes.Buffer
	root, err := s.WriteBundle(&buf, id)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := s.Root(id); root != want {
		t.Fatalf("WriteBundle returned root %s, ROOT is %s", root, want)
	}
	return buf.Bytes()
}

func verifyBytes(t testing.TB, b []byte) *BundleReport {
	t.Helper()
	rep, err := VerifyBundle(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("VerifyBundle: %v", err)
	}
	return rep
}

func mustBundleOK(t testing.TB, b []byte) *BundleReport {
	t.Helper()
	rep := verifyBytes(t, b)
	if !rep.OK() {
		t.Fatalf("bundle problems: %+v", rep.Problems)
	}
	return rep
}

// splitBundle cuts a bundle into its header (with its length) and its
// sections (each with its length).
func splitBundle(t testing.TB, b []byte) (hdr []byte, secs [][]byte) {
	t.Helper()
	n, k := binary.Uvarint(b)
	hdr, b = b[:k+int(n)], b[k+int(n):]
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || k+int(n) > len(b) {
			t.Fatal("splitBundle: malformed")
		}
		secs, b = append(secs, b[:k+int(n)]), b[k+int(n):]
	}
	return hdr, secs
}

// sectionOf frames data under the CID c (any CID).
func sectionOf(c cid.Cid, data []byte) []byte {
	cb := c.Bytes()
	out := binary.AppendUvarint(nil, uint64(len(cb)+len(data)))
	out = append(out, cb...)
	return append(out, data...)
}

// carOf builds a bundle whose root is the manifest man and whose other
// sections are the blocks, in order.
func carOf(man []byte, blocks ...[]byte) []byte {
	root := Sum(man)
	hdr := bundle.Header(root)
	out := binary.AppendUvarint(nil, uint64(len(hdr)))
	out = append(out, hdr...)
	out = append(out, sectionOf(root, man)...)
	for _, b := range blocks {
		out = append(out, sectionOf(Sum(b), b)...)
	}
	return out
}

// bundleBlocks returns a sound bundle's manifest (parsed and raw) and its
// other blocks' data, in order.
func bundleBlocks(t testing.TB, b []byte) (*Manifest, []byte, [][]byte) {
	t.Helper()
	_, secs := splitBundle(t, b)
	var datas [][]byte
	for _, s := range secs {
		_, k := binary.Uvarint(s)
		datas = append(datas, s[k+bundle.CIDLen:])
	}
	var m Manifest
	if err := json.Unmarshal(datas[0], &m); err != nil {
		t.Fatal(err)
	}
	return &m, datas[0], datas[1:]
}

func hasProblem(rep *BundleReport, what string) bool {
	for _, p := range rep.Problems {
		if strings.Contains(p.What, what) {
			return true
		}
	}
	return false
}

// recordingDirs lists DIR/recordings, whatever is in it.
func recordingDirs(t testing.TB, s *Store) []string {
	t.Helper()
	return blobstest.Names(t, s.Layout().Recordings())
}

// TestBundleRoundTrip: export, verify, import into a fresh store: the same
// root, references and manifest, a store that verifies, and a re-export
// byte for byte the same. Importing again changes nothing.
func TestBundleRoundTrip(t *testing.T) {
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	datas := testBlobs(1, 40, 300)
	datas = append(datas, bytes.Repeat([]byte{7}, blobs.PackMaxBlob+1)) // stored loose
	id := record(t, src, datas, true)
	b := exportBundle(t, src, id)

	n, k := binary.Uvarint(b)
	root, _ := src.Root(id)
	rc, _ := ParseCID(root)
	if n != 58 || !bytes.Equal(b[k:k+58], bundle.Header(rc)) {
		t.Fatalf("header: %d bytes, % x", n, b[:min(len(b), 64)])
	}
	m, raw, blocks := bundleBlocks(t, b)
	if len(m.Segments) < 2 {
		t.Fatalf("want several segments, got %d", len(m.Segments))
	}
	if len(blocks) != len(m.Segments)+len(m.Blobs) {
		t.Fatalf("%d blocks for %d segments and %d blobs", len(blocks), len(m.Segments), len(m.Blobs))
	}
	for i, seg := range m.Segments {
		if SumString(blocks[i]) != seg.CID {
			t.Fatalf("block %d is not segment %d", i, i+1)
		}
	}
	for i, c := range m.Blobs {
		if SumString(blocks[len(m.Segments)+i]) != c {
			t.Fatalf("block %d is not blob %d", len(m.Segments)+i, i)
		}
	}

	rep := mustBundleOK(t, b)
	if rep.Root != root || rep.Recording != id || rep.Segments != len(m.Segments) || rep.Blobs != len(m.Blobs) ||
		rep.Events != m.Events || rep.Bytes != int64(len(b)) || rep.Blocks != 1+len(blocks) {
		t.Fatalf("report %+v", rep)
	}
	gotRoot, gotRaw, err := ReadBundleManifest(bytes.NewReader(b))
	if err != nil || gotRoot != root || !bytes.Equal(gotRaw, raw) {
		t.Fatalf("ReadBundleManifest: %s %v", gotRoot, err)
	}
	storedRaw, _, _, err := src.ManifestBytes(id)
	if err != nil || !bytes.Equal(storedRaw, raw) {
		t.Fatalf("ManifestBytes: %v", err)
	}

	dst := openTestStore(t, t.TempDir())
	defer dst.Close()
	gotID, gotRoot, err := dst.ImportBundle(bytes.NewReader(b))
	if err != nil || gotID != id || gotRoot != root {
		t.Fatalf("ImportBundle: %s %s %v", gotID, gotRoot, err)
	}
	if r, _ := dst.Root(id); r != root {
		t.Fatalf("ROOT after import: %s", r)
	}
	want, _ := src.References(id)
	got, err := dst.References(id)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("references differ: %v", err)
	}
	mustVerify(t, dst)
	row, last, err := dst.RowOf(id)
	if err != nil || row.State != StateFinished || row.Root != root || last != m.LastSeq || row.Verdict != "pass" {
		t.Fatalf("RowOf: %+v %d %v", row, last, err)
	}
	meta, err := dst.Meta(id)
	if err != nil || meta.ID != id || meta.Project != "p" {
		t.Fatalf("meta: %+v %v", meta, err)
	}
	if again := exportBundle(t, dst, id); !bytes.Equal(again, b) {
		t.Fatal("re-export differs")
	}
	var n2 int
	dst.Scan(id, Pos{}, 0, func(Record, Locator) error { n2++; return nil })
	if int64(n2) != m.Events {
		t.Fatalf("scan after import: %d records", n2)
	}

	// Twice: nothing changes.
	before := recordingDirs(t, dst)
	if gotID, gotRoot, err := dst.ImportBundle(bytes.NewReader(b)); err != nil || gotID != id || gotRoot != root {
		t.Fatalf("second import: %s %s %v", gotID, gotRoot, err)
	}
	if after := recordingDirs(t, dst); !slices.Equal(before, after) {
		t.Fatalf("second import changed recordings: %v → %v", before, after)
	}
	mustVerify(t, dst)

	// A sweep right after the import keeps every blob the recording needs.
	sw := dst.Blobs.BeginSweep()
	live := mark(t, dst)
	if _, err := sw.Collect(live.has, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	mustVerify(t, dst)
}

// TestBundleEmptyAndOpen: a finished recording without events bundles as
// its manifest alone; an open one is ErrOpen; a missing one ErrNotFound.
func TestBundleEmptyAndOpen(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	id := record(t, s, nil, true)
	b := exportBundle(t, s, id)
	if rep := mustBundleOK(t, b); rep.Blocks != 1 || rep.Events != 0 {
		t.Fatalf("empty recording: %+v", rep)
	}
	dst := openTestStore(t, t.TempDir())
	defer dst.Close()
	if _, _, err := dst.ImportBundle(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, dst)

	open := record(t, s, testBlobs(2, 3, 10), false)
	if _, err := s.WriteBundle(io.Discard, open); !errors.Is(err, ErrOpen) {
		t.Fatalf("open recording: %v", err)
	}
	if _, err := s.WriteBundle(io.Discard, newID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing recording: %v", err)
	}
	if _, err := s.WriteBundle(io.Discard, "../../etc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("invalid id: %v", err)
	}
}

// TestBundleEveryByteFlipped: whichever byte of a bundle is flipped —
// header, CIDs, lengths, manifest, records, blobs — verification finds a
// problem and an import installs nothing.
func TestBundleEveryByteFlipped(t *testing.T) {
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	id := record(t, src, testBlobs(3, 14, 40), true)
	b := exportBundle(t, src, id)
	m, _, _ := bundleBlocks(t, b)
	if len(m.Segments) < 2 {
		t.Fatalf("want several segments, got %d", len(m.Segments))
	}
	t.Logf("bundle of %d bytes, %d segments, %d blobs", len(b), len(m.Segments), len(m.Blobs))
	mustBundleOK(t, b)

	dst := openTestStore(t, t.TempDir())
	defer dst.Close()
	bad := bytes.Clone(b)
	for i := range b {
		for _, x := range []byte{0x01, 0x80} {
			if testing.Short() && x == 0x80 {
				continue
			}
			bad[i] = b[i] ^ x
			rep, err := VerifyBundle(bytes.NewReader(bad))
			if err == nil && rep.OK() {
				t.Fatalf("byte %d ^ %#x: verified ok", i, x)
			}
			if _, _, err := dst.ImportBundle(bytes.NewReader(bad)); err == nil {
				t.Fatalf("byte %d ^ %#x: imported", i, x)
			}
			bad[i] = b[i]
		}
	}
	if dirs := recordingDirs(t, dst); len(dirs) != 0 {
		t.Fatalf("failed imports left %v", dirs)
	}
	// What they stored is referenced by nothing: a sweep removes it all.
	sw := dst.Blobs.BeginSweep()
	if _, err := sw.Collect(func(cid.Cid) bool { return false }, nil); err != nil {
		t.Fatal(err)
	}
	sw.End()
	if n := blobstest.Count(t, dst.Blobs.Walk); n != 0 {
		t.Fatalf("%d blobs left after the sweep", n)
	}
	// The sound bundle still imports into that store.
	if _, _, err := dst.ImportBundle(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, dst)
}

// TestBundleTruncated: every proper prefix is refused.
func TestBundleTruncated(t *testing.T) {
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	id := record(t, src, testBlobs(4, 8, 30), true)
	b := exportBundle(t, src, id)
	dst := openTestStore(t, t.TempDir())
	defer dst.Close()
	for n := range len(b) {
		rep, err := VerifyBundle(bytes.NewReader(b[:n]))
		if err == nil && rep.OK() {
			t.Fatalf("prefix of %d bytes verified ok", n)
		}
		if _, _, err := dst.ImportBundle(bytes.NewReader(b[:n])); err == nil {
			t.Fatalf("prefix of %d bytes imported", n)
		}
	}
	if dirs := recordingDirs(t, dst); len(dirs) != 0 {
		t.Fatalf("failed imports left %v", dirs)
	}
	rep := verifyBytes(t, b[:len(b)-1])
	if !hasProblem(rep, "truncated") {
		t.Errorf("one byte short: %+v", rep.Problems)
	}
	_, secs := splitBundle(t, b)
	rep = verifyBytes(t, b[:len(b)-len(secs[len(secs)-1])])
	if !hasProblem(rep, "missing") {
		t.Errorf("last section cut: %+v", rep.Problems)
	}
}

// TestBundleSections: sections in another order verify; an unlisted
// block, a duplicate, a missing one, a foreign CID and oversized lengths
// are problems.
func TestBundleSections(t *testing.T) {
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	id := record(t, src, testBlobs(5, 10, 50), true)
	b := exportBundle(t, src, id)
	hdr, secs := splitBundle(t, b)
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	rev := [][]byte{hdr, secs[0]}
	for i := len(secs) - 1; i >= 1; i-- {
		rev = append(rev, secs[i])
	}
	mustBundleOK(t, join(rev...))

	extra := []byte("not part of the recording")
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"unlisted block", "not listed", join(b, sectionOf(Sum(extra), extra))},
		{"duplicate block", "appears twice", join(b, secs[len(secs)-1])},
		{"missing segment", "segment 1 is missing", join(append([][]byte{hdr, secs[0]}, secs[2:]...)...)},
		{"missing blob", "blob is missing", join(append([][]byte{hdr}, secs[:len(secs)-1]...)...)},
		{"root not first", "not the root", join(hdr, secs[1], secs[0])},
		{"foreign CID", "not a CIDv1 raw sha2-256", join(b, sectionOf(cid.NewCidV1(cid.DagCBOR, mustMH(extra)), extra))},
		{"huge section", "over the", join(b, binary.AppendUvarint(nil, MaxBundleSection+1))},
		{"huge header", "header length", binary.AppendUvarint(nil, MaxBundleHeader+1)},
		{"empty", "empty file", nil},
		{"no manifest", "no sections", hdr},
		{"long varint", "malformed", join(hdr, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})},
		{"non-minimal varint", "malformed", join(hdr, []byte{0x80, 0x00})},
		{"short section", "too short", join(b, []byte{2, 1, 2})},
	}
	dst := openTestStore(t, t.TempDir())
	defer dst.Close()
	for _, c := range cases {
		rep := verifyBytes(t, c.data)
		if rep.OK() || !hasProblem(rep, c.want) {
			t.Errorf("%s: want %q, got %+v", c.name, c.want, rep.Problems)
		}
		if _, _, err := dst.ImportBundle(bytes.NewReader(c.data)); !errors.Is(err, ErrBadBundle) {
			t.Errorf("%s: import: %v", c.name, err)
		}
	}
	if dirs := recordingDirs(t, dst); len(dirs) != 0 {
		t.Fatalf("failed imports left %v", dirs)
	}
}

func mustMH(b []byte) multihash.Multihash {
	mh, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		panic(err)
	}
	return mh
}

// TestBundleManifestChecks: a bundle whose blocks all hash right but whose
// manifest does not describe its records is refused.
func TestBundleManifestChecks(t *testing.T) {
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	id := record(t, src, testBlobs(6, 20, 60), true)
	m0, _, blocks := bundleBlocks(t, exportBundle(t, src, id))
	remarshal := func(edit func(m *Manifest)) []byte {
		b, _ := json.Marshal(m0)
		var m Manifest
		json.Unmarshal(b, &m)
		edit(&m)
		out, _ := json.MarshalIndent(m, "", " ")
		return out
	}
	// Sanity: an unedited re-encoding verifies.
	mustBundleOK(t, carOf(remarshal(func(*Manifest) {}), blocks...))
	extra := []byte("unreferenced")
	nseg := len(m0.Segments)
	cases := []struct {
		name, want string
		man        []byte
		blocks     [][]byte
	}{
		{"events", "events, its segments hold", remarshal(func(m *Manifest) { m.Events++ }), blocks},
		{"steps", "steps, the records have", remarshal(func(m *Manifest) { m.Steps++ }), blocks},
		{"counts", "counts by kind", remarshal(func(m *Manifest) { m.Counts[event.KindConsole] = 1 }), blocks},
		{"bytes", "its segments and blobs hold", remarshal(func(m *Manifest) { m.Bytes-- }), blocks},
		{"first seq", "starts at seq", remarshal(func(m *Manifest) { m.Segments[1].FirstSeq++ }), blocks},
		{"segment bytes", "the manifest says", remarshal(func(m *Manifest) { m.Segments[0].Bytes++ }), blocks},
		{"version", "manifest version 2", remarshal(func(m *Manifest) { m.Version = 2 }), blocks},
		{"recording id", "not a flightrec id", remarshal(func(m *Manifest) { m.Recording.ID = "../x" }), blocks},
		{"unsorted blobs", "sorted", remarshal(func(m *Manifest) { m.Blobs[0], m.Blobs[1] = m.Blobs[1], m.Blobs[0] }), blocks},
		{"unreferenced blob", "no event references", remarshal(func(m *Manifest) {
			m.Blobs = append(m.Blobs, SumString(extra))
			slices.Sort(m.Blobs)
			m.Bytes += int64(len(extra))
		}), append(slices.Clone(blocks), extra)},
		{"unlisted blob", "does not list", remarshal(func(m *Manifest) { m.Blobs = m.Blobs[1:] }),
			slices.Delete(slices.Clone(blocks), nseg, nseg+1)},
		{"segments swapped", "not after", remarshal(func(m *Manifest) { m.Segments[0], m.Segments[1] = m.Segments[1], m.Segments[0] }), blocks},
		{"not json", "not a manifest", []byte("{"), blocks},
		{"bad cid", "not a flightrec CID", remarshal(func(m *Manifest) { m.Blobs[0] = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG" }), blocks},
	}
	dst := openTestStore(t, t.TempDir())
	defer dst.Close()
	for _, c := range cases {
		b := carOf(c.man, c.blocks...)
		rep := verifyBytes(t, b)
		if rep.OK() || !hasProblem(rep, c.want) {
			t.Errorf("%s: want %q, got %+v", c.name, c.want, rep.Problems)
		}
		if _, _, err := dst.ImportBundle(bytes.NewReader(b)); !errors.Is(err, ErrBadBundle) {
			t.Errorf("%s: import: %v", c.name, err)
		}
	}
	if dirs := recordingDirs(t, dst); len(dirs) != 0 {
		t.Fatalf("failed imports left %v", dirs)
	}

	// A record whose blob size disagrees with the blob.
	s2 := openTestStore(t, t.TempDir())
	defer s2.Close()
	id2 := newID()
	meta := RecordingMeta{ID: id2, Project: "p", CreatedAt: 1}
	s2.Create(meta)
	lg, _ := s2.OpenLog(id2)
	blob := []byte("twelve bytes")
	c, _, _ := s2.Blobs.Put(blob)
	if _, err := lg.Append([]Record{{Seq: 1, Kind: event.KindFrame, CID: c.String(), BlobSize: 99, Data: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	if _, err := s2.Seal(meta); err != nil {
		t.Fatal(err)
	}
	rep := verifyBytes(t, exportBundle(t, s2, id2))
	if !hasProblem(rep, "blob is 12 bytes, its events say 99") {
		t.Errorf("blob size: %+v", rep.Problems)
	}
}

// TestBundleImportConflicts: an id taken by an open recording or by one
// with another root is refused and left as it was.
func TestBundleImportConflicts(t *testing.T) {
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	id := record(t, src, testBlobs(7, 5, 20), true)
	b := exportBundle(t, src, id)

	open := openTestStore(t, t.TempDir())
	defer open.Close()
	if err := open.Create(RecordingMeta{ID: id, Project: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := open.ImportBundle(bytes.NewReader(b)); !errors.Is(err, ErrOpen) {
		t.Fatalf("over an open recording: %v", err)
	}
	if r, _ := open.Root(id); r != "" {
		t.Fatal("the open recording was finished")
	}

	other := openTestStore(t, t.TempDir())
	defer other.Close()
	meta := RecordingMeta{ID: id, Project: "other"}
	other.Create(meta)
	lg, _ := other.OpenLog(id)
	lg.Append([]Record{{Seq: 1, Kind: event.KindConsole, Data: json.RawMessage(`{"text":"x"}`)}})
	lg.Close()
	theirs, err := other.Seal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.ImportBundle(bytes.NewReader(b)); !errors.Is(err, ErrConflict) {
		t.Fatalf("over another root: %v", err)
	}
	if r, _ := other.Root(id); r != theirs {
		t.Fatal("the other recording's root changed")
	}
	if dirs := recordingDirs(t, other); len(dirs) != 1 {
		t.Fatalf("recordings: %v", dirs)
	}
}

// TestBundleStagingRemovedAtOpen: a staging directory an import crashed in
// is removed when the store opens.
func TestBundleStagingRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	stage := filepath.Join(dir, "recordings", removingPrefix+"import-"+newID()+"-123")
	os.MkdirAll(stage, 0o755)
	os.WriteFile(filepath.Join(stage, "ROOT"), []byte("x\n"), 0o644)
	s.Close()
	s = openTestStore(t, dir)
	defer s.Close()
	if dirs := recordingDirs(t, s); len(dirs) != 0 {
		t.Fatalf("left %v", dirs)
	}
}

// FuzzVerifyBundle: whatever the bytes, VerifyBundle neither panics nor
// reads past them, and an import agrees with it.
func FuzzVerifyBundle(f *testing.F) {
	s := openTestStore(f, f.TempDir())
	defer s.Close()
	id := record(f, s, testBlobs(8, 4, 20), true)
	b := exportBundle(f, s, id)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[:70])
	f.Add([]byte{})
	f.Add(carOf([]byte(`{"version":1,"recording":{"id":"01jq0000000000000000000000"},"segments":[],"blobs":[]}`)))
	dst := openTestStore(f, f.TempDir())
	defer dst.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := VerifyBundle(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("read error from a bytes.Reader: %v", err)
		}
		if rep.Bytes > int64(len(data)) {
			t.Fatalf("read %d of %d bytes", rep.Bytes, len(data))
		}
		if len(rep.Problems) > bundle.MaxProblems {
			t.Fatalf("%d problems", len(rep.Problems))
		}
		_, _, ierr := dst.ImportBundle(bytes.NewReader(data))
		if rep.OK() != (ierr == nil) && !errors.Is(ierr, ErrConflict) {
			t.Fatalf("verify ok %v, import %v", rep.OK(), ierr)
		}
	})
}

func TestBundleReportString(t *testing.T) {
	// The problems name offsets and CIDs, never data.
	src := openTestStore(t, t.TempDir())
	defer src.Close()
	secret := []byte("SECRET-VALUE-0123456789")
	id := record(t, src, [][]byte{secret}, true)
	b := exportBundle(t, src, id)
	i := bytes.Index(b, secret)
	b[i] ^= 1
	rep := verifyBytes(t, b)
	out := fmt.Sprint(rep.Problems)
	if rep.OK() || strings.Contains(out, "SECRET") {
		t.Fatalf("%s", out)
	}
}
