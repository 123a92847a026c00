package recorder_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
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
// download is described by name, size, MIME type and the PDF's sha256.
func TestDemoPopupAndDownload(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	shop, _ := testenv.Shop(t, demoapp.Options{})
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
}
