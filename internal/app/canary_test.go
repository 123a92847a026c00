package app_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

// forms are the encodings a secret could survive in: plain, URL-encoded,
// JSON-escaped, and base64 (std and URL alphabets) at each of the three
// alignments it can take inside a longer base64 text.
func forms(secret string) []string {
	out := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	if j, _ := json.Marshal(secret); len(j) > 2 {
		out = append(out, string(j[1:len(j)-1]))
	}
	// The way the canary recording plants one secret inside a JSON body
	// (a \u-escaped '!'), raw and as that body sits in a JSON string.
	uesc := strings.ReplaceAll(secret, "!", `\u0021`)
	out = append(out, uesc, strings.ReplaceAll(uesc, `\`, `\\`))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := 0; pad < 3; pad++ {
			b := enc.EncodeToString([]byte(strings.Repeat("x", pad) + secret))
			// Drop the characters the neighbouring bytes also shape.
			if lo, hi := 4, len(b)-4; hi-lo >= 8 {
				out = append(out, b[lo:hi])
			}
		}
	}
	seen := map[string]bool{}
	var uniq []string
	for _, f := range out {
		if !seen[f] {
			seen[f] = true
			uniq = append(uniq, f)
		}
	}
	return uniq
}

// corpus is everything the service wrote or served, by where it came from.
type corpus map[string][]byte

func (c corpus) size() int {
	n := 0
	for _, b := range c {
		n += len(b)
	}
	return n
}

// hits lists where any form of any secret appears.
func (c corpus) hits(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		for _, f := range forms(s) {
			for where, b := range c {
				if bytes.Contains(b, []byte(f)) {
					out = append(out, fmt.Sprintf("%q (form %q) in %s", s, f, where))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestCanariesNeverReachDisk plants secrets in every channel and every
// encoding, ingests them, and searches every byte under the data
// directory, every API response and every log line for them.
func TestCanariesNeverReachDisk(t *testing.T) {
	c := testgen.CanaryRecording(1)
	if len(c.Secrets) < 50 {
		t.Fatalf("only %d canaries", len(c.Secrets))
	}
	sent := testgen.NDJSON(c.Events)
	// Every canary is really in what is sent (in some form), so a clean
	// search below means something.
	sentCorpus := corpus{"sent": sent}
	for _, s := range c.Secrets {
		if len(sentCorpus.hits([]string{s})) == 0 {
			t.Fatalf("canary %q is not in the recording sent", s)
		}
	}

	logs := &syncBuffer{}
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	a, err := app.New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer func() { srv.Close(); a.Close() }()
	base := srv.URL

	open, _ := json.Marshal(map[string]any{"project": "shop", "flow": "checkout", "app_map": c.AppMap})
	r := do(t, "POST", base+"/v1/recordings", open)
	if r.status != 201 {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	var o wire.OpenReply
	r.decode(t, &o)
	id := o.ID
	// Half plain, half gzip; one batch sent twice (a retry).
	half := len(c.Events) / 2
	acked(t, appendBatch(t, base, id, c.Events[:half]))
	acked(t, appendBatch(t, base, id, c.Events[:half]))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(testgen.NDJSON(c.Events[half:]))
	zw.Close()
	acked(t, do(t, "POST", base+"/v1/recordings/"+id+"/events", gz.Bytes(), "Content-Encoding", "gzip"))
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	// And a second recording left open, so open logs are searched too.
	r = do(t, "POST", base+"/v1/recordings", open)
	var o2 wire.OpenReply
	r.decode(t, &o2)
	id2 := o2.ID
	acked(t, appendBatch(t, base, id2, c.Events))
	rec := waitIndexed(t, base, id, uint64(len(c.Events)))

	// Every API response about the recordings.
	api := corpus{}
	get := func(path string) []byte {
		r := do(t, "GET", base+path, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		api["GET "+path] = r.body
		return r.body
	}
	get("/v1/recordings")
	for _, rid := range []string{id, id2} {
		get("/v1/recordings/" + rid)
		var tl wire.Timeline
		json.Unmarshal(get("/v1/recordings/"+rid+"/steps"), &tl)
		for _, s := range tl.Steps {
			get(fmt.Sprintf("/v1/recordings/%s/steps/%d", rid, s.Step))
		}
		var page wire.EventPage
		json.Unmarshal(get("/v1/recordings/"+rid+"/events?limit=10000"), &page)
		for _, e := range page.Events {
			for _, m := range regexp.MustCompile(`bafkrei[a-z2-7]{52}`).FindAll(e.Data, -1) {
				get("/v1/blobs/" + string(m))
			}
		}
		get("/v1/recordings/" + rid + "/redaction")
	}
	var man store.Manifest
	json.Unmarshal(get("/v1/blobs/"+rec.Root), &man)
	for _, s := range man.Segments {
		get("/v1/blobs/" + s.CID)
	}
	get("/metrics")
	a.Close() // flush the index, close files: the disk holds everything now

	disk := corpus{}
	filepath.WalkDir(cfg.Store.Data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			disk[p] = b
		}
		return nil
	})
	all := corpus{"server log": logs.Bytes()}
	for k, v := range disk {
		all[k] = v
	}
	for k, v := range api {
		all[k] = v
	}
	if h := all.hits(c.Secrets); len(h) > 0 {
		t.Errorf("%d canary hits, e.g.:\n%s", len(h), strings.Join(h[:min(len(h), 40)], "\n"))
	}
	nforms := 0
	for _, s := range c.Secrets {
		nforms += len(forms(s))
	}
	t.Logf("%d canaries in %d forms searched in %d bytes (%d files under the data directory, %d API responses, %d bytes of logs)",
		len(c.Secrets), nforms, all.size(), len(disk), len(api), len(logs.Bytes()))

	// Redaction did its work and said so.
	var rep store.RedactionReport
	json.Unmarshal(api["GET /v1/recordings/"+id+"/redaction"], &rep)
	rules := map[string]bool{}
	for _, rc := range rep.Rules {
		rules[rc.Rule] = true
		for _, l := range rc.Locations {
			if l.Seq == 0 || l.Seq > uint64(len(c.Events)) || !strings.HasPrefix(l.Pointer, "/") {
				t.Errorf("bad location %+v in rule %s", l, rc.Rule)
			}
		}
	}
	for _, want := range []string{"header:authorization", "header:cookie", "header:set-cookie", "cookie", "dom:input-type:password"} {
		if !rules[want] {
			t.Errorf("report has no rule %q (has %v)", want, rules)
		}
	}
	if rep.PlanDigest == "" || rep.PlanDigest != man.Recording.PlanDigest || man.Redaction == nil {
		t.Errorf("plan digest: report %q, manifest %q", rep.PlanDigest, man.Recording.PlanDigest)
	}
	if a.Policy.Evaluations() != 2 {
		t.Errorf("%d policy evaluations for 2 recordings", a.Policy.Evaluations())
	}
	// Events kept their shape: the stored recording still has every seq.
	var page wire.EventPage
	json.Unmarshal(api["GET /v1/recordings/"+id+"/events?limit=10000"], &page)
	if len(page.Events) != len(c.Events) {
		t.Fatalf("%d events stored of %d", len(page.Events), len(c.Events))
	}
	for i, e := range page.Events {
		if e.Seq != uint64(i+1) || e.Kind != c.Events[i].Kind {
			t.Fatalf("event %d: seq %d kind %s", i, e.Seq, e.Kind)
		}
		if e.Kind == event.KindHAR && !json.Valid(e.Data) {
			t.Fatalf("event %d is not JSON", i)
		}
	}
}
