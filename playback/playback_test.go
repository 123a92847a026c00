package playback_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/sqlite"
)

// env is a playback service over a store and an embedded index, with a
// projector the tests flush by hand, so what the index holds is exactly
// what a test put there.
type env struct {
	st   *store.Store
	idx  store.Index
	proj *store.Projector
	base string
}

func newEnv(t *testing.T, wrap func(store.Index) store.Index) *env {
	t.Helper()
	dir := t.TempDir()
	// Small segments, so a recording of a few events has several.
	st, err := store.OpenStore(dir, store.LogOptions{SegmentBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(filepath.Join(dir, "index.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	var idx store.Index = db
	if wrap != nil {
		idx = wrap(db)
	}
	log := slog.New(slog.DiscardHandler)
	svc := playback.New(st, idx, log, httpx.NewEdge(nil, log))
	r := chi.NewRouter()
	svc.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		srv.Close()
		svc.Close()
		db.Close()
		st.Close()
	})
	return &env{st: st, idx: idx, proj: store.NewProjector(st, idx, log), base: srv.URL}
}

// recording is what record made.
type recording struct {
	id    string
	blobs []string // the CIDs of its frames, in order
	root  string   // "" while open
	segs  []string // its manifest's segment CIDs
}

// record stores a recording of project whose frames carry blobs (one
// frame event each, between console events that carry none), finished if
// finish is set, and indexes it unless skipIndex is set.
func (e *env) record(t *testing.T, project string, blobs [][]byte, finish, skipIndex bool) recording {
	t.Helper()
	meta := store.RecordingMeta{ID: store.NewRecordingID(time.Now()), Project: project, CreatedAt: time.Now().UnixNano()}
	if err := e.st.Create(meta); err != nil {
		t.Fatal(err)
	}
	cids, err := e.st.Blobs.PutMany(blobs)
	if err != nil {
		t.Fatal(err)
	}
	rec := recording{id: meta.ID}
	var recs []store.Record
	for i, c := range cids {
		rec.blobs = append(rec.blobs, c.String())
		seq := uint64(len(recs) + 1)
		recs = append(recs,
			store.Record{Seq: seq, TS: meta.CreatedAt + int64(seq), Step: i, Kind: event.KindConsole,
				Summary: event.Summary{Level: "log", Text: "step " + fmt.Sprint(i)},
				Data:    []byte(`{"level":"log","text":"step ` + fmt.Sprint(i) + `"}`)},
			store.Record{Seq: seq + 1, TS: meta.CreatedAt + int64(seq) + 1, Step: i, Kind: event.KindFrame,
				CID: c.String(), BlobSize: int64(len(blobs[i])),
				Data: []byte(`{"image_cid":"` + c.String() + `","format":"png","width":8,"height":8}`)})
	}
	l, err := e.st.OpenLog(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	row := store.RecordingRow{RecordingMeta: meta, State: store.StateOpen}
	if finish {
		meta.FinishedAt, meta.Verdict = time.Now().UnixNano(), "pass"
		if rec.root, err = e.st.Seal(meta); err != nil {
			t.Fatal(err)
		}
		m, err := e.st.ReadManifest(rec.root)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Segments {
			rec.segs = append(rec.segs, s.CID)
		}
		row = store.RecordingRow{RecordingMeta: meta, State: store.StateFinished, Root: rec.root}
	}
	if !skipIndex {
		e.proj.Put(row)
		e.proj.Notify(meta.ID, uint64(len(recs)))
		if err := e.proj.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c, err := e.idx.Cursor(context.Background(), meta.ID); err != nil || c != uint64(len(recs)) {
			t.Fatalf("index cursor of %s = %d, %v; want %d", meta.ID, c, err, len(recs))
		}
	}
	return rec
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func get(t *testing.T, url string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

func (e *env) blob(t *testing.T, rec, cid string, hdr ...string) reply {
	t.Helper()
	return get(t, e.base+"/v1/recordings/"+rec+"/blobs/"+cid, hdr...)
}

func pngOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for y := range 8 {
		for x := range 8 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const unknownID = "0000000000000000000000000z" // well-formed, never created

// TestRecordingBlob: a blob is served through a recording that references
// it (a frame, its root, a segment), exactly as GET /v1/blobs/{cid} serves
// it, and through no other: a recording that does not reference the blob
// answers as an unknown recording does, even though the blob exists.
func TestRecordingBlob(t *testing.T) {
	e := newEnv(t, nil)
	red, green, shared := pngOf(t, color.RGBA{255, 0, 0, 255}), pngOf(t, color.RGBA{0, 255, 0, 255}), pngOf(t, color.Gray{7})
	html := []byte("<html><script>alert(1)</script></html>")
	a := e.record(t, "alpha", [][]byte{red, shared, html}, false, false) // open
	b := e.record(t, "beta", [][]byte{green, shared}, true, false)       // finished
	if len(b.segs) < 2 {
		t.Fatalf("fixture: b has %d segments, want several", len(b.segs))
	}

	unknown := e.blob(t, unknownID, a.blobs[0])
	if unknown.status != 404 || !strings.Contains(string(unknown.body), `"RECORDING_NOT_FOUND"`) {
		t.Fatalf("unknown recording: %d %s", unknown.status, unknown.body)
	}
	// Every refusal is the unknown recording's answer, byte for byte.
	refused := func(what string, r reply) {
		t.Helper()
		if r.status != unknown.status || !bytes.Equal(r.body, unknown.body) ||
			r.header.Get("Content-Type") != unknown.header.Get("Content-Type") {
			t.Errorf("%s: %d %s; want the unknown recording's %d %s", what, r.status, r.body, unknown.status, unknown.body)
		}
	}

	// Served through the recording, as /v1/blobs serves it.
	for _, c := range []struct {
		rec, cid, ct string
		want         []byte
	}{
		{a.id, a.blobs[0], "image/png", red},
		{a.id, a.blobs[1], "image/png", shared},
		{a.id, a.blobs[2], "application/octet-stream", html}, // never text/html
		{b.id, b.blobs[0], "image/png", green},
		{b.id, b.blobs[1], "image/png", shared}, // identical bytes: one CID, referenced by both
	} {
		r := e.blob(t, c.rec, c.cid)
		if r.status != 200 || !bytes.Equal(r.body, c.want) {
			t.Errorf("blob %s through %s: %d, %d bytes; want 200 and the frame's %d bytes", c.cid, c.rec, r.status, len(r.body), len(c.want))
			continue
		}
		direct := get(t, e.base+"/v1/blobs/"+c.cid)
		for _, h := range []string{"Content-Type", "X-Content-Type-Options", "ETag", "Content-Length", "Accept-Ranges"} {
			if r.header.Get(h) != direct.header.Get(h) {
				t.Errorf("blob %s through %s: %s %q, /v1/blobs says %q", c.cid, c.rec, h, r.header.Get(h), direct.header.Get(h))
			}
		}
		if got := r.header.Get("Content-Type"); got != c.ct {
			t.Errorf("blob %s through %s: Content-Type %q, want %q", c.cid, c.rec, got, c.ct)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("ETag") != `"`+c.cid+`"` {
			t.Errorf("blob %s through %s: headers %v", c.cid, c.rec, r.header)
		}
		// Served because the caller may read the recording: no shared
		// cache may keep it for others.
		if cc := r.header.Get("Cache-Control"); !strings.HasPrefix(cc, "private") {
			t.Errorf("blob %s through %s: Cache-Control %q, want private", c.cid, c.rec, cc)
		}
	}

	// The root and every segment of a finished recording.
	for _, c := range append([]string{b.root}, b.segs...) {
		r := e.blob(t, b.id, c)
		want := get(t, e.base+"/v1/blobs/"+c)
		if r.status != 200 || want.status != 200 || !bytes.Equal(r.body, want.body) {
			t.Errorf("%s through %s: %d; want 200 and the blob's bytes", c, b.id, r.status)
		}
	}

	// Not through a recording that does not reference the blob, although
	// the blob exists.
	for _, c := range []struct{ rec, cid, what string }{
		{b.id, a.blobs[0], "a's frame through b"},
		{b.id, a.blobs[2], "a's other frame through b"},
		{a.id, b.blobs[0], "b's frame through a"},
		{a.id, b.root, "b's root through a"},
		{a.id, b.segs[0], "b's segment through a"},
		{unknownID, b.root, "b's root through an unknown recording"},
		{"nope", a.blobs[0], "a's frame through a malformed id"},
		{a.id, store.SumString([]byte("never stored")), "a blob nobody has, through a"},
	} {
		if get(t, e.base+"/v1/blobs/"+c.cid).status != 200 && !strings.Contains(c.what, "nobody") {
			t.Fatalf("fixture: %s does not exist", c.cid)
		}
		refused(c.what, e.blob(t, c.rec, c.cid))
	}

	// A malformed CID is 400, as on /v1/blobs.
	for _, rec := range []string{a.id, unknownID} {
		for _, c := range []string{"bafkreiabcd", "..%2f..%2fetc%2fpasswd", strings.ToUpper(a.blobs[0])} {
			if r := e.blob(t, rec, c); r.status != 400 || !strings.Contains(string(r.body), `"BAD_CID"`) {
				t.Errorf("CID %q through %s: %d %s; want 400 BAD_CID", c, rec, r.status, r.body)
			}
		}
	}
}

// TestRecordingBlobRange: Range and conditional requests work through a
// recording as on /v1/blobs.
func TestRecordingBlobRange(t *testing.T) {
	e := newEnv(t, nil)
	frame := pngOf(t, color.RGBA{1, 2, 3, 255})
	a := e.record(t, "alpha", [][]byte{frame}, false, false)
	c := a.blobs[0]

	r := e.blob(t, a.id, c, "Range", "bytes=8-23")
	if r.status != http.StatusPartialContent || !bytes.Equal(r.body, frame[8:24]) {
		t.Fatalf("range 8-23: %d, %d bytes", r.status, len(r.body))
	}
	if got, want := r.header.Get("Content-Range"), fmt.Sprintf("bytes 8-23/%d", len(frame)); got != want {
		t.Errorf("Content-Range %q, want %q", got, want)
	}
	if r.header.Get("Content-Type") != "image/png" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("range headers: %v", r.header)
	}
	r = e.blob(t, a.id, c, "Range", "bytes=-5")
	if r.status != http.StatusPartialContent || !bytes.Equal(r.body, frame[len(frame)-5:]) {
		t.Errorf("suffix range: %d, %q", r.status, r.body)
	}
	r = e.blob(t, a.id, c, "Range", fmt.Sprintf("bytes=%d-", len(frame)+10))
	if r.status != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("range past the end: %d", r.status)
	}
	r = e.blob(t, a.id, c, "If-None-Match", `"`+c+`"`)
	if r.status != http.StatusNotModified || len(r.body) != 0 {
		t.Errorf("If-None-Match with the ETag: %d, %d bytes", r.status, len(r.body))
	}
	// A range of a blob the recording does not reference is refused like
	// the whole blob.
	other := e.record(t, "beta", [][]byte{pngOf(t, color.White)}, false, false)
	if r := e.blob(t, a.id, other.blobs[0], "Range", "bytes=0-3"); r.status != 404 || len(r.body) == 4 {
		t.Errorf("range of another recording's blob: %d %q", r.status, r.body)
	}
}

// TestRecordingBlobBeforeIndexed: a finished recording's manifest lists
// its blobs, so they are served through it before the index has its
// events; an open recording's blob waits for the index.
func TestRecordingBlobBeforeIndexed(t *testing.T) {
	e := newEnv(t, nil)
	frame, open := pngOf(t, color.RGBA{9, 9, 9, 255}), pngOf(t, color.RGBA{8, 8, 8, 255})
	fin := e.record(t, "alpha", [][]byte{frame}, true, true)
	if ok, err := e.idx.HasBlob(t.Context(), fin.id, fin.blobs[0]); err != nil || ok {
		t.Fatalf("fixture: the index has %s's frame (%v, %v)", fin.id, ok, err)
	}
	for _, c := range append([]string{fin.blobs[0], fin.root}, fin.segs...) {
		if r := e.blob(t, fin.id, c); r.status != 200 {
			t.Errorf("%s through %s, not indexed: %d %s", c, fin.id, r.status, r.body)
		}
	}
	op := e.record(t, "alpha", [][]byte{open}, false, true)
	if r := e.blob(t, op.id, op.blobs[0]); r.status != 404 {
		t.Errorf("an open recording's blob before the index has it: %d, want 404", r.status)
	}
	if r := e.blob(t, fin.id, op.blobs[0]); r.status != 404 {
		t.Errorf("another recording's blob through a finished, unindexed one: %d, want 404", r.status)
	}
}

// failingBlobs is an index whose HasBlob fails.
type failingBlobs struct{ store.Index }

func (failingBlobs) HasBlob(context.Context, string, string) (bool, error) {
	return false, errors.New("index down")
}

// TestRecordingBlobIndexDown: when the index cannot say whether the
// recording references the blob, the answer is 503, not a 404 that would
// read as "no".
func TestRecordingBlobIndexDown(t *testing.T) {
	e := newEnv(t, func(idx store.Index) store.Index { return failingBlobs{idx} })
	a := e.record(t, "alpha", [][]byte{pngOf(t, color.Black)}, false, false)
	r := e.blob(t, a.id, a.blobs[0])
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"INDEX_UNAVAILABLE"`) ||
		r.header.Get("Retry-After") == "" {
		t.Errorf("HasBlob failing: %d %s", r.status, r.body)
	}
}
