package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/layout"
)

// fileSums hashes every file under dir (path → size and sha256).
func fileSums(t *testing.T, dir string, skip func(rel string) bool) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if skip(rel) {
			return nil
		}
		if d.IsDir() {
			sums[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sums[rel] = fmt.Sprintf("%d %x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// TestReadOnlyOpenBesideAWriter runs read-only opens and full verifies
// while another Store appends blobs and records: every verify is clean,
// every write method of the read-only store returns ErrReadOnly, no byte
// of any file the writer does not write changes (a torn log tail, a
// crash's leftovers that a writable open would tidy), and everything the
// writer acknowledged reads back whole afterwards (its pack and log were
// neither cut nor zeroed).
func TestReadOnlyOpenBesideAWriter(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenStore(dir, LogOptions{SegmentBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// What a writable open would change: a torn log tail of a recording
	// nobody writes, and the leftovers of a crash.
	still, sl := openRecording(t, w, 1)
	recs := consoleRecs(20)
	for i := 3; i < len(recs); i += 4 { // every fourth a frame, naming a blob
		r := &recs[i]
		r.Kind = event.KindFrame
		c, _, err := w.Blobs.Put([]byte(fmt.Sprint(r.Seq)))
		if err != nil {
			t.Fatal(err)
		}
		r.CID, r.BlobSize = c.String(), 50<<10
	}
	mustAppend(t, sl, recs)
	sl.Close()
	appendBytes(t, filepath.Join(w.logDir(still.ID), "00000001.seg"), []byte{9, 0, 0})
	os.MkdirAll(filepath.Join(dir, "recordings", removingPrefix+still.ID, "log"), 0o755)
	os.WriteFile(filepath.Join(dir, "blobs", "packs", "00000099.idx"), []byte("orphan"), 0o644)
	os.WriteFile(filepath.Join(dir, "blobs", "packs", layout.TempPrefix+"x"), []byte("half"), 0o644)
	os.MkdirAll(filepath.Join(dir, "blobs", "aa"), 0o755)
	os.WriteFile(filepath.Join(dir, "blobs", "aa", layout.TempPrefix+"y"), []byte("half"), 0o644)

	live, ll := openRecording(t, w, 2)
	writerOnly := func(rel string) bool {
		return strings.HasPrefix(rel, filepath.Join("recordings", live.ID)) || strings.HasPrefix(rel, filepath.Join("blobs", "packs", "0000000")) ||
			(len(rel) > 7 && strings.HasPrefix(rel, "blobs"+string(filepath.Separator)) && !strings.Contains(rel, layout.TempPrefix) && rel != filepath.Join("blobs", "aa"))
	}
	before := fileSums(t, dir, writerOnly)

	stop := make(chan struct{})
	type acked struct {
		seq  uint64
		blob []byte
	}
	done := make(chan []acked)
	var written atomic.Uint64
	var writerDone atomic.Bool
	go func() {
		var out []acked
		defer func() { writerDone.Store(true); done <- out }()
		for seq := uint64(1); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			blob := []byte(strings.Repeat(fmt.Sprintf("frame %d ", seq), 3000))
			cids, err := w.Blobs.PutMany([][]byte{blob})
			if err != nil {
				t.Error(err)
				return
			}
			rec := Record{Seq: seq, TS: int64(seq), Kind: event.KindFrame, CID: cids[0].String(), BlobSize: int64(len(blob)),
				Data: json.RawMessage(`{}`)}
			if _, err := ll.Append([]Record{rec}); err != nil {
				t.Error(err)
				return
			}
			out = append(out, acked{seq, blob})
			written.Store(seq)
		}
	}()
	// Each read-only open and verify starts after the writer appended
	// since the last one began, so they overlap its appends.
	var failure string
	for i, seen := 0, uint64(0); i < 8 && failure == ""; i++ {
		for written.Load() == seen && !writerDone.Load() {
			runtime.Gosched()
		}
		seen = written.Load()
		ro, err := OpenStoreReadOnly(dir, LogOptions{})
		if err != nil {
			failure = err.Error()
			break
		}
		rep, err := ro.Verify(context.Background(), nil)
		if err != nil || !rep.OK() {
			failure = fmt.Sprintf("verify beside a writer: %v %+v", err, rep.Problems)
		}
		checkReadOnly(t, ro, live.ID)
		ro.Close()
	}
	close(stop)
	got := <-done
	if failure != "" {
		t.Fatal(failure)
	}
	ll.Close()
	w.Close()
	if len(got) < 8 {
		t.Fatalf("the writer wrote %d records", len(got))
	}
	after := fileSums(t, dir, writerOnly)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: %s → %s", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared", k)
		}
	}
	ro, err := OpenStoreReadOnly(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n := 0
	if _, err := ro.Scan(live.ID, Pos{}, 0, func(r Record, _ Locator) error {
		a := got[n]
		n++
		if r.Seq != a.seq || r.CID != SumString(a.blob) {
			return fmt.Errorf("record %d is seq %d", n, r.Seq)
		}
		f, err := ro.Blobs.Open(mustCID(t, r.CID))
		if err != nil {
			return err
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		if SumString(b) != r.CID {
			return fmt.Errorf("seq %d: its blob reads back with other bytes", r.Seq)
		}
		return nil
	}); err != nil || n != len(got) {
		t.Fatalf("read back %d of %d acknowledged records: %v", n, len(got), err)
	}
}

// openRecording creates recording number i of a test and opens its log.
func openRecording(t *testing.T, st *Store, i int) (RecordingMeta, *Log) {
	t.Helper()
	meta := RecordingMeta{ID: NewRecordingID(timeAt(i)), Project: "p"}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	return meta, lg
}

func timeAt(i int) time.Time { return time.Unix(1764483600+int64(i), 0) }

func mustCID(t *testing.T, s string) cid.Cid {
	t.Helper()
	c, err := ParseCID(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkReadOnly calls every write method of a read-only store.
func checkReadOnly(t *testing.T, ro *Store, id string) {
	t.Helper()
	if !ro.ReadOnly() {
		t.Fatal("ReadOnly() is false")
	}
	errs := map[string]error{}
	errs["Create"] = ro.Create(RecordingMeta{ID: NewRecordingID(timeAt(3)), Project: "p"})
	_, errs["OpenLog"] = ro.OpenLog(id)
	_, errs["Seal"] = ro.Seal(RecordingMeta{ID: id})
	_, _, errs["Repair"] = ro.Repair(id)
	errs["SavePlan"] = ro.SavePlan(id, []byte(`{}`))
	_, errs["Key"] = ro.Key("never-made.key")
	_, errs["RemoveRecording"] = ro.RemoveRecording(id)
	_, errs["PutDerived"] = ro.PutDerived(id, "x", []byte("x"))
	errs["SetFailureSignature"] = ro.SetFailureSignature(id, "sig")
	_, _, errs["Put"] = ro.Blobs.Put([]byte("x"))
	_, errs["PutMany"] = ro.Blobs.PutMany([][]byte{[]byte("x")})
	errs["Delete"] = ro.Blobs.Delete(mustCID(t, SumString([]byte("x"))))
	_, _, errs["ImportBundle"] = ro.ImportBundle(strings.NewReader(""))
	for name, err := range errs {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly", name, err)
		}
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestOnePackStoreSizeInProportion: a store holding one small recording's
// blobs takes disk in proportion to them, not a whole pack's preallocation.
func TestOnePackStoreSizeInProportion(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ { // 40 frames of 20 KB, batch by batch
		if _, err := st.Blobs.PutMany([][]byte{randBytes(t, 20<<10)}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	if got := diskBytes(t, dir); got >= 16<<20 {
		t.Fatalf("the store takes %d bytes on disk for 800 KB of blobs", got)
	}
	// Reopening (the pack is still being filled) keeps it in proportion.
	st, err = OpenStore(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if got := diskBytes(t, dir); got >= 16<<20 {
		t.Fatalf("after a reopen the store takes %d bytes on disk", got)
	}
}

// diskBytes is what du counts: allocated blocks, not file sizes.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}
