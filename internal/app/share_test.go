package app_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/playback"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store/layout"
)

// playerRoutes are the routes a player link opens (GET, its own
// recording): written out here, not read from access, so the test checks
// the guard.
var playerRoutes = []string{"/v1/recordings/{id}", "/v1/recordings/{id}/steps", "/v1/recordings/{id}/steps/{n}",
	"/v1/recordings/{id}/steps/{n}/dom", "/v1/recordings/{id}/events", "/v1/recordings/{id}/snapshots/{seq}", "/v1/recordings/{id}/redaction",
	"/v1/recordings/{id}/blobs/{cid}", "/v1/recordings/{id}/video.webm", "/v1/recordings/{id}/at",
	"/v1/recordings/{id}/search", "/v1/recordings/{id}/comments", "/v1/recordings/{id}/evidence"}

// mint makes a token, failing the test if it cannot.
func mint(t *testing.T, a interface {
	Create(string, []string, time.Duration, string) (string, access.Grant, error)
}, project string, scopes ...string) string {
	t.Helper()
	sec, _, err := a.Create(project, scopes, 0, "share test")
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

type shareReply struct {
	Share access.Share
	URL   string
}

// TestShareLinks: a player link opens exactly its recording's player
// routes without a token; every other route, the other project's
// recording, a forged, expired or revoked link answer the bytes of an
// unknown recording's 404; /s/ links open a video; the viewer audit counts
// each viewer's view once per 10 minutes; the secret is in no byte
// written (files, logs, audit).
func TestShareLinks(t *testing.T) {
	logs := &syncBuffer{}
	f := newFixtureLog(t, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	admin := mint(t, f.app.Tokens, "*", policy.Scopes...)
	sharer := mint(t, f.app.Tokens, "alpha", policy.ScopeRead, policy.ScopeShare)
	alpha, beta := f.rec["alpha"], f.rec["beta"]
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	for _, body := range []string{`{"expires_in":"91d"}`, `{"what":"list"}`, `{"expires_in":"-1h"}`, `{"scope":"all"}`} {
		if r := do(t, "POST", f.base+"/v1/recordings/"+alpha+"/shares", []byte(body), as(sharer)...); r.status != 400 {
			t.Errorf("share %s: %d, want 400", body, r.status)
		} else {
			r.errCode(t)
		}
	}
	r := do(t, "POST", f.base+"/v1/recordings/"+alpha+"/shares", []byte(`{"expires_in":"7d","what":"player"}`), as(sharer)...)
	if r.status != http.StatusCreated {
		t.Fatalf("share: %d %s", r.status, r.body)
	}
	var made shareReply
	r.decode(t, &made)
	prefix := f.base + "/r/" + alpha + "#share="
	if !strings.HasPrefix(made.URL, prefix) || r.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("player link %q (Referrer-Policy %q), want %s…", made.URL, r.header.Get("Referrer-Policy"), prefix)
	}
	secret := strings.TrimPrefix(made.URL, prefix)
	if week := made.Share.ExpiresAt - made.Share.CreatedAt; week != int64(7*24*time.Hour) || made.Share.What != "player" {
		t.Fatalf("share %+v", made.Share)
	}

	// What an unknown recording answers, per route, and the GET one.
	unknown := map[string][]byte{}
	for r := range routeScope {
		method, route, _ := strings.Cut(r, " ")
		for _, c := range f.requests(method, route) {
			if c.target == "?" {
				unknown[r] = do(t, method, c.url, c.body, as(admin)...).body
			}
		}
	}
	notFound := unknown["GET /v1/recordings/{id}"]
	if !bytes.Contains(notFound, []byte("RECORDING_NOT_FOUND")) {
		t.Fatalf("unknown recording: %s", notFound)
	}
	hidden := func(what string, got reply, want []byte) {
		t.Helper()
		if got.status != http.StatusNotFound || !bytes.Equal(got.body, want) {
			t.Errorf("%s: got %d %s, want the unknown recording's 404 %s", what, got.status, short(got.body), want)
		}
	}

	// Every route with the link: only the player's reads of alpha pass.
	opened := 0
	for r, need := range routeScope {
		method, route, _ := strings.Cut(r, " ")
		if need == "" {
			continue // public
		}
		for _, c := range f.requests(method, route) {
			got := do(t, method, c.url, c.body, as(secret)...)
			switch {
			case c.target == "alpha" && method == "GET" && slices.Contains(playerRoutes, route):
				opened++
				if msg := checkCell(t, "pass", got, reply{}, c); msg != "" {
					t.Errorf("link on %s (%s): %s", r, c.name, msg)
				}
			case strings.Contains(route, "{id}") && strings.HasPrefix(route, "/v1/recordings/"):
				hidden("link on "+r+" ("+c.name+")", got, unknown[r])
			default:
				if got.status != http.StatusNotFound || got.errCode(t) != "RECORDING_NOT_FOUND" {
					t.Errorf("link on %s (%s): %d %s, want RECORDING_NOT_FOUND", r, c.name, got.status, short(got.body))
				}
			}
		}
	}
	if opened != len(playerRoutes) {
		t.Fatalf("%d player routes opened, want %d", opened, len(playerRoutes))
	}

	// Forged: another signature, or the signature moved to beta.
	forged := secret[:len(secret)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(secret, "A")]
	hidden("a forged link", do(t, "GET", f.base+"/v1/recordings/"+alpha, nil, as(forged)...), notFound)
	moved := strings.Replace(secret, alpha, beta, 1)
	hidden("alpha's link moved to beta", do(t, "GET", f.base+"/v1/recordings/"+beta, nil, as(moved)...), notFound)
	hidden("alpha's link on beta", do(t, "GET", f.base+"/v1/recordings/"+beta+"/steps", nil, as(secret)...), notFound)

	// /s/: the video link plays with no token; a player link goes to the
	// player with the secret in the fragment.
	v := do(t, "GET", f.base+"/s/"+f.videoLink, nil)
	if v.status != 200 || v.header.Get("Content-Type") != "video/webm" || !bytes.HasPrefix(v.body, []byte{0x1a, 0x45, 0xdf, 0xa3}) ||
		v.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("video link: %d %s %q", v.status, v.header.Get("Content-Type"), v.header.Get("Referrer-Policy"))
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.base + "/s/" + secret)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/r/"+alpha+"#share="+secret {
		t.Fatalf("player link via /s/: %d %q", resp.StatusCode, loc)
	}
	hidden("a video link on the timeline", do(t, "GET", f.base+"/v1/recordings/"+alpha+"/steps", nil, as(f.videoLink)...), notFound)

	// Widening a link by editing its record (kind, expiry) breaks its
	// signature: the record is not trusted, the key is.
	path := layout.Of(f.app.Store.Dir()).Shares(alpha)
	rec, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []access.Share
	if err := json.Unmarshal(rec, &recs); err != nil || len(recs) != 2 || recs[0].What != "video" {
		t.Fatalf("shares.json %s: %v", rec, err)
	}
	recs[0].What, recs[0].ExpiresAt = "player", recs[0].ExpiresAt+int64(365*24*time.Hour)
	widened, _ := json.Marshal(recs)
	if err := os.WriteFile(path, widened, 0o600); err != nil {
		t.Fatal(err)
	}
	hidden("a video link widened to the player", do(t, "GET", f.base+"/v1/recordings/"+alpha+"/steps", nil, as(f.videoLink)...), notFound)
	hidden("a video link widened, on its video", do(t, "GET", f.base+"/s/"+f.videoLink, nil), notFound)
	if err := os.WriteFile(path, rec, 0o600); err != nil {
		t.Fatal(err)
	}

	// Views: the player's load (its timeline) once per 10 minutes per
	// viewer, the video once; a token's export is a view too.
	do(t, "GET", f.base+"/v1/recordings/"+alpha+"/steps", nil, as(secret)...)
	do(t, "GET", f.base+"/v1/recordings/"+alpha+"/har", nil, as(sharer)...)
	start := time.Now()
	f.app.Shares.SetClock(func() time.Time { return start.Add(11 * time.Minute) })
	do(t, "GET", f.base+"/v1/recordings/"+alpha+"/steps", nil, as(secret)...)
	var views struct{ Views []access.View }
	do(t, "GET", f.base+"/v1/recordings/"+alpha+"/views", nil, as(admin)...).decode(t, &views)
	count := map[string]int{}
	for _, v := range views.Views {
		who := "token"
		if v.Share != "" {
			who = "share " + v.Share
		}
		count[who+" "+v.What]++
	}
	videoShare := strings.Split(f.videoLink, ".")[1]
	if count["share "+made.Share.ID+" player"] != 2 || count["share "+videoShare+" video"] != 1 || count["token export"] != 1 {
		t.Errorf("views %v (%+v), want the player link's 2 player views, the video link's 1 video view, a token's 1 export", count, views.Views)
	}
	if r := do(t, "GET", f.base+"/v1/recordings/"+alpha+"/views", nil, as(sharer)...); r.status != http.StatusForbidden {
		t.Errorf("views with a project's share token: %d, want 403", r.status)
	}

	// Expired, then revoked: an unknown recording.
	f.app.Shares.SetClock(func() time.Time { return start.Add(7*24*time.Hour + time.Minute) })
	hidden("an expired link", do(t, "GET", f.base+"/v1/recordings/"+alpha, nil, as(secret)...), notFound)
	f.app.Shares.SetClock(time.Now)
	if r := do(t, "GET", f.base+"/v1/recordings/"+alpha, nil, as(secret)...); r.status != 200 {
		t.Fatalf("the link before revocation: %d", r.status)
	}
	if r := do(t, "DELETE", f.base+"/v1/recordings/"+alpha+"/shares/"+made.Share.ID, nil, as(sharer)...); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	hidden("a revoked link", do(t, "GET", f.base+"/v1/recordings/"+alpha, nil, as(secret)...), notFound)
	hidden("a revoked link via /s/", do(t, "GET", f.base+"/s/"+secret, nil), notFound)
	var list struct{ Shares []access.Share }
	do(t, "GET", f.base+"/v1/recordings/"+alpha+"/shares", nil, as(sharer)...).decode(t, &list)
	if len(list.Shares) != 2 || list.Shares[1].ID != made.Share.ID || list.Shares[1].RevokedAt == 0 {
		t.Errorf("shares %+v, want the video link and the revoked player link", list.Shares)
	}

	// The audit log has the link made and revoked; no byte written
	// anywhere holds a secret.
	var entries struct{ Entries []audit.Entry }
	do(t, "GET", f.base+"/v1/audit", nil, as(admin)...).decode(t, &entries)
	kinds := map[string]int{}
	for _, e := range entries.Entries {
		kinds[e.Kind]++
	}
	if kinds["share"] != 1+1 || kinds["unshare"] != 1 { // the test's, the fixture's
		t.Errorf("audit kinds %v", kinds)
	}
	c := testenv.Corpus{"logs": logs.Bytes(), "audit reply": mustBody(t, f.base+"/v1/audit", admin)}
	c.AddFiles(t, f.app.Store.Dir(), "end")
	sig := func(s string) string { return s[strings.LastIndex(s, ".")+1:] }
	if hits := c.Hits([]string{sig(secret), sig(f.videoLink)}, []string{"player link", "video link"}); len(hits) > 0 {
		t.Fatalf("a share secret was written: %v", hits)
	}
}

func mustBody(t *testing.T, url, tok string) []byte {
	t.Helper()
	r := do(t, "GET", url, nil, "Authorization", "Bearer "+tok)
	if r.status != 200 {
		t.Fatalf("%s: %d", url, r.status)
	}
	return r.body
}

// TestComments: a comment is redacted with the recording's plan, listed,
// changed and deleted by its author or an admin only, in the audit log
// without its text, kept beside the recording (not in its log) and gone
// with it.
func TestComments(t *testing.T) {
	logs := &syncBuffer{}
	f := newFixtureLog(t, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	admin := mint(t, f.app.Tokens, "*", policy.Scopes...)
	alice := mint(t, f.app.Tokens, "alpha", policy.ScopeRead, policy.ScopeComment)
	bob := mint(t, f.app.Tokens, "alpha", policy.ScopeRead, policy.ScopeComment)
	reader := mint(t, f.app.Tokens, "alpha", policy.ScopeRead)
	alpha := f.rec["alpha"]
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	url := f.base + "/v1/recordings/" + alpha + "/comments"
	const card, pw = "4111 1111 1111 1111", "Hunter2CanaryQ7x"

	root := do(t, "GET", f.base+"/v1/recordings/"+alpha, nil, as(admin)...)
	if r := do(t, "POST", url, []byte(`{"step":1,"text":"x"}`), as(reader)...); r.status != http.StatusForbidden {
		t.Fatalf("comment without the comment scope: %d", r.status)
	}
	if r := do(t, "POST", url, []byte(`{"step":99,"text":"x"}`), as(alice)...); r.status != 404 || r.errCode(t) != "STEP_NOT_FOUND" {
		t.Fatalf("comment on no step: %d %s", r.status, r.body)
	}
	r := do(t, "POST", url, []byte(`{"step":1,"t":0.5,"text":"paid with `+card+` and password=`+pw+`, see step 1"}`), as(alice)...)
	if r.status != http.StatusCreated {
		t.Fatalf("comment: %d %s", r.status, r.body)
	}
	var c playback.Comment
	r.decode(t, &c)
	if strings.Contains(c.Text, "4111") || strings.Contains(c.Text, pw) || !strings.Contains(c.Text, "see step 1") || c.Step != 1 || c.T != 0.5 {
		t.Fatalf("comment stored as %+v: want the card and password masked, the rest kept", c)
	}
	if r := do(t, "PATCH", url+"/"+c.ID, []byte(`{"text":"bob's"}`), as(bob)...); r.status != http.StatusForbidden {
		t.Fatalf("another author's edit: %d", r.status)
	}
	if r := do(t, "PATCH", url+"/"+c.ID, []byte(`{"text":"now `+card+`"}`), as(alice)...); r.status != 200 || strings.Contains(string(r.body), "4111") {
		t.Fatalf("author's edit: %d %s", r.status, r.body)
	}
	other := do(t, "POST", url, []byte(`{"step":1,"text":"bob was here"}`), as(bob)...)
	var list struct{ Comments []playback.Comment }
	do(t, "GET", url, nil, as(reader)...).decode(t, &list)
	fromFunc, err := f.app.Playback.Comments(alpha)
	if err != nil || len(list.Comments) != 2 || len(fromFunc) != 2 || fromFunc[0].ID != c.ID {
		t.Fatalf("list %+v, Comments() %+v %v", list.Comments, fromFunc, err)
	}
	if r := do(t, "DELETE", url+"/"+c.ID, nil, as(bob)...); r.status != http.StatusForbidden {
		t.Fatalf("another author's delete: %d", r.status)
	}
	if r := do(t, "DELETE", url+"/"+c.ID, nil, as(admin)...); r.status != http.StatusNoContent {
		t.Fatalf("admin's delete: %d", r.status)
	}
	if got := do(t, "GET", f.base+"/v1/recordings/"+alpha, nil, as(admin)...); !bytes.Equal(got.body, root.body) {
		t.Errorf("a comment changed the recording: %s, was %s", got.body, root.body)
	}

	var entries struct{ Entries []audit.Entry }
	do(t, "GET", f.base+"/v1/audit", nil, as(admin)...).decode(t, &entries)
	kinds := map[string]int{}
	for _, e := range entries.Entries {
		kinds[e.Kind]++
	}
	if kinds["comment"] != 2 || kinds["comment_edit"] != 1 || kinds["comment_delete"] != 1 {
		t.Errorf("audit kinds %v", kinds)
	}
	corpus := testenv.Corpus{"logs": logs.Bytes()}
	corpus.AddFiles(t, f.app.Store.Dir(), "end")
	if hits := corpus.Hits([]string{card, "4111111111111111", pw}, []string{"card", "card digits", "password"}); len(hits) > 0 {
		t.Fatalf("a comment's secret was written: %v", hits)
	}
	if !bytes.Contains(corpus["file recordings/"+alpha+"/comments.json (end)"], []byte("bob was here")) || other.status != 201 {
		t.Fatalf("comments are not kept beside the recording")
	}

	// Gone with the recording.
	if _, err := f.app.Store.RemoveRecording(alpha); err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.Playback.Comments(alpha); err == nil {
		t.Fatal("comments outlived their recording")
	}
}
