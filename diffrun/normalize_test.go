package diffrun

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flightrec/flightrec/event"
)

func TestTemplate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"https://Shop.Example/orders/48213", "https://shop.example/orders/{id}"},
		{"http://127.0.0.1:41234/api/checkout", "http://127.0.0.1:{port}/api/checkout"},
		{"http://localhost:5173/", "http://localhost:{port}/"},
		{"http://[::1]:8080/x", "http://[::1]:{port}/x"},
		{"https://user:pw@api.example:443/v1/users/42/orders/7", "https://api.example/v1/users/{id}/orders/{id}"},
		{"https://api.example:8443/a", "https://api.example:8443/a"},
		{"https://shop.example", "https://shop.example/"},
		{"https://shop.example?q=1", "https://shop.example/?q={id}"},
		{"https://shop.example/api/cart/550e8400-e29b-41d4-a716-446655440000/items", "https://shop.example/api/cart/{uuid}/items"},
		{"https://shop.example/api/cart/550E8400-E29B-41D4-A716-446655440000", "https://shop.example/api/cart/{uuid}"},
		{"https://cdn.example/static/app.3f9a8c7d.js", "https://cdn.example/static/app.{hash}.js"},
		{"https://cdn.example/assets/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "https://cdn.example/assets/{hash}"},
		{"https://shop.example/orders/ord_8f7a6b5c4d3e", "https://shop.example/orders/ord_{hash}"},
		{"https://shop.example/s/Zk93QmX2pLr8vN4tYw1c", "https://shop.example/s/{token}"},
		{"https://shop.example/products/blue-kettle", "https://shop.example/products/blue-kettle"},
		{"https://shop.example/products/kettle-1200", "https://shop.example/products/kettle-{id}"},
		{"https://shop.example/v2/items", "https://shop.example/v2/items"},
		// Cache busters and random values are dropped, ids templated, the rest sorted.
		{"https://shop.example/api/session?_=1767225600123", "https://shop.example/api/session"},
		{"https://shop.example/static/app.js?v=3c1a9f20", "https://shop.example/static/app.js"},
		{"https://shop.example/a?t=5&cb=x&nocache=1&ts=12&timestamp=now", "https://shop.example/a"},
		{"https://shop.example/a?z=1&b=blue&since=1767225600", "https://shop.example/a?b=blue&z={id}"},
		{"https://shop.example/a?order=550e8400-e29b-41d4-a716-446655440000", "https://shop.example/a?order={uuid}"},
		{"https://shop.example/a?state=aZ3k9QmL2pX7vB1q", "https://shop.example/a"},
		{"https://shop.example/a?at=2026-01-01T10:00:00Z", "https://shop.example/a"},
		{"https://shop.example/a?flag&x=", "https://shop.example/a?flag&x="},
		{"https://shop.example/a#/orders/12", "https://shop.example/a"},
		{"/api/orders/12?page=2", "/api/orders/{id}?page={id}"},
		{"data:image/png;base64,iVBORw0KGgo=", "data:image/png"},
		{"about:blank", "about:blank"},
		{"blob:https://shop.example/550e8400-e29b-41d4-a716-446655440000", "blob:https://shop.example/{uuid}"},
		{"javascript:void(0)", "javascript:"},
	} {
		got := Template(c.in)
		if got != c.want {
			t.Errorf("Template(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := Template(got); again != got {
			t.Errorf("Template not idempotent on %q: %q → %q", c.in, got, again)
		}
	}
	if p := PathTemplate("http://127.0.0.1:4000/orders/48213?t=1"); p != "/orders/{id}" {
		t.Errorf("PathTemplate = %q", p)
	}
}

func TestNormalizeText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"checkout failed: GIFT_CARD_STATE", "checkout failed: GIFT_CARD_STATE"},
		{"  spaced\n\tout  ", "spaced out"},
		{"Failed to load resource: the server responded with a status of 500 (Internal Server Error)",
			"Failed to load resource: the server responded with a status of 500 (Internal Server Error)"},
		{"GET http://127.0.0.1:41234/api/orders/48213?_=1767225600123 404 (Not Found)",
			"GET http://127.0.0.1:{port}/api/orders/{id} 404 (Not Found)"},
		{"TypeError: Cannot read properties of null\n    at checkoutFailed (http://127.0.0.1:41234/static/app.min.js:1:2345)",
			"TypeError: Cannot read properties of null at checkoutFailed (http://127.0.0.1:{port}/static/app.min.js:{id}:{id})"},
		{"at app.js:12:7", "at app.js:{n}:{n}"},
		{"object at 0x7ffe3c1a9f20 freed", "object at {hex} freed"},
		{"request 550e8400-e29b-41d4-a716-446655440000 timed out", "request {uuid} timed out"},
		{"session 3c1a9f2077aa1b2c expired", "session {hex} expired"},
		{"token Zk93QmX2pLr8vN4tYw1c rejected", "token {token} rejected"},
		{"order 48213 took 1234ms (retry 2 of 3)", "order {n} took {n}ms (retry 2 of 3)"},
		{"version 1.2.3 at 10.0.0.1", "version {n} at {n}"},
		{"see https://docs.example/errors.", "see https://docs.example/errors."},
		{"at 12:30:45", "at 12:{n}:{n}"},
	} {
		got := NormalizeText(c.in)
		if got != c.want {
			t.Errorf("NormalizeText(%q) =\n%q, want\n%q", c.in, got, c.want)
		}
		if again := NormalizeText(got); again != got {
			t.Errorf("NormalizeText not idempotent: %q → %q", got, again)
		}
	}
}

func TestNormalizeSnapshot(t *testing.T) {
	a := `banner
 link "Acme shop" @e1
main
 heading "Checkout" level=1
 form
  textbox "Email" required value="buyer@acme.example" @e7
  textbox "Card number" value="[redacted:00000000deadbeef]" @e8
  textbox "Password" value="[masked]" @e9
  button "Pay" disabled @e16
  link "Order #48213" @e17`
	b := `banner
 link "Acme shop" @e31
main
 heading "Checkout" level=1
 form
  textbox "Email" required value="buyer@acme.example" @e40
  textbox "Card number" value="[redacted:77777777cafebabe]" @e41
  textbox "Password" value="[redacted]" @e42
  button "Pay" disabled @e52
  link "Order #7" @e53`
	want := `banner
 link "Acme shop"
main
 heading "Checkout" level=1
 form
  textbox "Email" required value="buyer@acme.example"
  textbox "Card number" value="[masked]"
  textbox "Password" value="[masked]"
  button "Pay" disabled
  link "Order #{n}"`
	na, nb := NormalizeSnapshot(a), NormalizeSnapshot(b)
	if na != want {
		t.Errorf("NormalizeSnapshot(a) =\n%s\nwant\n%s", na, want)
	}
	if nb != na {
		t.Errorf("snapshots with other refs differ:\n%s\n%s", na, nb)
	}
	if again := NormalizeSnapshot(na); again != na {
		t.Errorf("not idempotent:\n%s", again)
	}
	lines := parseSnapLines(a, nil)
	if len(lines) != 10 {
		t.Fatalf("%d lines", len(lines))
	}
	if l := lines[8]; l.Key != `button "Pay"` || l.Rest != "disabled" || !l.Actionable {
		t.Errorf("pay line = %+v", l)
	}
	if l := lines[3]; l.Key != `heading "Checkout"` || l.Actionable {
		t.Errorf("heading line = %+v", l)
	}
	// A name with an escaped quote and a ref-looking word inside the name.
	l, _ := parseSnapLine(`button "Say \"hi\" @e5" @e6`)
	if l.Key != `button "Say \"hi\" @e{n}"` || !l.Actionable || l.Rest != "" {
		t.Errorf("%+v", l)
	}
}

func TestStepTargets(t *testing.T) {
	if s := normSelector("#item-12345  > .row"); s != "#item-{n} > .row" {
		t.Errorf("normSelector = %q", s)
	}
	tg := func(role, name, sel, ref string) *event.Target {
		return &event.Target{Role: role, Name: name, Selector: sel, Ref: ref}
	}
	for _, c := range []struct {
		verb     string
		target   *event.Target
		resolved *event.Target
		args     string
		want     string
	}{
		{"click", tg("button", "Pay", "", ""), nil, "", `button "Pay"`},
		{"click", tg("button", "", "", ""), nil, "", `button`},
		{"click", tg("link", "Order 48213", "", ""), nil, "", `link "Order {n}"`},
		{"fill", tg("", "", "#gift-code", ""), tg("textbox", "Gift card code", "", "@e14"), `{"value":"x"}`, `css "#gift-code"`},
		{"click", tg("", "", "", "@e16"), tg("button", "Pay", "", "@e16"), "", `button "Pay"`},
		{"click", tg("", "", "", "@e16"), nil, "", "ref"},
		{"goto", nil, nil, `{"url":"http://127.0.0.1:4000/product/12?utm=x&_=17"}`, "url /product/{id}?utm=x"},
		{"wait", nil, nil, `{"wait":{"url":"http://127.0.0.1:4000/checkout"}}`, "url /checkout"},
		{"wait", nil, nil, `{"wait":{"text":"Added to cart"}}`, `text "Added to cart"`},
		{"wait", nil, nil, `{"wait":{"settled":true}}`, "settled"},
		{"expect", nil, nil, `{"expect":{"text":"is confirmed"}}`, `text "is confirmed"`},
		{"expect", nil, nil, `{"expect":{"state":{"method":"GET","url":"http://127.0.0.1:4000/api/orders/last","status":200}}}`, "state GET /api/orders/last"},
		{"press", nil, nil, `{"key":"Enter"}`, `key "Enter"`},
		{"press", nil, nil, `not json`, ""},
		{"wait", nil, nil, "", ""},
	} {
		a := event.Action{Verb: c.verb, Target: c.target}
		if c.args != "" {
			a.Args = json.RawMessage(c.args)
		}
		if got := describeTarget(a, c.resolved); got != c.want {
			t.Errorf("%s %+v %s: %q, want %q", c.verb, c.target, c.args, got, c.want)
		}
	}
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"https://shop.example/orders/48213?_=1&b=2#frag",
		"http://127.0.0.1:41234/api/cart/550e8400-e29b-41d4-a716-446655440000/items",
		"//cdn.example/app.3f9a8c7d.js?v=1",
		"blob:blob:http://x/1", "data:;,", "about:blank", "/a//b/?&&=&x==1",
		"http://[::1", "http://@:/?", "HTTP://A:80", "a:b", "%7Bid%7D", "{id}", "/x/{uuid}-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Template(s)
		if again := Template(got); again != got {
			t.Fatalf("Template(%q) = %q, then %q", s, got, again)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Template(%q) = %q is not UTF-8", s, got)
		}
		n := NormalizeText(s)
		if again := NormalizeText(n); again != n {
			t.Fatalf("NormalizeText(%q) = %q, then %q", s, n, again)
		}
		_ = NormalizeSnapshot(s)
		if strings.Contains(got, "#") {
			t.Fatalf("Template(%q) = %q keeps a fragment", s, got)
		}
	})
}
