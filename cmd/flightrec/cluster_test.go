package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/store/lease"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/wire"
)

// clusterEnv is a cluster on loopback: versitygw, one ClickHouse, the
// deployment's keys and flightrec nodes in cluster mode, each a serve
// process. It is the one place the cluster tests start nodes.
type clusterEnv struct {
	t     *testing.T
	s3    *testenv.S3Server
	obj   objstore.Store // the deployment's store, as the nodes see it
	blobs string         // --blobs
	dsn   string         // --index
	keys  app.KeyFiles
	ttl   time.Duration
	nodes []*serverProc
}

func newClusterEnv(t *testing.T, n int, ttl time.Duration) *clusterEnv {
	t.Helper()
	e := &clusterEnv{t: t, s3: testenv.S3(t), ttl: ttl}
	if os.Getenv(testenv.ClickHouseEnv) != "" {
		e.dsn = testenv.ClickHouse(t)
	} else {
		e.dsn, _, _ = testenv.StartClickHouse(t) // a private one
	}
	b := make([]byte, 6)
	rand.Read(b)
	e.blobs = e.s3.URL("cluster-" + hex.EncodeToString(b))
	var err error
	if e.keys, err = app.GenerateKeys(filepath.Join(t.TempDir(), "keys")); err != nil {
		t.Fatal(err)
	}
	if e.obj, err = objstore.Open(e.blobs, objstore.Credentials{AccessKeyID: e.s3.AccessKey, SecretAccessKey: e.s3.SecretKey}); err != nil {
		t.Fatal(err)
	}
	bin := binary(t)
	logs := t.TempDir()
	for i := range n {
		addr := freeAddr(t)
		out, err := os.Create(filepath.Join(logs, fmt.Sprintf("node%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		p := &serverProc{t: t, bin: bin, addr: addr, data: t.TempDir(), out: out,
			args: []string{"--blobs", e.blobs, "--index", e.dsn,
				"--attestation-key", e.keys.Attestation, "--pseudonym-key", e.keys.Pseudonym,
				"--cluster-node", fmt.Sprintf("node%d", i), "--advertise", "http://" + addr, "--lease-ttl", ttl.String()},
			// Credentials reach the nodes as operators give them: the
			// environment, never a flag or a log line.
			env: []string{"AWS_ACCESS_KEY_ID=" + e.s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + e.s3.SecretKey}}
		p.start()
		e.nodes = append(e.nodes, p)
		t.Cleanup(func() {
			p.cmd.Process.Signal(syscall.SIGCONT) // a test that failed while it was paused
			p.stop()
			out.Close()
			if t.Failed() {
				log, _ := os.ReadFile(out.Name())
				t.Logf("node%d's log:\n%s", i, log)
			}
		})
	}
	return e
}

func (e *clusterEnv) url(i int) string { return "http://" + e.nodes[i].addr }

// waitLapsed waits until recording id's ownership lease has expired.
func (e *clusterEnv) waitLapsed(id string) lease.Lease {
	e.t.Helper()
	ls := lease.New(e.obj, "cluster/leases", time.Now)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := ls.Read(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if !l.Live(time.Now()) {
			return l
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("lease of %s still live: %+v", id, l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// batchEpoch reads the epoch and the first event's data of recording id's
// batch object that starts at seq.
func (e *clusterEnv) batchEpoch(id string, seq uint64) (epoch uint64, node string) {
	e.t.Helper()
	raw, _, err := objstore.ReadAll(context.Background(), e.obj, fmt.Sprintf("cluster/batches/%s/%020d", id, seq))
	if err != nil {
		e.t.Fatal(err)
	}
	var b struct {
		Epoch uint64 `json:"epoch"`
		Node  string `json:"node"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		e.t.Fatal(err)
	}
	return b.Epoch, b.Node
}

// post appends ndjson to recording id through base and returns the reply
// as it came (status, acknowledging node, envelope).
func post(t *testing.T, base, id string, ndjson []byte) (status int, node string, body []byte) {
	t.Helper()
	resp, err := http.Post(base+"/v1/recordings/"+id+"/events", "application/x-ndjson", bytes.NewReader(ndjson))
	if err != nil {
		return 0, "", []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(ingest.NodeHeader), body
}

// consoleLines are n console events from seq first on, whose text says
// who sent them.
func consoleLines(first uint64, n int, who string) []byte {
	var b bytes.Buffer
	ts := int64(1764483600000000000) + int64(first)*1_000_000
	for i := range n {
		seq := first + uint64(i)
		data, _ := json.Marshal(map[string]any{"level": "log", "text": fmt.Sprintf("%s seq %d", who, seq)})
		line, _ := json.Marshal(event.Envelope{Seq: seq, TS: ts + int64(i)*1_000_000, Step: 1, Kind: event.KindConsole, Data: data})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// allEvents reads a recording's events through base.
func allEvents(t *testing.T, base, id string) []event.Envelope {
	t.Helper()
	var out []event.Envelope
	var after uint64
	for {
		resp, err := http.Get(fmt.Sprintf("%s/v1/recordings/%s/events?limit=10000&after_seq=%d", base, id, after))
		if err != nil {
			t.Fatal(err)
		}
		var page playback.EventPage
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("events of %s: %d %v", id, resp.StatusCode, err)
		}
		out = append(out, page.Events...)
		if page.NextAfterSeq == 0 {
			return out
		}
		after = page.NextAfterSeq
	}
}

// TestClusterFencing: node A owns a recording and is paused (SIGSTOP)
// past its lease; node B takes the recording over. When A resumes, a
// write it still attempts as the owner of the old epoch is refused on the
// batch's key (B wrote that range first) or, when A writes first, ignored
// (A's own check finds its lease lapsed, so it never acknowledges, and B
// replaces the batch with its epoch). Either way the recording ends with
// exactly what was acknowledged.
func TestClusterFencing(t *testing.T) {
	e := newClusterEnv(t, 2, 2*time.Second)
	for _, tc := range []struct {
		name string
		// bFirst: B writes the range before A tries (A's write is refused
		// on the key); otherwise B takes over without writing, A writes
		// first, and B's write replaces A's.
		bFirst bool
		// want is the refusal the resumed owner's own write gets.
		want string
	}{{"refused", true, "the recording is changing owner: another node took it over"},
		{"ignored", false, "the recording is changing owner: this node's lease lapsed"}} {
		t.Run(tc.name, func(t *testing.T) {
			// Whether A, resumed, writes before its renewal notices the
			// takeover is a race; try until it did, since that write is
			// what this test is about.
			for attempt := 1; ; attempt++ {
				got := fenceOnce(t, e, tc.bFirst)
				if got == tc.want {
					t.Logf("attempt %d: the resumed owner's write: %s", attempt, got)
					return
				}
				t.Logf("attempt %d: %s", attempt, got)
				if attempt == 8 {
					t.Fatalf("in %d tries the resumed node never wrote as the old owner (want %q)", attempt, tc.want)
				}
			}
		})
	}
}

// fenceOnce runs the fencing scenario once on a new recording and says
// what became of the resumed old owner's write: "proxied to the new
// owner" (it noticed the takeover first), or its refusal's message.
func fenceOnce(t *testing.T, e *clusterEnv, bFirst bool) string {
	ctx := context.Background()
	a := e.nodes[0]
	c := client.New(e.url(0))
	rep, err := c.Open(ctx, wire.OpenRequest{Project: "fence", Flow: "fence"})
	if err != nil {
		t.Fatal(err)
	}
	id := rep.ID
	if st, node, body := post(t, e.url(0), id, consoleLines(1, 10, "A")); st != 200 || node != "node0" {
		t.Fatalf("append to the owner: %d %s %s", st, node, body)
	}
	a.cmd.Process.Signal(syscall.SIGSTOP)
	old := e.waitLapsed(id)
	// B takes over: with the next range, or with a retry of what
	// A acknowledged (all duplicates: nothing written).
	bLines := consoleLines(1, 10, "A")
	if bFirst {
		bLines = consoleLines(11, 10, "B")
	}
	st, node, body := post(t, e.url(1), id, bLines)
	if st != 200 || node != "node1" {
		t.Fatalf("append to B after A's lease lapsed: %d %s %s", st, node, body)
	}
	cur, err := lease.New(e.obj, "cluster/leases", time.Now).Read(ctx, id)
	if err != nil || cur.Epoch != old.Epoch+1 || cur.Holder != e.url(1) {
		t.Fatalf("after the takeover the lease is %+v (%v), want B's, epoch %d", cur, err, old.Epoch+1)
	}
	// A is asked, while still paused, for seqs 11-20 with other
	// content: the request waits in its socket, so that when A
	// wakes still believing it owns epoch 1 it races its own
	// lease renewal (which would find the takeover) to write.
	type reply struct {
		st   int
		node string
		body []byte
	}
	stale := make(chan reply, 1)
	go func() {
		st, node, body := post(t, e.url(0), id, consoleLines(11, 10, "stale-A"))
		stale <- reply{st, node, body}
	}()
	time.Sleep(300 * time.Millisecond)
	a.cmd.Process.Signal(syscall.SIGCONT)
	r := <-stale
	st, node, body = r.st, r.node, r.body
	staleAcked := st == 200
	switch {
	case staleAcked && node != "node1":
		t.Fatalf("the paused node acknowledged a write itself after losing its lease: %s", body)
	case staleAcked:
		t.Logf("A had noticed the takeover first and proxied to B: %s", body)
	default:
		t.Logf("A's stale write was refused: %d %s", st, body)
	}
	if !bFirst {
		if st, node, body := post(t, e.url(1), id, consoleLines(11, 10, "B")); st != 200 || node != "node1" {
			t.Fatalf("B appending 11-20: %d %s %s", st, node, body)
		}
	}
	if ep, node := e.batchEpoch(id, 11); ep != old.Epoch+1 || node != "node1" {
		t.Errorf("the batch at seq 11 is epoch %d by %s, want B's epoch %d", ep, node, old.Epoch+1)
	}
	// A can no longer write, now or later: a further append to it
	// is served by B.
	if st, node, body := post(t, e.url(0), id, consoleLines(21, 5, "A-again")); st != 200 || node != "node1" {
		t.Fatalf("append through A after the takeover: %d %s %s (want B's acknowledgement through A)", st, node, body)
	}
	fin, err := client.New(e.url(0)).Finish(ctx, id, "pass")
	if err != nil {
		t.Fatal(err)
	}
	if fin.AckedThrough != 25 {
		t.Errorf("finish acked through %d, want 25", fin.AckedThrough)
	}
	want := map[uint64]string{}
	for s := uint64(1); s <= 25; s++ {
		who := "A"
		switch {
		case s > 20:
			who = "A-again"
		case s > 10 && (bFirst || !staleAcked):
			who = "B"
		case s > 10:
			who = "stale-A" // acknowledged, by B, through A's proxy
		}
		want[s] = fmt.Sprintf("%s seq %d", who, s)
	}
	var evs []event.Envelope
	deadline := time.Now().Add(time.Minute)
	for {
		evs = allEvents(t, e.url(1), id)
		if len(evs) >= 25 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(evs) != 25 {
		t.Fatalf("the finished recording has %d events, want 25", len(evs))
	}
	for i, ev := range evs {
		var d struct{ Text string }
		json.Unmarshal(ev.Data, &d)
		if ev.Seq != uint64(i+1) || d.Text != want[ev.Seq] {
			t.Errorf("event %d: seq %d %q, want seq %d %q", i, ev.Seq, d.Text, i+1, want[uint64(i+1)])
		}
		if strings.HasPrefix(d.Text, "stale-A") && !staleAcked {
			t.Errorf("the paused node's unacknowledged write is in the recording: %s", d.Text)
		}
	}
	if staleAcked {
		return "proxied to the new owner"
	}
	var env wire.Envelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return fmt.Sprintf("%d %s", st, body)
	}
	return env.Error.Message
}
