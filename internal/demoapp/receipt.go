package demoapp

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
)

// receipt serves a paid order's receipt as a PDF attachment, so the browser
// downloads it rather than showing it.
func (s *shop) receipt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	ss := s.session(r)
	var o *attempt
	if ss != nil && ss.orders[id] != nil {
		c := *ss.orders[id]
		o = &c
	}
	s.mu.Unlock()
	if o == nil {
		writeJSON(w, http.StatusNotFound, errBody("NO_ORDER"))
		return
	}
	w.Header().Set("Content-Type", "application/pdf")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="receipt-%s.pdf"`, o.ID))
	_, _ = w.Write(ReceiptPDF(o.ID, o.TotalCents))
}

// ReceiptPDF is the receipt of order id: a valid one-page PDF 1.4 (header,
// four objects, a cross-reference table with their byte offsets, trailer).
// It is deterministic, so a test can compute the sha256 a download must have.
func ReceiptPDF(id string, totalCents int) []byte {
	esc := strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`)
	text := fmt.Sprintf("BT /F1 14 Tf 72 720 Td (Acme Outfitters receipt: order %s, paid %s) Tj ET",
		esc.Replace(id), money(totalCents))
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(text), text),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}
