// Package demoapp is a small storefront served on loopback, for recording
// real browser runs against something that behaves like a shop: a sign-in
// with a password, a product page, a checkout with email, card number and
// gift card, and an order confirmation. Everything it serves is embedded
// (no CDN, no external asset), its JSON APIs answer with the status codes
// a real shop would, and every control has an accessible name, so a
// recorder can target it by role and name.
//
// Options.GiftCardBug reproduces a real bug: with a gift card applied,
// POST /api/checkout answers 500 {"error":"GIFT_CARD_STATE"}.
//
// The routes:
//
//	GET  /                  303 to /product when signed in, else to /signin
//	GET  /signin            the sign-in page
//	POST /api/signin        {"email","password"} → 200 and the session cookie | 401 BAD_CREDENTIALS
//	POST /api/signout       204, the session ends
//	GET  /product           the product page (303 to /signin without a session)
//	GET  /api/cart          the cart
//	POST /api/cart          {"sku","qty"} → 201 the cart | 404 UNKNOWN_PRODUCT | 422 BAD_QUANTITY
//	GET  /checkout          the checkout page
//	POST /api/gift          {"code"} → 200 | 404 GIFT_CARD_NOT_FOUND | 409 CART_EMPTY | 422 MISSING_CODE
//	POST /api/checkout      {"email","token"} (or "card") → 200 {"order_id","next"} | 409 CART_EMPTY | 422 INVALID_EMAIL, INVALID_CARD | 500 GIFT_CARD_STATE
//	GET  /api/orders/last   the last checkout attempt: {"id","state","http_status","error","total_cents"}
//	GET  /orders/{id}       the order confirmation, with a "Download receipt" link
//	GET  /orders/{id}/receipt.pdf  the paid order's receipt, a one-page PDF, as an attachment
//	GET  /terms             the terms of sale (the "Terms" link opens it in a popup)
//	GET  /ws/cart           a WebSocket: the server sends {"type":"cart","count":N} on
//	                        connect and whenever the cart changes; the page sends
//	                        {"type":"hello","page":PATH} once open
//	GET  /pay/card, POST /api/tokens  the payment provider's card frame (payments.go)
//	GET  /static/…          app.min.js (with app.min.js.map), src/app.js, live.js, pay.js, style.css
//
// The pages load static/app.min.js, minified by esbuild from the readable
// static/src/app.js with a source map whose "sources" is src/app.js, served
// at /static/src/app.js: a console stack recorded on the storefront maps
// back to the source it was written in. Regenerate both with go generate
// after editing static/src/app.js (it needs npx, from Node.js).
//
// static/live.js (the cart badge's socket and the Terms popup) is served
// as written, outside the minified bundle, so it needs no regeneration.
//
// Options.FrontendOnly serves the pages and assets alone: every /api/
// route answers 503 {"error":"FRONTEND_ONLY"}.
//
// Every API answers 401 UNAUTHENTICATED without a session, 400 BAD_REQUEST
// for a body that is not JSON and 415 UNSUPPORTED_MEDIA_TYPE for a body that
// is not sent as application/json. Errors are {"error": "CODE"}.
package demoapp

//go:generate npx --yes esbuild@0.28.2 static/src/app.js --minify --sourcemap --outfile=static/app.min.js

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The demo account and the values the shipped flows type.
const (
	// Email and Password sign in; any other pair is refused.
	Email    = "buyer@acme.example"
	Password = "correct-horse-battery-staple"
	// Card is a test card number that passes the Luhn check.
	Card = "4242 4242 4242 4242"
	// GiftCode is the gift card the shop accepts, worth GiftCents.
	GiftCode  = "GIFT-2025"
	GiftCents = 1000
	// SessionCookie names the session cookie (HttpOnly, random value).
	SessionCookie = "shop_session"
	// ProductSKU is the one product on sale.
	ProductSKU = "KETTLE-1"
)

// Options configure the storefront.
type Options struct {
	// GiftCardBug makes POST /api/checkout fail with 500 GIFT_CARD_STATE
	// once a gift card was applied to the cart.
	GiftCardBug bool
	// Addr is the address to listen on (default 127.0.0.1:0, a free port
	// on loopback). Start refuses an address that is not loopback.
	Addr string
	// FrontendOnly serves the pages and static assets alone: every /api/
	// route answers 503 {"error":"FRONTEND_ONLY"}, and the pages render
	// without a session, as the demo buyer sees them with the kettle in
	// the cart (/orders/{id} confirms order id). A run whose API answers
	// come from a recording proves with it that none came from here.
	FrontendOnly bool
	// SocketExtra, when set, is one more text message the cart socket
	// sends after the first count: tests use it for a run whose socket
	// differs, or that carries a secret.
	SocketExtra string
	// PaymentOrigin is the origin the checkout loads the card frame from
	// (Start sets it to a second loopback port of its own); "" loads it
	// from the storefront's own origin.
	PaymentOrigin string
	// CrossSitePayment makes Start name the payment provider's port
	// http://localhost:PORT while the storefront is http://127.0.0.1:PORT
	// (both loopback): another site to the browser, as a real payment
	// provider is, so Chromium renders the card frame in a process of its
	// own (an out-of-process iframe), reachable over CDP only through a
	// session of the frame's own. Without it the provider is another port
	// of the same host: another origin of the same site, in the page's
	// process.
	CrossSitePayment bool
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{"money": money}).ParseFS(templateFS, "templates/*.html"))

type product struct {
	SKU, Name, Blurb string
	Cents            int
}

var catalog = map[string]product{
	ProductSKU: {SKU: ProductSKU, Name: "Trail Kettle",
		Blurb: "A 1.2 litre titanium kettle that boils water on any camp stove.", Cents: 4900},
}

type line struct {
	SKU   string `json:"sku"`
	Name  string `json:"name"`
	Qty   int    `json:"qty"`
	Cents int    `json:"cents"`
}

type attempt struct {
	ID         string `json:"id"`
	State      string `json:"state"` // paid or failed
	HTTPStatus int    `json:"http_status"`
	Error      string `json:"error,omitempty"`
	TotalCents int    `json:"total_cents"`
}

type session struct {
	email  string
	cart   []line
	gift   bool // a gift card is applied to the cart
	last   *attempt
	orders map[string]*attempt
}

func (s *session) subtotal() int {
	t := 0
	for _, l := range s.cart {
		t += l.Qty * l.Cents
	}
	return t
}

func (s *session) total() int {
	t := s.subtotal()
	if s.gift {
		t -= GiftCents
	}
	return max(t, 0)
}

func (s *session) items() int {
	n := 0
	for _, l := range s.cart {
		n += l.Qty
	}
	return n
}

type shop struct {
	opts     Options
	mu       sync.Mutex
	sessions map[string]*session
	sockets  map[*session]map[*wsConn]bool // the cart sockets open, by session
	tokens   map[string]string             // the payment provider's unspent tokens → card
}

// Handler returns the storefront's handler (for tests that serve it with
// net/http/httptest). Each Handler has its own sessions.
func Handler(opts Options) http.Handler {
	s := &shop{opts: opts, sessions: map[string]*session{}, sockets: map[*session]map[*wsConn]bool{},
		tokens: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.root)
	mux.HandleFunc("GET /signin", s.signinPage)
	mux.HandleFunc("GET /product", s.page("product"))
	mux.HandleFunc("GET /checkout", s.page("checkout"))
	mux.HandleFunc("GET /pay/card", s.cardFrame)
	mux.HandleFunc("GET /orders/{id}", s.orderPage)
	mux.HandleFunc("GET /orders/{id}/receipt.pdf", s.receipt)
	mux.HandleFunc("GET /terms", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, http.StatusOK, "terms", view{Title: "Terms of sale"})
	})
	if !opts.FrontendOnly {
		mux.HandleFunc("GET /ws/cart", s.cartSocket)
	}
	if !opts.FrontendOnly {
		// Frontend only, every /api/ path falls through to the 503 below.
		mux.HandleFunc("POST /api/signin", s.apiSignin)
		mux.HandleFunc("POST /api/signout", s.apiSignout)
		mux.HandleFunc("GET /api/cart", s.api(s.apiCart))
		mux.HandleFunc("POST /api/cart", s.api(s.apiAddToCart))
		mux.HandleFunc("POST /api/gift", s.api(s.apiGift))
		mux.HandleFunc("POST /api/checkout", s.api(s.apiCheckout))
		mux.HandleFunc("POST /api/tokens", s.apiToken)
		mux.HandleFunc("GET /api/orders/last", s.api(s.apiLastOrder))
	}
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			if opts.FrontendOnly {
				writeJSON(w, http.StatusServiceUnavailable, errBody("FRONTEND_ONLY"))
				return
			}
			writeJSON(w, http.StatusNotFound, errBody("NOT_FOUND"))
			return
		}
		s.render(w, http.StatusNotFound, "notfound", view{Title: "Not found"})
	})
	return headers(mux)
}

// headers sets what every answer carries: nothing is cached, nothing is
// loaded from elsewhere.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// Server is a storefront listening on loopback.
type Server struct {
	url    string
	payURL string
	srv    *http.Server
	pay    *http.Server // the payment provider's origin
	done   chan struct{}
}

// Start serves the storefront on opts.Addr (default a free port on
// 127.0.0.1) until Close.
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("demoapp: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("demoapp: refusing to listen on %s: the demo storefront serves loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demoapp: %w", err)
	}
	// The payment provider: the same handler on a second loopback port, a
	// different origin to the browser.
	payLn, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("demoapp: the payment provider's port: %w", err)
	}
	opts.PaymentOrigin = "http://" + payLn.Addr().String()
	if opts.CrossSitePayment {
		// The listener is on loopback; localhost names it for the browser,
		// which resolves localhost to loopback itself.
		opts.PaymentOrigin = "http://localhost:" + strconv.Itoa(payLn.Addr().(*net.TCPAddr).Port)
	}
	h := Handler(opts)
	s := &Server{url: "http://" + ln.Addr().String(), payURL: opts.PaymentOrigin, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		pay: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = s.srv.Serve(ln) }()
	go func() { defer wg.Done(); _ = s.pay.Serve(payLn) }()
	go func() { wg.Wait(); close(s.done) }()
	return s, nil
}

// PaymentURL is the payment provider's origin (the card frame's).
func (s *Server) PaymentURL() string { return s.payURL }

// URL is the storefront's base URL, such as http://127.0.0.1:41234 (no
// trailing slash).
func (s *Server) URL() string { return s.url }

// Close stops the server, waiting up to 5 s for requests in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for _, srv := range []*http.Server{s.srv, s.pay} {
		if e := srv.Shutdown(ctx); e != nil {
			err = errors.Join(err, e, srv.Close())
		}
	}
	<-s.done
	return err
}

// view is what a page template gets.
type view struct {
	Title    string
	Email    string // the signed-in user, "" when signed out
	Product  product
	Cart     []line
	Items    int
	Subtotal int
	Total    int
	Gift     bool
	Order    *attempt
	// CardFrame is the payment provider's card form the checkout frames;
	// Parent is the origin the card form answers (the card frame's page).
	CardFrame string
	Parent    string
}

func (s *shop) render(w http.ResponseWriter, status int, name string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, v); err != nil {
		// The header is out; all that can be done is to stop.
		_, _ = io.WriteString(w, "<p>template error</p>")
	}
}

// session returns the request's session, or nil. Frontend only, every
// page request has the fixture session (see Options.FrontendOnly).
func (s *shop) session(r *http.Request) *session {
	if s.opts.FrontendOnly {
		return frontendSession(r.PathValue("id"))
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	return s.sessions[c.Value]
}

// frontendSession is the state a frontend-only page renders: the demo
// buyer, the kettle in the cart and, when orderID is set, that order paid.
func frontendSession(orderID string) *session {
	p := catalog[ProductSKU]
	ss := &session{email: Email, cart: []line{{SKU: p.SKU, Name: p.Name, Qty: 1, Cents: p.Cents}}, orders: map[string]*attempt{}}
	if orderID != "" {
		ss.orders[orderID] = &attempt{ID: orderID, State: "paid", HTTPStatus: http.StatusOK, TotalCents: ss.total()}
	}
	return ss
}

func (s *shop) root(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ss := s.session(r)
	s.mu.Unlock()
	if ss != nil {
		http.Redirect(w, r, "/product", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func (s *shop) signinPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "signin", view{Title: "Sign in"})
}

// page serves a page that needs a session: without one, 303 to /signin.
func (s *shop) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ss := s.session(r)
		var v view
		if ss != nil {
			v = s.viewOf(ss)
		}
		s.mu.Unlock()
		if ss == nil {
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		v.Title = map[string]string{"product": catalog[ProductSKU].Name, "checkout": "Checkout"}[name]
		if name == "checkout" {
			self := "http://" + r.Host
			pay := s.opts.PaymentOrigin
			if pay == "" {
				pay = self
			}
			v.CardFrame = pay + "/pay/card?parent=" + url.QueryEscape(self)
			w.Header().Set("Content-Security-Policy", checkoutCSP(pay))
		}
		s.render(w, http.StatusOK, name, v)
	}
}

func (s *shop) viewOf(ss *session) view {
	return view{Email: ss.email, Product: catalog[ProductSKU], Cart: append([]line(nil), ss.cart...),
		Items: ss.items(), Subtotal: ss.subtotal(), Total: ss.total(), Gift: ss.gift}
}

func (s *shop) orderPage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ss := s.session(r)
	var v view
	if ss != nil {
		v = s.viewOf(ss)
		if o := ss.orders[r.PathValue("id")]; o != nil {
			c := *o
			v.Order = &c
		}
	}
	s.mu.Unlock()
	switch {
	case ss == nil:
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
	case v.Order == nil:
		s.render(w, http.StatusNotFound, "notfound", view{Title: "Not found", Email: v.Email})
	default:
		v.Title = "Order confirmed"
		s.render(w, http.StatusOK, "confirmation", v)
	}
}

// apiError is an API answer other than success.
type apiError struct {
	status int
	code   string
}

func (e *apiError) Error() string { return e.code }

func fail(status int, code string) *apiError { return &apiError{status, code} }

func errBody(code string) map[string]string { return map[string]string{"error": code} }

// api wraps a JSON handler that needs a session. The handler runs under
// the shop's lock.
func (s *shop) api(h func(r *http.Request, ss *session) (int, any, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ss := s.session(r)
		var (
			status int
			body   any
			aerr   *apiError
		)
		if ss == nil {
			aerr = fail(http.StatusUnauthorized, "UNAUTHENTICATED")
		} else {
			status, body, aerr = h(r, ss)
		}
		s.mu.Unlock()
		if aerr != nil {
			writeJSON(w, aerr.status, errBody(aerr.code))
			return
		}
		writeJSON(w, status, body)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON request body into v.
func decode(r *http.Request, v any) *apiError {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fail(http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE")
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	if err := dec.Decode(v); err != nil {
		return fail(http.StatusBadRequest, "BAD_REQUEST")
	}
	return nil
}

func (s *shop) apiSignin(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	if e := decode(r, &req); e != nil {
		writeJSON(w, e.status, errBody(e.code))
		return
	}
	if strings.TrimSpace(req.Email) == "" || req.Password == "" {
		writeJSON(w, http.StatusUnprocessableEntity, errBody("MISSING_CREDENTIALS"))
		return
	}
	if !strings.EqualFold(strings.TrimSpace(req.Email), Email) || req.Password != Password {
		writeJSON(w, http.StatusUnauthorized, errBody("BAD_CREDENTIALS"))
		return
	}
	token := randomHex(24)
	s.mu.Lock()
	s.sessions[token] = &session{email: Email, orders: map[string]*attempt{}}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode})
	writeJSON(w, http.StatusOK, map[string]string{"email": Email, "next": "/product"})
}

func (s *shop) apiSignout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

type cartBody struct {
	Items      []line `json:"items"`
	Count      int    `json:"count"`
	Subtotal   int    `json:"subtotal_cents"`
	Discount   int    `json:"discount_cents"`
	TotalCents int    `json:"total_cents"`
}

func cartOf(ss *session) cartBody {
	b := cartBody{Items: append([]line{}, ss.cart...), Count: ss.items(), Subtotal: ss.subtotal(), TotalCents: ss.total()}
	b.Discount = b.Subtotal - b.TotalCents
	return b
}

func (s *shop) apiCart(r *http.Request, ss *session) (int, any, *apiError) {
	return http.StatusOK, cartOf(ss), nil
}

func (s *shop) apiAddToCart(r *http.Request, ss *session) (int, any, *apiError) {
	var req struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	if e := decode(r, &req); e != nil {
		return 0, nil, e
	}
	p, ok := catalog[req.SKU]
	if !ok {
		return 0, nil, fail(http.StatusNotFound, "UNKNOWN_PRODUCT")
	}
	if req.Qty < 1 || req.Qty > 10 {
		return 0, nil, fail(http.StatusUnprocessableEntity, "BAD_QUANTITY")
	}
	for i := range ss.cart {
		if ss.cart[i].SKU == p.SKU {
			if ss.cart[i].Qty+req.Qty > 10 {
				return 0, nil, fail(http.StatusUnprocessableEntity, "BAD_QUANTITY")
			}
			ss.cart[i].Qty += req.Qty
			s.pushCount(ss)
			return http.StatusCreated, cartOf(ss), nil
		}
	}
	ss.cart = append(ss.cart, line{SKU: p.SKU, Name: p.Name, Qty: req.Qty, Cents: p.Cents})
	s.pushCount(ss)
	return http.StatusCreated, cartOf(ss), nil
}

func (s *shop) apiGift(r *http.Request, ss *session) (int, any, *apiError) {
	var req struct {
		Code string `json:"code"`
	}
	if e := decode(r, &req); e != nil {
		return 0, nil, e
	}
	code := strings.ToUpper(strings.TrimSpace(req.Code))
	switch {
	case code == "":
		return 0, nil, fail(http.StatusUnprocessableEntity, "MISSING_CODE")
	case len(ss.cart) == 0:
		return 0, nil, fail(http.StatusConflict, "CART_EMPTY")
	case code != GiftCode:
		return 0, nil, fail(http.StatusNotFound, "GIFT_CARD_NOT_FOUND")
	}
	ss.gift = true
	b := cartOf(ss)
	return http.StatusOK, map[string]any{"applied": true, "discount_cents": b.Discount, "total_cents": b.TotalCents}, nil
}

func (s *shop) apiCheckout(r *http.Request, ss *session) (int, any, *apiError) {
	var req struct {
		Email string `json:"email"`
		Card  string `json:"card"`
		Token string `json:"token"` // from the payment provider's frame
	}
	if e := decode(r, &req); e != nil {
		return 0, nil, e
	}
	if req.Token != "" {
		req.Card = s.cardOfToken(req.Token)
	}
	if len(ss.cart) == 0 {
		return 0, nil, fail(http.StatusConflict, "CART_EMPTY")
	}
	if a, err := mail.ParseAddress(strings.TrimSpace(req.Email)); err != nil || a.Name != "" {
		return 0, nil, fail(http.StatusUnprocessableEntity, "INVALID_EMAIL")
	}
	if !luhn(req.Card) {
		return 0, nil, fail(http.StatusUnprocessableEntity, "INVALID_CARD")
	}
	at := &attempt{ID: "ord_" + randomHex(6), TotalCents: ss.total()}
	ss.last = at
	if ss.gift && s.opts.GiftCardBug {
		// The bug: the gift card's balance was reserved when it was
		// applied, and payment finds the reservation in a state it does
		// not expect.
		at.State, at.HTTPStatus, at.Error = "failed", http.StatusInternalServerError, "GIFT_CARD_STATE"
		return 0, nil, fail(http.StatusInternalServerError, "GIFT_CARD_STATE")
	}
	at.State, at.HTTPStatus = "paid", http.StatusOK
	ss.orders[at.ID] = at
	ss.cart, ss.gift = nil, false
	s.pushCount(ss)
	return http.StatusOK, map[string]any{"order_id": at.ID, "total_cents": at.TotalCents, "next": "/orders/" + at.ID}, nil
}

func (s *shop) apiLastOrder(r *http.Request, ss *session) (int, any, *apiError) {
	if ss.last == nil {
		return 0, nil, fail(http.StatusNotFound, "NO_ORDER")
	}
	return http.StatusOK, *ss.last, nil
}

// luhn reports whether a card number (spaces and dashes allowed) has
// 12 to 19 digits and a valid check digit.
func luhn(card string) bool {
	var digits []int
	for _, c := range card {
		switch {
		case c >= '0' && c <= '9':
			digits = append(digits, int(c-'0'))
		case c == ' ' || c == '-':
		default:
			return false
		}
	}
	if len(digits) < 12 || len(digits) > 19 {
		return false
	}
	sum := 0
	for i := range digits {
		d := digits[len(digits)-1-i]
		if i%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

func money(cents int) string { return fmt.Sprintf("$%d.%02d", cents/100, cents%100) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
