package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// waitVideo waits until the player's video has its picture of step n and
// returns its time (seconds).
func (p *uiTab) waitVideo(n int) float64 {
	p.t.Helper()
	return uiEval[float64](p, `new Promise((resolve, reject) => {
		const v = document.getElementById("video");
		const t0 = Date.now();
		(function poll() {
			if (v.readyState >= 1 && !v.seeking && v.dataset.step === "`+fmt.Sprint(n)+`") return resolve(v.currentTime);
			if (document.body.dataset.video === "frames") return reject(new Error("no video: " + document.getElementById("frames-note").textContent));
			if (Date.now() - t0 > 90000) return reject(new Error("video not ready"));
			setTimeout(poll, 50);
		})();
	})`)
}

// openFailing loads a page that must fail to load and returns its error
// box's text.
func (p *uiTab) openFailing(url string) string {
	p.t.Helper()
	p.do("leave", chromedp.Navigate("about:blank"))
	p.do("open "+url, chromedp.Navigate(url))
	if state := p.waitFor("the page to give up", `(document.body && document.body.dataset.ready) || ""`, 30*time.Second); state != "error" {
		p.t.Fatalf("%s: ready=%q, want error", url, state)
	}
	return uiEval[string](p, `document.getElementById("error").textContent`)
}

// TestUIPlayerShareAndFeatures drives the player in Chromium over the
// demo's failing run: a deep link to a moment of the ninth step, 2× speed,
// the network filter down to the 500 and "copy as cURL" without a secret,
// the console level filter, the timeline and filmstrip; then a share link
// that opens the player and the video with no token, and, expired,
// revoked or on another recording, answers as an unknown recording; the
// viewer audit lists each use; no secret reaches any byte written.
func TestUIPlayerShareAndFeatures(t *testing.T) {
	srv, ids := demoRuns(t, "checkout-with-gift-card-fails")
	id := ids[0]
	var tl wire.Timeline
	do(t, "GET", srv.Base+"/v1/recordings/"+id+"/steps", nil).decode(t, &tl)
	var row store.RecordingRow
	do(t, "GET", srv.Base+"/v1/recordings/"+id, nil).decode(t, &row)
	var ninth, pay store.StepRow
	for _, s := range tl.Steps {
		if s.Step == 9 {
			ninth = s
		}
		if s.Action == "click" && strings.Contains(s.Target, "Pay") {
			pay = s
		}
	}
	if ninth.Step != 9 || ninth.EndTS <= ninth.StartTS || pay.Step == 0 {
		t.Fatalf("no ninth step with a span, or no Pay step, in %+v", tl.Steps)
	}
	mid := ninth.StartTS + (ninth.EndTS-ninth.StartTS)/2
	secs := float64(mid-row.FirstTS) / 1e9
	start, end := float64(ninth.StartTS-row.FirstTS)/1e9, float64(ninth.EndTS-row.FirstTS)/1e9
	tab := newUITab(t, 1280, 900)

	t.Run("features", func(t *testing.T) {
		tab.t = t
		// An RFC 3339 instant inside the ninth step selects it.
		tab.open(fmt.Sprintf("%s/r/%s?t=%s", srv.Base, id, time.Unix(0, mid).UTC().Format(time.RFC3339Nano)))
		if got := tab.selected(); got != 9 {
			t.Errorf("?t=RFC 3339 instant: step %d selected, want 9", got)
		}
		// Seconds from the start: the step, and the video at that moment.
		tab.open(fmt.Sprintf("%s/r/%s?t=%.3f", srv.Base, id, secs))
		if got := tab.selected(); got != 9 {
			t.Fatalf("?t=%.3f: step %d selected, want 9", secs, got)
		}
		if vt := tab.waitVideo(9); math.Abs(vt-secs) > 0.05 || vt < start || vt > end {
			t.Errorf("video at %.3fs, want %.3fs inside the ninth step [%.3f, %.3f]", vt, secs, start, end)
		}

		// 2×: the element's rate is 2, and playing moves its time.
		uiEval[bool](tab, `(() => { const s = document.getElementById("speed"); s.value = "2";
			s.dispatchEvent(new Event("change")); return true; })()`)
		if r := uiEval[float64](tab, `document.getElementById("video").playbackRate`); r != 2 {
			t.Errorf("playbackRate %v after choosing 2×", r)
		}
		from := uiEval[float64](tab, `document.getElementById("video").currentTime`)
		uiEval[bool](tab, `(() => { const v = document.getElementById("video"); v.muted = true; v.play(); return true; })()`)
		tab.waitFor("the video to play on", fmt.Sprintf(`document.getElementById("video").currentTime > %f + 0.2 ? "ok" : ""`, from), 20*time.Second)
		if r := uiEval[float64](tab, `(() => { const v = document.getElementById("video"); v.pause(); return v.playbackRate; })()`); r != 2 {
			t.Errorf("playbackRate %v while playing", r)
		}

		// Timeline and filmstrip.
		if n := uiEval[int](tab, `document.querySelectorAll("#timeline .seg-step").length`); n != len(tl.Steps) {
			t.Errorf("%d timeline segments, want %d", n, len(tl.Steps))
		}
		tab.click(fmt.Sprintf(`#steps [data-step="%d"]`, pay.Step))
		tab.waitFor("the filmstrip of the Pay step", fmt.Sprintf(`(() => { const f = document.getElementById("filmstrip");
			return f.dataset.step === "%d" && f.querySelector("img[src]") ? "ok" : ""; })()`, pay.Step), 20*time.Second)
		uiEval[bool](tab, fmt.Sprintf(`(document.querySelector('#timeline .seg-step[data-step="%d"]').dispatchEvent(new MouseEvent("mouseenter")), true)`, pay.Step))
		tab.waitFor("the hover preview", fmt.Sprintf(`(() => { const t = document.getElementById("timeline-tip");
			const i = t.querySelector("img"); return !t.hidden && t.dataset.step === "%d" && i && !i.hidden && i.naturalWidth > 0 ? "ok" : ""; })()`,
			pay.Step), 20*time.Second)

		// The network pane down to the 500, then cURL.
		all := tab.waitFor("the network rows", `String(document.querySelectorAll("#network tr.net-row").length || "")`, 10*time.Second)
		t.Logf("the Pay step has %s requests", all)
		uiEval[bool](tab, `(() => { const s = document.querySelector('#network-filter select[name="status"]'); s.value = "2xx";
			s.dispatchEvent(new Event("change")); return true; })()`)
		if n := uiEval[int](tab, `document.querySelectorAll('#network tr.net-row[data-status="500"]').length`); n != 0 {
			t.Errorf("network filtered to 2xx shows the 500")
		}
		uiEval[bool](tab, `(() => { const s = document.querySelector('#network-filter select[name="status"]'); s.value = "5xx";
			s.dispatchEvent(new Event("change")); return true; })()`)
		rows := uiEval[[]string](tab, `[...document.querySelectorAll("#network tr.net-row")].map((r) => r.dataset.status + " " + r.textContent)`)
		if len(rows) != 1 || !strings.HasPrefix(rows[0], "500 POST") || !strings.Contains(rows[0], "/api/checkout") {
			t.Fatalf("network filtered to 5xx: %q", rows)
		}
		if c := uiEval[string](tab, `document.getElementById("network-count").textContent`); all != "1" && !strings.Contains(c, "1 of") {
			t.Errorf("network count %q", c)
		}
		tab.click(`#network tr.net-row`)
		tab.click(`#copy-curl`)
		curl := tab.waitFor("the copied cURL", `window.FRPlayer.copied || ""`, 10*time.Second)
		if !strings.HasPrefix(curl, "curl -X POST '") || !strings.Contains(curl, "/api/checkout") || !strings.Contains(curl, "--data-raw") {
			t.Errorf("cURL %q", curl)
		}
		for _, secret := range []string{"correct-horse-battery-staple", "4242 4242 4242 4242", "4242424242424242"} {
			if strings.Contains(curl, secret) {
				t.Errorf("the cURL command holds a secret (%s): %s", secret, curl)
			}
		}
		tab.screenshot("ui-player-features.png") // the 500 alone, its details, the hover preview
		uiEval[bool](tab, `(() => { const s = document.querySelector('#network-filter select[name="method"]'); s.value = "GET";
			s.dispatchEvent(new Event("change")); return true; })()`)
		if n := uiEval[int](tab, `document.querySelectorAll("#network tr.net-row").length`); n != 0 {
			t.Errorf("GET and 5xx: %d rows, want none", n)
		}

		// The console: errors only, then nothing.
		only := func(levels ...string) []string {
			return uiEval[[]string](tab, fmt.Sprintf(`(() => { const keep = %q.split(",");
				for (const cb of document.querySelectorAll('#console-filter input[name="level"]')) {
					if (cb.checked !== keep.includes(cb.value)) { cb.checked = !cb.checked; cb.dispatchEvent(new Event("change")); }
				}
				return [...document.querySelectorAll("#console .entry")].map((e) => e.dataset.level + " " + e.textContent); })()`,
				strings.Join(levels, ",")))
		}
		errs := only("error")
		if len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), "checkout failed") {
			t.Errorf("console errors only: %q", errs)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e, "error ") {
				t.Errorf("console filtered to errors shows %q", e)
			}
		}
		if rest := only("debug"); len(rest) != 0 {
			t.Errorf("console filtered to debug shows %q", rest)
		}
		only("error", "warn", "info", "log", "debug")
		tab.noErrors("player features")
	})

	t.Run("share link", func(t *testing.T) {
		tab.t = t
		admin, _, err := srv.App.Tokens.Create("*", policy.Scopes, 0, "ui test")
		if err != nil {
			t.Fatal(err)
		}
		as := []string{"Authorization", "Bearer " + admin}
		// Another recording, and what an unknown one answers.
		r := do(t, "POST", srv.Base+"/v1/recordings", []byte(`{"project":"other"}`), as...)
		var other wire.OpenReply
		r.decode(t, &other)
		unknown := do(t, "GET", srv.Base+"/v1/recordings/"+store.NewRecordingID(time.Now())+"/steps", nil, as...)
		if unknown.status != 404 {
			t.Fatalf("unknown recording: %d", unknown.status)
		}
		// Comments with canaries: masked as the recording would be.
		const card, pw = "5555 5555 5555 4444", "CanaryPw9Zq"
		if r := do(t, "POST", srv.Base+"/v1/recordings/"+id+"/comments", []byte(fmt.Sprintf(
			`{"step":%d,"text":"card %s, password=%s: the Pay step fails"}`, pay.Step, card, pw)), as...); r.status != 201 {
			t.Fatalf("comment: %d %s", r.status, r.body)
		}
		share := func(what string) (string, string) {
			r := do(t, "POST", srv.Base+"/v1/recordings/"+id+"/shares", []byte(`{"what":"`+what+`","expires_in":"2d"}`), as...)
			var sr struct {
				Share access.Share
				URL   string
			}
			if r.status != 201 {
				t.Fatalf("share %s: %d %s", what, r.status, r.body)
			}
			r.decode(t, &sr)
			return sr.URL, sr.Share.ID
		}
		player, playerID := share("player")
		video, videoID := share("video")
		secret := player[strings.Index(player, "#share=")+len("#share="):]
		if !strings.HasPrefix(player, srv.Base+"/r/"+id+"#share=") || !strings.HasPrefix(video, srv.Base+"/s/") {
			t.Fatalf("links %q %q", player, video)
		}

		// No token: the player refuses; with the link it opens, video too.
		if msg := tab.openFailing(srv.Base + "/r/" + id); !strings.Contains(msg, "UNAUTHENTICATED") {
			t.Errorf("the player without a token: %q", msg)
		}
		// (From another page: the same page with a new fragment reloads,
		// and the old page's state would answer first.)
		tab.do("leave", chromedp.Navigate("about:blank"))
		tab.open(player + "&x=1") // a fragment's other members are ignored
		if uiEval[string](tab, `document.body.dataset.shared || ""`) != "1" || tab.selected() != pay.Step {
			t.Errorf("shared player: shared=%q, step %d", uiEval[string](tab, `document.body.dataset.shared || ""`), tab.selected())
		}
		tab.waitVideo(pay.Step)
		comment := tab.waitFor("the comment at the Pay step", `(() => { const c = document.querySelector("#comments .comment-text");
			return c ? c.textContent : ""; })()`, 10*time.Second)
		if strings.Contains(comment, "5555") || strings.Contains(comment, pw) || !strings.Contains(comment, "the Pay step fails") {
			t.Errorf("comment shown as %q", comment)
		}
		if v := uiEval[string](tab, `location.hash`); !strings.Contains(v, secret) {
			t.Errorf("selecting a step dropped the link from the address: %q", v)
		}
		tab.screenshot("ui-share-link.png")
		tab.noErrors("shared player")
		tab.do("open the video link", chromedp.Navigate(video))
		tab.waitFor("the shared video", `(() => { const v = document.querySelector("video");
			return v && v.readyState >= 1 && v.duration > 0 ? "ok" : ""; })()`, 60*time.Second)

		// Another recording, expired, revoked: the unknown recording's 404.
		hidden := func(what, url string) {
			t.Helper()
			got := do(t, "GET", url, nil, "Authorization", "Bearer "+secret)
			if got.status != 404 || !bytes.Equal(got.body, unknown.body) {
				t.Errorf("%s: %d %s, want %s", what, got.status, got.body, unknown.body)
			}
		}
		hidden("the link on another recording", srv.Base+"/v1/recordings/"+other.ID+"/steps")
		if msg := tab.openFailing(srv.Base + "/r/" + other.ID + "#share=" + secret); !strings.Contains(msg, "RECORDING_NOT_FOUND") {
			t.Errorf("player of another recording with the link: %q", msg)
		}
		srv.App.Shares.SetClock(func() time.Time { return time.Now().Add(49 * time.Hour) })
		hidden("an expired link", srv.Base+"/v1/recordings/"+id+"/steps")
		if msg := tab.openFailing(player); !strings.Contains(msg, "RECORDING_NOT_FOUND") {
			t.Errorf("expired link: %q", msg)
		}
		if got := do(t, "GET", video, nil); got.status != 404 || !bytes.Equal(got.body, unknown.body) {
			t.Errorf("an expired video link: %d %s", got.status, got.body)
		}
		srv.App.Shares.SetClock(time.Now)
		if r := do(t, "DELETE", srv.Base+"/v1/recordings/"+id+"/shares/"+playerID, nil, as...); r.status != 200 {
			t.Fatalf("revoke: %d", r.status)
		}
		hidden("a revoked link", srv.Base+"/v1/recordings/"+id+"/steps")
		if msg := tab.openFailing(player); !strings.Contains(msg, "RECORDING_NOT_FOUND") {
			t.Errorf("revoked link: %q", msg)
		}

		// The viewer audit: the link's player load and the video link's
		// video, each once.
		var views struct{ Views []access.View }
		do(t, "GET", srv.Base+"/v1/recordings/"+id+"/views", nil, as...).decode(t, &views)
		seen := map[string]int{}
		for _, v := range views.Views {
			seen[v.Share+" "+v.What]++
		}
		if seen[playerID+" player"] != 1 || seen[videoID+" video"] != 1 || seen[playerID+" video"] != 0 {
			b, _ := json.Marshal(views.Views)
			t.Errorf("views %s: want the player link's one player view and the video link's one video view", b)
		}

		// No secret anywhere: files, index, logs.
		c := testenv.Corpus{"log": srv.Log.Bytes()}
		srv.Close()
		c.AddFiles(t, srv.App.Store.Dir(), "end")
		sig := func(s string) string { return s[strings.LastIndex(s, ".")+1:] }
		if hits := c.Hits([]string{sig(secret), sig(video), card, "5555555555554444", pw},
			[]string{"player link", "video link", "comment card", "comment card digits", "comment password"}); len(hits) > 0 {
			t.Fatalf("secrets written: %v", hits)
		}
	})
	_ = http.StatusOK
}
