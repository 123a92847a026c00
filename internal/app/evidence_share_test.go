package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// screenshotOf is a w×h JPEG gradient (a failure screenshot).
func screenshotOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// failedRecording records a finished, failed two-step recording: step 2
// failed with a console error and an 800×450 failure screenshot, each step
// has a frame (for the video).
func failedRecording(t *testing.T, base string) string {
	t.Helper()
	r := do(t, "POST", base+"/v1/recordings", []byte(`{"project":"alpha","flow":"checkout"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	var open wire.OpenReply
	r.decode(t, &open)
	img := func(b []byte, w, h int, reason string) json.RawMessage {
		out, _ := json.Marshal(event.Screenshot{Frame: event.Frame{Mime: "image/jpeg", Image: b, Width: w, Height: h}, Reason: reason})
		return out
	}
	now := time.Now().UnixNano()
	evs := []event.Envelope{
		{Seq: 1, TS: now, Step: 1, Kind: event.KindFrame, Data: img(jpegOf(t, color.RGBA{200, 30, 30, 255}), 32, 24, "")},
		{Seq: 2, TS: now + 1e6, Step: 1, Kind: event.KindReceipt, Data: json.RawMessage(`{"step":1,"action":{"verb":"click"},"outcome":"done"}`)},
		{Seq: 3, TS: now + 2e6, Step: 2, Kind: event.KindFrame, Data: img(jpegOf(t, color.RGBA{30, 30, 200, 255}), 32, 24, "")},
		{Seq: 4, TS: now + 3e6, Step: 2, Kind: event.KindConsole, Data: json.RawMessage(`{"level":"error","text":"payment failed"}`)},
		{Seq: 5, TS: now + 4e6, Step: 2, Kind: event.KindScreenshot, Data: img(screenshotOf(t, 800, 450), 800, 450, "failure")},
		{Seq: 6, TS: now + 5e6, Step: 2, Kind: event.KindReceipt,
			Data: json.RawMessage(`{"step":2,"action":{"verb":"click","target":{"role":"button","name":"Pay"}},"outcome":"failed","error":{"code":"APP_ERROR","message":"the shop answered 500","next":"see the failed request"}}`)},
	}
	if a := acked(t, appendBatch(t, base, open.ID, evs)); a.AckedThrough != uint64(len(evs)) {
		t.Fatalf("append: %+v", a)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+open.ID+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, open.ID, uint64(len(evs)))
	return open.ID
}

// TestEvidenceShared: POST …/evidence {"share"} makes a card whose player,
// video and thumbnail links open with no token, made through the shares
// code (listed, audited, revocable: a revoked link answers the unknown
// recording's 404 bytes); a GET card makes no share; the failing step's
// comments are in the card, masked as stored and capped, and the card
// stays under the comment limit however many long comments there are; the
// card's step link opens the player at the failing step in Chromium; no
// secret (share secrets, the comment's card number and password) is in
// any byte written.
func TestEvidenceShared(t *testing.T) {
	logs := &syncBuffer{}
	a, base := serverLog(t, ingest.DefaultLimits, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	id := failedRecording(t, base)

	// Comments, before any token exists: one with secrets, many long
	// ones on the failing step, one on another step.
	const cardNo, pw = "4111 1111 1111 1111", "Hunter2CanaryQ7x"
	comment := func(step int, text string) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"step": step, "text": text})
		if r := do(t, "POST", base+"/v1/recordings/"+id+"/comments", b); r.status != http.StatusCreated {
			t.Fatalf("comment: %d %s", r.status, r.body)
		}
	}
	comment(2, "paid with "+cardNo+" and password="+pw+", the gift card was spent")
	for i := range 30 {
		comment(2, fmt.Sprintf("long %d ", i)+strings.Repeat("lorem `ipsum` | dolor ", 340))
	}
	comment(1, "a comment on step one")

	admin := mint(t, a.Tokens, "*", policy.Scopes...)
	sharer := mint(t, a.Tokens, "alpha", policy.ScopeRead, policy.ScopeShare)
	reader := mint(t, a.Tokens, "alpha", policy.ScopeRead)
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	evidence := base + "/v1/recordings/" + id + "/evidence"
	if r := do(t, "GET", evidence, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("the card without a token: %d, want 401 (tokens are required from here on)", r.status)
	}

	// A GET card: token links, the comments, no share made.
	var got wire.EvidenceCard
	do(t, "GET", evidence+"?format=json", nil, as(reader)...).decode(t, &got)
	listShares := func() []access.Share {
		t.Helper()
		var l struct{ Shares []access.Share }
		do(t, "GET", base+"/v1/recordings/"+id+"/shares", nil, as(sharer)...).decode(t, &l)
		return l.Shares
	}
	if n := len(listShares()); n != 0 || got.Links.Video != "" || got.Links.Thumbnail != "" || got.Links.HAR == "" {
		t.Fatalf("a GET card: %d shares made, links %+v", n, got.Links)
	}
	if got.CommentsTotal != 31 || len(got.Comments) != wire.MaxCardComments ||
		!strings.Contains(got.Comments[0].Text, "the gift card was spent") || strings.Contains(got.Comments[0].Text, "4111") ||
		strings.Contains(got.Comments[0].Text, pw) || len(got.Comments[1].Text) > 1100 {
		t.Fatalf("card comments (%d of %d): %+v", len(got.Comments), got.CommentsTotal, got.Comments)
	}
	for _, c := range got.Comments {
		if strings.Contains(c.Text, "step one") {
			t.Fatalf("another step's comment in the card: %+v", c)
		}
	}
	md := do(t, "GET", evidence, nil, as(reader)...)
	if md.status != 200 || len(md.body) >= wire.MaxCardMarkdown || !bytes.Contains(md.body, []byte("#### Comments on step 2 (5 of 31)")) ||
		bytes.Contains(md.body, []byte("4111")) {
		t.Fatalf("GET card markdown: %d, %d bytes, %.2000s", md.status, len(md.body), md.body)
	}

	// Refusals: no share scope, no or a bad body.
	if r := do(t, "POST", evidence, []byte(`{"share":"7d"}`), as(reader)...); r.status != http.StatusForbidden {
		t.Fatalf("POST card with read only: %d", r.status)
	}
	for _, body := range []string{``, `{}`, `{"share":"91d"}`, `{"share":"7d","what":"all"}`} {
		if r := do(t, "POST", evidence, []byte(body), as(sharer)...); r.status != http.StatusBadRequest || r.errCode(t) != "BAD_REQUEST" {
			t.Errorf("POST card %q: %d %s, want 400", body, r.status, r.body)
		}
	}
	if n := len(listShares()); n != 0 {
		t.Fatalf("refused POSTs made %d shares", n)
	}

	// The shared card.
	r := do(t, "POST", evidence+"?format=json", []byte(`{"share":"7d"}`), as(sharer)...)
	if r.status != http.StatusCreated || r.header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("POST card: %d %s", r.status, r.body)
	}
	var sc wire.EvidenceCard
	r.decode(t, &sc)
	l := sc.Links
	playerPrefix := base + "/r/" + id + "#share="
	if !strings.HasPrefix(l.Player, playerPrefix) || l.Step != base+"/r/"+id+"?step=2#share="+strings.TrimPrefix(l.Player, playerPrefix) ||
		l.Screenshot != l.Step || !strings.HasPrefix(l.Video, base+"/s/frs_") || !strings.HasPrefix(l.Evidence, base+"/s/frs_") ||
		l.Thumbnail != l.Evidence+"?format=thumbnail" || l.HAR != "" || l.StepJSON != "" {
		t.Fatalf("shared card links %+v", l)
	}
	if life := time.Until(time.Unix(0, l.SharesExpireAt)); life < 7*24*time.Hour-time.Hour || life > 7*24*time.Hour {
		t.Fatalf("shares expire in %s, want 7 days", life)
	}
	if sc.CommentsTotal != 31 || sc.FailingStep == nil || sc.FailingStep.Code != "APP_ERROR" {
		t.Fatalf("shared card: %+v", sc)
	}
	playerSecret := strings.TrimPrefix(l.Player, playerPrefix)
	videoSecret := strings.TrimPrefix(l.Video, base+"/s/")
	evidenceSecret := strings.TrimPrefix(l.Evidence, base+"/s/")

	m := do(t, "POST", evidence, []byte(`{"share":"1d"}`), as(sharer)...)
	thumbMD := between(string(m.body), `[![failure screenshot of step 2](`, `)`)
	if m.status != http.StatusCreated || len(m.body) >= wire.MaxCardMarkdown || !strings.HasPrefix(thumbMD, base+"/s/frs_") ||
		!strings.Contains(string(m.body), "[![failure screenshot of step 2]("+thumbMD+")]("+base+"/r/"+id+"?step=2#share=frs_") ||
		!strings.Contains(string(m.body), "[video]("+base+"/s/frs_") || strings.Contains(string(m.body), "4111") {
		t.Fatalf("shared card markdown: %d, %d bytes: %.3000s", m.status, len(m.body), m.body)
	}

	// Listed: the six links (three a card), by kind, by the sharer.
	shares := listShares()
	kinds := map[string]int{}
	for _, s := range shares {
		kinds[s.What]++
	}
	if len(shares) != 6 || kinds["player"] != 2 || kinds["video"] != 2 || kinds["evidence"] != 2 {
		t.Fatalf("shares %+v", shares)
	}
	shareID := func(secret string) string { return strings.Split(secret, ".")[1] }
	for _, s := range []string{playerSecret, videoSecret, evidenceSecret} {
		if !slices.ContainsFunc(shares, func(x access.Share) bool { return x.ID == shareID(s) }) {
			t.Fatalf("link %s is not listed", shareID(s))
		}
	}

	// Open with no token.
	v := do(t, "GET", l.Video, nil)
	if v.status != 200 || v.header.Get("Content-Type") != "video/webm" || !bytes.HasPrefix(v.body, []byte{0x1a, 0x45, 0xdf, 0xa3}) {
		t.Fatalf("video link: %d %s %s", v.status, v.header.Get("Content-Type"), short(v.body))
	}
	th := do(t, "GET", l.Thumbnail, nil)
	if th.status != 200 || th.header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("thumbnail link: %d %s %s", th.status, th.header.Get("Content-Type"), short(th.body))
	}
	if cfg, err := jpeg.DecodeConfig(bytes.NewReader(th.body)); err != nil || cfg.Width != 480 || cfg.Height != 270 {
		t.Fatalf("thumbnail %+v %v, want 480×270 (the 800×450 screenshot scaled)", cfg, err)
	}
	if c := do(t, "GET", l.Evidence, nil); c.status != 200 || !bytes.Contains(c.body, []byte("APP_ERROR")) {
		t.Fatalf("evidence link: %d %s", c.status, short(c.body))
	}
	if p := do(t, "GET", base+"/r/"+id, nil); p.status != 200 || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Fatalf("player page: %d %s", p.status, p.header.Get("Content-Type"))
	}
	for _, path := range []string{"/steps", "/steps/2", "/comments"} {
		if p := do(t, "GET", base+"/v1/recordings/"+id+path, nil, as(playerSecret)...); p.status != 200 {
			t.Fatalf("the player's %s through the player link: %d %s", path, p.status, short(p.body))
		}
	}
	// In Chromium: the card's step link opens the player with no token,
	// at the failing step.
	t.Run("chromium", func(t *testing.T) {
		tab := newUITab(t, 1280, 900)
		tab.open(l.Step)
		if shared := uiEval[string](tab, `document.body.dataset.shared || ""`); shared != "1" || tab.selected() != 2 {
			t.Errorf("the card's step link: shared=%q, step %d selected, want the shared player at step 2", shared, tab.selected())
		}
	})
	// A GET through a link is no share either.
	if n := len(listShares()); n != 6 {
		t.Fatalf("%d shares after the links were used, want 6", n)
	}

	// Revoked: the unknown recording's 404, byte for byte.
	notFound := do(t, "GET", base+"/v1/recordings/"+store.NewRecordingID(time.Now()), nil, as(admin)...).body
	for _, s := range []string{evidenceSecret, playerSecret} {
		if r := do(t, "DELETE", base+"/v1/recordings/"+id+"/shares/"+shareID(s), nil, as(sharer)...); r.status != 200 {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
	}
	for what, got := range map[string]reply{
		"thumbnail": do(t, "GET", l.Thumbnail, nil),
		"card":      do(t, "GET", l.Evidence, nil),
		"player":    do(t, "GET", base+"/v1/recordings/"+id+"/steps", nil, as(playerSecret)...),
	} {
		if got.status != http.StatusNotFound || !bytes.Equal(got.body, notFound) {
			t.Errorf("revoked %s link: %d %s, want %s", what, got.status, short(got.body), notFound)
		}
	}
	if v := do(t, "GET", l.Video, nil); v.status != 200 {
		t.Errorf("the video link (not revoked): %d", v.status)
	}

	// Audited like every share.
	var entries struct{ Entries []audit.Entry }
	do(t, "GET", base+"/v1/audit", nil, as(admin)...).decode(t, &entries)
	count := map[string]int{}
	for _, e := range entries.Entries {
		count[e.Kind]++
	}
	if count[audit.KindShare] != 6 || count[audit.KindUnshare] != 2 {
		t.Errorf("audit kinds %v, want 6 share and 2 unshare", count)
	}

	// No secret in any byte written.
	corpus := testenv.Corpus{"logs": logs.Bytes()}
	corpus.AddFiles(t, a.Store.Dir(), "end")
	if hits := corpus.Hits([]string{playerSecret, videoSecret, evidenceSecret, cardNo, "4111111111111111", pw},
		[]string{"player link", "video link", "evidence link", "card", "card digits", "password"}); len(hits) > 0 {
		t.Fatalf("a secret was written: %v", hits)
	}
}

// between is the text between the first from and the next to in s.
func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	got, _, _ := strings.Cut(after, to)
	return got
}
