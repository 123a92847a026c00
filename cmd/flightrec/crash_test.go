package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds flightrec once per test run.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flightrec-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "flightrec")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serverProc is a flightrec serve subprocess.
type serverProc struct {
	t    testing.TB
	bin  string
	addr string
	data string
	args []string // more flags for serve
	env  []string // more environment for serve
	// out, when set, receives the server's stdout and stderr (its log).
	out  io.Writer
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *serverProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, append([]string{"serve", "--addr", p.addr, "--data", p.data, "--log-level", "warn"}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, io.Discard
	if p.out != nil {
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	}
	if p.env != nil {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(p.cmd, p.done)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + p.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-p.done:
			p.t.Fatalf("server exited at start")
		case <-time.After(10 * time.Millisecond):
		}
	}
	p.t.Fatal("server did not come up")
}

func (p *serverProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *serverProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(getBytes(t, url), v); err != nil {
		t.Fatal(err)
	}
}

// getBytes GETs url, which must answer 200.
func getBytes(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// TestCrashRecovery kills the server with SIGKILL at random points during
// ingest, at least 20 times, restarting it each time while the client
// resumes. Afterwards seqs are exactly 1..N, nothing acknowledged is lost or
// duplicated, and the index agrees with the log.
func TestCrashRecovery(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	base := "http://" + p.addr

	evs := testgen.Recording(testgen.Options{Seed: 42, Steps: 300, EventsPerStep: 40, FrameBytes: 8000})
	lines, err := client.ParseLines(testgen.NDJSON(evs))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base)
	c.RetryFor = time.Minute
	var maxAcked atomic.Uint64
	var lost atomic.Value
	c.OnGap = func(exp uint64) {
		if exp <= maxAcked.Load() {
			lost.Store(fmt.Sprintf("server expected seq %d after acknowledging %d", exp, maxAcked.Load()))
		}
	}
	ctx := context.Background()
	rep, err := c.Open(ctx, wire.OpenRequest{Project: "crash", Flow: "f"})
	if err != nil {
		t.Fatal(err)
	}

	sent := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, rep.ID, lines, 150, 1<<20, func(a uint64) {
			if a < maxAcked.Load() {
				lost.Store(fmt.Sprintf("acked_through went back from %d to %d", maxAcked.Load(), a))
			}
			maxAcked.Store(a)
		})
		sent <- err
	}()
	// Kill at 25 random points spread over the recording: each time the
	// client's acknowledgements pass one, kill after a random few ms, while
	// the next batches are in flight.
	rng := rand.New(rand.NewPCG(1, 2))
	points := make([]uint64, 25)
	for i := range points {
		points[i] = uint64(len(evs)) * uint64(i+1) / uint64(len(points)+2)
	}
	kills := 0
	sendDone := false
	for _, at := range points {
		for !sendDone && maxAcked.Load() < at {
			select {
			case err := <-sent:
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				sendDone = true
			case <-time.After(2 * time.Millisecond):
			}
		}
		if sendDone {
			break // ingest finished early: the count check below fails
		}
		time.Sleep(time.Duration(rng.IntN(8)) * time.Millisecond)
		p.kill()
		kills++
		p.start()
	}
	if !sendDone {
		if err := <-sent; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	if kills < 20 {
		t.Fatalf("only %d kills happened during ingest; make the recording larger", kills)
	}
	if l := lost.Load(); l != nil {
		t.Fatalf("acknowledged events were lost: %s", l)
	}
	// Kill once more during finish, and let the client's retry finish it.
	fin := make(chan error, 1)
	var root string
	go func() {
		r, err := c.Finish(ctx, rep.ID, "pass")
		root = r.Root
		fin <- err
	}()
	time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
	p.kill()
	p.start()
	if err := <-fin; err != nil {
		t.Fatalf("finish: %v", err)
	}
	// A clean restart, then read everything back.
	p.stop()
	p.start()
	defer p.stop()
	t.Logf("%d kills during ingest of %d events; root %s", kills, len(evs), root)

	deadline := time.Now().Add(60 * time.Second)
	var rec store.RecordingRow
	for {
		getJSON(t, base+"/v1/recordings/"+rep.ID, &rec)
		if rec.IndexedTo == uint64(len(evs)) && rec.State == store.StateFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index did not catch up: %+v", rec)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec.Root != root || rec.Events != int64(len(evs)) {
		t.Fatalf("recording: root %s events %d; want root %s events %d", rec.Root, rec.Events, root, len(evs))
	}
	// Seqs exactly 1..N, each once, equal to what was sent.
	after := uint64(0)
	next := 0
	for {
		var page wire.EventPage
		getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/events?limit=10000&after_seq=%d", base, rep.ID, after), &page)
		for _, e := range page.Events {
			if next >= len(evs) || e.Seq != evs[next].Seq || e.Step != evs[next].Step || e.Kind != evs[next].Kind || e.TS != evs[next].TS {
				t.Fatalf("event %d: got seq %d, want seq %d", next, e.Seq, next+1)
			}
			next++
		}
		if page.NextAfterSeq == 0 {
			break
		}
		after = page.NextAfterSeq
	}
	if next != len(evs) {
		t.Fatalf("read back %d events, sent %d", next, len(evs))
	}
	// The index agrees with the log: per-step counts from the timeline
	// equal counts from the manifest's log segments.
	var tl wire.Timeline
	getJSON(t, base+"/v1/recordings/"+rep.ID+"/steps", &tl)
	fromIndex := map[int]map[event.Kind]int64{}
	for _, s := range tl.Steps {
		fromIndex[s.Step] = map[event.Kind]int64{}
		for k, n := range s.Counts {
			if n > 0 {
				fromIndex[s.Step][k] = n
			}
		}
	}
	p.stop()
	st, err := store.OpenStore(p.data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fromLog := map[int]map[event.Kind]int64{}
	var seq uint64
	if _, err := st.Scan(rep.ID, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		seq++
		if r.Seq != seq {
			return fmt.Errorf("log holds seq %d where %d belongs", r.Seq, seq)
		}
		if fromLog[r.Step] == nil {
			fromLog[r.Step] = map[event.Kind]int64{}
		}
		fromLog[r.Step][r.Kind]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seq != uint64(len(evs)) || !reflect.DeepEqual(fromIndex, fromLog) {
		t.Fatalf("index and log disagree (log has %d records)", seq)
	}
	vr, err := st.Verify(ctx, nil)
	if err != nil || !vr.OK() {
		t.Fatalf("verify: %v %+v", err, vr)
	}
	p.start()
}
