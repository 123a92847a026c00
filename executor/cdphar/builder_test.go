package cdphar

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
)

// TestBuilderFromRecordedEvents: a Builder makes the same entries as a
// Recorder from events fed by hand, says where each request started, and
// keeps a request the log ended before.
func TestBuilderFromRecordedEvents(t *testing.T) {
	b := NewBuilder()
	doc := sent("1", "http://x.test/", 10, nil)
	doc.LoaderID, doc.FrameID, doc.Type = "L1", "F1", network.ResourceTypeDocument
	post := sent("2", "http://x.test/api/pay", 11, nil)
	post.LoaderID = "L1"
	post.Request.Method, post.Request.HasPostData = "POST", true
	post.Request.Headers = network.Headers{"Content-Type": "application/json"}
	post.Request.PostDataEntries = []*network.PostDataEntry{{Bytes: []byte(`{"a":1}`)}}
	hang := sent("3", "http://x.test/poll", 12, nil)
	evs := []any{
		&page.EventLoadEventFired{}, // not a network event: ignored, but counted
		doc,
		&network.EventResponseReceived{RequestID: "1", Timestamp: 10.2, Type: network.ResourceTypeDocument,
			Response: &network.Response{Status: 200, Protocol: "http/1.1", MimeType: "text/html", Headers: network.Headers{}}},
		&network.EventLoadingFinished{RequestID: "1", Timestamp: 10.3, EncodedDataLength: 100},
		post,
		&network.EventResponseReceived{RequestID: "2", Timestamp: 11.1, Type: network.ResourceTypeFetch,
			Response: &network.Response{Status: 500, Protocol: "http/1.1", MimeType: "application/json", Headers: network.Headers{}}},
		&network.EventLoadingFinished{RequestID: "2", Timestamp: 11.2},
		hang,
	}
	for i, ev := range evs {
		if got, want := b.Add(ev), i > 0; got != want {
			t.Fatalf("Add #%d: %v", i, got)
		}
	}
	built := b.Entries()
	if len(built) != 3 {
		t.Fatalf("%d entries", len(built))
	}
	var es []Entry
	for _, x := range built {
		var e Entry
		if err := json.Unmarshal(x.JSON, &e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if built[0].Index != 1 || built[1].Index != 4 || built[2].Index != 7 {
		t.Errorf("indexes %d %d %d", built[0].Index, built[1].Index, built[2].Index)
	}
	if built[0].LoaderID != "L1" || built[0].FrameID != "F1" || built[0].RequestID != "1" || built[0].WallTime != 1764483610 || !built[0].Ended {
		t.Errorf("first: %+v", built[0])
	}
	if es[0].Response.Status != 200 || es[0].Response.Content.Comment != "body not in the DevTools log" || es[0].Response.Content.Text != "" {
		t.Errorf("document: %+v", es[0].Response)
	}
	if es[1].Response.Status != 500 || es[1].Request.PostData == nil || es[1].Request.PostData.Text != `{"a":1}` {
		t.Errorf("post: %+v %+v", es[1].Request, es[1].Response)
	}
	if built[2].Ended || es[2].Response.Error != "not finished when the log ended" || es[2].Response.Status != 0 {
		t.Errorf("unfinished: %+v %+v", built[2], es[2].Response)
	}
}
