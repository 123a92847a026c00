package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// TestRealCaptureLeavesNoSecret is the acceptance test for HAR redaction on
// real traffic: a headless Chromium visits the cookie app (two Set-Cookie
// lines, a Cookie header sent back, a session echoed in a JSON body, a
// password in a form body), a cdphar.Recorder turns the visit into HAR
// entries, and they go through the real server over loopback. Then every
// byte the server wrote (data directory, index rows, log lines) and every
// byte it serves for the recording is searched for every secret the app
// handed out or received, in plain, URL-encoded and base64 forms.
func TestRealCaptureLeavesNoSecret(t *testing.T) {
	cp := testenv.CaptureCookieApp(t)
	if len(cp.Entries) < 3 || len(cp.Secrets) < 3 {
		t.Fatalf("capture too thin to prove anything: %d entries, %d secrets", len(cp.Entries), len(cp.Secrets))
	}
	// The capture must really carry the secrets, or a clean search proves
	// nothing.
	var sent bytes.Buffer
	now := time.Now().UnixNano()
	evs := make([]event.Envelope, len(cp.Entries))
	for i, raw := range cp.Entries {
		evs[i] = event.Envelope{Seq: uint64(i + 1), TS: now + int64(i), Step: 1, Kind: event.KindHAR, Data: raw}
		sent.Write(raw)
	}
	for _, s := range cp.Secrets {
		if !bytes.Contains(sent.Bytes(), []byte(s)) {
			t.Fatalf("a secret the app issued is not in the capture: the capture is not real")
		}
	}

	srv := appserver.Start(t)
	base := srv.Base
	id := openRec(t, base)
	if a := acked(t, appendBatch(t, base, id, evs)); a.AckedThrough != uint64(len(evs)) {
		t.Fatalf("append: %+v", a)
	}
	c := testenv.Corpus{}
	fin := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`))
	if fin.status != 200 {
		t.Fatalf("finish: %d %s", fin.status, fin.body)
	}
	c["POST finish"] = fin.body
	waitIndexed(t, base, id, uint64(len(evs)))

	// Every read of the recording, and every blob any of them names.
	get := func(path string) []byte {
		t.Helper()
		r := do(t, "GET", base+path, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		c["GET "+path] = r.body
		return r.body
	}
	get("/v1/recordings/" + id)
	get("/v1/recordings?project=shop")
	var tl wire.Timeline
	if err := json.Unmarshal(get("/v1/recordings/"+id+"/steps"), &tl); err != nil {
		t.Fatal(err)
	}
	for _, st := range tl.Steps {
		get(fmt.Sprintf("/v1/recordings/%s/steps/%d", id, st.Step))
	}
	served := 0
	for after := uint64(0); ; {
		var page wire.EventPage
		if err := json.Unmarshal(get(fmt.Sprintf("/v1/recordings/%s/events?limit=2&after_seq=%d", id, after)), &page); err != nil {
			t.Fatal(err)
		}
		served += len(page.Events)
		if page.NextAfterSeq == 0 {
			break
		}
		after = page.NextAfterSeq
	}
	if served != len(evs) {
		t.Fatalf("served %d events, sent %d", served, len(evs))
	}
	var rep store.RedactionReport
	if err := json.Unmarshal(get("/v1/recordings/"+id+"/redaction"), &rep); err != nil {
		t.Fatal(err)
	}
	fetched := c.FollowCIDs(func(cid string) { get("/v1/blobs/" + cid) })

	// Every file while the server runs (the index's -wal and -shm are
	// there now), then again after it closed and checkpointed.
	dir := srv.App.Store.Dir()
	c.AddFiles(t, dir, "running")
	srv.Close()
	c.AddFiles(t, dir, "closed")
	c.AddSQLite(t, filepath.Join(dir, "index.sqlite"))
	c["server log"] = srv.Log.Bytes()

	t.Logf("searched %d bytes in %d places (%d files, %d blobs, %d API replies, %d bytes of log) for %d secrets",
		c.Size(), len(c), c.Count("file "), fetched, c.Count("GET ")+c.Count("POST "), len(c["server log"]), len(cp.Secrets))
	// CookieApp issues sid and csrf on GET /, then receives the password.
	labels := make([]string, len(cp.Secrets))
	for i := range labels {
		labels[i] = fmt.Sprintf("secret #%d", i)
		if len(cp.Secrets) == 3 {
			labels[i] = []string{"sid cookie", "csrf cookie", "password"}[i]
		}
	}
	if hits := c.Hits(cp.Secrets, labels); len(hits) > 0 {
		if len(hits) > 40 {
			hits = append(hits[:40], fmt.Sprintf("… and %d more", len(hits)-40))
		}
		t.Errorf("secrets from the real capture survived ingest (%d places):\n  %s", len(hits), strings.Join(hits, "\n  "))
	}

	// A positive control: what redaction keeps (the browser's User-Agent)
	// is found, in the stored files and in the API's replies, so the search
	// does look where the entries went.
	var inFiles, inAPI bool
	for where, b := range c {
		if bytes.Contains(b, []byte("HeadlessChrome/")) {
			inFiles = inFiles || strings.HasPrefix(where, "file ")
			inAPI = inAPI || strings.HasPrefix(where, "GET ")
		}
	}
	if !inFiles || !inAPI {
		t.Errorf("the control string is not where the entries went: in files %v, in API replies %v", inFiles, inAPI)
	}
	if os.Getenv("FLIGHTREC_DEBUG_REALCAPTURE") != "" {
		t.Logf("redaction report: %s", rcShort(c["GET /v1/recordings/"+id+"/redaction"]))
		t.Logf("step 1: %s", c[fmt.Sprintf("GET /v1/recordings/%s/steps/1", id)])
	}

	// And redaction did something: the cookie rules fired.
	counts := map[string]int64{}
	for _, r := range rep.Rules {
		counts[r.Rule] += r.Count
	}
	for _, rule := range []string{"header:cookie", "header:set-cookie", "cookie"} {
		if counts[rule] == 0 {
			t.Errorf("the redaction report has no count for rule %q: %s", rule, rcShort(c["GET /v1/recordings/"+id+"/redaction"]))
		}
	}
}

func rcShort(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
