package redact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// TestDownloadKeptOnlyByPolicy: a download event's bytes are dropped under
// the default plan, kept as sent when the plan keeps downloads, and dropped
// when its name carries a secret (the bytes cannot be rewritten around a
// redacted name).
func TestDownloadKeptOnlyByPolicy(t *testing.T) {
	pdf := []byte("%PDF-1.4 a receipt")
	sum := sha256.Sum256(pdf)
	dl := func(name string) *event.Decoded {
		data, _ := json.Marshal(event.Download{Name: name, MIME: "application/pdf", SHA256: hex.EncodeToString(sum[:]), Data: pdf})
		d, err := event.Decode(event.Envelope{Seq: 1, TS: 1, Step: 1, Kind: event.KindDownload, Data: data}, event.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	keep := testPlan()
	keep.KeepDownloads = true
	for _, c := range []struct {
		what     string
		keep     bool
		name     string
		wantDrop bool
	}{
		{"default plan", false, "receipt.pdf", true},
		{"keep_downloads", true, "receipt.pdf", false},
		{"keep_downloads, a secret in the name", true, "receipt-" + tGHP + ".pdf", true},
	} {
		p := testPlan()
		if c.keep {
			p = keep
		}
		r, err := New(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Redact(dl(c.name))
		if err != nil || res.Drop != c.wantDrop || res.Data != nil || res.Image != nil || (c.wantDrop && len(res.Findings) == 0) {
			t.Errorf("%s: %+v, %v; want drop %v", c.what, res, err, c.wantDrop)
		}
	}
}
