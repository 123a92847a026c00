package demoapp

import (
	"net/http"
	"strings"
)

// The payment provider stands in for a real one (Stripe Elements, Adyen's
// card component): the checkout page embeds its card form in an iframe
// served from another origin (Start serves it on a second loopback port),
// so the card number is typed into a cross-origin frame. On Pay the
// checkout asks the frame for a token over postMessage; the frame posts
// the card to its own origin's POST /api/tokens and hands back a token,
// which the checkout sends instead of the card. The shop's page never
// sees the number.
//
//	GET  /pay/card?parent=ORIGIN  the card form, framed by ORIGIN only
//	POST /api/tokens              {"card"} → 201 {"token"} | 422 INVALID_CARD

// paymentFrameTitle is the iframe's title: its accessible name, and the
// name flow files use to reach into it (frame "Payment card" …).
const paymentFrameTitle = "Payment card"

// cardFrame serves the provider's card form. Its CSP lets only the
// storefront that asked (a loopback origin) frame it.
func (s *shop) cardFrame(w http.ResponseWriter, r *http.Request) {
	parent := r.URL.Query().Get("parent")
	if !loopbackOrigin(parent) {
		http.Error(w, "parent must be a loopback origin", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors "+parent+"; form-action 'self'")
	s.render(w, http.StatusOK, "cardframe", view{Title: paymentFrameTitle, Parent: parent})
}

// loopbackOrigin says whether o is http://127.0.0.1:PORT or
// http://localhost:PORT (the only parents the demo provider serves).
func loopbackOrigin(o string) bool {
	rest, ok := strings.CutPrefix(o, "http://")
	if !ok {
		return false
	}
	host, port, ok := strings.Cut(rest, ":")
	if !ok || port == "" || strings.Trim(port, "0123456789") != "" {
		return false
	}
	return host == "127.0.0.1" || host == "localhost"
}

// apiToken exchanges a card number for a one-use token.
func (s *shop) apiToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Card string `json:"card"`
	}
	if e := decode(r, &req); e != nil {
		writeJSON(w, e.status, errBody(e.code))
		return
	}
	if !luhn(req.Card) {
		writeJSON(w, http.StatusUnprocessableEntity, errBody("INVALID_CARD"))
		return
	}
	tok := "tok_" + randomHex(8)
	s.mu.Lock()
	s.tokens[tok] = req.Card
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]string{"token": tok})
}

// cardOfToken spends a token (the caller holds s.mu): the card it stands
// for, or "" when the token is unknown or spent.
func (s *shop) cardOfToken(tok string) string {
	card := s.tokens[tok]
	delete(s.tokens, tok)
	return card
}

// checkoutCSP lets the checkout page frame the provider's origin.
func checkoutCSP(payOrigin string) string {
	return "default-src 'self'; img-src 'self' data:; frame-src 'self' " + payOrigin + "; frame-ancestors 'none'; form-action 'self'"
}
