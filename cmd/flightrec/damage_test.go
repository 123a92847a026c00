package main

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/wire"
)

// damageFixture is a stopped server's data directory holding one open
// recording of 200 acknowledged and indexed events (frames among them).
type damageFixture struct {
	p    *serverProc
	base string
	id   string
	evs  int
}

func newDamageFixture(t *testing.T) damageFixture {
	t.Helper()
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	base := "http://" + p.addr
	evs := testgen.Recording(testgen.Options{Seed: 7, Steps: 20, EventsPerStep: 10, FrameBytes: 3000})
	lines, err := client.ParseLines(testgen.NDJSON(evs))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base)
	ctx := context.Background()
	rep, err := c.Open(ctx, wire.OpenRequest{Project: "damage", Flow: "f"})
	if err != nil {
		t.Fatal(err)
	}
	acked, err := c.Send(ctx, rep.ID, lines, 25, 1<<20, nil)
	if err != nil || acked != uint64(len(evs)) {
		t.Fatalf("send: acked %d of %d: %v", acked, len(evs), err)
	}
	waitIndexedThrough(t, base, rep.ID, uint64(len(evs)))
	p.stop()
	return damageFixture{p: p, base: base, id: rep.ID, evs: len(evs)}
}

func waitIndexedThrough(t *testing.T, base, id string, through uint64) store.RecordingRow {
	t.Helper()
	return waitRecording(t, base, id, func(rec store.RecordingRow) bool { return rec.IndexedTo >= through })
}

// waitRecording polls GET /v1/recordings/{id} until done says the row is
// what the test waits for.
func waitRecording(t *testing.T, base, id string, done func(store.RecordingRow) bool) store.RecordingRow {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var rec store.RecordingRow
		getJSON(t, base+"/v1/recordings/"+id, &rec)
		if done(rec) {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("the index did not catch up: %+v", rec)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runBinary runs the real binary and returns its exit code and output.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func request(t *testing.T, method, url, body string) reply {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

// readSeqs reads every event of a recording through the read API.
func readSeqs(t *testing.T, base, id string) []uint64 {
	t.Helper()
	var page wire.EventPage
	getJSON(t, base+"/v1/recordings/"+id+"/events?limit=10000", &page)
	seqs := make([]uint64, len(page.Events))
	for i, e := range page.Events {
		seqs[i] = e.Seq
	}
	return seqs
}

func wantSeqsBut(t *testing.T, got []uint64, n int, lost uint64) {
	t.Helper()
	var want []uint64
	for s := uint64(1); s <= uint64(n); s++ {
		if s != lost {
			want = append(want, s)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d seqs %v…, want every seq 1..%d but %d", len(got), got[:min(len(got), 5)], n, lost)
	}
}

// flipBitOfSeq flips one bit in the middle of seq's frame in recording
// id's log and returns the segment's path, its damaged bytes and the frame.
func flipBitOfSeq(t *testing.T, data, id string, seq uint64) (string, []byte, store.Locator) {
	t.Helper()
	logDir := filepath.Join(data, "recordings", id, "log")
	var victim store.Locator
	_ = store.ScanLog(logDir, func(r store.Record, loc store.Locator) error {
		if r.Seq == seq {
			victim = loc
		}
		return nil
	})
	seg := filepath.Join(logDir, fmt.Sprintf("%08d.seg", victim.Segment))
	b, err := os.ReadFile(seg)
	if err != nil || victim.Length == 0 {
		t.Fatalf("seq %d not found in the log: %v", seq, err)
	}
	b[victim.Offset+int64(victim.Length)/2] ^= 0x10
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return seg, b, victim
}

// TestDamageMidLogContainedAndRepaired flips one bit in the middle of an
// open recording's log: the server starts, reports the damage (/readyz,
// metric), serves every intact record before and after it, refuses appends
// with RECORDING_DAMAGED; verify finds it and exits 1; repair quarantines
// the damaged bytes and seals the recording with the gap; verify then
// passes, and the bundle states the gap, which VerifyBundle accepts.
func TestDamageMidLogContainedAndRepaired(t *testing.T) {
	fx := newDamageFixture(t)
	p, base, id := fx.p, fx.base, fx.id
	seg, b, victim := flipBitOfSeq(t, p.data, id, 102)

	p.start()
	if r := request(t, "GET", base+"/readyz", ""); r.status != 200 || !strings.Contains(string(r.body), "damaged recording "+id) ||
		!strings.Contains(string(r.body), "flightrec repair "+id) {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	if m := string(getBytes(t, base+"/metrics")); !strings.Contains(m, "flightrec_damaged_recordings 1") {
		t.Fatal("the damaged recordings metric is not 1")
	}
	wantSeqsBut(t, readSeqs(t, base, id), fx.evs, 102)
	more := testgen.NDJSON(testgen.Recording(testgen.Options{Seed: 8, Steps: 1, EventsPerStep: 1}))
	more = bytes.Replace(more, []byte(`"seq":1,`), []byte(fmt.Sprintf(`"seq":%d,`, fx.evs+1)), 1)
	r := request(t, "POST", base+"/v1/recordings/"+id+"/events", string(more))
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"RECORDING_DAMAGED"`) ||
		!strings.Contains(string(r.body), "flightrec repair "+id) {
		t.Fatalf("append to the damaged recording: %d %s", r.status, r.body)
	}
	// Every other recording works.
	other, err := client.New(base).Open(context.Background(), wire.OpenRequest{Project: "damage"})
	if err != nil {
		t.Fatal(err)
	}
	if r := request(t, "POST", base+"/v1/recordings/"+other.ID+"/events", string(testgen.NDJSON(
		testgen.Recording(testgen.Options{Seed: 9, Steps: 1, EventsPerStep: 1})))); r.status != 200 {
		t.Fatalf("append to another recording: %d %s", r.status, r.body)
	}
	p.stop()
	after, _ := os.ReadFile(seg)
	if !bytes.Equal(after, b) {
		t.Fatal("the server changed the damaged log")
	}

	code, out := runBinary(t, "verify", "--data", p.data)
	if code != exitFound || !strings.Contains(out, "log damaged") || !strings.Contains(out, "seqs 102–102 lost") {
		t.Fatalf("verify of the damaged store: exit %d\n%s", code, out)
	}
	code, out = runBinary(t, "repair", id, "--data", p.data)
	if code != 0 || !strings.Contains(out, "GAP seqs 102–102") {
		t.Fatalf("repair: exit %d\n%s", code, out)
	}
	q, _ := filepath.Glob(filepath.Join(p.data, "recordings", id, "quarantine", "*.bad"))
	if len(q) != 1 {
		t.Fatalf("quarantine files: %v", q)
	}
	if qb, _ := os.ReadFile(q[0]); len(qb) != victim.Length || !bytes.Equal(qb, b[victim.Offset:victim.Offset+int64(victim.Length)]) {
		t.Fatalf("the quarantine holds %d bytes, not the damaged frame's %d", len(qb), victim.Length)
	}
	if code, out = runBinary(t, "verify", "--data", p.data); code != 0 {
		t.Fatalf("verify after repair: exit %d\n%s", code, out)
	}

	p.start()
	defer p.stop()
	var rec store.RecordingRow
	getJSON(t, base+"/v1/recordings/"+id, &rec)
	if rec.State != store.StateFinished || rec.Events != int64(fx.evs-1) {
		t.Fatalf("after repair: %+v", rec)
	}
	wantSeqsBut(t, readSeqs(t, base, id), fx.evs, 102)
	r = request(t, "GET", base+"/v1/recordings/"+id+"/bundle", "")
	if r.status != 200 || r.header.Get("X-Flightrec-Gaps") != "102-102" {
		t.Fatalf("bundle: %d gaps %q", r.status, r.header.Get("X-Flightrec-Gaps"))
	}
	br, err := store.VerifyBundle(bytes.NewReader(r.body))
	if err != nil || !br.OK() || len(br.Gaps) != 1 || br.Gaps[0].From != 102 || br.Gaps[0].To != 102 {
		t.Fatalf("VerifyBundle: %v %+v", err, br)
	}
	bundle := filepath.Join(t.TempDir(), "r.car")
	os.WriteFile(bundle, r.body, 0o644)
	if code, out := runBinary(t, "verify", bundle); code != 0 || !strings.Contains(out, "GAP seqs 102–102") {
		t.Fatalf("verify BUNDLE: exit %d\n%s", code, out)
	}
	// The bundle imports elsewhere as the same recording, gap and all.
	elsewhere := t.TempDir()
	if code, out := runBinary(t, "import", "bundle", bundle, "--data", elsewhere); code != 0 {
		t.Fatalf("import bundle: exit %d\n%s", code, out)
	}
	if code, out := runBinary(t, "verify", "--data", elsewhere); code != 0 {
		t.Fatalf("verify of the imported recording: exit %d\n%s", code, out)
	}
	if r := request(t, "GET", base+"/v1/recordings/"+id+"/attestation", ""); r.status == 200 {
		var env struct{ Payload []byte }
		json.Unmarshal(r.body, &env)
		if !bytes.Contains(env.Payload, []byte(`"gaps":[{"from":102,"to":102`)) {
			t.Fatalf("the attestation does not state the gap: %s", env.Payload)
		}
	} else {
		t.Fatalf("attestation: %d %s", r.status, r.body)
	}
}

// TestDamageFlippedPackByte flips one byte in the middle of one blob in the
// pack being filled: the server starts, serves every other blob with its
// bytes and refuses the corrupt one; verify reports that blob's CID alone
// and exits 1; nothing in the pack is cut or zeroed.
func TestDamageFlippedPackByte(t *testing.T) {
	fx := newDamageFixture(t)
	p, base := fx.p, fx.base
	pack := filepath.Join(p.data, "blobs", "packs", "00000001.pack")
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	// Walk the entries (u32 flags and length, u32 CRC, 32-byte digest,
	// stored bytes; a delta's stored bytes start with u32 back, the
	// distance to its base's entry), and flip a byte in the middle of the
	// stored bytes of the tenth or a later one that no delta is kept
	// against (packs.go), so that it alone is damaged.
	const flagZ, flagD = 1 << 31, 1 << 30
	type entry struct {
		off, n int
	}
	var entries []entry
	var cids []string
	isBase := map[int]bool{} // entry offsets a delta names
	victim := ""
	for off := 8; off+40 <= len(b); {
		w := bin.LittleEndian.Uint32(b[off:])
		if w == 0 {
			break
		}
		n := int(w &^ (flagZ | flagD))
		entries = append(entries, entry{off: off, n: n})
		cids = append(cids, blobs.FromDigest(b[off+8:off+40]).String())
		if w&flagD != 0 {
			isBase[off-int(bin.LittleEndian.Uint32(b[off+40:]))] = true
		}
		off += 40 + n
	}
	for i := 9; i < len(entries) && victim == ""; i++ {
		if !isBase[entries[i].off] {
			victim = cids[i]
			b[entries[i].off+40+entries[i].n/2] ^= 0x01
		}
	}
	if victim == "" {
		t.Fatalf("the pack holds %d blobs, want ≥ 10", len(cids))
	}
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.start()
	for _, c := range cids {
		r := request(t, "GET", base+"/v1/blobs/"+c, "")
		if c == victim {
			if r.status != 500 || !strings.Contains(string(r.body), "BLOB_CORRUPT") {
				t.Fatalf("the corrupt blob: %d %s", r.status, r.body)
			}
			continue
		}
		if r.status != 200 || store.SumString(r.body) != c {
			t.Fatalf("blob %s: %d, served bytes hash to %s", c, r.status, store.SumString(r.body))
		}
	}
	p.stop()
	after, _ := os.ReadFile(pack)
	if len(after) < len(b) || !bytes.Equal(after[:len(b)], b) {
		t.Fatal("the pack was cut or rewritten")
	}
	code, out := runBinary(t, "verify", "--data", p.data)
	if code != exitFound || strings.Count(out, "PROBLEM") != 1 || !strings.Contains(out, "cid="+victim) {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
}

// TestDamageTruncatedMeta truncates one recording's meta.json: the server
// starts, lists it on /readyz, answers RECORDING_DAMAGED on its routes, and
// serves every other recording; verify reports it and exits 1.
func TestDamageTruncatedMeta(t *testing.T) {
	fx := newDamageFixture(t)
	p, base, id := fx.p, fx.base, fx.id
	meta := filepath.Join(p.data, "recordings", id, "meta.json")
	mb, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, mb[:len(mb)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	p.start()
	if r := request(t, "GET", base+"/readyz", ""); r.status != 200 || !strings.Contains(string(r.body), "damaged recording "+id) {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	for _, route := range []string{"", "/events", "/steps", "/bundle"} {
		r := request(t, "GET", base+"/v1/recordings/"+id+route, "")
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"RECORDING_DAMAGED"`) || !strings.Contains(string(r.body), `"next"`) {
			t.Fatalf("GET %s: %d %s", route, r.status, r.body)
		}
	}
	if r := request(t, "POST", base+"/v1/recordings/"+id+"/events", "{}\n"); r.status != http.StatusConflict {
		t.Fatalf("append: %d %s", r.status, r.body)
	}
	c := client.New(base)
	other, err := c.Open(context.Background(), wire.OpenRequest{Project: "damage"})
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := client.ParseLines(testgen.NDJSON(testgen.Recording(testgen.Options{Seed: 3, Steps: 2, EventsPerStep: 3})))
	if _, err := c.Send(context.Background(), other.ID, lines, 10, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finish(context.Background(), other.ID, "pass"); err != nil {
		t.Fatal(err)
	}
	p.stop()
	code, out := runBinary(t, "verify", "--data", p.data)
	if code != exitFound || !strings.Contains(out, "recording="+id) || !strings.Contains(out, "meta.json unreadable") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
}

// TestDamageCorruptIndex garbles index.sqlite past its first page: /readyz
// fails with INDEX_CORRUPT and the cause, naming reindex, which moves the
// damaged file aside and rebuilds the index; the server is then ready and
// serves the recording.
func TestDamageCorruptIndex(t *testing.T) {
	fx := newDamageFixture(t)
	p, base, id := fx.p, fx.base, fx.id
	path := filepath.Join(p.data, "index.sqlite")
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 3*4096 {
		t.Fatalf("index of %d bytes: %v", len(b), err)
	}
	for i := 4096; i < len(b); i++ {
		b[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	cmd := exec.Command(binary(t), "serve", "--data", p.data, "--addr", p.addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-exited:
			// Refusing to start is as good, if it says why and what to do.
			if s := out.String(); !strings.Contains(s, "INDEX_CORRUPT") || !strings.Contains(s, "flightrec reindex --data") {
				t.Fatalf("serve on a damaged index: %s", s)
			}
			t.Logf("serve refused to start: %s", out.String())
			goto reindex
		default:
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve neither started nor refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := request(t, "GET", base+"/readyz", ""); r.status != http.StatusServiceUnavailable ||
		!strings.Contains(string(r.body), "INDEX_CORRUPT") || !strings.Contains(string(r.body), "flightrec reindex") {
		t.Fatalf("/readyz on a damaged index: %d %s", r.status, r.body)
	} else {
		t.Logf("/readyz: %d %s", r.status, r.body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
reindex:
	if code, out := runBinary(t, "reindex", "--data", p.data); code != 0 {
		t.Fatalf("reindex: exit %d\n%s", code, out)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("the damaged index was not kept aside: %v", aside)
	}
	p.start()
	defer p.stop()
	if r := request(t, "GET", base+"/readyz", ""); r.status != 200 {
		t.Fatalf("/readyz after reindex: %d %s", r.status, r.body)
	}
	wantSeqsBut(t, readSeqs(t, base, id), fx.evs, 0)
}

// TestOneRecordingStoreSize: the data directory of a server that took one
// small recording (200 events, frames among them) stays under 16 MiB on
// disk, counted as du counts (allocated blocks), preallocation included.
func TestOneRecordingStoreSize(t *testing.T) {
	fx := newDamageFixture(t)
	var blocks int64
	filepath.WalkDir(fx.p.data, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				blocks += st.Blocks
			}
		}
		return nil
	})
	t.Logf("one-recording store: %d bytes on disk", blocks*512)
	if blocks*512 >= 16<<20 {
		t.Fatalf("a store holding one small recording takes %d bytes on disk", blocks*512)
	}
}

// TestDamageRepairThroughServer repairs a damaged recording on the running
// server (flightrec repair --server): it is sealed with the gap, its intact
// records stay readable, appends get RECORDING_FINISHED, and the damage is
// no longer reported. repair --data on a directory a server holds is
// refused with DATA_DIR_LOCKED.
func TestDamageRepairThroughServer(t *testing.T) {
	fx := newDamageFixture(t)
	p, base, id := fx.p, fx.base, fx.id
	flipBitOfSeq(t, p.data, id, 50)

	// A server's lock refuses repair --data at once.
	lock, err := store.LockDir(p.data, store.LockOptions{Holder: store.LockHolder{Command: "serve", Addr: p.addr}})
	if err != nil {
		t.Fatal(err)
	}
	code, out := runBinary(t, "repair", id, "--data", p.data)
	lock.Close()
	if code != exitFailure || !strings.Contains(out, "DATA_DIR_LOCKED") || !strings.Contains(out, "--server http://"+p.addr) {
		t.Fatalf("repair --data under a server's lock: exit %d\n%s", code, out)
	}

	p.start()
	defer p.stop()
	code, out = runBinary(t, "repair", "--server", base, id)
	if code != 0 || !strings.Contains(out, "GAP seqs 50–50") {
		t.Fatalf("repair --server: exit %d\n%s", code, out)
	}
	rec := waitIndexedThrough(t, base, id, uint64(fx.evs))
	if rec.State != store.StateFinished || rec.Events != int64(fx.evs-1) {
		t.Fatalf("after repair: %+v", rec)
	}
	wantSeqsBut(t, readSeqs(t, base, id), fx.evs, 50)
	if r := request(t, "POST", base+"/v1/recordings/"+id+"/events", "{}\n"); r.status != http.StatusConflict ||
		!strings.Contains(string(r.body), "RECORDING_FINISHED") {
		t.Fatalf("append after repair: %d %s", r.status, r.body)
	}
	if r := request(t, "GET", base+"/readyz", ""); r.status != 200 || strings.Contains(string(r.body), "damaged") {
		t.Fatalf("/readyz after repair: %d %s", r.status, r.body)
	}
	if m := string(getBytes(t, base+"/metrics")); !strings.Contains(m, "flightrec_damaged_recordings 0") {
		t.Fatal("the damaged recordings metric is not 0 after repair")
	}
	if code, out := runBinary(t, "repair", "--server", base, id); code != 0 || !strings.Contains(out, "not damaged") {
		t.Fatalf("a second repair: exit %d\n%s", code, out)
	}
}
