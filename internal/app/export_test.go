package app_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
)

// TestExports: the HAR export is one HAR 1.2 document with a page per step
// that made requests and every entry pointing at its step's page; the
// rrweb export is the DOM events, unchanged, in order.
func TestExports(t *testing.T) {
	_, base := server(t, ingest.DefaultLimits)
	id := openRec(t, base)
	now := time.Now().UnixNano()
	har := func(step int, url string, status int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"startedDateTime":"2026-11-30T10:00:0%d.000Z","time":12.5,`+
			`"request":{"method":"GET","url":%q,"httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0},`+
			`"response":{"status":%d,"statusText":"","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":2,"mimeType":"application/json","text":"{}"},"redirectURL":"","headersSize":-1,"bodySize":2},`+
			`"cache":{},"timings":{"send":1,"wait":10,"receive":1.5}}`, step, url, status))
	}
	dom := []json.RawMessage{
		json.RawMessage(`{"type":4,"data":{"href":"http://shop.test/","width":1280,"height":800},"timestamp":1764483600000}`),
		json.RawMessage(`{"type":2,"data":{"node":{"type":0,"childNodes":[],"id":1},"initialOffset":{"left":0,"top":0}},"timestamp":1764483600001}`),
		json.RawMessage(`{"type":3,"data":{"source":0,"adds":[],"removes":[],"texts":[],"attributes":[]},"timestamp":1764483600002}`),
	}
	evs := []event.Envelope{
		{Seq: 1, TS: now, Step: 1, Kind: event.KindDOM, Data: dom[0]},
		{Seq: 2, TS: now + 1, Step: 1, Kind: event.KindDOM, Data: dom[1]},
		{Seq: 3, TS: now + 2, Step: 1, Kind: event.KindHAR, Data: har(1, "http://shop.test/", 200)},
		{Seq: 4, TS: now + 3, Step: 1, Kind: event.KindHAR, Data: har(1, "http://shop.test/app.js", 200)},
		{Seq: 5, TS: now + 4, Step: 2, Kind: event.KindDOM, Data: dom[2]},
		{Seq: 6, TS: now + 5, Step: 2, Kind: event.KindHAR, Data: har(2, "http://shop.test/api/checkout", 500)},
	}
	if a := acked(t, appendBatch(t, base, id, evs)); a.AckedThrough != 6 {
		t.Fatalf("append: %+v", a)
	}
	if r := do(t, "POST", base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"fail"}`)); r.status != 200 {
		t.Fatalf("finish: %d %s", r.status, r.body)
	}
	waitIndexed(t, base, id, 6)

	var doc struct {
		Log struct {
			Version string
			Creator struct{ Name string }
			Pages   []struct{ ID, StartedDateTime string }
			Entries []struct {
				Pageref  string
				Request  struct{ Method, URL string }
				Response struct{ Status int }
			}
		}
	}
	r := do(t, "GET", base+"/v1/recordings/"+id+"/har", nil)
	if r.status != 200 {
		t.Fatalf("har: %d %s", r.status, r.body)
	}
	r.decode(t, &doc)
	l := doc.Log
	if l.Version != "1.2" || l.Creator.Name != "flightrec" || len(l.Pages) != 2 || len(l.Entries) != 3 {
		t.Fatalf("HAR: %s", r.body)
	}
	pages := map[string]bool{}
	for _, p := range l.Pages {
		pages[p.ID] = p.StartedDateTime != ""
	}
	for i, e := range l.Entries {
		if !pages[e.Pageref] {
			t.Errorf("entry %d points at page %q, not one of the document's", i, e.Pageref)
		}
	}
	if l.Entries[2].Pageref != "step_2" || l.Entries[2].Response.Status != 500 || l.Entries[0].Request.URL != "http://shop.test/" {
		t.Errorf("entries: %+v", l.Entries)
	}

	r = do(t, "GET", base+"/v1/recordings/"+id+"/rrweb", nil)
	if r.status != 200 {
		t.Fatalf("rrweb: %d %s", r.status, r.body)
	}
	var got, want []any
	r.decode(t, &got)
	for _, d := range dom {
		var v any
		_ = json.Unmarshal(d, &v)
		want = append(want, v)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rrweb export:\n%s\nwant the DOM events as sent", r.body)
	}
}
