package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/internal/demoapp"
)

// Served is one request the demo storefront answered.
type Served struct {
	Method, URL string
	Status      int
}

// Shop serves the demo storefront on 127.0.0.1 for the test and returns
// its base URL and, for any time, every request it has answered (the
// ground truth of what a browser loaded). The server closes on t.Cleanup.
func Shop(t testing.TB, opts demoapp.Options) (base string, served func() []Served) {
	t.Helper()
	var (
		mu  sync.Mutex
		log []Served
	)
	h := demoapp.Handler(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		mu.Lock()
		log = append(log, Served{Method: r.Method, URL: "http://" + r.Host + r.URL.RequestURI(), Status: sw.status})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []Served {
		mu.Lock()
		defer mu.Unlock()
		return append([]Served(nil), log...)
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer (the
// storefront's WebSocket hijacks the connection through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// ShopCheckout drives the browser of ctx (see Chromium) through the demo
// storefront at base: sign in, add the product to the cart, go to
// checkout, fill email and card, apply the gift card when gift is set,
// and pay. It returns the text the page shows after paying: the
// confirmation heading, or the payment error ("Payment failed: …"). Three
// documents load: /signin, /product and /checkout (and a fourth,
// /orders/…, when payment succeeds).
func ShopCheckout(t testing.TB, ctx context.Context, base string, gift bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// waitFor evaluates expr until it is a non-empty string. A navigation
	// under way fails an evaluation; that is retried too.
	waitFor := func(what, expr string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
			if err == nil && v != "" {
				return v
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	loaded := func(path string) string {
		return `location.pathname === "` + path + `" && document.readyState === "complete" ? location.pathname : ""`
	}
	do := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("open the sign-in page", chromedp.Navigate(base+"/signin"))
	waitFor("the sign-in page", loaded("/signin"))
	do("type the email", chromedp.SendKeys(chromedp.CSS("#email"), demoapp.Email))
	do("type the password", chromedp.SendKeys(chromedp.CSS("#password"), demoapp.Password))
	do("sign in", chromedp.Click(chromedp.CSS("#signin")))
	waitFor("the product page", loaded("/product"))
	do("add to cart", chromedp.Click(chromedp.CSS("#add-to-cart")))
	waitFor("the cart", `document.getElementById("cart-status").textContent.startsWith("Added to cart") ? "ok" : ""`)
	do("go to checkout", chromedp.Click(chromedp.CSS("#to-checkout")))
	waitFor("the checkout page", loaded("/checkout"))
	do("type the email", chromedp.SendKeys(chromedp.CSS("#checkout-email"), demoapp.Email))
	// The card form is the payment provider's, in a frame of its own
	// origin (same site, so in the page's process): its field is found in
	// the frame's document.
	frame, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS("#card-frame")))
	if err != nil || len(frame) == 0 {
		t.Fatalf("the card frame: %v", err)
	}
	inFrame := chromedp.FromNode(frame[0])
	do("wait for the card form", chromedp.WaitVisible(chromedp.CSS("#card-number"), inFrame))
	do("type the card number", chromedp.SendKeys(chromedp.CSS("#card-number"), demoapp.Card, inFrame))
	if gift {
		do("type the gift code", chromedp.SendKeys(chromedp.CSS("#gift-code"), demoapp.GiftCode))
		do("apply the gift card", chromedp.Click(chromedp.CSS("#apply-gift")))
		waitFor("the gift card", `document.getElementById("gift-status").textContent.startsWith("Gift card applied") ? "ok" : ""`)
	}
	do("pay", chromedp.Click(chromedp.CSS("#pay")))
	return waitFor("the payment's outcome", `(() => {
		const err = document.getElementById("pay-error");
		if (err && !err.hidden && err.textContent) return err.textContent;
		const h = document.getElementById("thanks");
		return h && document.readyState === "complete" ? h.textContent : "";
	})()`)
}
