package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// feeder ingests recordings with frames into a server, one after another,
// until halted, and keeps what the server acknowledged for each.
type feeder struct {
	mu    sync.Mutex
	acked map[string]uint64 // recording → acknowledged through
	stop  chan struct{}
	done  chan error
}

// startFeeder starts ingesting into base; recordings have steps steps
// (one frame each).
func startFeeder(base string, seed uint64, steps int) *feeder {
	f := &feeder{acked: map[string]uint64{}, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() { f.done <- f.run(base, seed, steps) }()
	return f
}

func (f *feeder) run(base string, seed uint64, steps int) error {
	ctx := context.Background()
	c := client.New(base)
	c.RetryFor = time.Minute
	for i := uint64(0); ; i++ {
		select {
		case <-f.stop:
			return nil
		default:
		}
		evs := testgen.Recording(testgen.Options{Seed: seed + i, Steps: steps, EventsPerStep: 20, FrameBytes: 2000})
		lines, err := client.ParseLines(testgen.NDJSON(evs))
		if err != nil {
			return err
		}
		rep, err := c.Open(ctx, wire.OpenRequest{Project: "lock", Flow: "feed"})
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		if _, err := c.Send(ctx, rep.ID, lines, 40, 1<<20, func(a uint64) {
			f.mu.Lock()
			f.acked[rep.ID] = a
			f.mu.Unlock()
		}); err != nil {
			return fmt.Errorf("send %s: %w", rep.ID, err)
		}
		if _, err := c.Finish(ctx, rep.ID, verdictOf(evs)); err != nil {
			return fmt.Errorf("finish %s: %w", rep.ID, err)
		}
	}
}

// verdictOf is the verdict the recording's receipts imply.
func verdictOf(evs []event.Envelope) string {
	for _, e := range evs {
		if e.Kind == "receipt" && strings.Contains(string(e.Data), `"outcome":"failed"`) {
			return "fail"
		}
	}
	return "pass"
}

// ackedSoFar is the number of events acknowledged so far, over every
// recording.
func (f *feeder) ackedSoFar() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n uint64
	for _, a := range f.acked {
		n += a
	}
	return n
}

// waitAcked waits until at least n events are acknowledged.
func (f *feeder) waitAcked(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for f.ackedSoFar() < n {
		select {
		case err := <-f.done:
			t.Fatalf("ingest stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d events acknowledged, waiting for %d", f.ackedSoFar(), n)
		}
	}
}

// halt stops the feeder after the recording it is sending is finished and
// returns what was acknowledged.
func (f *feeder) halt(t *testing.T) map[string]uint64 {
	t.Helper()
	close(f.stop)
	if err := <-f.done; err != nil {
		t.Fatalf("ingest: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]uint64, len(f.acked))
	for id, a := range f.acked {
		out[id] = a
	}
	return out
}

// checkServed checks that the server at base serves every acknowledged
// event of every recording in acked, once the index has caught up: the
// index counts exactly the acknowledged events, the events read back are
// seqs 1..N, and every frame's bytes hash to the CID it is served under.
// It returns how many events and frames it checked.
func checkServed(t *testing.T, base string, acked map[string]uint64) (events, frames int) {
	t.Helper()
	for id, n := range acked {
		deadline := time.Now().Add(time.Minute)
		var rec store.RecordingRow
		for {
			getJSON(t, base+"/v1/recordings/"+id, &rec)
			if rec.IndexedTo >= n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("recording %s: index did not catch up: indexed through %d of %d", id, rec.IndexedTo, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rec.Events != int64(n) {
			t.Errorf("recording %s: the index counts %d events, %d were acknowledged", id, rec.Events, n)
		}
		after, seq := uint64(0), uint64(0)
		for {
			var page wire.EventPage
			getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/events?limit=10000&after_seq=%d", base, id, after), &page)
			for _, e := range page.Events {
				seq++
				if e.Seq != seq {
					t.Fatalf("recording %s: read seq %d where %d belongs", id, e.Seq, seq)
				}
				if e.Kind != event.KindFrame {
					continue
				}
				var fr event.Frame
				if err := json.Unmarshal(e.Data, &fr); err != nil || fr.ImageCID == "" {
					t.Fatalf("recording %s seq %d: frame without image_cid: %s", id, e.Seq, e.Data)
				}
				body := getBytes(t, base+"/v1/recordings/"+id+"/blobs/"+fr.ImageCID)
				if got := store.SumString(body); got != fr.ImageCID {
					t.Errorf("recording %s seq %d: frame served under %s hashes to %s", id, e.Seq, fr.ImageCID, got)
				}
				frames++
			}
			if page.NextAfterSeq == 0 {
				break
			}
			after = page.NextAfterSeq
		}
		if seq != n {
			t.Errorf("recording %s: read back %d events, %d were acknowledged", id, seq, n)
		}
		events += int(seq)
	}
	return events, frames
}

// indexLag reads flightrec_index_lag_events from the server's metrics.
func indexLag(t *testing.T, base string) float64 {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(getBytes(t, base+"/metrics")))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flightrec_index_lag_events "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no flightrec_index_lag_events in /metrics")
	return 0
}

// TestTwoServesOneDataDir: a second serve on a data directory that a
// server holds exits at once with DATA_DIR_LOCKED, naming the holder's PID
// and address and pointing to --server; the first keeps serving, and
// every frame it acknowledged, before and after, is served with its bytes.
func TestTwoServesOneDataDir(t *testing.T) {
	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir()}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	f := startFeeder(base, 100, 20)
	f.waitAcked(t, 500)

	second := freeAddr(t)
	_, errOut, code := flightrecEnv(t, nil, time.Minute, "serve", "--data", p.data, "--addr", second)
	if code != exitFailure || !strings.Contains(errOut, "DATA_DIR_LOCKED") {
		t.Fatalf("second serve: exit %d %q, want %d DATA_DIR_LOCKED", code, errOut, exitFailure)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", p.cmd.Process.Pid), p.addr, "next: stop that server", "--server http://" + p.addr} {
		if !strings.Contains(errOut, want) {
			t.Errorf("second serve's refusal %q does not say %q", errOut, want)
		}
	}

	f.waitAcked(t, f.ackedSoFar()+500) // the first server still acknowledges
	acked := f.halt(t)
	events, frames := checkServed(t, base, acked)
	if frames == 0 {
		t.Fatal("no frames checked")
	}
	t.Logf("%d recordings, %d events and %d frames served intact after a refused second serve", len(acked), events, frames)
	if _, errOut, code := flightrec(t, "audit", "verify", "--data", p.data); code != exitOK {
		t.Errorf("audit verify beside the server: exit %d %s", code, errOut)
	}
	// The directory stays sound: a server starts on it again and serves
	// the same.
	p.stop()
	p.start()
	checkServed(t, base, acked)
}

// hashTree hashes every file under dir, but SQLite's -shm and -wal, which
// a reader of the index may touch.
func hashTree(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	out := map[string][sha256.Size]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "-shm") || strings.HasSuffix(path, "-wal") {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a temporary file renamed meanwhile
		}
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(path, dir)] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// quietTree waits until the server has stopped writing (two hashes of
// the tree a moment apart agree: the index's checkpoint after the last
// batch is done) and returns that hash.
func quietTree(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	prev := hashTree(t, dir)
	for i := 0; i < 100; i++ {
		time.Sleep(300 * time.Millisecond)
		cur := hashTree(t, dir)
		if reflect.DeepEqual(prev, cur) {
			return cur
		}
		prev = cur
	}
	t.Fatal("the data directory never stopped changing")
	return nil
}

// runBin runs the binary from any goroutine (no t.Fatal).
func runBin(args ...string) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(binPath, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode(), nil
	}
	return out.String(), errOut.String(), 0, err
}
