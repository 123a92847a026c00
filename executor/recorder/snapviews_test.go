package recorder_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/playback"
)

// checkSnapshotViews checks the failing demo run's delta and full
// snapshots: the delta after the Apply click names the line that
// changed (the gift card's status), and the full snapshot the flow asked
// for lists the payment frame's elements with the frame's refs.
func checkSnapshotViews(t *testing.T, res recorder.Result, evs []event.Envelope) {
	t.Helper()
	_, apply := receiptNamed(t, evs, "click", "Apply")
	var deltas, fulls []event.Snapshot
	snapStep := -1
	for _, e := range evs {
		switch e.Kind {
		case event.KindReceipt:
			if rc := decode[event.Receipt](t, e); rc.Action.Verb == "snapshot" {
				snapStep = rc.Step
				if rc.Outcome != event.OutcomeDone {
					t.Errorf("%s: the snapshot step %s %+v", res.Flow, rc.Outcome, rc.Error)
				}
			}
		case event.KindSnapshot:
			s := decode[event.Snapshot](t, e)
			switch {
			case s.View == "delta" && e.Step == apply:
				deltas = append(deltas, s)
			case s.View == "full":
				fulls = append(fulls, s)
				if e.Step != snapStep && snapStep >= 0 {
					t.Errorf("%s: a full snapshot at step %d, the snapshot step is %d", res.Flow, e.Step, snapStep)
				}
			}
		}
	}
	if len(deltas) != 1 || !strings.Contains(deltas[0].Text, `+ status "Gift card applied: $10.00 off"`) {
		t.Errorf("%s: delta snapshots after the Apply click (step %d): %+v, want one naming the status line that appeared", res.Flow, apply, deltas)
	}
	if snapStep < 0 || len(fulls) != 1 {
		t.Fatalf("%s: %d full snapshots; snapshot step %d", res.Flow, len(fulls), snapStep)
	}
	full := fulls[0].Text
	i := strings.Index(full, `frame "Payment card" (cross-origin frame: http://127.0.0.1:`)
	if i < 0 || !regexp.MustCompile(`(?m)^\s+textbox "Card number".* @f\d+e\d+$`).MatchString(full[i:]) ||
		!regexp.MustCompile(`(?m)^\s+StaticText "Card number" @f\d+e\d+$`).MatchString(full[i:]) {
		t.Errorf("%s: the full snapshot does not list the frame's elements with their refs:\n%s", res.Flow, full)
	}
	if strings.Contains(full, "4242") {
		t.Errorf("%s: the full snapshot holds card digits", res.Flow)
	}
}

// TestSnapshotPages: a page of 50,000 buttons makes an interactive
// snapshot far over a page's size; the event keeps it whole and the API
// gives it in pages, each with the handle of the next, which together
// are the snapshot.
func TestSnapshotPages(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	const n = 50_000
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>many</title></head><body><main>")
	for i := range n {
		fmt.Fprintf(&b, "<button>Item %d</button>", i)
	}
	b.WriteString("</main></body></html>")
	body := b.String()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	defer page.Close()
	res, evs := runSteps(t, srv.Base, page.URL, `wait: {text: "Item 49999"}`)
	var seq uint64
	for _, e := range evs {
		if e.Kind == event.KindSnapshot {
			if s := decode[event.Snapshot](t, e); s.View == "interactive" && s.When == "after" {
				seq = e.Seq
				if s.Truncated || len(s.Text) < n*20 {
					t.Fatalf("the stored snapshot is %d bytes, truncated %v: want all %d buttons", len(s.Text), s.Truncated, n)
				}
			}
		}
	}
	if seq == 0 {
		t.Fatal("no interactive snapshot after the step")
	}
	var all strings.Builder
	pages := 0
	for cursor := ""; ; pages++ {
		var pg playback.SnapshotPage
		getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/snapshots/%d?cursor=%s", srv.Base, res.ID, seq, cursor), &pg)
		if len(pg.Text) > playback.DefaultSnapshotPage {
			t.Fatalf("page %d is %d bytes, over the page size", pages, len(pg.Text))
		}
		if pages == 0 && (!pg.Truncated || pg.Next == "") {
			t.Fatalf("the first page is not truncated with a handle: %d of %d bytes", len(pg.Text), pg.TotalBytes)
		}
		all.WriteString(pg.Text)
		if pg.Next == "" {
			if pg.Truncated {
				t.Fatal("a truncated page without a handle")
			}
			break
		}
		cursor = pg.Next
	}
	got := all.String()
	for _, i := range []int{0, 1, 25_000, n - 1} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*button "Item %d" @e\d+$`, i)).MatchString(got) {
			t.Errorf("the pages lack button %d", i)
		}
	}
	if c := strings.Count(got, `button "Item `); c != n {
		t.Errorf("the pages list %d buttons, want %d", c, n)
	}
	t.Logf("%d bytes in %d pages", len(got), pages+1)
}
