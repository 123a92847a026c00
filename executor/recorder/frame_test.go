package recorder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/wire"
)

var frameRef = regexp.MustCompile(`^@f\d+e\d+$`)

// checkCardFrame checks the failing run's card went into the payment
// provider's cross-origin frame as the issue asks: typed through a frame
// ref; the frame inline in the interactive snapshot with its origin; the
// Pay step's DOM view showing the frame's form with no card digit; the
// frame's token request in the HAR; and no screencast frame showing a
// bright pixel where the card field is (measured in a browser of its own).
//
// oopif says the payment origin is another site (demoapp's
// CrossSitePayment): the frame must then be out of process.
func checkCardFrame(t *testing.T, base string, shop *demoapp.Server, oopif bool, res recorder.Result, evs []event.Envelope) {
	t.Helper()
	payOrigin := shop.PaymentURL()
	fill, checkoutAt, pay := -1, -1, -1
	for _, e := range evs {
		if e.Kind != event.KindReceipt {
			continue
		}
		rc := decode[event.Receipt](t, e)
		tg := rc.Action.Target
		switch {
		case rc.Action.Verb == "fill" && tg != nil && tg.Frame == "Payment card":
			fill = rc.Step
			if rc.Resolved == nil || !frameRef.MatchString(rc.Resolved.Ref) || rc.Resolved.Frame != "Payment card" {
				t.Errorf("%s: the card was not typed through a frame ref: resolved %+v", res.Flow, rc.Resolved)
			}
			if rc.Outcome != event.OutcomeDone {
				t.Errorf("%s: typing the card: %s %+v", res.Flow, rc.Outcome, rc.Error)
			}
		case rc.Action.Verb == "wait" && strings.Contains(string(rc.Action.Args), "/checkout"):
			checkoutAt = rc.Step
		case rc.Action.Verb == "click" && tg != nil && tg.Name == "Pay":
			pay = rc.Step
		}
	}
	if fill < 0 || checkoutAt < 0 || pay < 0 {
		t.Fatalf("%s: steps not found: fill card %d, checkout %d, pay %d", res.Flow, fill, checkoutAt, pay)
	}

	// The interactive snapshot after the fill shows the frame, its origin
	// and its own refs, and the card's value masked.
	frameLine := `frame "Payment card" (cross-origin frame: ` + payOrigin + `)`
	cardLine := regexp.MustCompile(`(?m)^(\s+)textbox "Card number".* value="\[(masked|redacted)\]".* @f\d+e\d+$`)
	found := false
	for _, e := range evs {
		if e.Kind != event.KindSnapshot || e.Step != fill {
			continue
		}
		s := decode[event.Snapshot](t, e)
		if s.View != "interactive" || s.When != "after" {
			continue
		}
		found = true
		i := strings.Index(s.Text, frameLine)
		if i < 0 || !cardLine.MatchString(s.Text[i:]) {
			t.Errorf("%s: the interactive snapshot after step %d lacks the frame (%s) with its masked card field:\n%s", res.Flow, fill, frameLine, s.Text)
		}
	}
	if !found {
		t.Errorf("%s: no interactive snapshot after step %d", res.Flow, fill)
	}

	// The DOM view of the Pay step shows the frame's form, no card digit.
	resp, err := http.Get(fmt.Sprintf("%s/v1/recordings/%s/steps/%d/dom?at=before", base, res.ID, pay))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != 200 || !strings.Contains(page, `data-flightrec-frame="Payment card"`) ||
		!strings.Contains(page, "Card number") || !strings.Contains(page, `id="card-number"`) {
		t.Errorf("%s: the Pay step's DOM view (%d) does not show the card frame's form:\n%s", res.Flow, resp.StatusCode, page)
	}
	if strings.Contains(page, "4242") {
		t.Errorf("%s: the Pay step's DOM view holds card digits", res.Flow)
	}

	// The frame's own request (the token exchange) is in the Pay step's HAR.
	var view wire.StepView
	getJSON(t, fmt.Sprintf("%s/v1/recordings/%s/steps/%d", base, res.ID, pay), &view)
	tokens := 0
	for _, e := range view.Events {
		if e.Kind == event.KindHAR {
			if h := decode[event.HAR](t, e); h.Request.URL == payOrigin+"/api/tokens" {
				tokens++
			}
		}
	}
	if tokens != 1 {
		t.Errorf("%s: %d token requests of the frame in the Pay step's HAR, want 1", res.Flow, tokens)
	}
	// The frame's document (on the page's session) and its first
	// requests, made as its document commits: out of process the frame is
	// paused at its start until the recorder has set up its session, so
	// they are not missed; each once.
	docs, script := 0, 0
	for _, e := range evs {
		if e.Kind != event.KindHAR {
			continue
		}
		h := decode[event.HAR](t, e)
		switch {
		case strings.HasPrefix(h.Request.URL, payOrigin+"/pay/card?"):
			docs++
		case h.Request.URL == payOrigin+"/static/pay.js":
			script++
		}
	}
	if docs != 1 || script != 1 {
		t.Errorf("%s: the card frame's document is in the HAR %d times, its script %d times; want each once", res.Flow, docs, script)
	}

	// Every screencast frame while the card field is on screen (from the
	// first step after the checkout loaded to the end: the failing run
	// stays there) is dark inside the field's rectangle.
	// The field is measured unscrolled: the check holds only if the
	// checkout never scrolled (rrweb's scroll events of the top document).
	if y := topScroll(t, evs, checkoutAt); y != 0 {
		t.Fatalf("%s: the checkout scrolled to y=%d after step %d: the card field's measured place does not hold", res.Flow, y, checkoutAt)
	}
	field := cardFieldRect(t, shop.URL(), payOrigin, oopif)
	checked := 0
	for _, e := range evs {
		if e.Kind != event.KindFrame || e.Step <= checkoutAt {
			continue
		}
		f := decode[event.Frame](t, e)
		img := fetchImage(t, base, f.ImageCID)
		b := img.Bounds()
		sx, sy := float64(b.Dx())/float64(f.Width), float64(b.Dy())/float64(f.Height)
		bright := 0
		for y := int(float64(field.Y)*sy) + 1; y < int(float64(field.Y+field.H)*sy)-1; y++ {
			for x := int(float64(field.X)*sx) + 1; x < int(float64(field.X+field.W)*sx)-1; x++ {
				r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				if r>>8 > 12 || g>>8 > 12 || bl>>8 > 12 {
					bright++
				}
			}
		}
		if bright > 0 {
			t.Errorf("%s frame %d (step %d): %d pixels over 12 inside the card field %+v (masks %v)", res.Flow, e.Seq, e.Step, bright, field, f.Masks)
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("%s: no screencast frame while the card field was on screen", res.Flow)
	}
	t.Logf("%s: card field %+v dark in %d frames", res.Flow, field, checked)
}

// topScroll is the furthest vertical scroll of the top document rrweb
// recorded in the steps after step after (0: it never scrolled).
func topScroll(t *testing.T, evs []event.Envelope, after int) int {
	t.Helper()
	top, far := int64(-1), 0
	for _, e := range evs {
		if e.Kind != event.KindDOM {
			continue
		}
		d := decode[event.DOM](t, e)
		var data struct {
			Node   *struct{ ID int64 } `json:"node"`
			Source *int                `json:"source"`
			ID     int64               `json:"id"`
			Y      float64             `json:"y"`
		}
		_ = json.Unmarshal(d.Data, &data)
		switch {
		case *d.Type == 2 && data.Node != nil:
			top = data.Node.ID
		case *d.Type == 3 && data.Source != nil && *data.Source == 3 && data.ID == top && e.Step > after:
			far = max(far, int(data.Y))
		}
	}
	return far
}

func fetchImage(t *testing.T, base, cid string) image.Image {
	t.Helper()
	resp, err := http.Get(base + "/v1/blobs/" + cid)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	img, _, err := image.Decode(resp.Body)
	if err != nil {
		t.Fatalf("blob %s: %v", cid, err)
	}
	return img
}

// cardFieldRect measures where the card field is on the checkout page at
// the demo flows' viewport, in a browser of the test's own (not the
// recorder's, whose masks are what is being checked): the field's border
// box in the top page's CSS pixels.
//
// It also proves which kind of frame the payment frame is: with oopif a
// frame target of the payment origin must attach to the tab (chromedp
// auto-attaches them: an attached frame target is an out-of-process
// iframe), and the field must not be in the tab's own documents.
func cardFieldRect(t *testing.T, shopURL, payOrigin string, oopif bool) event.Rect {
	t.Helper()
	path, err := recorder.Browser("")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(recorder.ChromiumOptions(path, t.TempDir()), chromedp.Flag("hide-scrollbars", true), chromedp.WindowSize(1280, 800))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	var mu sync.Mutex
	var frameTargets []*target.Info
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		if ev, ok := ev.(*target.EventAttachedToTarget); ok && ev.TargetInfo.Type == "iframe" {
			mu.Lock()
			frameTargets = append(frameTargets, ev.TargetInfo)
			mu.Unlock()
		}
	}))
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	frameTarget := func() *target.Info {
		mu.Lock()
		defer mu.Unlock()
		// The target's URL is empty when it attaches (before its
		// document commits): the frame's own document says which it is.
		if len(frameTargets) > 0 {
			return frameTargets[len(frameTargets)-1]
		}
		return nil
	}
	eval := func(expr string) {
		t.Helper()
		res, err := chromedp.Call(tab, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: expr, AwaitPromise: ptr(true), ReturnByValue: ptr(true)})
		if err != nil || res.ExceptionDetails != nil {
			t.Fatalf("%s: %v %+v", expr, err, res.ExceptionDetails)
		}
	}
	open := func(u string) {
		t.Helper()
		if _, err := chromedp.Call(tab, page.Navigate, page.NavigateParams{URL: u}); err != nil {
			t.Fatal(err)
		}
		eval(`new Promise(r => { const ok = () => document.readyState === "complete" ? r(true) : setTimeout(ok, 20); ok(); })`)
	}
	if _, err := chromedp.Call(tab, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: 1280, Height: 800, DeviceScaleFactor: 1}); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) string {
		return fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"Content-Type": "application/json"}, body: %q}).then(r => { if (!r.ok) throw new Error(r.status); })`, path, body)
	}
	open(shopURL + "/signin")
	eval(post("/api/signin", fmt.Sprintf(`{"email":%q,"password":%q}`, demoapp.Email, demoapp.Password)))
	eval(post("/api/cart", fmt.Sprintf(`{"sku":%q,"qty":1}`, demoapp.ProductSKU)))
	open(shopURL + "/checkout")
	deadline := time.Now().Add(time.Minute)
	for {
		// In the page's process the field is in the pierced document; out
		// of process it is in the frame target's own.
		if r, ok := fieldIn(tab, 0, 0); ok {
			if oopif {
				t.Fatal("the card frame is in the page's process: the payment origin was meant to be cross-site (an out-of-process iframe)")
			}
			return r
		}
		if fr := frameTarget(); fr != nil {
			if !oopif {
				t.Fatalf("the card frame is out of process (%s), the test expected it in the page's", fr.URL)
			}
			fctx, cancel := chromedp.NewContext(tab, chromedp.WithTargetID(fr.TargetID))
			defer cancel()
			tree, err := chromedp.Call(fctx, page.GetFrameTree, struct{}{})
			if err == nil && !strings.HasPrefix(tree.FrameTree.Frame.URL, payOrigin+"/") {
				t.Fatalf("the out-of-process frame is %s, not the payment origin's", tree.FrameTree.Frame.URL)
			}
			if err == nil {
				if x, y, ok := frameOffset(tab); ok {
					if r, ok := fieldIn(fctx, x, y); ok {
						return r
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkout's card field never appeared in its frame")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fieldIn is the card field's border box in the document ctx reaches,
// moved by (dx, dy) (a frame's place in the top page).
func fieldIn(ctx context.Context, dx, dy float64) (event.Rect, bool) {
	doc, err := chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{Depth: ptr(int64(-1)), Pierce: ptr(true)})
	if err != nil {
		return event.Rect{}, false
	}
	n := findNode(doc.Root, "card-number")
	if n == nil {
		return event.Rect{}, false
	}
	bm, err := chromedp.Call(ctx, dom.GetBoxModel, dom.GetBoxModelParams{NodeID: n.NodeID})
	if err != nil || bm.Model == nil || len(bm.Model.Border) != 8 {
		return event.Rect{}, false
	}
	q := bm.Model.Border
	return event.Rect{X: int(q[0] + dx), Y: int(q[1] + dy), W: int(q[4] - q[0]), H: int(q[5] - q[1])}, true
}

// frameOffset is the top-left corner of the card frame's content box in
// the top page.
func frameOffset(tab context.Context) (x, y float64, ok bool) {
	doc, err := chromedp.Call(tab, dom.GetDocument, dom.GetDocumentParams{Depth: ptr(int64(-1))})
	if err != nil {
		return 0, 0, false
	}
	var find func(n *cdp.Node) *cdp.Node
	find = func(n *cdp.Node) *cdp.Node {
		if n.LocalName == "iframe" {
			return n
		}
		for _, c := range n.Children {
			if f := find(c); f != nil {
				return f
			}
		}
		return nil
	}
	f := find(doc.Root)
	if f == nil {
		return 0, 0, false
	}
	bm, err := chromedp.Call(tab, dom.GetBoxModel, dom.GetBoxModelParams{NodeID: f.NodeID})
	if err != nil || bm.Model == nil || len(bm.Model.Content) != 8 {
		return 0, 0, false
	}
	return bm.Model.Content[0], bm.Model.Content[1], true
}

func ptr[T any](v T) *T { return &v }

// findNode finds the element with id, through frames' documents.
func findNode(n *cdp.Node, id string) *cdp.Node {
	if n == nil {
		return nil
	}
	for i := 0; i+1 < len(n.Attributes); i += 2 {
		if n.Attributes[i] == "id" && n.Attributes[i+1] == id {
			return n
		}
	}
	if f := findNode(n.ContentDocument, id); f != nil {
		return f
	}
	for _, c := range n.Children {
		if f := findNode(c, id); f != nil {
			return f
		}
	}
	return nil
}

// checkSnapshotViews checks the failing demo run's delta and full
// snapshots: the delta after the Apply click names the line that
// changed (the gift card's status), and the full snapshot the flow asked
// for lists the payment frame's elements with the frame's refs.
func checkSnapshotViews(t *testing.T, payOrigin string, res recorder.Result, evs []event.Envelope) {
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
	i := strings.Index(full, `frame "Payment card" (cross-origin frame: `+payOrigin+`)`)
	if i < 0 || !regexp.MustCompile(`(?m)^\s+textbox "Card number".* @f\d+e\d+$`).MatchString(full[i:]) ||
		!regexp.MustCompile(`(?m)^\s+StaticText "Card number" @f\d+e\d+$`).MatchString(full[i:]) {
		t.Errorf("%s: the full snapshot does not list the frame's elements with their refs:\n%s", res.Flow, full)
	}
	if strings.Contains(full, "4242") {
		t.Errorf("%s: the full snapshot holds card digits", res.Flow)
	}
}
