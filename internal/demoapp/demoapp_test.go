package demoapp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// shopper is a browser-like client of one storefront: it keeps cookies and
// does not follow redirects, so tests see them.
type shopper struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newShopper(t *testing.T, opts Options) *shopper {
	t.Helper()
	srv := httptest.NewServer(Handler(opts))
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &shopper{t: t, base: srv.URL, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("not JSON (%d): %s", a.status, a.body)
	}
	return m
}

func (s *shopper) do(method, path, ctype, body string) answer {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, b}
}

func (s *shopper) post(path string, v any) answer {
	s.t.Helper()
	b, _ := json.Marshal(v)
	return s.do("POST", path, "application/json", string(b))
}

func (s *shopper) get(path string) answer { s.t.Helper(); return s.do("GET", path, "", "") }

func (s *shopper) signIn() {
	s.t.Helper()
	if a := s.post("/api/signin", map[string]string{"email": Email, "password": Password}); a.status != 200 {
		s.t.Fatalf("sign-in: %d %s", a.status, a.body)
	}
}

func (s *shopper) fillCart() {
	s.t.Helper()
	if a := s.post("/api/cart", map[string]any{"sku": ProductSKU, "qty": 1}); a.status != http.StatusCreated {
		s.t.Fatalf("add to cart: %d %s", a.status, a.body)
	}
}

func (s *shopper) pay() answer {
	s.t.Helper()
	return s.post("/api/checkout", map[string]string{"email": Email, "card": Card})
}

func TestSigninSetsSessionCookie(t *testing.T) {
	s := newShopper(t, Options{})
	if a := s.post("/api/signin", map[string]string{"email": Email, "password": "wrong"}); a.status != http.StatusUnauthorized ||
		a.json(t)["error"] != "BAD_CREDENTIALS" || len(a.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("wrong password: %d %v %s", a.status, a.header, a.body)
	}
	var values []string
	for range 2 {
		a := s.post("/api/signin", map[string]string{"email": Email, "password": Password})
		if a.status != 200 {
			t.Fatalf("sign-in: %d %s", a.status, a.body)
		}
		res := http.Response{Header: a.header}
		cs := res.Cookies()
		if len(cs) != 1 || cs[0].Name != SessionCookie || !cs[0].HttpOnly || cs[0].Path != "/" {
			t.Fatalf("cookies: %+v", cs)
		}
		if !regexp.MustCompile(`^[0-9a-f]{48}$`).MatchString(cs[0].Value) {
			t.Fatalf("session value is not 24 random bytes in hex")
		}
		if bytes.Contains(a.body, []byte(cs[0].Value)) {
			t.Fatal("the session value is echoed in the body")
		}
		values = append(values, cs[0].Value)
	}
	if values[0] == values[1] {
		t.Fatal("two sign-ins got the same session value")
	}
	if a := s.get("/product"); a.status != 200 || !bytes.Contains(a.body, []byte("Add to cart")) {
		t.Fatalf("product page with a session: %d", a.status)
	}
}

func TestPagesNeedSession(t *testing.T) {
	s := newShopper(t, Options{})
	for _, p := range []string{"/", "/product", "/checkout", "/orders/ord_1"} {
		if a := s.get(p); a.status != http.StatusSeeOther || a.header.Get("Location") != "/signin" {
			t.Errorf("GET %s without a session: %d %q", p, a.status, a.header.Get("Location"))
		}
	}
	if a := s.post("/api/cart", map[string]any{"sku": ProductSKU, "qty": 1}); a.status != 401 || a.json(t)["error"] != "UNAUTHENTICATED" {
		t.Errorf("API without a session: %d %s", a.status, a.body)
	}
	if a := s.get("/signin"); a.status != 200 {
		t.Errorf("sign-in page: %d", a.status)
	}
}

func TestCheckoutPassesWithoutGiftCard(t *testing.T) {
	for _, bug := range []bool{false, true} {
		s := newShopper(t, Options{GiftCardBug: bug})
		s.signIn()
		s.fillCart()
		a := s.pay()
		if a.status != 200 {
			t.Fatalf("bug=%v: checkout: %d %s", bug, a.status, a.body)
		}
		m := a.json(t)
		id, _ := m["order_id"].(string)
		if !strings.HasPrefix(id, "ord_") || m["next"] != "/orders/"+id || m["total_cents"] != 4900.0 {
			t.Fatalf("checkout answer: %s", a.body)
		}
		if c := s.get("/orders/" + id); c.status != 200 || !bytes.Contains(c.body, []byte("Thank you for your order")) {
			t.Fatalf("confirmation: %d", c.status)
		}
		if l := s.get("/api/orders/last").json(t); l["state"] != "paid" || l["http_status"] != 200.0 {
			t.Fatalf("last order: %v", l)
		}
		// The cart is empty after an order.
		if again := s.pay(); again.status != http.StatusConflict || again.json(t)["error"] != "CART_EMPTY" {
			t.Fatalf("second checkout: %d %s", again.status, again.body)
		}
	}
}

func TestGiftCardBug(t *testing.T) {
	for _, bug := range []bool{true, false} {
		s := newShopper(t, Options{GiftCardBug: bug})
		s.signIn()
		s.fillCart()
		g := s.post("/api/gift", map[string]string{"code": GiftCode})
		if g.status != 200 || g.json(t)["total_cents"] != 3900.0 {
			t.Fatalf("apply gift card: %d %s", g.status, g.body)
		}
		a := s.pay()
		last := s.get("/api/orders/last").json(t)
		if bug {
			if a.status != http.StatusInternalServerError || strings.TrimSpace(string(a.body)) != `{"error":"GIFT_CARD_STATE"}` {
				t.Fatalf("with the bug: %d %s", a.status, a.body)
			}
			if last["state"] != "failed" || last["http_status"] != 500.0 || last["error"] != "GIFT_CARD_STATE" {
				t.Fatalf("last order with the bug: %v", last)
			}
			// The state persists: paying again fails again.
			if again := s.pay(); again.status != 500 {
				t.Fatalf("second attempt: %d", again.status)
			}
			continue
		}
		if a.status != 200 || a.json(t)["total_cents"] != 3900.0 {
			t.Fatalf("without the bug: %d %s", a.status, a.body)
		}
		if last["state"] != "paid" {
			t.Fatalf("last order without the bug: %v", last)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	s := newShopper(t, Options{})
	s.signIn()
	cases := []struct {
		name, path, ctype, body string
		status                  int
		code                    string
	}{
		{"gift on an empty cart", "/api/gift", "application/json", `{"code":"GIFT-2025"}`, 409, "CART_EMPTY"},
		{"pay an empty cart", "/api/checkout", "application/json", `{"email":"a@b.example","card":"4242424242424242"}`, 409, "CART_EMPTY"},
		{"unknown product", "/api/cart", "application/json", `{"sku":"NOPE","qty":1}`, 404, "UNKNOWN_PRODUCT"},
		{"zero quantity", "/api/cart", "application/json", `{"sku":"KETTLE-1","qty":0}`, 422, "BAD_QUANTITY"},
		{"not JSON", "/api/cart", "application/json", `{"sku":`, 400, "BAD_REQUEST"},
		{"form body", "/api/cart", "application/x-www-form-urlencoded", `sku=KETTLE-1`, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"add", "/api/cart", "application/json", `{"sku":"KETTLE-1","qty":2}`, 201, ""},
		{"empty gift code", "/api/gift", "application/json", `{"code":" "}`, 422, "MISSING_CODE"},
		{"unknown gift code", "/api/gift", "application/json", `{"code":"GIFT-1999"}`, 404, "GIFT_CARD_NOT_FOUND"},
		{"bad card", "/api/checkout", "application/json", `{"email":"a@b.example","card":"4242 4242 4242 4241"}`, 422, "INVALID_CARD"},
		{"bad email", "/api/checkout", "application/json", `{"email":"nobody","card":"4242424242424242"}`, 422, "INVALID_EMAIL"},
		{"unknown API", "/api/nothing", "application/json", `{}`, 404, "NOT_FOUND"},
		{"no order yet", "/api/orders/last", "", "", 404, "NO_ORDER"},
	}
	for _, c := range cases {
		method := "POST"
		if c.body == "" {
			method = "GET"
		}
		a := s.do(method, c.path, c.ctype, c.body)
		if a.status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, a.status, c.status, a.body)
			continue
		}
		if c.code != "" && a.json(t)["error"] != c.code {
			t.Errorf("%s: %s, want error %s", c.name, a.body, c.code)
		}
	}
}

// TestPagesAreAccessible: every input has a label, the checkout has the
// controls the flows target, and nothing is loaded from elsewhere.
func TestPagesAreAccessible(t *testing.T) {
	s := newShopper(t, Options{})
	signin := s.get("/signin")
	s.signIn()
	s.fillCart()
	checkout := s.get("/checkout")
	// The card form is the payment provider's, framed from its origin (the
	// storefront's own here: Handler alone has no second port).
	frameSrc := regexp.MustCompile(`<iframe id="card-frame" class="cardframe" title="Payment card" src="([^"]+)"`).FindSubmatch(checkout.body)
	if frameSrc == nil {
		t.Fatalf("the checkout page has no card frame:\n%s", checkout.body)
	}
	src := strings.ReplaceAll(string(frameSrc[1]), "&amp;", "&")
	if want := s.base + "/pay/card?parent=" + url.QueryEscape(s.base); src != want {
		t.Errorf("card frame src %q, want %q", src, want)
	}
	if csp := checkout.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-src 'self' "+s.base) {
		t.Errorf("checkout CSP %q does not allow the provider's frame", csp)
	}
	card := s.get(strings.TrimPrefix(src, s.base))
	if csp := card.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors "+s.base) {
		t.Errorf("card frame CSP %q: only the storefront may frame it", csp)
	}
	if a := s.get("/pay/card?parent=https://evil.example"); a.status != http.StatusBadRequest {
		t.Errorf("a card frame for a foreign parent: %d, want 400", a.status)
	}
	body := regexp.MustCompile(`<iframe[^>]*>`).ReplaceAll(checkout.body, nil)
	pages := map[string][]byte{"/signin": signin.body, "/product": s.get("/product").body, "/checkout": body, "/pay/card": card.body}
	inputID := regexp.MustCompile(`<input id="([^"]+)"`)
	for path, body := range pages {
		for _, m := range inputID.FindAllSubmatch(body, -1) {
			if !bytes.Contains(body, []byte(`<label for="`+string(m[1])+`">`)) {
				t.Errorf("%s: input #%s has no label", path, m[1])
			}
		}
		if regexp.MustCompile(`(src|href)="(https?:)?//`).Match(body) {
			t.Errorf("%s loads something from another origin", path)
		}
	}
	co := string(pages["/checkout"])
	for _, want := range []string{`id="gift-code"`, `>Apply</button>`, `>Pay</button>`,
		`id="pay-error" class="error" role="alert"`} {
		if !strings.Contains(co, want) {
			t.Errorf("checkout page lacks %s", want)
		}
	}
	for _, want := range []string{`autocomplete="cc-number"`, `<label for="card-number">Card number</label>`, `src="/static/pay.js"`} {
		if !strings.Contains(string(card.body), want) {
			t.Errorf("card frame lacks %s", want)
		}
	}
	if !strings.Contains(co, `<script src="/static/app.min.js" defer></script>`) {
		t.Error("the page does not load app.min.js")
	}
	js := s.get("/static/app.min.js")
	if js.status != 200 || !strings.Contains(string(js.body), `console.error("checkout failed: "+`) ||
		!strings.HasSuffix(string(js.body), "\n//# sourceMappingURL=app.min.js.map\n") {
		t.Errorf("app.min.js: %d", js.status)
	}
	if m := s.get("/static/app.min.js.map"); m.status != 200 || !bytes.HasPrefix(m.body, []byte("{")) {
		t.Errorf("app.min.js.map: %d", m.status)
	}
	if src := s.get("/static/src/app.js"); src.status != 200 || !strings.Contains(string(src.body), `console.error("checkout failed: " + code)`) {
		t.Errorf("src/app.js: %d", src.status)
	}
	if csp := js.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP: %q", csp)
	}
}

func TestStartServesLoopbackOnly(t *testing.T) {
	if _, err := Start(Options{Addr: "0.0.0.0:0"}); err == nil {
		t.Fatal("Start listened on every interface")
	}
	srv, err := Start(Options{GiftCardBug: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %s", srv.URL())
	}
	res, err := http.Get(srv.URL() + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /signin: %d", res.StatusCode)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(srv.URL() + "/signin"); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestShippedFlowsAreEmbedded(t *testing.T) {
	names := FlowNames()
	if strings.Join(names, ",") != "checkout-passes,checkout-with-gift-card-fails" {
		t.Fatalf("flows: %v", names)
	}
	for _, n := range names {
		file, data, err := FlowFile(n)
		if err != nil || file != n+".yaml" || !bytes.Contains(data, []byte("name: "+n)) {
			t.Errorf("%s: %s %v", n, file, err)
		}
	}
}

// TestCardTokenPays: the provider's token stands for the card once; a
// spent or unknown token is no card.
func TestCardTokenPays(t *testing.T) {
	s := newShopper(t, Options{})
	s.signIn()
	if a := s.post("/api/tokens", map[string]string{"card": "4242 4242 4242 4241"}); a.status != 422 {
		t.Errorf("a card failing Luhn got a token: %d %s", a.status, a.body)
	}
	tok := s.post("/api/tokens", map[string]string{"card": Card})
	if tok.status != 201 {
		t.Fatalf("token: %d %s", tok.status, tok.body)
	}
	token, _ := tok.json(t)["token"].(string)
	s.fillCart()
	if a := s.post("/api/checkout", map[string]string{"email": Email, "token": token}); a.status != 200 {
		t.Fatalf("paying with the token: %d %s", a.status, a.body)
	}
	s.fillCart()
	if a := s.post("/api/checkout", map[string]string{"email": Email, "token": token}); a.status != 422 || a.json(t)["error"] != "INVALID_CARD" {
		t.Errorf("a spent token paid again: %d %s", a.status, a.body)
	}
}
