package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"

	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store"
)

// storeFrames writes a finished recording straight into the store at
// data, past ingest and its checks (as an older version stored it): a
// frame at each of frameTS, then a console event at lastTS.
func storeFrames(t *testing.T, data string, frameTS []int64, lastTS int64) string {
	t.Helper()
	st, err := store.OpenStore(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	meta := store.RecordingMeta{ID: store.NewRecordingID(time.Now()), Project: "shop", CreatedAt: time.Now().UnixNano()}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	for i, ts := range frameTS {
		img := image.NewRGBA(image.Rect(0, 0, 320, 200))
		for p := range img.Pix {
			img.Pix[p] = byte(i*90 + p%7)
		}
		img.Set(0, 0, color.White)
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, nil); err != nil {
			t.Fatal(err)
		}
		c, _, err := st.Blobs.Put(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.Record{Seq: uint64(i + 1), TS: ts, Step: 1, Kind: event.KindFrame,
			CID: c.String(), BlobSize: int64(b.Len()),
			Data: []byte(`{"image_cid":"` + c.String() + `","format":"jpeg","width":320,"height":200}`)})
	}
	recs = append(recs, store.Record{Seq: uint64(len(recs) + 1), TS: lastTS, Step: 1, Kind: event.KindConsole,
		Summary: event.Summary{Level: "log", Text: "late"}, Data: []byte(`{"level":"log","text":"late"}`)})
	l, err := st.OpenLog(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	meta.FinishedAt, meta.Verdict = time.Now().UnixNano(), "pass"
	if _, err := st.Seal(meta); err != nil {
		t.Fatal(err)
	}
	return meta.ID
}

// procStatus reads a field (in kB) of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// children lists the pids whose parent is pid and whose command is comm.
func children(pid int, comm string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) > 1 && s[open+1:close] == comm && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing after a minute: what is
// asserted is that it happens, not how fast.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVideoOfAWildTimestamp: a finished recording with two frames and one
// event at ts 2^63−1, stored by an older version that let it in, makes
// video.webm answer at once with an envelope (VIDEO_TOO_LONG, a next)
// instead of laying out billions of frames; the server's peak RSS stays
// under 1 GB. A long but allowed video is encoded by ffmpeg, and
// cancelling the request stops the encoder; SIGTERM during another build
// ends the server and its encoder.
func TestVideoOfAWildTimestamp(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	data := t.TempDir()
	now := time.Now().UnixNano()
	wild := storeFrames(t, data, []int64{now, now + int64(time.Second)}, math.MaxInt64)
	long := storeFrames(t, data, []int64{now, now + int64(50*time.Minute)}, now+int64(55*time.Minute))
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	pid := p.cmd.Process.Pid
	for _, id := range []string{wild, long} {
		waitIndexed(t, base, id)
	}

	resp, err := http.Get(base + "/v1/recordings/" + wild + "/video.webm")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var env struct {
		Error struct{ Code, Message, Next string }
	}
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != 422 || env.Error.Code != "VIDEO_TOO_LONG" ||
		!strings.Contains(env.Error.Next, "from_step") {
		t.Fatalf("video of a wild ts: %d %s; want 422 VIDEO_TOO_LONG with a next", resp.StatusCode, body)
	}
	hwm := procStatus(t, pid, "VmHWM")
	t.Logf("peak RSS after the wild video request: %d MB", hwm/1024)
	if hwm > 1<<20 {
		t.Fatalf("peak RSS %d kB, over 1 GB", hwm)
	}

	// The refused video lost nothing: the recording's three stored events
	// are all served.
	var evs struct{ Events []json.RawMessage }
	getJSON(t, base+"/v1/recordings/"+wild+"/events", &evs)
	if len(evs.Events) != 3 {
		t.Fatalf("the wild recording serves %d events after its video request, want 3", len(evs.Events))
	}

	// A 55-minute video of two frames is allowed: ffmpeg runs. The client
	// goes away; the encoder stops.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/recordings/"+long+"/video.webm", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "ffmpeg starting", func() bool { return len(children(pid, "ffmpeg")) > 0 })
	cancel()
	<-done
	waitFor(t, "ffmpeg stopping after the client left", func() bool { return len(children(pid, "ffmpeg")) == 0 })
	if r, err := http.Get(base + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("server after a cancelled video: %v", err)
	}
	// The build went to files under the data directory, not memory; a
	// cancelled one leaves none behind.
	waitFor(t, "the cancelled build's files removed", func() bool {
		left, _ := filepath.Glob(filepath.Join(data, store.VideoTempPrefix+"*"))
		return len(left) == 0
	})

	// SIGTERM while a build runs: the server ends (a graceful shutdown
	// first, then the build is cancelled), and so does its encoder.
	go func() {
		if resp, err := http.Get(base + "/v1/recordings/" + long + "/video.webm"); err == nil {
			resp.Body.Close()
		}
	}()
	var enc []int
	waitFor(t, "ffmpeg starting", func() bool { enc = children(pid, "ffmpeg"); return len(enc) > 0 })
	t.Logf("peak RSS while encoding: %d MB", procStatus(t, pid, "VmHWM")/1024)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("the server did not end within a minute of SIGTERM")
	}
	waitFor(t, "ffmpeg ending with the server", func() bool {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(enc[0]), "stat"))
		return err != nil
	})
}

// TestSlowBodyIsCut: a body trickled a byte at a time is cut once the
// server's --body-timeout passes: the client gets 408 BODY_TIMEOUT with a
// next (or, where the connection no longer allows a reply, its end), and
// an append that arrives in time afterwards is stored.
func TestSlowBodyIsCut(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir(), args: []string{"--body-timeout", "1s"}}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	id := openRec(t, base, "shop")
	for _, path := range []string{"/v1/recordings", "/v1/recordings/" + id + "/events"} {
		conn, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n", path, p.addr)
		stop := make(chan struct{})
		go func() {
			// A byte every 100 ms: the whole body would take hours.
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		close(stop)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct{ Error struct{ Code, Next string } }
			if json.Unmarshal(body, &env) != nil || resp.StatusCode != http.StatusRequestTimeout ||
				env.Error.Code != "BODY_TIMEOUT" || env.Error.Next == "" {
				t.Errorf("%s: slow body answered %d %s; want 408 BODY_TIMEOUT with a next", path, resp.StatusCode, body)
			}
		} else {
			t.Logf("%s: the connection ended without a reply: %v", path, err)
		}
		conn.Close()
	}
	// The recording is unharmed: an append in time is taken.
	if code, body := postLines(t, base, id, []string{fmt.Sprintf(`{"seq":1,"ts":%d,"step":0,"kind":"meta","data":{}}`, time.Now().UnixNano())}); code != 200 {
		t.Fatalf("append after the slow bodies: %d %s", code, body)
	}
}

// zstdBomb is 1 GiB of zeros compressed (a few tens of KB), as one
// frame that declares its size, the way klauspost's EncodeAll writes it.
func zstdBomb(t *testing.T) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var out bytes.Buffer
	enc.Reset(&out)
	zero := make([]byte, 1<<20)
	for range 1024 {
		if _, err := enc.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestConcurrentZstdBombs: ten appends at once, each 1 GiB of zeros as
// zstd, are each refused with 413 BATCH_TOO_LARGE, the server's peak
// RSS stays under 512 MB, and a real append is taken afterwards.
func TestConcurrentZstdBombs(t *testing.T) {
	bomb := zstdBomb(t)
	t.Logf("bomb: %d bytes", len(bomb))
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	pid := p.cmd.Process.Pid
	id := openRec(t, base, "shop")
	now := time.Now().UnixNano()
	if code, body := postLines(t, base, id, []string{fmt.Sprintf(`{"seq":1,"ts":%d,"step":0,"kind":"meta","data":{}}`, now)}); code != 200 {
		t.Fatalf("append before the bombs: %d %s", code, body)
	}
	type result struct {
		code int
		body []byte
		err  error
	}
	res := make(chan result, 10)
	for range 10 {
		go func() {
			req, _ := http.NewRequest("POST", base+"/v1/recordings/"+id+"/events", bytes.NewReader(bomb))
			req.Header.Set("Content-Encoding", "zstd")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				res <- result{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			res <- result{code: resp.StatusCode, body: b}
		}()
	}
	for range 10 {
		r := <-res
		var env struct{ Error struct{ Code, Next string } }
		if r.err != nil || json.Unmarshal(r.body, &env) != nil || r.code != http.StatusRequestEntityTooLarge ||
			env.Error.Code != "BATCH_TOO_LARGE" || env.Error.Next == "" {
			t.Errorf("bomb: %d %s %v; want 413 BATCH_TOO_LARGE with a next", r.code, r.body, r.err)
		}
	}
	hwm := procStatus(t, pid, "VmHWM")
	t.Logf("peak RSS under 10 concurrent zstd bombs: %d MB", hwm/1024)
	if hwm > 512<<10 {
		t.Errorf("peak RSS %d MB, over 512 MB", hwm/1024)
	}
	// The memory is handed back: RSS falls to half the peak (the server
	// does so a second after the last large body).
	waitFor(t, "RSS falling after the bombs", func() bool { return procStatus(t, pid, "VmRSS") < hwm/2 })
	t.Logf("RSS after: %d MB", procStatus(t, pid, "VmRSS")/1024)
	if code, body := postLines(t, base, id, []string{fmt.Sprintf(`{"seq":2,"ts":%d,"step":0,"kind":"console","data":{"level":"log","text":"after"}}`, now+1)}); code != 200 {
		t.Fatalf("append after the bombs: %d %s", code, body)
	}
	// Nothing acknowledged was lost: the event before the bombs and the
	// one after are both stored.
	if row := waitIndexedThrough(t, base, id, 2); row.Events != 2 {
		t.Fatalf("after the bombs the recording holds %d events, want 2", row.Events)
	}
}

// TestKeptVideoBuiltOnDisk: a finished recording's video is built in a
// file under the data directory and moved into the blob store, not held
// in memory: it is served whole as WebM with its CID as the ETag, a second
// request is served the kept blob (the same ETag, no new build), a range
// request gets its bytes, and no build file is left.
func TestKeptVideoBuiltOnDisk(t *testing.T) {
	testenv.RequireFFmpeg(t, "ffmpeg")
	data := t.TempDir()
	now := time.Now().UnixNano()
	id := storeFrames(t, data, []int64{now, now + int64(40*time.Second)}, now+int64(60*time.Second))
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	waitIndexed(t, base, id)
	get := func(hdr ...string) (int, http.Header, []byte) {
		req, _ := http.NewRequest("GET", base+"/v1/recordings/"+id+"/video.webm", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	code, h, body := get()
	if code != 200 || !bytes.HasPrefix(body, []byte{0x1a, 0x45, 0xdf, 0xa3}) {
		t.Fatalf("video: %d, %d bytes %q…; want 200 WebM", code, len(body), body[:min(len(body), 40)])
	}
	if etag := h.Get("ETag"); etag != `"`+store.SumString(body)+`"` {
		t.Fatalf("ETag %s is not the CID of the %d bytes served", etag, len(body))
	}
	t.Logf("a 60 s video: %d bytes, peak RSS %d MB", len(body), procStatus(t, p.cmd.Process.Pid, "VmHWM")/1024)
	code, h2, again := get("Range", "bytes=100-199")
	if code != http.StatusPartialContent || h2.Get("ETag") != h.Get("ETag") || !bytes.Equal(again, body[100:200]) {
		t.Fatalf("range request of the kept video: %d %s", code, h2.Get("ETag"))
	}
	if left, _ := filepath.Glob(filepath.Join(data, store.VideoTempPrefix+"*")); len(left) != 0 {
		t.Fatalf("build files left: %v", left)
	}
}
