package webm

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/internal/testenv"
)

// stepOf is the step whose chapter holds ts.
func stepOf(rec recording, ts int64) int {
	step := rec.chapters[0].Step
	for _, c := range rec.chapters {
		if ts >= c.Start {
			step = c.Step
		}
	}
	return step
}

// Real Chromium plays the file over HTTP (with Range, as a browser
// fetches media): the duration is the recording's, and seeking to a
// chapter's start lands there, with the picture of that instant.
func TestChromiumSeeks(t *testing.T) {
	rec, _, data := fixture(t)
	ctx := testenv.Chromium(t)

	var ranges atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/video.webm", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			ranges.Add(1)
		}
		w.Header().Set("Content-Type", "video/webm")
		http.ServeContent(w, r, "video.webm", time.Unix(0, rec.end), bytes.NewReader(data))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><video id="v" src="/video.webm" preload="auto" muted></video>
<canvas id="c" width="64" height="64"></canvas>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	type meta struct {
		Duration, Seekable float64
		Err                string
	}
	m, err := chromedp.Run(cctx, chromedp.Evaluate[meta](`new Promise((resolve) => {
		const v = document.getElementById('v');
		const done = () => resolve({
			Duration: v.duration,
			Seekable: v.seekable.length ? v.seekable.end(0) : -1,
			Err: v.error ? 'error ' + v.error.code + ' ' + v.error.message : '',
		});
		if (v.readyState >= 1 || v.error) { done(); return; }
		v.addEventListener('loadedmetadata', done, {once: true});
		v.addEventListener('error', done, {once: true});
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	want := float64(rec.end-rec.start) / 1e9
	const frame = 1.0 / 5
	if m.Err != "" || math.Abs(m.Duration-want) > frame || math.Abs(m.Seekable-want) > frame {
		t.Fatalf("metadata %+v; want duration %.3f s", m, want)
	}

	type seeked struct {
		Time  float64
		Ready int
		Err   string
		Pixel [3]int
	}
	for _, k := range []int{3, 5} {
		ch := rec.chapters[k-1]
		at := float64(ch.Start-rec.start) / 1e9
		s, err := chromedp.Run(cctx, chromedp.Evaluate[seeked](fmt.Sprintf(`new Promise((resolve) => {
			const v = document.getElementById('v');
			v.addEventListener('seeked', async () => {
				for (let i = 0; i < 100 && v.readyState < 2; i++) await new Promise(r => setTimeout(r, 50));
				const c = document.getElementById('c').getContext('2d');
				c.drawImage(v, 40, 100, 1, 1, 0, 0, 1, 1);
				const p = c.getImageData(0, 0, 1, 1).data;
				resolve({Time: v.currentTime, Ready: v.readyState, Err: v.error ? 'error ' + v.error.code : '', Pixel: [p[0], p[1], p[2]]});
			}, {once: true});
			v.currentTime = %.9f;
		})`, at), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("chapter %d: chromium: %v", k, err)
		}
		if s.Err != "" || math.Abs(s.Time-at) > frame || s.Ready < 2 {
			t.Errorf("chapter %d: after seeking to %.3f s: %+v", k, at, s)
		}
		// The picture on screen at the chapter's start: the frame at or
		// before the last output frame at or before it.
		slotAt := (ch.Start - rec.start) / 200e6 * 200e6
		wantStep := stepOf(rec, shownAt(rec.frames, rec.start, slotAt).Time)
		got := color.RGBA{uint8(s.Pixel[0]), uint8(s.Pixel[1]), uint8(s.Pixel[2]), 255}
		if !near(got, stepColor(wantStep), 16) {
			t.Errorf("chapter %d: the picture at %.3f s has background %v, want step %d's %v", k, at, got, wantStep, stepColor(wantStep))
		}
	}
	if ranges.Load() == 0 {
		t.Error("Chromium made no range request")
	}
}
