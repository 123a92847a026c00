package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	_ "image/png" // screenshots
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"os"

	"github.com/ipfs/go-cid"
	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/playback/webm"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/store/layout"
)

// BenchmarkStoredBytesOfDemoRuns measures issue 19's storage rows on the demo
// storefront: the bytes one recorded run of the failing checkout flow
// stores, and what 5 runs of it store ÷ one run; what near-identical
// screencast frames cost (consecutive frames of a recording that differ
// in a few pixels); each run's frames per step and, for a rerun's new
// frames, whether the first run showed that page at that step; and what
// the next steps (changed tiles, video at rest) would store. A benchmark,
// since the figures are measurements (they
// depend on the browser's timing): logged and reported, not asserted; it
// asserts that every run verifies and
// reads back.
func BenchmarkStoredBytesOfDemoRuns(b *testing.B) {
	t := b
	testenv.RequireChromium(t)
	buggy := startStorefront(t, "--bug")
	flow := shippedFlow(t, "checkout-with-gift-card-fails", t.TempDir())
	data := t.TempDir()
	var perRun []int64
	var ids []string
	for i := range 5 {
		ids = append(ids, recordFlow(t, nil, flow, buggy, data))
		perRun = append(perRun, storedBytes(t, data))
		if i == 0 {
			t.Logf("one run: %d bytes stored (%s)", perRun[0], storedBreakdown(t, data))
		}
	}
	b.ReportMetric(float64(perRun[0]), "bytes/run")
	b.ReportMetric(float64(perRun[4])/float64(perRun[0]), "5runs/1run")
	t.Logf("5 runs: %d bytes stored (%s); 5 runs ÷ one run = %.2f× (issue 19's goal ≤ 1.5×); each run added %v",
		perRun[4], storedBreakdown(t, data), float64(perRun[4])/float64(perRun[0]), deltas(perRun))
	if out, errOut, code := flightrec(t, "verify", "--data", data); code != exitOK {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
	st, err := store.OpenStoreReadOnly(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var fs frameStats
	for _, id := range ids {
		fs.add(t, st, id)
	}
	t.Logf("event data of the first run by kind: %s", dataByKind(t, st, ids[0]))
	t.Logf("blobs by the kind of event naming them, first run / all 5 runs: %s / %s", blobsByKind(t, st, ids[:1]), blobsByKind(t, st, ids))
	t.Logf("screencast frames: %d stored (%d bytes); %d identical to the one before (stored once already); "+
		"%d differ from the one before in ≤ %d pixels (%d of them in none beyond JPEG noise), %d bytes, %.1f%% of the frames' bytes: "+
		"keeping only the changed tiles of those would save at most that much",
		fs.frames, fs.bytes, fs.same, fs.near, nearPixels, fs.noise, fs.nearBytes, 100*float64(fs.nearBytes)/float64(max(fs.bytes, 1)))
	t.Logf("where near-identical frames differ: %s", strings.Join(fs.nearBoxes, "; "))
	for _, r := range fs.runs {
		t.Logf("frames, %s", r)
	}
	alone, inContext := framesPacked(t, st, ids[0])
	segRaw, segStored, segDict := rerunSegments(t, st, ids)
	// Printed, not logged: a benchmark's log is cut after its first lines.
	fmt.Printf("next steps: the 5 runs' distinct frames are %s; as changed 16×16 tiles against the frame before, about %s; "+
		"the first run's %s of distinct frames as one VP8 WebM (CRF 12, 5 fps) %s; "+
		"the first run's distinct frames each compressed alone %s, as one zstd stream in recording order (each in the context of those before; packs keep a frame against the one before it) %s; "+
		"the reruns' log segments hold %s, stored in %s, and would take %s against the first run's as a dictionary\n",
		kb(fs.distinct), kb(fs.tileBytes), kb(fs.firstDistinct), kb(videoBytes(t, fs.video)), kb(alone), kb(inContext),
		kb(segRaw), kb(segStored), kb(segDict))
}

// storedBytes is what a data directory holds, the index aside (it is
// rebuilt from the rest: flightrec reindex): the blobs as kept (a loose
// one's file, compressed or not; the packs to their logical end, not a
// pack's preallocated tail, with their indexes: a packed blob compressed
// counts its compressed bytes), and the recordings' own files.
func storedBytes(t testing.TB, data string) int64 {
	t.Helper()
	packed, zst, loose, other := storedParts(t, data)
	return packed + zst + loose + other
}

func storedParts(t testing.TB, data string) (packed, zst, loose, other int64) {
	t.Helper()
	st, err := store.OpenStoreReadOnly(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	bt := layout.Of(data).Blobs()
	err = st.Blobs.Walk(func(c cid.Cid, size int64) error {
		if fi, err := os.Stat(bt.LooseCompressed(c.String())); err == nil {
			zst += fi.Size()
		} else if fi, err := os.Stat(bt.Loose(c.String())); err == nil {
			loose += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Blobs.StoredBytes()
	if err != nil {
		t.Fatal(err)
	}
	packed = all - zst - loose
	err = filepath.WalkDir(filepath.Join(data, "recordings"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			other += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return packed, zst, loose, other
}

// storedBreakdown splits a data directory's bytes into packed blobs,
// compressed loose blobs, plain loose blobs and the recordings' files.
func storedBreakdown(t testing.TB, data string) string {
	t.Helper()
	packed, zst, loose, other := storedParts(t, data)
	return "packed " + kb(packed) + ", compressed loose " + kb(zst) + ", plain loose " + kb(loose) + ", recordings' files " + kb(other)
}

func kb(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

func deltas(xs []int64) []int64 {
	out := []int64{xs[0]}
	for i := 1; i < len(xs); i++ {
		out = append(out, xs[i]-xs[i-1])
	}
	return out
}

// nearPixels is "a few pixels": frames differing in at most this many are
// near-identical (a caret's blink, a spinner's step).
const nearPixels = 256

// frameStats counts recordings' screencast frames against the frame
// before each, and each run's against the first run's.
type frameStats struct {
	frames, same, near int
	noise              int // of near: no pixel beyond JPEG's noise
	bytes, nearBytes   int64
	nearBoxes          []string // where near-identical frames differ (the first few)
	stored             map[string]bool
	firstRun           map[int][]image.Image // the first run's distinct frames by step
	runs               []string
	// tileBytes estimates what storing only the changed 16×16 tiles of
	// each new frame against the frame before would take
	// (changedTilesBytes; the first frame of a run whole).
	tileBytes int64
	// distinct and firstDistinct are the bytes of the distinct frames of
	// all runs and of the first.
	distinct, firstDistinct int64
	// video is the first run's frames, for the video-at-rest estimate.
	video []webm.Frame
}

// framesPacked is what recording id's distinct frames take each compressed
// alone (its own zstd frame when that saves a tenth: blobs.CompressPacked,
// as version-2 packs kept them), and as one zstd stream in recording order
// (zstd's default level, a window that holds them all), each frame
// compressed in the context of those before it. Packs now keep a frame
// against the one packed before it (a delta), which comes close to the
// second.
func framesPacked(t testing.TB, st *store.Store, id string) (alone, inContext int64) {
	t.Helper()
	seen := map[string]bool{}
	var frames [][]byte
	_, err := st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		if r.Kind != event.KindFrame || r.CID == "" || seen[r.CID] {
			return nil
		}
		seen[r.CID] = true
		b, err := readBlob(st, r.CID)
		if err != nil {
			return err
		}
		stored, _ := blobs.CompressPacked(b)
		alone += int64(len(stored))
		frames = append(frames, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(32<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return alone, int64(len(enc.EncodeAll(bytes.Join(frames, nil), nil)))
}

func (s *frameStats) add(t testing.TB, st *store.Store, id string) {
	t.Helper()
	if s.stored == nil {
		s.stored, s.firstRun = map[string]bool{}, map[int][]image.Image{}
	}
	first := len(s.runs) == 0
	var run struct {
		frames, masked, fresh, freshNoise, freshNear int
		freshBytes, maskedBytes                      int64
	}
	perStep := map[int]int{}
	var prev image.Image
	var prevCID string
	_, err := st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		if r.Kind != event.KindFrame || r.CID == "" {
			return nil
		}
		s.frames++
		s.bytes += r.BlobSize
		run.frames++
		perStep[r.Step]++
		var fr event.Frame
		if err := json.Unmarshal(r.Data, &fr); err != nil {
			return err
		}
		if len(fr.Masks) > 0 {
			run.masked++
			run.maskedBytes += r.BlobSize
		}
		fresh := !s.stored[r.CID]
		s.stored[r.CID] = true
		if first {
			c := r.CID
			s.video = append(s.video, webm.Frame{Time: r.TS, Load: func() ([]byte, error) { return readBlob(st, c) }})
		}
		if r.CID == prevCID {
			s.same++
			return nil
		}
		img, err := readImage(st, r.CID)
		if err != nil {
			return err
		}
		if fresh {
			if prev != nil && img.Bounds() == prev.Bounds() {
				s.tileBytes += changedTilesBytes(t, prev, img)
			} else {
				s.tileBytes += r.BlobSize
			}
		}
		if prev != nil && img.Bounds() == prev.Bounds() {
			if n, box := recorder.PixelsDiffering(prev, img); n <= nearPixels {
				s.near++
				s.nearBytes += r.BlobSize
				if n == 0 {
					s.noise++
				} else if len(s.nearBoxes) < 12 {
					s.nearBoxes = append(s.nearBoxes, fmt.Sprintf("step %d: %d px in %v", r.Step, n, box))
				}
			}
		}
		if first && fresh {
			s.firstRun[r.Step] = append(s.firstRun[r.Step], img)
		}
		if fresh {
			run.fresh++
			run.freshBytes += r.BlobSize
			s.distinct += r.BlobSize
			if first {
				s.firstDistinct += r.BlobSize
			}
			if !first {
				// The same page state as the first run's at this step?
				least := -1
				for _, f := range s.firstRun[r.Step] {
					if n, _ := recorder.PixelsDiffering(f, img); least < 0 || n < least {
						least = n
					}
				}
				if least == 0 {
					run.freshNoise++
				} else if least > 0 && least <= nearPixels {
					run.freshNear++
				}
			}
		}
		prev, prevCID = img, r.CID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for n := 0; n <= slices.Max(slices.Collect(maps.Keys(perStep))); n++ {
		steps = append(steps, fmt.Sprint(perStep[n]))
	}
	s.runs = append(s.runs, fmt.Sprintf("run %d: %d frames (per step %s), %d with masks (%s); %d not stored before (%s), "+
		"%d of them the first run's page at that step within JPEG noise, %d within %d pixels of it",
		len(s.runs)+1, run.frames, strings.Join(steps, " "), run.masked, kb(run.maskedBytes), run.fresh, kb(run.freshBytes),
		run.freshNoise, run.freshNear, nearPixels))
}

// changedTilesBytes is what b's 16×16 tiles (a JPEG MCU) with a pixel
// past JPEG's noise against a take as a JPEG at the screencast's quality
// 70, the others painted flat grey (a flat tile costs a few bits): about
// what a frame stored as its changed tiles against the frame before
// would take.
func changedTilesBytes(t testing.TB, a, b image.Image) int64 {
	t.Helper()
	type sub interface {
		SubImage(image.Rectangle) image.Image
	}
	r := b.Bounds()
	out := image.NewRGBA(r)
	draw.Draw(out, r, b, r.Min, draw.Src)
	sa, oka := a.(sub)
	sb, okb := b.(sub)
	for y := r.Min.Y; y < r.Max.Y; y += 16 {
		for x := r.Min.X; x < r.Max.X; x += 16 {
			tile := image.Rect(x, y, x+16, y+16).Intersect(r)
			if oka && okb && recorder.SamePixels(sa.SubImage(tile), sb.SubImage(tile)) {
				draw.Draw(out, tile, image.NewUniform(color.Gray{Y: 128}), image.Point{}, draw.Src)
			}
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, out, &jpeg.Options{Quality: 70}); err != nil {
		t.Fatal(err)
	}
	return int64(buf.Len())
}

// videoBytes is the size of the frames as one WebM (playback/webm's
// defaults: VP8 at CRF 12, 5 frames a second), the video-at-rest
// estimate; 0 when ffmpeg is missing.
func videoBytes(t testing.TB, frames []webm.Frame) int64 {
	t.Helper()
	if len(frames) == 0 {
		return 0
	}
	if _, err := webm.FFmpegPath(""); err != nil {
		return 0
	}
	var buf bytes.Buffer
	opt := webm.Options{Start: frames[0].Time, End: frames[len(frames)-1].Time + int64(time.Second)}
	if err := webm.Encode(context.Background(), opt, slices.Values(frames), nil, &buf); err != nil {
		t.Fatal(err)
	}
	return int64(buf.Len())
}

func readBlob(st *store.Store, c string) ([]byte, error) {
	cid, err := store.ParseCID(c)
	if err != nil {
		return nil, err
	}
	f, err := st.Blobs.Open(cid)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func readImage(st *store.Store, c string) (image.Image, error) {
	b, err := readBlob(st, c)
	if err != nil {
		return nil, err
	}
	img, _, err := image.Decode(bytes.NewReader(b))
	return img, err
}

// blobsByKind sums the distinct blobs the recordings' events name, by the
// events' kind (an outlined part under its event's kind, as "+data").
func blobsByKind(t testing.TB, st *store.Store, ids []string) string {
	t.Helper()
	seen := map[string]bool{}
	size := map[string]int64{}
	for _, id := range ids {
		_, err := st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
			r.EachBlob(func(c string, n int64) {
				k := string(r.Kind)
				if r.Outlined != nil && c == r.Outlined.CID {
					k += "+data"
				}
				if !seen[c] {
					seen[c] = true
					size[k] += n
				}
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var parts []string
	for k, n := range size {
		parts = append(parts, k+" "+kb(n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// dataByKind sums a recording's event data by kind: events, bytes, the
// largest, and how many have an outlined part.
func dataByKind(t testing.TB, st *store.Store, id string) string {
	t.Helper()
	type agg struct {
		n, outlined   int
		bytes, larges int64
	}
	by := map[event.Kind]*agg{}
	_, err := st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		a := by[r.Kind]
		if a == nil {
			a = &agg{}
			by[r.Kind] = a
		}
		a.n++
		a.bytes += int64(len(r.Data))
		a.larges = max(a.larges, int64(len(r.Data)))
		if r.Outlined != nil {
			a.outlined++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for k, a := range by {
		parts = append(parts, fmt.Sprintf("%s: %d events, %s (largest %s), %d outlined", k, a.n, kb(a.bytes), kb(a.larges), a.outlined))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// playwrightTraces is issue 19's count of traces of one flow.
const playwrightTraces = 10

// BenchmarkStoredBytesOfPlaywrightTraces measures issue 19's Playwright row:
// 10 traces of the demo storefront's checkout (current playwright-core,
// testenv.PlaywrightCheckout) imported with --unmasked-frames into one
// data directory, its stored bytes ÷ the 10 zips' bytes, and one import
// ÷ its zip. A benchmark: the figures are logged and reported (the
// browser's timing moves them); it asserts that every import succeeds and the store verifies.
func BenchmarkStoredBytesOfPlaywrightTraces(b *testing.B) {
	t := b
	shop, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	data := t.TempDir()
	var zips, first, firstZip int64
	for i := range playwrightTraces {
		trace, _ := testenv.PlaywrightCheckout(t, shop)
		fi, err := os.Stat(trace)
		if err != nil {
			t.Fatal(err)
		}
		zips += fi.Size()
		if out, errOut, code := flightrec(t, "import", "playwright", "--data", data, "--unmasked-frames", "--verdict", "fail", trace); code != exitOK {
			t.Fatalf("import %d: exit %d: %s %s", i+1, code, out, errOut)
		}
		if i == 0 {
			first, firstZip = storedBytes(t, data), fi.Size()
			t.Logf("one trace: %d bytes stored for its %d-byte zip: %.2f× (issue 19's goal ≤ 0.6×; %s)",
				first, fi.Size(), float64(first)/float64(fi.Size()), storedBreakdown(t, data))
		}
	}
	all := storedBytes(t, data)
	b.ReportMetric(float64(all)/float64(zips), "stored/zips")
	b.ReportMetric(float64(first)/float64(firstZip), "one/zip")
	t.Logf("%d traces: %d bytes stored for %d bytes of zips: %.2f× (issue 19's goal ≤ 0.3×; %s); ÷ one import %.2f×",
		playwrightTraces, all, zips, float64(all)/float64(zips), storedBreakdown(t, data), float64(all)/float64(first))
	st, err := store.OpenStoreReadOnly(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := st.IDs()
	t.Logf("blobs by the kind of event naming them, all traces: %s", blobsByKind(t, st, ids))
	if len(ids) > 0 {
		t.Logf("event data of one import by kind: %s", dataByKind(t, st, ids[0]))
		alone, inContext := framesPacked(t, st, ids[0])
		t.Logf("one import's distinct frames: each compressed alone %s; as one zstd stream in recording order "+
			"(each in the context of those before: what byte deltas could at best reach; packs keep JPEG deltas) %s", kb(alone), kb(inContext))
	}
	st.Close()
	if len(ids) != playwrightTraces {
		t.Fatalf("%d recordings, want %d", len(ids), playwrightTraces)
	}
	if out, errOut, code := flightrec(t, "verify", "--data", data); code != exitOK {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

// rerunSegments is what the reruns' (ids[1:]) sealed log segments hold,
// what they are stored in (each compressed alone), and what they would be
// compressed against the first run's segments as a zstd raw-content
// dictionary: what a next step would save.
func rerunSegments(t testing.TB, st *store.Store, ids []string) (raw, asStored, dict int64) {
	segs := func(id string) [][]byte {
		m, _, err := st.Manifest(id)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, s := range m.Segments {
			b, err := readBlob(st, s.CID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	first := bytes.Join(segs(ids[0]), nil)
	if len(first) > 1<<20 {
		first = first[len(first)-1<<20:]
	}
	withDict, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderDictRaw(1, first), zstd.WithWindowSize(4<<20))
	bt := layout.Of(st.Dir()).Blobs()
	for _, id := range ids[1:] {
		m, _, _ := st.Manifest(id)
		for _, s := range m.Segments {
			raw += s.Bytes
			if fi, err := os.Stat(bt.LooseCompressed(s.CID)); err == nil {
				asStored += fi.Size()
			}
		}
	}
	for _, id := range ids[1:] {
		for _, s := range segs(id) {
			dict += int64(len(withDict.EncodeAll(s, nil)))
		}
	}
	return raw, asStored, dict
}
