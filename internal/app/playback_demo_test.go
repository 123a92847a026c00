package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// TestPlaybackOfTheDemo is playback's acceptance test on a real recording:
// the demo's failing checkout, recorded in Debian's Chromium, read back as
// the DOM at a step, as video, by time and by search.
func TestPlaybackOfTheDemo(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	base := srv.Base
	logTail := func() string {
		b := srv.Log.Bytes()
		return string(b[max(0, len(b)-3000):])
	}
	shop, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	res := testenv.Record(t, base, shop, testenv.DemoFlow(t, "checkout-with-gift-card-fails"))
	row := waitIndexed(t, base, res.ID, res.Total)
	pay, tl := payStep(t, base, res.ID)
	rec := base + "/v1/recordings/" + res.ID

	t.Run("dom", func(t *testing.T) {
		r := do(t, "GET", fmt.Sprintf("%s/steps/%d/dom?at=before", rec, pay), nil)
		if r.status != 200 {
			t.Fatalf("dom: %d %s", r.status, r.body)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("CSP %q: want default-src 'none' and no script source", csp)
		}
		doc, err := html.Parse(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		form := findElement(doc, func(n *html.Node) bool { return n.Data == "form" && attr(n, "id") == "checkout-form" })
		if form == nil {
			t.Fatalf("no checkout form in the DOM before the Pay step:\n%s", r.body)
		}
		card := findElement(form, func(n *html.Node) bool { return n.Data == "input" && attr(n, "id") == "card-number" })
		if card == nil {
			t.Fatal("no card number field in the checkout form")
		}
		v := attr(card, "value")
		if v == "" || strings.ContainsAny(v, "0123456789") {
			t.Errorf("card number value %q: want it masked", v)
		}
		if bytes.Contains(r.body, []byte("4242")) {
			t.Error("the card number's digits reached the DOM")
		}
		if findElement(doc, func(n *html.Node) bool { return n.Data == "script" }) != nil {
			t.Error("a script element survived")
		}
		// After the Pay step the page shows the failure.
		after := do(t, "GET", fmt.Sprintf("%s/steps/%d/dom?at=after", rec, tl.Steps[len(tl.Steps)-1].Step), nil)
		if after.status != 200 || !bytes.Contains(after.body, []byte("Payment failed")) {
			t.Errorf("the last step's DOM does not show the failure: %d %.300s", after.status, after.body)
		}
		for _, bad := range []string{"?at=sideways", "/../dom"} {
			if r := do(t, "GET", fmt.Sprintf("%s/steps/%d/dom%s", rec, pay, bad), nil); r.status == 200 {
				t.Errorf("%s: 200", bad)
			}
		}
	})

	t.Run("video", func(t *testing.T) {
		testenv.RequireFFmpeg(t, "ffmpeg")
		ffprobe := testenv.RequireFFmpeg(t, "ffprobe")
		r := do(t, "GET", rec+"/video.webm", nil)
		if r.status != 200 || r.header.Get("Content-Type") != "video/webm" {
			t.Fatalf("video: %d %s %.200s\nserver log:\n%s", r.status, r.header.Get("Content-Type"), r.body, logTail())
		}
		file := filepath.Join(t.TempDir(), "run.webm")
		if err := os.WriteFile(file, r.body, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "format=duration", "-show_chapters", "-of", "json", file).Output()
		if err != nil {
			t.Fatalf("ffprobe: %v", err)
		}
		var probe struct {
			Format   struct{ Duration string }
			Chapters []struct {
				StartTime string `json:"start_time"`
			}
		}
		if err := json.Unmarshal(out, &probe); err != nil {
			t.Fatal(err)
		}
		dur, _ := strconv.ParseFloat(probe.Format.Duration, 64)
		want := float64(row.LastTS-row.FirstTS) / 1e9
		const frame = 0.2 // 5 frames per second
		if math.Abs(dur-want) > frame {
			t.Errorf("duration %.3fs, recording %.3fs", dur, want)
		}
		if len(probe.Chapters) != len(tl.Steps) {
			t.Fatalf("%d chapters, %d steps", len(probe.Chapters), len(tl.Steps))
		}
		for i, c := range probe.Chapters {
			got, _ := strconv.ParseFloat(c.StartTime, 64)
			wantStart := float64(tl.Steps[i].StartTS-row.FirstTS) / 1e9
			if math.Abs(got-wantStart) > 0.001 {
				t.Errorf("chapter %d starts at %.3fs, step %d at %.3fs", i+1, got, tl.Steps[i].Step, wantStart)
			}
		}
		// The middle bytes, by Range.
		n := len(r.body)
		from, to := n/3, n/3+4095
		part := do(t, "GET", rec+"/video.webm", nil, "Range", fmt.Sprintf("bytes=%d-%d", from, to))
		if part.status != http.StatusPartialContent || !bytes.Equal(part.body, r.body[from:to+1]) {
			t.Errorf("range: %d, %d bytes, equal %v", part.status, len(part.body), bytes.Equal(part.body, r.body[from:min(to+1, n)]))
		}
		if cr := part.header.Get("Content-Range"); cr != fmt.Sprintf("bytes %d-%d/%d", from, to, n) {
			t.Errorf("Content-Range %q", cr)
		}
		// The finished recording's video is kept as a blob (its CID the
		// ETag); the second answer is that blob.
		if etag := r.header.Get("ETag"); !strings.HasPrefix(etag, `"bafkrei`) {
			t.Errorf("ETag %q: want the kept video's CID", etag)
		}
		if again := do(t, "GET", rec+"/video.webm", nil); !bytes.Equal(again.body, r.body) || again.header.Get("ETag") != r.header.Get("ETag") {
			t.Error("a second request got other bytes than the kept video")
		}

		// A clip of the Pay step and the one after.
		clip := do(t, "GET", fmt.Sprintf("%s/video.webm?from_step=%d&to_step=%d", rec, pay, pay+1), nil)
		if clip.status != 200 {
			t.Fatalf("clip: %d %.200s\nserver log:\n%s", clip.status, clip.body, logTail())
		}
		cf := filepath.Join(t.TempDir(), "clip.webm")
		os.WriteFile(cf, clip.body, 0o644)
		out, err = exec.Command(ffprobe, "-v", "error", "-show_entries", "format=duration", "-show_chapters", "-of", "json", cf).Output()
		if err != nil {
			t.Fatalf("ffprobe clip: %v", err)
		}
		probe.Chapters = nil
		json.Unmarshal(out, &probe)
		if len(probe.Chapters) != 2 {
			t.Errorf("clip: %d chapters, want 2", len(probe.Chapters))
		}
		if r := do(t, "GET", rec+"/video.webm?from_step=9&to_step=2", nil); r.status != 400 {
			t.Errorf("backwards clip: %d", r.status)
		}

		// Chromium loads it and seeks to a chapter's start.
		ctx := testenv.Chromium(t)
		k := len(tl.Steps) / 2
		startK := float64(tl.Steps[k].StartTS-row.FirstTS) / 1e9
		type videoState struct {
			Duration, Time float64
			Ready          int
			Err            string
		}
		js := fmt.Sprintf(`new Promise((resolve) => {
			const v = document.createElement('video');
			v.muted = true;
			v.preload = 'auto';
			v.onerror = () => resolve({Err: 'error ' + (v.error && v.error.code)});
			v.onloadedmetadata = () => {
				v.onseeked = () => resolve({Duration: v.duration, Time: v.currentTime, Ready: v.readyState, Err: v.error ? 'error' : ''});
				v.currentTime = %f;
			};
			v.src = %q;
			document.body.appendChild(v);
		})`, startK, rec+"/video.webm")
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(cctx, chromedp.Navigate(base+"/healthz")); err != nil {
			t.Fatalf("chromium: %v", err)
		}
		state, err := chromedp.Run(cctx, chromedp.Evaluate[videoState](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		if state.Err != "" || math.Abs(state.Duration-want) > frame || math.Abs(state.Time-startK) > frame || state.Ready < 1 {
			t.Errorf("in Chromium: %+v; want duration %.3f, time %.3f (chapter %d)", state, want, startK, k+1)
		}
	})

	t.Run("video without ffmpeg", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir()) // the server's ffmpeg is "ffmpeg" on $PATH
		r := do(t, "GET", fmt.Sprintf("%s/video.webm?from_step=1&to_step=2", rec), nil)
		if r.status != http.StatusNotImplemented || r.errCode(t) != "FFMPEG_MISSING" || !strings.Contains(string(r.body), "apt-get install ffmpeg") {
			t.Errorf("a clip without ffmpeg: %d %s", r.status, r.body)
		}
	})

	t.Run("evidence", func(t *testing.T) {
		b := do(t, "GET", rec+"/bundle", nil)
		if b.status != 200 {
			t.Fatalf("bundle: %d %.200s", b.status, b.body)
		}
		rep, err := store.VerifyBundle(bytes.NewReader(b.body))
		if err != nil || !rep.OK() || rep.Root != row.Root || rep.Recording != row.ID {
			t.Fatalf("verify: %v %+v (root %s)", err, rep, row.Root)
		}
		flipped := bytes.Clone(b.body)
		flipped[len(flipped)/2] ^= 0x01
		if rep, err := store.VerifyBundle(bytes.NewReader(flipped)); err == nil && rep.OK() {
			t.Error("a flipped byte in the middle of the bundle verified")
		}
		other, err := store.OpenStore(t.TempDir(), store.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		id, root, err := other.ImportBundle(bytes.NewReader(b.body))
		if err != nil || id != row.ID || root != row.Root {
			t.Fatalf("import: %s %s %v, want %s %s", id, root, err, row.ID, row.Root)
		}

		key := do(t, "GET", base+"/v1/attestation/key", nil)
		pub, err := attest.ParsePublicKey(key.body)
		if err != nil {
			t.Fatalf("key: %d %v", key.status, err)
		}
		env := do(t, "GET", rec+"/attestation", nil)
		if env.status != 200 {
			t.Fatalf("attestation: %d %s", env.status, env.body)
		}
		manifest, _, _, err := other.ManifestBytes(row.ID)
		if err != nil {
			t.Fatal(err)
		}
		st, err := attest.Verify(env.body, pub, manifest)
		if err != nil {
			t.Fatalf("verify attestation: %v", err)
		}
		if st.Predicate.Verdict != "fail" || st.Predicate.Steps != len(tl.Steps) || st.Predicate.RedactionPlanDigest == "" {
			t.Errorf("predicate: %+v", st.Predicate)
		}
		// Another recording's manifest does not verify.
		id2 := openRec(t, base)
		if r := do(t, "POST", base+"/v1/recordings/"+id2+"/finish", []byte(`{"verdict":"pass"}`)); r.status != 200 {
			t.Fatalf("finish: %d %s", r.status, r.body)
		}
		waitIndexed(t, base, id2, 0)
		// Seen once under -race in CI: a 409 for this just-finished,
		// empty recording, though its row read finished. Logged, not
		// hidden: the bundle must come within a few seconds.
		r := do(t, "GET", base+"/v1/recordings/"+id2+"/bundle", nil)
		for i := 0; r.status == 409 && i < 50; i++ {
			t.Logf("second bundle: %d %s (retrying)", r.status, r.body)
			time.Sleep(100 * time.Millisecond)
			r = do(t, "GET", base+"/v1/recordings/"+id2+"/bundle", nil)
		}
		if r.status != 200 {
			t.Fatalf("second bundle: %d %s", r.status, r.body)
		} else if _, m2, err := store.ReadBundleManifest(bytes.NewReader(r.body)); err != nil {
			t.Fatal(err)
		} else if _, err := attest.Verify(env.body, pub, m2); err == nil {
			t.Error("the attestation verified against another recording's manifest")
		}
		// A modified predicate does not verify.
		var e attest.Envelope
		json.Unmarshal(env.body, &e)
		payload, _ := base64.StdEncoding.DecodeString(e.Payload)
		e.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(`"fail"`), []byte(`"pass"`), 1))
		forged, _ := json.Marshal(e)
		if _, err := attest.Verify(forged, pub, manifest); err == nil {
			t.Error("an attestation with a modified predicate verified")
		}
	})

	t.Run("at", func(t *testing.T) {
		s := tl.Steps[pay-1]
		if s.Step != pay {
			s = tl.Steps[len(tl.Steps)/2]
		}
		// Steps may overlap in time (a step's late events land after the
		// next one started), and then either may answer. Ask for an
		// instant inside s that no other step holds, so the answer is s.
		mid, alone := s.StartTS+(s.EndTS-s.StartTS)/2, false
		for k := int64(1); k < 16 && !alone; k++ {
			mid, alone = s.StartTS+(s.EndTS-s.StartTS)*k/16, true
			for _, o := range tl.Steps {
				if o.Step != s.Step && o.StartTS <= mid && mid <= o.EndTS {
					alone = false
				}
			}
		}
		var at wire.AtResult
		r := do(t, "GET", fmt.Sprintf("%s/at?t=%d", rec, mid), nil)
		r.decode(t, &at)
		if !alone {
			// Every instant of s is shared: the answer must still hold it.
			t.Logf("every instant of step %d is held by another step too", s.Step)
			s = at.Step
		}
		if r.status != 200 || at.Step.Step != s.Step || mid < at.Step.StartTS || mid > at.Step.EndTS || at.Frame == nil || at.Frame.TS > mid || at.OffsetNS != mid-row.FirstTS {
			t.Fatalf("at %d: %d %+v (frame %+v)", mid, r.status, at, at.Frame)
		}
		if img := do(t, "GET", base+at.Frame.URL, nil); img.status != 200 || img.header.Get("Content-Type") != "image/jpeg" {
			t.Errorf("the frame: %d %s", img.status, img.header.Get("Content-Type"))
		}
		if r := do(t, "GET", fmt.Sprintf("%s/at?t=%d", rec, row.LastTS+int64(time.Hour)), nil); r.status != 404 || r.errCode(t) != "OUT_OF_RANGE" {
			t.Errorf("after the end: %d %s", r.status, r.body)
		}
	})

	t.Run("search", func(t *testing.T) {
		var res wire.SearchResult
		do(t, "GET", rec+"/search?q=status:500", nil).decode(t, &res)
		if len(res.Hits) == 0 || len(res.Steps) != 1 || res.Steps[0] != pay {
			t.Fatalf("status:500 in the recording: %+v, want the Pay step %d", res, pay)
		}
		do(t, "GET", base+"/v1/search?q=GIFT_CARD_STATE", nil).decode(t, &res)
		found := false
		for _, h := range res.Hits {
			found = found || h.Recording == row.ID
		}
		if !found {
			t.Errorf("searching every recording for GIFT_CARD_STATE: %+v", res)
		}
		// The failure signature diffrun derived once the recording was
		// indexed: on the recording's row, and found by search.
		// The projector records it right after indexing the last event,
		// so it may trail the indexed_through the test waited for.
		var got store.RecordingRow
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			do(t, "GET", rec, nil).decode(t, &got)
			if got.FailureSignature != "" || time.Now().After(deadline) {
				break
			}
		}
		if got.FailureSignature != "POST /api/checkout 500 GIFT_CARD_STATE" {
			t.Errorf("failure signature %q", got.FailureSignature)
		}
		do(t, "GET", base+"/v1/search?q="+url.QueryEscape(got.FailureSignature), nil).decode(t, &res)
		if len(res.Hits) != 1 || res.Hits[0].Recording != row.ID || res.Hits[0].Field != "failure_signature" {
			t.Errorf("searching for the failure signature: %+v", res.Hits)
		}
		do(t, "GET", base+"/v1/search?q=code:APP_ERROR", nil).decode(t, &res)
		if len(res.Hits) != 1 || res.Hits[0].Step != pay || res.Hits[0].Kind != "receipt" {
			t.Errorf("code:APP_ERROR: %+v", res.Hits)
		}
		if r := do(t, "GET", base+"/v1/search?q=status:999", nil); r.status != 400 || r.errCode(t) != "BAD_PARAMETER" {
			t.Errorf("status:999: %d %s", r.status, r.body)
		}
	})
}

func findElement(n *html.Node, ok func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && ok(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := findElement(c, ok); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
