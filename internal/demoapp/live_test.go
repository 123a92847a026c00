package demoapp

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReceiptDownloadsAPDF: the confirmation links the receipt, which is
// an attachment, a PDF whose cross-reference offsets point at its objects.
func TestReceiptDownloadsAPDF(t *testing.T) {
	s := newShopper(t, Options{})
	s.signIn()
	s.fillCart()
	id := s.pay().json(t)["order_id"].(string)
	conf := s.get("/orders/" + id)
	if !bytes.Contains(conf.body, []byte(`href="/orders/`+id+`/receipt.pdf"`)) {
		t.Fatalf("confirmation does not link the receipt: %s", conf.body)
	}
	a := s.get("/orders/" + id + "/receipt.pdf")
	if a.status != 200 || a.header.Get("Content-Type") != "application/pdf" ||
		a.header.Get("Content-Disposition") != `attachment; filename="receipt-`+id+`.pdf"` {
		t.Fatalf("receipt: %d %v", a.status, a.header)
	}
	if !bytes.Equal(a.body, ReceiptPDF(id, 4900)) {
		t.Fatal("the served receipt is not ReceiptPDF's")
	}
	checkPDF(t, a.body)
	if b := s.get("/orders/ord_nope/receipt.pdf"); b.status != 404 {
		t.Errorf("unknown order's receipt: %d", b.status)
	}
}

// checkPDF checks the structure a PDF reader relies on: the header, the
// startxref offset at the xref table, each entry's offset at "N 0 obj".
func checkPDF(t *testing.T, b []byte) {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("%PDF-1.4\n")) || !bytes.HasSuffix(b, []byte("%%EOF\n")) {
		t.Fatalf("not a PDF: %q", b)
	}
	m := regexp.MustCompile(`startxref\n(\d+)\n`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no startxref")
	}
	x, _ := strconv.Atoi(string(m[1]))
	if !bytes.HasPrefix(b[x:], []byte("xref\n0 6\n")) {
		t.Fatalf("startxref %d does not point at the xref table", x)
	}
	entries := strings.Split(string(b[x:]), "\n")[3:8]
	for i, e := range entries {
		off, _ := strconv.Atoi(e[:10])
		if want := strconv.Itoa(i+1) + " 0 obj\n"; !bytes.HasPrefix(b[off:], []byte(want)) {
			t.Errorf("xref entry %d (%d) points at %q", i+1, off, b[off:min(off+10, len(b))])
		}
	}
	stream := regexp.MustCompile(`(?s)/Length (\d+) >>\nstream\n(.*?)\nendstream`).FindSubmatch(b)
	if n, _ := strconv.Atoi(string(stream[1])); n != len(stream[2]) {
		t.Errorf("stream /Length %d, stream has %d bytes", n, len(stream[2]))
	}
}

func TestTermsPageAndLink(t *testing.T) {
	s := newShopper(t, Options{})
	s.signIn()
	if a := s.get("/product"); !bytes.Contains(a.body, []byte(`id="terms"`)) || !bytes.Contains(a.body, []byte(`id="cart-badge"`)) {
		t.Fatalf("the product page has no Terms link or cart badge: %s", a.body)
	}
	if a := s.get("/terms"); a.status != 200 || !bytes.Contains(a.body, []byte("Terms of sale")) {
		t.Fatalf("terms: %d", a.status)
	}
}

// wsClient is a minimal RFC 6455 client: enough to test the server from
// the other side of the wire.
type wsClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialCart(t *testing.T, s *shopper) *wsClient {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req, _ := http.NewRequest("GET", s.base+"/ws/cart", nil)
	for _, ck := range s.c.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Version", "13")
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 6455 §1.3's worked example of the accept value.
	if res.StatusCode != 101 || res.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("handshake: %d %v", res.StatusCode, res.Header)
	}
	return &wsClient{c, br}
}

func (w *wsClient) recv(t *testing.T) string {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		t.Fatal(err)
	}
	if h[0] != 0x81 || h[1]&0x80 != 0 {
		t.Fatalf("frame header %x: want a final, unmasked text frame", h)
	}
	p := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(w.br, p); err != nil {
		t.Fatal(err)
	}
	return string(p)
}

func (w *wsClient) send(t *testing.T, text string) {
	t.Helper()
	mask := []byte{1, 2, 3, 4}
	f := append([]byte{0x81, 0x80 | byte(len(text))}, mask...)
	for i := range len(text) {
		f = append(f, text[i]^mask[i%4])
	}
	if _, err := w.c.Write(f); err != nil {
		t.Fatal(err)
	}
}

func TestCartSocket(t *testing.T) {
	s := newShopper(t, Options{SocketExtra: `{"type":"promo"}`})
	if a := s.get("/ws/cart"); a.status != 401 {
		t.Fatalf("socket without a session: %d", a.status)
	}
	s.signIn()
	if a := s.get("/ws/cart"); a.status != 400 || a.json(t)["error"] != "NOT_A_WEBSOCKET" {
		t.Fatalf("plain GET: %d %s", a.status, a.body)
	}
	ws := dialCart(t, s)
	if m := ws.recv(t); m != `{"count":0,"type":"cart"}` {
		t.Fatalf("first message %s", m)
	}
	if m := ws.recv(t); m != `{"type":"promo"}` {
		t.Fatalf("extra message %s", m)
	}
	ws.send(t, `{"type":"hello","page":"/product"}`)
	s.fillCart()
	if m := ws.recv(t); m != `{"count":1,"type":"cart"}` {
		t.Fatalf("after adding: %s", m)
	}
	// A ping is answered with a pong carrying its payload.
	_, _ = ws.c.Write([]byte{0x89, 0x82, 0, 0, 0, 0, 'h', 'i'})
	var h [4]byte
	if _, err := io.ReadFull(ws.br, h[:]); err != nil || h != [4]byte{0x8a, 2, 'h', 'i'} {
		t.Fatalf("pong %x %v", h, err)
	}
}
