package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/demoapp"
)

// startStorefront runs flightrec demo storefront with args and returns its
// base URL; the process is interrupted on cleanup.
func startStorefront(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"demo", "storefront", "--json", "--addr", freeAddr(t)}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var got struct {
		URL string `json:"url"`
	}
	// The JSON line comes once the storefront listens.
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&got); err != nil || got.URL == "" {
		t.Fatalf("demo storefront %v: %v\n%s", args, err, errOut.String())
	}
	return got.URL
}

// shopCall makes one request with the client's cookies and returns the
// status and body.
func shopCall(t *testing.T, c *http.Client, method, u, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDemoStorefront: the storefront alone, with its bug on it fails the
// gift-card checkout with 500 GIFT_CARD_STATE and with it off it pays;
// frontend only, every API answers 503 while pages and assets are served.
func TestDemoStorefront(t *testing.T) {
	checkout := func(base string) (int, string) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		for _, step := range []struct{ path, body string }{
			{"/api/signin", `{"email":"` + demoapp.Email + `","password":"` + demoapp.Password + `"}`},
			{"/api/cart", `{"sku":"` + demoapp.ProductSKU + `","qty":1}`},
			{"/api/gift", `{"code":"` + demoapp.GiftCode + `"}`},
		} {
			if st, b := shopCall(t, c, "POST", base+step.path, step.body); st/100 != 2 {
				t.Fatalf("POST %s: %d %s", step.path, st, b)
			}
		}
		return shopCall(t, c, "POST", base+"/api/checkout", `{"email":"`+demoapp.Email+`","card":"`+demoapp.Card+`"}`)
	}
	if st, b := checkout(startStorefront(t, "--bug")); st != 500 || !strings.Contains(b, "GIFT_CARD_STATE") {
		t.Errorf("bug on: checkout answered %d %s, want 500 GIFT_CARD_STATE", st, b)
	}
	if st, b := checkout(startStorefront(t)); st != 200 || !strings.Contains(b, "order_id") {
		t.Errorf("bug off: checkout answered %d %s, want 200 and an order", st, b)
	}

	base := startStorefront(t, "--frontend-only", "--bug")
	c := &http.Client{}
	for _, api := range []struct{ method, path string }{
		{"POST", "/api/signin"}, {"GET", "/api/cart"}, {"POST", "/api/checkout"}, {"GET", "/api/orders/last"}, {"GET", "/api/nope"},
	} {
		if st, b := shopCall(t, c, api.method, base+api.path, ""); st != 503 || !strings.Contains(b, "FRONTEND_ONLY") {
			t.Errorf("frontend only: %s %s answered %d %s, want 503 FRONTEND_ONLY", api.method, api.path, st, b)
		}
	}
	for path, want := range map[string]string{
		"/signin": "Sign in", "/checkout": "Trail Kettle", "/product": "Trail Kettle",
		"/orders/ord_1": "ord_1", "/static/app.min.js": "checkoutFailed",
	} {
		if st, b := shopCall(t, c, "GET", base+path, ""); st != 200 || !strings.Contains(b, want) {
			t.Errorf("frontend only: GET %s answered %d (want 200 with %q)", path, st, want)
		}
	}
	_, errOut, code := flightrec(t, "demo", "storefront", "--addr", "0.0.0.0:0")
	if code != exitUsage || !strings.Contains(errOut, "INSECURE_ADDRESS") {
		t.Errorf("storefront on all interfaces: exit %d, %q", code, errOut)
	}
}
