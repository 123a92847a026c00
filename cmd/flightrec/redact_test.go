package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// plant holds the secrets of a planted recording, each with a label that
// names its class (the search reports labels, never values).
type plant struct {
	r               *rand.Rand
	secrets, labels []string
}

func (p *plant) str(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[p.r.IntN(len(alphabet))]
	}
	return string(b)
}

func (p *plant) keep(label, s string) string {
	p.secrets, p.labels = append(p.secrets, s), append(p.labels, label)
	return s
}

const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
const alnumChars = upper + "abcdefghijklmnopqrstuvwxyz0123456789"

// jwt returns a JWT whose payload and signature (the secret part) are kept.
func (p *plant) jwt(label string) string {
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	pay := b64(fmt.Sprintf(`{"sub":"%s"}`, p.str(12, alnumChars)))
	sig := p.str(43, alnumChars)
	p.keep(label, pay+"."+sig)
	return b64(`{"alg":"HS256","typ":"JWT"}`) + "." + pay + "." + sig
}

// dottedCard returns a Luhn-valid 16-digit number in dot-separated groups.
func (p *plant) dottedCard(label string) string { return p.keep(label, testgen.LuhnCard(p.r, ".")) }

// issue17Recording plants one secret of each class issue 17 found stored:
// metadata at open, DOM texts and attributes, key-signalled values, dotted
// cards, fills and checks aimed by CSS and by an unknown ref, a known
// value echoed before (and, in after, after a restart) the event that
// teaches it, in a URL, a JSON body and base64, a frame that is not an
// image, and invalid UTF-8 with a lone surrogate.
func issue17Recording(seed uint64) (p *plant, open map[string]any, before, after []string) {
	p = &plant{r: rand.New(rand.NewPCG(seed, seed+7))}
	open = map[string]any{"project": "shop", "flow": "issue17",
		"labels":   map[string]string{"note": "password=" + p.keep("label note", p.str(20, alnumChars)), "api_token": p.jwt("label api_token")},
		"executor": "bot ghp_" + p.keep("executor", p.str(36, alnumChars)),
		"versions": map[string]string{"app": "token=" + p.keep("versions app", p.str(24, alnumChars))}}
	seq := 0
	line := func(kind event.Kind, data any) string {
		seq++
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		return fmt.Sprintf(`{"seq":%d,"ts":%d,"step":1,"kind":"%s","data":%s}`, seq, 1764483600000000000+int64(seq)*1e6, kind, b)
	}
	har := func(method, url string, headers []map[string]string, body string) map[string]any {
		if headers == nil {
			headers = []map[string]string{}
		}
		req := map[string]any{"method": method, "url": url, "httpVersion": "HTTP/1.1", "headers": headers,
			"cookies": []any{}, "queryString": []any{}, "headersSize": -1, "bodySize": len(body)}
		if body != "" {
			req["postData"] = map[string]any{"mimeType": "application/json", "text": body}
		}
		return map[string]any{"startedDateTime": "2026-11-30T06:00:00.000Z", "time": 1.5, "request": req,
			"response": map[string]any{"status": 204, "statusText": "", "httpVersion": "HTTP/1.1", "headers": []any{},
				"cookies": []any{}, "content": map[string]any{"size": 0, "mimeType": "text/plain"}, "redirectURL": "",
				"headersSize": -1, "bodySize": 0},
			"timings": map[string]float64{"send": 0.5, "wait": 0.5, "receive": 0.5}}
	}
	ck := p.keep("cookie echoed before it is sent", p.str(32, alnumChars))
	beacon := func() string {
		return line(event.KindHAR, har("GET", "https://shop.example/collect?v=1&utmcc=__utma%3D"+ck+"%3B%2B__utmz%3D1.2.3&z=9", nil, ""))
	}
	el := func(id int, tag string, attrs map[string]any, kids ...map[string]any) map[string]any {
		if kids == nil {
			kids = []map[string]any{}
		}
		return map[string]any{"type": 2, "id": id, "tagName": tag, "attributes": attrs, "childNodes": kids}
	}
	fill := func(target map[string]string, v string) string {
		return line(event.KindReceipt, map[string]any{"step": 1, "action": map[string]any{"verb": "fill", "target": target,
			"args": map[string]string{"value": v}}, "outcome": "done"})
	}
	fillPw := p.keep("fill by css", p.str(18, alnumChars))
	before = []string{
		beacon(),
		line(event.KindHAR, har("POST", "https://shop.example/collect", nil,
			`{"c":"`+ck+`","b":"`+base64.StdEncoding.EncodeToString([]byte("c="+ck))+`"}`)),
		line(event.KindHAR, har("GET", "https://shop.example/api/me", []map[string]string{{"name": "Cookie", "value": "sid=" + ck}}, "")),
		line(event.KindDOM, map[string]any{"type": 2, "timestamp": 1764483600001, "data": map[string]any{
			"node": map[string]any{"type": 0, "id": 1, "childNodes": []map[string]any{el(2, "html", map[string]any{}, el(3, "body", map[string]any{},
				el(4, "p", map[string]any{}, map[string]any{"type": 3, "id": 5, "textContent": "your token " + p.jwt("dom text jwt")}),
				el(6, "img", map[string]any{"title": "password: " + p.keep("dom title key-signalled", p.str(18, upper)),
					"alt":      "card " + p.dottedCard("dom alt dotted card"),
					"data-cfg": "api_key=" + p.keep("dom data-* attribute", p.str(22, alnumChars))}),
				el(7, "input", map[string]any{"type": "password", "id": "pw"}),
				el(8, "input", map[string]any{"type": "text", "id": "q"}),
			))}},
			"initialOffset": map[string]int{"top": 0, "left": 0}}}),
		line(event.KindConsole, map[string]any{"level": "log", "text": "password: " + p.keep("console key-signalled", p.str(18, upper))}),
		line(event.KindConsole, map[string]any{"level": "log", "text": "paid with " + p.dottedCard("console dotted card")}),
		fill(map[string]string{"css": "#pw"}, fillPw),
		fill(map[string]string{"ref": "@e99"}, p.keep("fill by unknown ref", p.str(18, alnumChars))),
		line(event.KindCheck, map[string]any{"type": "ui", "target": "#pw", "expect": p.keep("check by css", p.str(18, alnumChars)), "passed": true}),
		line(event.KindFrame, map[string]any{"mime": "image/jpeg", "width": 8, "height": 8,
			"image": base64.StdEncoding.EncodeToString([]byte("not an image: secret=" + p.keep("frame not an image", p.str(24, alnumChars))))}),
	}
	// Raw invalid UTF-8 and a lone surrogate escape.
	seq++
	before = append(before, fmt.Sprintf(`{"seq":%d,"ts":%d,"step":1,"kind":"console","data":{"level":"log","text":"bad `+"\xff\xfe"+` bytes and a lone \ud800 surrogate"}}`,
		seq, 1764483600000000000+int64(seq)*1e6))
	after = []string{
		line(event.KindConsole, map[string]any{"level": "log", "text": "echo " + ck + " and " + fillPw}),
		fill(map[string]string{"css": "#pw"}, p.keep("fill by css after the restart", p.str(18, alnumChars))),
		line(event.KindDOM, map[string]any{"type": 3, "timestamp": 1764483600009, "data": map[string]any{"source": 0,
			"texts":      []map[string]any{{"id": 5, "value": "now " + p.jwt("dom mutation jwt after the restart")}},
			"attributes": []map[string]any{{"id": 6, "attributes": map[string]any{"title": "pwd=" + p.keep("dom attribute after the restart", p.str(16, alnumChars))}}},
			"adds":       []any{}, "removes": []any{}}}),
		beacon(),
		line(event.KindHAR, har("POST", "https://shop.example/collect", nil,
			`{"b":"`+base64.URLEncoding.EncodeToString([]byte("xx"+ck))+`"}`)),
	}
	return p, open, before, after
}

// wantIssue17Rules checks that each class issue17Recording plants fired
// its rule (as "rule channel").
func wantIssue17Rules(t *testing.T, who string, fired map[string]bool) {
	t.Helper()
	for _, want := range []string{"utf8:replaced console", "frame:undecodable frame", "known-value har", "known-value console",
		"receipt:masked-target receipt", "check:masked-field check", "detector:jwt dom", "detector:card dom",
		"detector:card console", "detector:generic console", "detector:generic recording"} {
		if !fired[want] {
			t.Errorf("%s has no %q: %v", who, want, fired)
		}
	}
}

// collectServed reads every API reply about a recording (list, row, steps,
// each step, events, redaction report) and every blob they name that is
// still stored.
func collectServed(t *testing.T, base, id string, c testenv.Corpus) {
	t.Helper()
	get := func(path string) []byte {
		b := getBytes(t, base+path)
		c["GET "+path] = b
		return b
	}
	get("/v1/recordings")
	get("/v1/recordings/" + id)
	var tl wire.Timeline
	if err := json.Unmarshal(get("/v1/recordings/"+id+"/steps"), &tl); err != nil {
		t.Fatal(err)
	}
	for _, s := range tl.Steps {
		get(fmt.Sprintf("/v1/recordings/%s/steps/%d", id, s.Step))
	}
	get("/v1/recordings/" + id + "/events?limit=10000")
	get("/v1/recordings/" + id + "/redaction")
	c.FollowCIDs(func(cid string) {
		// A CID may name what garbage collection took (a re-redacted
		// recording's old root).
		resp, err := http.Get(base + "/v1/blobs/" + cid)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c["GET /v1/blobs/"+cid] = b
		if resp.StatusCode != 200 && resp.StatusCode != 404 {
			t.Fatalf("GET blob: %d %s", resp.StatusCode, b)
		}
	})
}

// searchServedAndStored collects what srv serves about id, stops it, adds
// every file under its data directory and the index's rows and its log,
// and fails on any spelling of any secret.
func searchServedAndStored(t *testing.T, srv *serverProc, logs *appserver.LogBuffer, id string, secrets, labels []string) testenv.Corpus {
	t.Helper()
	c := testenv.Corpus{}
	collectServed(t, "http://"+srv.addr, id, c)
	c.AddFiles(t, srv.data, "running")
	srv.stop()
	c.AddFiles(t, srv.data, "stopped")
	c.AddSQLite(t, filepath.Join(srv.data, "index.sqlite"))
	c["server log"] = logs.Bytes()
	if hits := c.Hits(secrets, labels); len(hits) > 0 {
		t.Errorf("%d hits:\n  %s", len(hits), strings.Join(hits, "\n  "))
	}
	t.Logf("searched %d bytes in %d places for %d secrets", c.Size(), len(c), len(secrets))
	return c
}

// TestIssue17ClassesNeverStored plants each class of issue 17 through the
// real binary (serve, HTTP ingest), kills the server in the middle of the
// recording and repeats the secrets learned before the restart after it,
// then searches every byte under the data directory (files while running
// and after, the index's rows), every API reply and the server's log for
// every secret in every spelling.
func TestIssue17ClassesNeverStored(t *testing.T) {
	p, open, before, after := issue17Recording(17)
	// Every secret is really sent (in some spelling), or a clean search
	// proves nothing.
	openJSON, _ := json.Marshal(open)
	sent := testenv.Corpus{"sent": []byte(string(openJSON) + strings.Join(append(before, after...), "\n"))}
	for i, s := range p.secrets {
		if len(sent.Hits([]string{s}, []string{p.labels[i]})) == 0 {
			t.Fatalf("%s is not in what is sent", p.labels[i])
		}
	}
	logs := &appserver.LogBuffer{}
	srv := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir(), args: []string{"--log-level", "debug"}, out: logs}
	srv.start()
	defer srv.stop()
	base := "http://" + srv.addr
	body, _ := json.Marshal(open)
	resp, err := http.Post(base+"/v1/recordings", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&o)
	resp.Body.Close()
	if resp.StatusCode != 201 || o.ID == "" {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	sendAll(t, base, o.ID, before, len(before))
	srv.kill() // mid-recording: the batch is acknowledged, the recording open
	srv.start()
	sendAll(t, base, o.ID, after, len(after))
	finishRec(t, base, o.ID)
	waitIndexed(t, base, o.ID)

	c := searchServedAndStored(t, srv, logs, o.ID, p.secrets, p.labels)

	// What redaction did, it said.
	var rep store.RedactionReport
	if err := json.Unmarshal(c["GET /v1/recordings/"+o.ID+"/redaction"], &rep); err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, rc := range rep.Rules {
		rules[rc.Rule+" "+rc.Channel] = true
	}
	wantIssue17Rules(t, "the report", rules)
	// The event with bad bytes is stored as valid text.
	var page wire.EventPage
	if err := json.Unmarshal(c["GET /v1/recordings/"+o.ID+"/events?limit=10000"], &page); err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		if !utf8.Valid(e.Data) || bytes.Contains(bytes.ToLower(e.Data), []byte(`\ud800`)) {
			t.Errorf("seq %d stored with invalid UTF-8 or a lone surrogate: %q", e.Seq, e.Data)
		}
	}
	if len(page.Events) != len(before)+len(after) {
		t.Errorf("%d events stored of %d", len(page.Events), len(before)+len(after))
	}
}

// TestRealCookieCaptureThroughTheBinary sends what Debian's Chromium
// really did on the cookie app (Set-Cookie, Cookie sent back, the session
// echoed in a JSON body, a form password, and analytics beacons echoing
// the cookies in a URL-encoded query value, a JSON body and base64) to
// the real binary. The beacons go first, before the entries that teach the
// cookie values; the server is killed between two batches and the beacons
// are sent again after. No cookie or password value is stored or served.
func TestRealCookieCaptureThroughTheBinary(t *testing.T) {
	cp := testenv.CaptureCookieApp(t)
	var beacons, rest []json.RawMessage
	for _, e := range cp.Entries {
		if bytes.Contains(e, []byte(`/collect`)) {
			beacons = append(beacons, e)
		} else {
			rest = append(rest, e)
		}
	}
	if len(beacons) < 2 || len(rest) < 3 || len(cp.Secrets) < 3 {
		t.Fatalf("capture too thin: %d beacons, %d other entries, %d secrets", len(beacons), len(rest), len(cp.Secrets))
	}
	seq := 0
	lines := func(es []json.RawMessage) []string {
		var out []string
		for _, e := range es {
			seq++
			out = append(out, fmt.Sprintf(`{"seq":%d,"ts":%d,"step":1,"kind":"har","data":%s}`, seq, 1764483600000000000+int64(seq), e))
		}
		return out
	}
	first := lines(append(append([]json.RawMessage{}, beacons...), rest...))
	again := lines(beacons)
	sent := testenv.Corpus{"sent": []byte(strings.Join(first, "\n"))}
	labels := make([]string, len(cp.Secrets))
	for i := range labels {
		labels[i] = fmt.Sprintf("cookie app secret #%d", i)
		if len(sent.Hits(cp.Secrets[i:i+1], labels[i:i+1])) == 0 {
			t.Fatalf("%s is not in the capture", labels[i])
		}
	}
	if len(sent.Hits(cp.Secrets, labels)) == 0 {
		t.Fatal("nothing to find")
	}
	logs := &appserver.LogBuffer{}
	srv := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: t.TempDir(), args: []string{"--log-level", "debug"}, out: logs}
	srv.start()
	defer srv.stop()
	base := "http://" + srv.addr
	id := openRec(t, base, "shop")
	sendAll(t, base, id, first, len(first))
	srv.kill()
	srv.start()
	sendAll(t, base, id, again, len(again))
	waitFinishedThrough(t, base, id, finishRec(t, base, id))
	searchServedAndStored(t, srv, logs, id, cp.Secrets, labels)
}

// oldWayStore stores lines as a version before issue 17 did: the metadata
// as sent, every event's data as sent (a frame's bytes as a blob, whatever
// they are), then seals the recording. It returns the recording's id and
// root.
func oldWayStore(t *testing.T, data string, open map[string]any, lines []string) (string, string) {
	t.Helper()
	st, err := store.OpenStore(data, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := store.NewRecordingID(time.Now())
	meta := store.RecordingMeta{ID: id, Project: "shop", Flow: "issue17", Executor: open["executor"].(string),
		Labels: open["labels"].(map[string]string), Versions: open["versions"].(map[string]string), CreatedAt: time.Now().UnixNano()}
	if err := st.Create(meta); err != nil {
		t.Fatal(err)
	}
	lg, err := st.OpenLog(id)
	if err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	for _, l := range lines {
		var env event.Envelope
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			continue // raw invalid UTF-8: the old reader refused it
		}
		d, err := event.Decode(env, event.Limits{})
		if err != nil {
			t.Fatalf("seq %d: %v", env.Seq, err)
		}
		rec := store.Record{Seq: d.Seq, TS: d.TS, Step: d.Step, Kind: d.Kind, Data: d.Data, Summary: event.Summarize(d)}
		if _, b := event.Binary(d); b != nil {
			c, _, err := st.Blobs.Put(b)
			if err != nil {
				t.Fatal(err)
			}
			rec.CID, rec.BlobSize, rec.Data = c.String(), int64(len(b)), event.StoredData(d, c.String())
		}
		rec.Seq = uint64(len(recs) + 1)
		recs = append(recs, rec)
	}
	if _, err := lg.Append(recs); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	meta.Verdict, meta.FinishedAt = "fail", time.Now().UnixNano()
	root, err := st.Seal(meta)
	if err != nil {
		t.Fatal(err)
	}
	return id, root
}

// TestAuditScanFixReRedactsAnOldStore writes the issue-17 classes the way a
// version before it stored them, finds each with audit scan, rewrites the
// recording with --fix, and then: nothing of any secret is left under the
// data directory once the old blobs are collected, nor in what the server
// serves; the recording says it was re-redacted; the audit log names both
// roots; and the bundle and attestation exported for the old root still
// verify offline.
func TestAuditScanFixReRedactsAnOldStore(t *testing.T) {
	p, open, before, after := issue17Recording(171)
	data := t.TempDir()
	id, oldRoot := oldWayStore(t, data, open, append(before, after...))
	dir := t.TempDir()
	car, att := filepath.Join(dir, "old.car"), filepath.Join(dir, "old.intoto.json")
	for _, c := range [][]string{{"export", "bundle", "--data", data, "-o", car, id}, {"export", "attestation", "--data", data, "-o", att, id}} {
		if _, errOut, code := runCLI(t, c...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c, code, errOut)
		}
	}
	pub := filepath.Join(dir, "attestation.pub")
	if err := os.WriteFile(pub, mustRead(t, filepath.Join(data, "keys", "attestation.pub")), 0o644); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, "audit", "scan", "--data", data, "--json")
	if code != exitFound {
		t.Fatalf("audit scan: exit %d: %s %s", code, out, errOut)
	}
	var rep struct {
		Findings []scanFinding
		Fixed    []fixedRecording
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range rep.Findings {
		found[f.Rule+" "+f.Channel] = true
	}
	wantIssue17Rules(t, "audit scan", found)
	if h := (testenv.Corpus{"audit scan": []byte(out + errOut)}).Hits(p.secrets, p.labels); len(h) > 0 {
		t.Errorf("audit scan printed secrets: %v", h)
	}

	out, errOut, code = runCLI(t, "audit", "scan", "--fix", "--data", data, "--json")
	if code != exitOK {
		t.Fatalf("audit scan --fix: exit %d: %s %s", code, out, errOut)
	}
	rep.Fixed = nil
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Fixed) != 1 || rep.Fixed[0].OldRoot != oldRoot || rep.Fixed[0].NewRoot == "" || rep.Fixed[0].NewRoot == oldRoot {
		t.Fatalf("fixed: %+v", rep.Fixed)
	}
	newRoot := rep.Fixed[0].NewRoot
	// A second scan finds nothing left to do.
	if out, errOut, code := runCLI(t, "audit", "scan", "--data", data, "--json"); code != exitOK {
		t.Errorf("audit scan after --fix: exit %d: %s %s", code, out, errOut)
	}
	// The old root's bundle and attestation verify on their own.
	if out, errOut, code := runCLI(t, "verify", "--attestation", att, "--key", pub, car); code != exitOK || !strings.Contains(out, oldRoot) {
		t.Errorf("old bundle: exit %d: %s %s", code, out, errOut)
	}
	auditLog := string(mustRead(t, filepath.Join(data, "audit.log")))
	if !strings.Contains(auditLog, `"re_redact"`) || !strings.Contains(auditLog, oldRoot) || !strings.Contains(auditLog, newRoot) {
		t.Errorf("audit log lacks the re-redaction: %s", auditLog)
	}

	// Serve the fixed store, collect the old blobs, and search everything.
	logs := &appserver.LogBuffer{}
	srv := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data, args: []string{"--log-level", "debug"}, out: logs}
	srv.start()
	defer srv.stop()
	base := "http://" + srv.addr
	if out, errOut, code := runCLI(t, "retention", "sweep", "--server", base); code != exitOK {
		t.Fatalf("sweep: exit %d: %s %s", code, out, errOut)
	}
	var row struct {
		Root       string
		ReRedacted []store.ReRedaction `json:"re_redacted"`
	}
	getJSON(t, base+"/v1/recordings/"+id, &row)
	if row.Root != newRoot || len(row.ReRedacted) != 1 || row.ReRedacted[0].OldRoot != oldRoot || len(row.ReRedacted[0].Rules) == 0 {
		t.Errorf("the recording does not say it was re-redacted: %+v", row)
	}
	searchServedAndStored(t, srv, logs, id, p.secrets, p.labels)
	// …and the data directory held them before (the search can fail).
	if h := (testenv.Corpus{"bundle": mustRead(t, car)}).Hits(p.secrets, p.labels); len(h) == 0 {
		t.Error("the old bundle holds no secret: the store was not written the old way")
	}
}

// TestAuditScanFixRefusedWhileLocked: --fix writes, so it takes the data
// directory's lock; while a server holds it, the refusal is the envelope
// with DATA_DIR_LOCKED and nothing is rewritten.
func TestAuditScanFixRefusedWhileLocked(t *testing.T) {
	_, open, before, _ := issue17Recording(7)
	data := t.TempDir()
	id, root := oldWayStore(t, data, open, before)
	lock, err := store.LockDir(data, store.LockOptions{Holder: store.LockHolder{Command: "serve", Addr: "127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	out, errOut, code := runCLI(t, "audit", "scan", "--fix", "--data", data, "--json")
	var env struct {
		Error struct{ Code, Message, Next string }
	}
	if code != exitFailure || json.Unmarshal([]byte(errOut), &env) != nil || env.Error.Code != "DATA_DIR_LOCKED" || env.Error.Next == "" {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if got := strings.TrimSpace(string(mustRead(t, filepath.Join(data, "recordings", id, "ROOT")))); got != root {
		t.Errorf("root changed while locked: %s → %s", root, got)
	}
}
