// Package testgen makes synthetic recordings for tests and benchmarks:
// every kind, realistic sizes, deterministic from a seed.
package testgen

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand/v2"

	"github.com/flightrec/flightrec/event"
)

// Options shape a generated recording.
type Options struct {
	Seed          uint64
	Steps         int // steps 1..Steps; step 0 holds the meta event
	EventsPerStep int // besides the receipt
	FrameBytes    int // 0: no frames; else each step gets one frame this size
	StartTS       int64
}

// Recording returns the envelopes of a synthetic recording, seq 1..N.
func Recording(o Options) []event.Envelope {
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	ts := o.StartTS
	if ts == 0 {
		ts = 1764483600000000000
	}
	var out []event.Envelope
	add := func(step int, kind event.Kind, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		ts += int64(1_000_000 + r.IntN(5_000_000))
		out = append(out, event.Envelope{Seq: uint64(len(out) + 1), TS: ts, Step: step, Kind: kind, Data: b})
	}
	add(0, event.KindMeta, map[string]any{
		"versions": map[string]string{"engine": "chromium 156", "flow_revision": fmt.Sprintf("r%d", o.Seed)},
		"viewport": map[string]int{"width": 1280, "height": 800},
	})
	for s := 1; s <= o.Steps; s++ {
		for i := 0; i < o.EventsPerStep; i++ {
			switch r.IntN(5) {
			case 0:
				add(s, event.KindConsole, map[string]any{"level": []string{"log", "warn", "error"}[r.IntN(3)],
					"text": fmt.Sprintf("step %d message %d: value=%d", s, i, r.IntN(1e6)),
					"url":  "https://app.example/static/app.js", "line": 10 + r.IntN(500), "column": r.IntN(80)})
			case 1:
				status := []int{200, 200, 204, 304, 404, 500}[r.IntN(6)]
				add(s, event.KindHAR, map[string]any{
					"startedDateTime": "2026-11-30T06:00:00.000Z", "time": 12.5,
					"request": map[string]any{"method": []string{"GET", "POST"}[r.IntN(2)],
						"url": fmt.Sprintf("https://app.example/api/item/%d?page=%d", r.IntN(1000), s), "httpVersion": "HTTP/1.1",
						"cookies": []any{}, "headers": []any{map[string]string{"name": "accept", "value": "application/json"}},
						"queryString": []any{}, "headersSize": -1, "bodySize": 0},
					"response": map[string]any{"status": status, "statusText": "", "httpVersion": "HTTP/1.1",
						"cookies": []any{}, "headers": []any{}, "content": map[string]any{"size": 17,
							"mimeType": "application/json", "text": fmt.Sprintf(`{"ok":%d}`, r.IntN(99))},
						"redirectURL": "", "headersSize": -1, "bodySize": 17},
					"timings": map[string]float64{"send": 0.1, "wait": 10, "receive": 2.4}})
			case 2:
				add(s, event.KindDOM, map[string]any{"type": 3, "timestamp": ts / 1e6,
					"data": map[string]any{"source": 0, "adds": []any{}, "removes": []any{},
						"texts":      []any{map[string]any{"id": r.IntN(500), "value": fmt.Sprintf("text %d", r.IntN(1e4))}},
						"attributes": []any{}}})
			case 3:
				add(s, event.KindSnapshot, map[string]any{"view": "interactive", "when": "after",
					"origin": "https://app.example", "nonce": fmt.Sprintf("%x", r.Uint32()),
					"text": fmt.Sprintf("main \"Checkout\"\n button \"Pay\" @e%d\n textbox \"Email\" @e%d", r.IntN(99), r.IntN(99))})
			case 4:
				add(s, event.KindCheck, map[string]any{"type": "state", "target": "GET /api/orders?last=1",
					"expect": map[string]string{"state": "paid"}, "actual": map[string]string{"state": "paid"}, "passed": true})
			}
		}
		if o.FrameBytes > 0 {
			// No mask rectangles: masking (which decodes, paints and
			// re-encodes) is redact's to test. Unmasked frames are stored
			// byte for byte once their header and dimensions check out.
			img := FrameJPEG(r, o.FrameBytes)
			add(s, event.KindFrame, map[string]any{"mime": "image/jpeg", "image": base64.StdEncoding.EncodeToString(img),
				"width": 1280, "height": 800, "cursor": map[string]int{"x": r.IntN(1280), "y": r.IntN(800)}})
		}
		outcome := map[string]any{"outcome": "done"}
		if r.IntN(10) == 0 {
			outcome = map[string]any{"outcome": "failed", "error": map[string]string{
				"code": "NOT_ACTIONABLE", "message": "covered by dialog", "next": "snapshot"}}
		}
		receipt := map[string]any{"step": s, "action": map[string]any{"verb": "click",
			"target": map[string]string{"ref": fmt.Sprintf("@e%d", s), "role": "button", "name": fmt.Sprintf("Button %d", s)}},
			"rule": "preview-auto", "started_at": ts, "ended_at": ts + 400_000_000, "browser_seconds": 0.41,
			"effects": map[string]any{"requests": []map[string]any{{"method": "POST", "url": "/api/gift", "status": 200}}}}
		for k, v := range outcome {
			receipt[k] = v
		}
		add(s, event.KindReceipt, receipt)
	}
	return out
}

// NDJSON encodes envelopes one per line.
func NDJSON(evs []event.Envelope) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			panic(err)
		}
	}
	return b.Bytes()
}

// tinyJPEG is a valid 16×16 JPEG, the body of every FrameJPEG.
var tinyJPEG = func() []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 16, 16)), nil); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// FrameJPEG returns a valid JPEG of about n bytes whose bytes are random
// (comment segments after the start marker), so frames are unique and
// incompressible like real ones and still pass an image check.
func FrameJPEG(r *rand.Rand, n int) []byte {
	out := append(make([]byte, 0, n+len(tinyJPEG)), tinyJPEG[:2]...)
	for left := n - len(tinyJPEG); left > 4; {
		seg := min(left-4, 65533)
		out = append(out, 0xFF, 0xFE, byte((seg+2)>>8), byte(seg+2))
		for i := 0; i < seg; i++ {
			out = append(out, byte(r.Uint32()))
		}
		left -= seg + 4
	}
	return append(out, tinyJPEG[2:]...)
}

// Flood returns a finished-looking recording whose step 1 fails with
// APP_ERROR, logging one console error of consoleBytes and making
// failedRequests requests answered 500 {"error":{"code":"FLOOD"}}: the
// worst a size-bounded view (an evidence card) must stay bounded against.
func Flood(consoleBytes, failedRequests int) []event.Envelope {
	ts := int64(1764483600000000000)
	var out []event.Envelope
	add := func(step int, kind event.Kind, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		ts += 1_000_000
		out = append(out, event.Envelope{Seq: uint64(len(out) + 1), TS: ts, Step: step, Kind: kind, Data: b})
	}
	add(0, event.KindMeta, map[string]any{"versions": map[string]string{"engine": "chromium 156"}})
	text := bytes.Repeat([]byte("flood of console text "), consoleBytes/22+1)[:consoleBytes]
	add(1, event.KindConsole, map[string]any{"level": "error", "text": string(text), "url": "https://app.example/app.js", "line": 1, "column": 1})
	for i := range failedRequests {
		add(1, event.KindHAR, map[string]any{
			"startedDateTime": "2026-11-30T06:00:00.000Z", "time": 1.5,
			"request": map[string]any{"method": "POST", "url": fmt.Sprintf("https://app.example/api/flood/%d", i), "httpVersion": "HTTP/1.1",
				"cookies": []any{}, "headers": []any{}, "queryString": []any{}, "headersSize": -1, "bodySize": 0},
			"response": map[string]any{"status": 500, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": []any{}, "headers": []any{},
				"content":     map[string]any{"size": 27, "mimeType": "application/json", "text": `{"error":{"code":"FLOOD"}}`},
				"redirectURL": "", "headersSize": -1, "bodySize": 27}})
	}
	add(1, event.KindReceipt, map[string]any{"step": 1, "action": map[string]any{"verb": "click",
		"target": map[string]string{"role": "button", "name": "Flood"}}, "outcome": "failed",
		"error": map[string]string{"code": "APP_ERROR", "message": "the app answered 500", "next": "read the console"}})
	return out
}
