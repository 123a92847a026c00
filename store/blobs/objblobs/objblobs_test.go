package objblobs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/blobs/blobstest"
	"github.com/flightrec/flightrec/store/blobs/objblobs"
	"github.com/flightrec/flightrec/store/objstore"
)

func open(t *testing.T, obj objstore.Store) *objblobs.Store {
	t.Helper()
	s, err := objblobs.Open(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func count(t *testing.T, obj objstore.Store, prefix string) int {
	t.Helper()
	n := 0
	for _, err := range obj.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// exercise: a burst of small blobs is one pack object, read back blob by
// blob by range; a large blob and a single Put are loose; a second store
// on the same objects (another node) finds every blob, packed ones
// through the packs' own headers; duplicates are not stored twice.
func exercise(t *testing.T, obj func() objstore.Store) {
	a := open(t, obj())
	small := blobstest.RandMany(t, 300, 2000)
	small = append(small, small[7]) // a duplicate within the batch
	large := blobstest.Rand(t, blobs.PackMaxBlob+1)
	cids := blobstest.PutMany(t, a.PutMany, append(small, large))
	single := blobstest.Rand(t, 100)
	sc, created, err := a.Put(single)
	if err != nil || !created {
		t.Fatalf("put: created %v, %v", created, err)
	}
	o := obj()
	if n := count(t, o, "packs/"); n != 1 {
		t.Fatalf("%d pack objects after one burst, want 1", n)
	}
	if n := count(t, o, "loose/"); n != 2 {
		t.Fatalf("%d loose objects, want 2 (the large blob and the single put)", n)
	}
	// Again: nothing new is written.
	blobstest.PutMany(t, a.PutMany, small)
	if n := count(t, o, "packs/"); n != 1 {
		t.Fatalf("%d pack objects after putting the same burst again, want 1", n)
	}

	b := open(t, obj()) // another node
	for i, c := range cids {
		want := append(small, large)[i]
		if got := blobstest.Read(t, b.Open, c); !bytes.Equal(got, want) {
			t.Fatalf("blob %d read back differs", i)
		}
		if n, err := b.Stat(c); err != nil || n != int64(len(want)) {
			t.Fatalf("stat blob %d: %d, %v", i, n, err)
		}
	}
	if got := blobstest.Read(t, b.Open, sc); !bytes.Equal(got, single) {
		t.Fatal("single blob differs")
	}
	// A pack written by a after b opened is found on b's miss.
	later := blobstest.RandMany(t, 3, 500)
	lc := blobstest.PutMany(t, a.PutMany, later)
	if got := blobstest.Read(t, b.Open, lc[2]); !bytes.Equal(got, later[2]) {
		t.Fatal("blob packed after the reader opened differs")
	}
	seen := map[cid.Cid]bool{}
	if err := b.Walk(func(c cid.Cid, _ int64) error { seen[c] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 300+1+1+3 {
		t.Fatalf("walk saw %d blobs, want %d", len(seen), 305)
	}
	if err := b.Delete(cids[0]); !errors.Is(err, blobs.ErrPacked) {
		t.Fatalf("delete packed: %v", err)
	}
	if _, err := b.Open(blobs.FromDigest(make([]byte, 32))); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
	// PutFile streams a file and removes it once stored.
	src := filepath.Join(t.TempDir(), "video")
	vid := blobstest.Rand(t, 3<<20)
	if err := os.WriteFile(src, vid, 0o644); err != nil {
		t.Fatal(err)
	}
	vc, created, err := a.PutFile(src)
	if err != nil || !created {
		t.Fatalf("put file: %v %v", created, err)
	}
	if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("source left after a put: %v", err)
	}
	r, err := b.Open(vc)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, vid) {
		t.Fatal("file blob differs")
	}
}

func TestOnLocalObjects(t *testing.T) {
	exercise(t, localObjects(t))
}

func TestOnS3(t *testing.T) {
	srv := testenv.S3(t)
	exercise(t, func() objstore.Store { return srv.Store(t, "blobs") })
}

// TestOutage: with the server down a put fails with ErrUnavailable (never
// a false success) and a read never says a stored blob is missing; once
// the server is back, the put succeeds.
func TestOutage(t *testing.T) {
	srv := testenv.S3(t)
	s := open(t, srv.Store(t, "outage"))
	old := blobstest.RandMany(t, 4, 100)
	oc := blobstest.PutMany(t, s.PutMany, old)
	srv.Stop()
	batch := blobstest.RandMany(t, 5, 100)
	if _, err := s.PutMany(batch); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("put during an outage: %v, want ErrUnavailable", err)
	}
	loose := blobstest.RandMany(t, 1, 100)
	if _, err := s.PutMany(loose); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("single put during an outage: %v, want ErrUnavailable", err)
	}
	if _, err := s.Open(oc[0]); err == nil || errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("read during an outage: %v, want an error that is not ErrNotFound", err)
	}
	srv.Start()
	bc := blobstest.PutMany(t, s.PutMany, batch)
	if got := blobstest.Read(t, open(t, srv.Store(t, "outage")).Open, bc[4]); !bytes.Equal(got, batch[4]) {
		t.Fatal("blob stored after the outage differs")
	}
	if !strings.Contains(s.String(), "s3://") {
		t.Fatalf("String %q", s.String())
	}
}

// TestRemoveRecordingObjects: removing a recording's files removes what
// Options.RecordingObjects names for it too (keys, and every key under a
// prefix), and nothing of another recording.
func TestRemoveRecordingObjects(t *testing.T) {
	ctx := context.Background()
	obj, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objects := func(id string) []string { return []string{"side/" + id + "/", "doc/" + id + ".json", "missing/" + id} }
	s, err := objblobs.OpenWith(ctx, obj, objblobs.Options{RecordingObjects: objects})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"rec1", "rec2"} {
		if err := s.PutRecordingFile(id, "ROOT", []byte("root")); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"side/" + id + "/a", "side/" + id + "/b/c", "doc/" + id + ".json"} {
			if _, err := obj.Put(ctx, key, bytes.NewReader([]byte(key)), int64(len(key)), objstore.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.RemoveRecordingFiles("rec1"); err != nil {
		t.Fatal(err)
	}
	for prefix, want := range map[string]int{"side/rec1/": 0, "doc/rec1": 0, "recordings/rec1/": 0, "side/rec2/": 2, "doc/rec2": 1, "recordings/rec2/": 1} {
		if n := count(t, obj, prefix); n != want {
			t.Errorf("%s: %d objects after removing rec1, want %d", prefix, n, want)
		}
	}
}
