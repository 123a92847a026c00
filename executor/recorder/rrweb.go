package recorder

import (
	_ "embed"
	"encoding/json"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
)

// rrweb's recorder runs in every top-level document and hands each event
// to the recorder through a CDP binding. It runs in every child frame too,
// with recordCrossOriginIframes: a same-origin frame's copy stands down
// (the top one records the frame's DOM), a cross-origin frame's posts its
// events to the top document's, which folds them into its own stream with
// the frame's nodes under the iframe node, so players replay the frame. Its events are sent unchanged, so
// any rrweb player replays an export.

//go:embed rrweb/record.umd.min.js
var rrwebBundle string

const rrwebVersion = "@rrweb/record 2.1.6"

// domBinding is the CDP binding rrweb's events come through.
const domBinding = "__flightrecDOM"

// rrwebScript is the bundle (without its sourceMappingURL comment: the map
// is not shipped) and the call that starts it. Inputs are masked at the
// source by the page helper's rules (maskInputFn is asked for every input
// and textarea); the server masks again by its plan.
func rrwebScript() string {
	bundle := rrwebBundle
	if i := strings.LastIndex(bundle, "//# sourceMappingURL="); i >= 0 {
		bundle = bundle[:i]
	}
	return `(function () {
  if (window.__flightrecRRWeb) return; // run once per document (a followed page gets it twice)
  Object.defineProperty(window, "__flightrecRRWeb", {value: true});
  var define, exports, module; // the bundle is UMD: make it set the global
  ` + bundle + `
  ;rrwebRecord.record({
    emit: function (e) { try { window.` + domBinding + `(JSON.stringify(e)); } catch (err) {} },
    maskInputOptions: {password: true, input: true, textarea: true},
    maskInputFn: function (text, el) {
      if (!el || !window.__flightrec || window.__flightrec.isMasked(el)) return "*".repeat(text.length);
      return text;
    },
    recordCrossOriginIframes: true,
    sampling: {mousemove: 100, scroll: 150, input: "last"},
    recordCanvas: false,
    collectFonts: false,
    inlineImages: false,
  });
}).call(window);`
}

// onDOM sends one rrweb event of pg from the binding (reader goroutine).
func (s *session) onDOM(pg *followedPage, payload string) {
	var ev struct {
		Type      *int            `json:"type"`
		Data      json.RawMessage `json:"data"`
		Timestamp int64           `json:"timestamp"`
	}
	if json.Unmarshal([]byte(payload), &ev) != nil || ev.Type == nil {
		return
	}
	ts := time.Now()
	// Under the clock pin rrweb's timestamps are the page's pinned clock,
	// not when the event happened: the event keeps it, the envelope has
	// the recorder's.
	if ev.Timestamp > 0 && !s.cfg.Pins.Clock {
		ts = time.UnixMilli(ev.Timestamp)
	}
	s.st.emit(event.KindDOM, ts, event.DOM{Type: ev.Type, Data: ev.Data, Timestamp: ev.Timestamp, Page: pg.id})
}
