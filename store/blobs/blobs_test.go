package blobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/flightrec/flightrec/internal/bench/disk"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
)

func openTestBlobs(t testing.TB) (*FSBlobs, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobs")
	b, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

func randBytes(t testing.TB, n int) []byte { t.Helper(); return blobstest.Rand(t, n) }

// blobFiles lists every file under dir (relative paths).
func blobFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func readBlob(t testing.TB, b Blobs, c cid.Cid) []byte {
	t.Helper()
	return blobstest.Read(t, b.Open, c)
}

func TestBlobsPutOpen(t *testing.T) {
	b, dir := openTestBlobs(t)
	data := []byte("hello, flight recorder")
	c, created, err := b.Put(data)
	if err != nil || !created {
		t.Fatalf("Put: created %v err %v", created, err)
	}
	if got := readBlob(t, b, c); !bytes.Equal(got, data) {
		t.Fatalf("read %q", got)
	}
	r, err := b.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, 6)
	if _, err := r.ReadAt(p, 7); err != nil || string(p) != "flight" {
		t.Fatalf("ReadAt: %q %v", p, err)
	}
	if _, err := r.Seek(-8, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "recorder" {
		t.Fatalf("after Seek: %q", rest)
	}
	if n, err := b.Stat(c); err != nil || n != int64(len(data)) {
		t.Fatalf("Stat: %d %v", n, err)
	}
	// Layout: dir/<next-to-last two chars>/<cid>.
	s := c.String()
	want := []string{filepath.Join(s[len(s)-3:len(s)-1], s)}
	if got := blobFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, want[0])); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Fatalf("blob file should be read-only: %v %v", fi.Mode(), err)
	}
}

func TestBlobCIDIsSHA256(t *testing.T) {
	b, _ := openTestBlobs(t)
	for _, data := range [][]byte{{}, []byte("a"), randBytes(t, 50<<10)} {
		c, _, err := b.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Digest(c)
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data)
		if !bytes.Equal(d, want[:]) {
			t.Fatalf("digest %x, want %x", d, want)
		}
		if s := c.String(); !strings.HasPrefix(s, "bafkrei") || len(s) != 59 {
			t.Fatalf("CID %q is not a base32 CIDv1 raw sha2-256", s)
		}
		if c.Version() != 1 || c.Type() != cid.Raw {
			t.Fatalf("CID %s: version %d codec %x", c, c.Version(), c.Type())
		}
		if _, err := ParseCID(c.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// The shard characters are uniform: 20000 random CIDs hit all 1024 shards
// (a constant-prefix or last-character shard would hit very few).
func TestBlobShardsUniform(t *testing.T) {
	seen := map[string]bool{}
	var p [8]byte
	for i := 0; i < 20000; i++ {
		binary.LittleEndian.PutUint64(p[:], uint64(i))
		seen[shardOf(SumString(p[:]))] = true
	}
	if len(seen) != 1024 {
		t.Fatalf("%d shards used, want 1024", len(seen))
	}
}

func TestBlobsPutTwiceStoresOnce(t *testing.T) {
	b, dir := openTestBlobs(t)
	data := randBytes(t, 4096)
	c1, created1, err := b.Put(data)
	if err != nil || !created1 {
		t.Fatalf("first Put: %v %v", created1, err)
	}
	_, _, path, _ := b.name(c1)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	c2, created2, err := b.Put(append([]byte(nil), data...))
	if err != nil || created2 {
		t.Fatalf("second Put: created %v err %v", created2, err)
	}
	if !c1.Equals(c2) {
		t.Fatalf("CIDs differ: %s %s", c1, c2)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("the blob file was replaced")
	}
	if n := len(blobFiles(t, dir)); n != 1 {
		t.Fatalf("%d files, want 1", n)
	}
}

func TestBlobsConcurrentPutSameBytes(t *testing.T) {
	b, dir := openTestBlobs(t)
	data := randBytes(t, 1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	createdN := 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created, err := b.Put(data)
			if err != nil {
				t.Error(err)
			}
			if created {
				mu.Lock()
				createdN++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if createdN != 1 {
		t.Fatalf("%d Puts created the blob, want 1", createdN)
	}
	if n := len(blobFiles(t, dir)); n != 1 {
		t.Fatalf("%d files, want 1", n)
	}
}

func TestBlobsPutManyDuplicates(t *testing.T) {
	b, dir := openTestBlobs(t)
	x, y := randBytes(t, 100), randBytes(t, 200)
	datas := [][]byte{x, y, x, x, y, {}}
	cids, err := b.PutMany(datas)
	if err != nil {
		t.Fatal(err)
	}
	if len(cids) != len(datas) {
		t.Fatalf("%d CIDs for %d blobs", len(cids), len(datas))
	}
	for i, c := range cids {
		if !c.Equals(Sum(datas[i])) {
			t.Fatalf("CID %d is %s, want %s", i, c, Sum(datas[i]))
		}
	}
	if n := walkCount(t, b); n != 3 {
		t.Fatalf("%d blobs, want 3", n)
	}
	packed := packBytes(t, dir)
	// Already stored: PutMany again writes nothing new.
	if _, err := b.PutMany(datas); err != nil {
		t.Fatal(err)
	}
	if packBytes(t, dir) != packed {
		t.Fatal("PutMany of stored blobs wrote to the pack again")
	}
	if _, created, _ := b.Put(x); created {
		t.Fatal("x was stored again")
	}
}

func TestBlobsPutManyFrames(t *testing.T) {
	b, dir := openTestBlobs(t)
	datas := make([][]byte, 50)
	for i := range datas {
		datas[i] = randBytes(t, 50<<10)
	}
	cids, err := b.PutMany(datas)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cids {
		if got := readBlob(t, b, c); !bytes.Equal(got, datas[i]) {
			t.Fatalf("blob %d differs", i)
		}
	}
	if n := walkCount(t, b); n != 50 {
		t.Fatalf("%d blobs, want 50", n)
	}
	// A fresh handle on the directory sees them all.
	b2, err := OpenFSBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cids {
		if n, err := b2.Stat(c); err != nil || n != int64(len(datas[i])) {
			t.Fatalf("Stat %d after reopen: %d %v", i, n, err)
		}
	}
}

func TestBlobsStaleTempRemovedOnOpen(t *testing.T) {
	b, dir := openTestBlobs(t)
	c, _, err := b.Put([]byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	shard := shardOf(c.String())
	stale := []string{
		filepath.Join(dir, shard, ".tmp-123456"),
		filepath.Join(dir, "zz", ".tmp-crashed"),
	}
	os.MkdirAll(filepath.Join(dir, "zz"), 0o755)
	for _, p := range stale {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Walk never reports a temporary as a blob.
	var walked []string
	b.Walk(func(c cid.Cid, _ int64) error { walked = append(walked, c.String()); return nil })
	if !slices.Equal(walked, []string{c.String()}) {
		t.Fatalf("Walk before reopen: %v", walked)
	}
	if _, err := OpenFSBlobs(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s survived reopen: %v", p, err)
		}
	}
	if got := readBlob(t, b, c); string(got) != "kept" {
		t.Fatalf("blob after reopen: %q", got)
	}
}

func TestBlobsWalk(t *testing.T) {
	b, dir := openTestBlobs(t)
	want := map[string]int64{}
	for i := 0; i < 40; i++ {
		p := randBytes(t, i*37)
		c, _, err := b.Put(p)
		if err != nil {
			t.Fatal(err)
		}
		want[c.String()] = int64(len(p))
	}
	// Strays that are not blobs.
	os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(dir, "ab"), 0o755)
	os.WriteFile(filepath.Join(dir, "ab", "not-a-cid"), []byte("x"), 0o644)
	misplaced := SumString([]byte("misplaced"))
	os.WriteFile(filepath.Join(dir, "ab", misplaced), []byte("misplaced"), 0o644)
	if shardOf(misplaced) == "ab" {
		t.Fatal("pick another misplaced blob")
	}

	got := map[string]int64{}
	err := b.Walk(func(c cid.Cid, size int64) error {
		if _, dup := got[c.String()]; dup {
			t.Errorf("%s walked twice", c)
		}
		got[c.String()] = size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Walk listed %d blobs, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := b.Walk(func(cid.Cid, int64) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Walk did not stop at the first error: %v after %d", err, n)
	}
}

func TestBlobsDelete(t *testing.T) {
	b, _ := openTestBlobs(t)
	c, _, err := b.Put([]byte("doomed"))
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := b.Put([]byte("kept"))
	if err := b.Delete(c); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat after Delete: %v", err)
	}
	if _, err := b.Open(c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open after Delete: %v", err)
	}
	if err := b.Delete(c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := b.Stat(other); err != nil {
		t.Fatalf("Delete took another blob: %v", err)
	}
	if _, created, err := b.Put([]byte("doomed")); err != nil || !created {
		t.Fatalf("Put after Delete: created %v err %v", created, err)
	}
}

func TestBlobsMissingAndForeignCIDs(t *testing.T) {
	b, _ := openTestBlobs(t)
	missing := Sum([]byte("never stored"))
	if _, err := b.Open(missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open missing: %v", err)
	}
	if _, err := b.Stat(missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat missing: %v", err)
	}
	mh, _ := multihash.Sum([]byte("x"), multihash.SHA2_256, -1)
	sha512, _ := multihash.Sum([]byte("x"), multihash.SHA2_512, -1)
	foreign := map[string]cid.Cid{
		"undefined": cid.Undef,
		"CIDv0":     cid.NewCidV0(mh),
		"dag-pb":    cid.NewCidV1(cid.DagProtobuf, mh),
		"sha2-512":  cid.NewCidV1(cid.Raw, sha512),
	}
	for name, c := range foreign {
		if _, err := b.Open(c); !errors.Is(err, ErrBadCID) {
			t.Errorf("Open %s: %v, want ErrBadCID", name, err)
		}
		if _, err := b.Stat(c); !errors.Is(err, ErrBadCID) {
			t.Errorf("Stat %s: %v, want ErrBadCID", name, err)
		}
		if err := b.Delete(c); !errors.Is(err, ErrBadCID) {
			t.Errorf("Delete %s: %v, want ErrBadCID", name, err)
		}
	}
}

func BenchmarkPutMany(b *testing.B) {
	const n, size = 20, 50 << 10
	bl, _ := openTestBlobs(b)
	datas := make([][]byte, n)
	for i := range datas {
		datas[i] = randBytes(b, size)
	}
	base := disk.Baseline(b, n*size)
	b.SetBytes(n * size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range datas {
			binary.LittleEndian.PutUint64(datas[j], uint64(i)) // fresh bytes: no dedup
		}
		if _, err := bl.PutMany(datas); err != nil {
			b.Fatal(err)
		}
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*n)/secs, "blobs/s")
	// Against one write+fsync of the whole batch into one file: the price
	// of 20 files each fsynced, renamed and their directories fsynced.
	b.ReportMetric(float64(b.N*n*size)/secs/1e6/base, "x_disk_fsync_baseline")
}

func walkCount(t testing.TB, b *FSBlobs) int { t.Helper(); return blobstest.Count(t, b.Walk) }

// packBytes is the total size of the pack files.
func packBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(dir, "packs"))
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".pack") {
			fi, _ := e.Info()
			n += fi.Size()
		}
	}
	return n
}
