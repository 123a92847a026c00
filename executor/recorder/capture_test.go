package recorder_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/store/blobs"
	"github.com/flightrec/flightrec/wire"
)

// receiptNamed returns the receipt of the step whose action is verb on a
// target named name.
func receiptNamed(t *testing.T, evs []event.Envelope, verb, name string) (event.Receipt, int) {
	t.Helper()
	for _, e := range evs {
		if e.Kind != event.KindReceipt {
			continue
		}
		r := decode[event.Receipt](t, e)
		if r.Action.Verb == verb && r.Action.Target != nil && r.Action.Target.Name == name {
			return r, e.Step
		}
	}
	t.Fatalf("no %s %q step", verb, name)
	return event.Receipt{}, 0
}

// TestDemoPopupAndDownload records the passing demo flow in real Chromium:
// the Terms click's receipt lists the popup it opened, and the receipt
// download is described by name, size, MIME type and the PDF's sha256,
// its bytes kept nowhere (the default policy). Recorded again under a
// policy that keeps downloads, the PDF is a blob the receipt names.
func TestDemoPopupAndDownload(t *testing.T) {
	testenv.RequireChromium(t)
	// The recorder's scratch space (its profile, where downloads land)
	// is made under TMPDIR: it must be gone after each run.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	scratchGone := func(when string) {
		t.Helper()
		if left, _ := filepath.Glob(filepath.Join(tmp, "flightrec-chromium-*")); len(left) > 0 {
			t.Errorf("%s: the recorder's scratch space is still there: %v", when, left)
		}
	}
	pol := t.TempDir()
	if err := os.WriteFile(filepath.Join(pol, "keep.rego"), []byte(`package flightrec.redact
keep_downloads := true if input.recording.project == "`+keepProject+`"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := appserver.Start(t, func(c *app.Config) { c.Policy = pol })
	// The socket's extra message carries a secret: redaction must erase
	// it (by its JSON key) before anything is written.
	const secret = "wsSecretPw7781"
	shop, _ := testenv.Shop(t, demoapp.Options{SocketExtra: `{"type":"auth","password":"` + secret + `"}`})
	res := recordFlow(t, srv.Base, shop, "checkout-passes")
	if res.Verdict != "pass" {
		t.Fatalf("verdict %s: %+v", res.Verdict, res.Failed)
	}
	indexed(t, srv.Base, res.ID, res.Total)
	evs := allEvents(t, srv.Base, res.ID)

	terms, _ := receiptNamed(t, evs, "click", "Terms")
	if terms.Effects == nil || len(terms.Effects.Popups) != 1 || terms.Effects.Popups[0] != shop+"/terms" {
		t.Errorf("the Terms step's effects: %+v, want the popup %s/terms", terms.Effects, shop)
	}
	checkPopupPage(t, srv.Base, res, terms, shop, evs)

	dl, _ := receiptNamed(t, evs, "click", "Download receipt")
	if dl.Effects == nil || len(dl.Effects.Files) != 1 {
		t.Fatalf("the download step's effects: %+v", dl.Effects)
	}
	f := dl.Effects.Files[0]
	id := strings.TrimSuffix(strings.TrimPrefix(f.Name, "receipt-"), ".pdf")
	pdf := demoapp.ReceiptPDF(id, 4900)
	sum := sha256.Sum256(pdf)
	if !strings.HasPrefix(id, "ord_") || f.Size != int64(len(pdf)) || f.SHA256 != hex.EncodeToString(sum[:]) ||
		f.MIME != "application/pdf" || f.State != "completed" {
		t.Errorf("file %+v, want %d bytes with sha256 %x", f, len(pdf), sum)
	}
	if len(dl.Effects.Downloads) != 1 || dl.Effects.Downloads[0] != f.Name {
		t.Errorf("effects.downloads %v, want [%s]", dl.Effects.Downloads, f.Name)
	}
	// Hash only: no CID, no download event, the PDF's bytes nowhere in
	// the data directory.
	for _, e := range evs {
		if e.Kind == event.KindDownload {
			t.Errorf("a download event (seq %d) under the default policy", e.Seq)
		}
	}
	running := testenv.Corpus{}
	running.AddFiles(t, srv.App.Store.Dir(), "running")
	if hits := running.Hits([]string{string(pdf)}, []string{"the receipt PDF"}); f.CID != "" || len(hits) > 0 {
		t.Errorf("the default policy kept the download (cid %q):\n  %s", f.CID, strings.Join(hits, "\n  "))
	}
	scratchGone("downloads hashed only")
	checkKeptDownload(t, srv.Base, shop)
	scratchGone("downloads kept")

	// The cart socket's messages are on its handshake's HAR entry: the
	// page's hello, the count, the extra message (redacted), and the
	// count pushed when the kettle went into the cart.
	var sockets []event.HAR
	for _, e := range evs {
		if e.Kind == event.KindHAR {
			if h := decode[event.HAR](t, e); strings.HasSuffix(h.Request.URL, "/ws/cart") {
				sockets = append(sockets, h)
			}
		}
	}
	var sawHello, sawCount1, sawAuth bool
	for _, h := range sockets {
		for _, m := range h.WebSocketMessages {
			switch {
			case m.Type == "send" && strings.Contains(m.Data, `"hello"`):
				sawHello = true
			case m.Type == "receive" && m.Data == `{"count":1,"type":"cart"}`:
				sawCount1 = true
			case m.Type == "receive" && strings.Contains(m.Data, `"auth"`):
				sawAuth = !strings.Contains(m.Data, secret) && m.Opcode == 1
			}
		}
	}
	if len(sockets) == 0 || !sawHello || !sawCount1 || !sawAuth {
		t.Errorf("%d socket entries; hello %v, count 1 %v, auth redacted %v: %+v", len(sockets), sawHello, sawCount1, sawAuth, sockets)
	}
	if hits := writtenBytes(t, srv).Hits([]string{secret}, []string{"socket secret"}); len(hits) > 0 {
		t.Errorf("the socket's secret reached the data directory:\n  %s", strings.Join(hits, "\n  "))
	}
}

// checkPopupPage checks the Terms popup was recorded as a page of its
// own: the step that opened it names its page id; the run switched to
// it, acted there and came back, each receipt saying which page it acted
// on; its document load, DOM, snapshots and frames carry its id; the
// player's timeline names the page of the steps taken on it.
func checkPopupPage(t *testing.T, base string, res recorder.Result, terms event.Receipt, shop string, evs []event.Envelope) {
	t.Helper()
	if terms.Effects == nil || len(terms.Effects.Pages) != 1 || terms.Effects.Pages[0].URL != shop+"/terms" || terms.Effects.Pages[0].Opener != "" {
		t.Fatalf("the Terms step's effects.pages: %+v", terms.Effects)
	}
	id := terms.Effects.Pages[0].ID
	if id == "" || terms.Page != "" {
		t.Errorf("popup page id %q; the Terms click acted on page %q, want the first", id, terms.Page)
	}
	var switches []event.Receipt
	onPopup := map[int]bool{}
	for _, e := range evs {
		if e.Kind == event.KindReceipt {
			rc := decode[event.Receipt](t, e)
			if rc.Action.Verb == "switch" {
				switches = append(switches, rc)
			}
			if rc.Page == id {
				onPopup[rc.Step] = true
			}
		}
	}
	if len(switches) != 2 || switches[0].Page != id || switches[0].Outcome != event.OutcomeDone || switches[1].Page != "" {
		t.Errorf("switch receipts %+v: want to %s and back to the first page", switches, id)
	}
	closeRC, _ := receiptNamed(t, evs, "click", "Close")
	if closeRC.Page != id || closeRC.Outcome != event.OutcomeDone {
		t.Errorf("the Close click: page %q %s %+v, want done on %s", closeRC.Page, closeRC.Outcome, closeRC.Error, id)
	}
	kinds := map[event.Kind]int{}
	popupDocs := 0
	for _, e := range evs {
		var p struct {
			Page    string `json:"page"`
			PageRef string `json:"pageref"`
		}
		_ = json.Unmarshal(e.Data, &p)
		if p.Page != id && p.PageRef != id {
			continue
		}
		kinds[e.Kind]++
		if e.Kind == event.KindHAR && e.Step != terms.Step && !onPopup[e.Step] {
			t.Errorf("a request of the popup at step %d, which acted elsewhere", e.Step)
		}
		if e.Kind == event.KindHAR && e.Step == terms.Step && decode[event.HAR](t, e).Request.URL == shop+"/terms" {
			popupDocs++
		}
	}
	// The popup waited at its start until the recorder had set it up, so
	// its document request is its own page's, in the step that opened it.
	if popupDocs != 1 {
		t.Errorf("the popup's document request is in the Terms step's HAR under page %s %d times, want once", id, popupDocs)
	}
	for _, k := range []event.Kind{event.KindHAR, event.KindDOM, event.KindSnapshot, event.KindFrame} {
		if kinds[k] == 0 {
			t.Errorf("no %s event carries the popup's page %s (%v)", k, id, kinds)
		}
	}
	// The player's timeline says which page a step acted on.
	var tl wire.Timeline
	getJSON(t, base+"/v1/recordings/"+res.ID+"/steps", &tl)
	for _, st := range tl.Steps {
		if onPopup[st.Step] && st.Action != "switch" && !strings.Contains(st.Target, "(page "+id+")") {
			t.Errorf("timeline step %d (on the popup) reads %q: the page is not named", st.Step, st.Target)
		}
	}
}

// keepProject is the project whose recordings keep downloads in
// TestDemoPopupAndDownload's policy.
const keepProject = "keep-downloads"

// checkKeptDownload records the passing flow under the policy that keeps
// downloads: the receipt's file names a CID, the recording serves that
// blob, and it is the PDF.
func checkKeptDownload(t *testing.T, base, shop string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := recorder.Record(ctx, recorder.Config{Chromium: testenv.RequireChromium(t), Project: keepProject},
		testenv.DemoFlow(t, "checkout-passes").Expand(shop), client.New(base))
	if err != nil || res.Verdict != "pass" {
		t.Fatalf("recording with downloads kept: %v, verdict %s %+v", err, res.Verdict, res.Failed)
	}
	indexed(t, base, res.ID, res.Total)
	evs := allEvents(t, base, res.ID)
	dl, _ := receiptNamed(t, evs, "click", "Download receipt")
	if dl.Effects == nil || len(dl.Effects.Files) != 1 {
		t.Fatalf("the download step's effects: %+v", dl.Effects)
	}
	f := dl.Effects.Files[0]
	pdf := demoapp.ReceiptPDF(strings.TrimSuffix(strings.TrimPrefix(f.Name, "receipt-"), ".pdf"), 4900)
	kept := 0
	for _, e := range evs {
		if e.Kind == event.KindDownload {
			if d := decode[event.Download](t, e); d.DataCID != f.CID || d.Name != f.Name || len(d.Data) != 0 {
				t.Errorf("download event %+v, want its bytes as blob %s", d, f.CID)
			}
			kept++
		}
	}
	resp, err := http.Get(base + "/v1/recordings/" + res.ID + "/blobs/" + f.CID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if kept != 1 || f.CID == "" || resp.StatusCode != http.StatusOK || !bytes.Equal(body, pdf) || blobs.SumString(body) != f.CID {
		t.Errorf("%d download events; file %+v; GET its blob: %d, %d bytes, the PDF %v", kept, f, resp.StatusCode, len(body), bytes.Equal(body, pdf))
	}
}
