package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
)

// TestExportFromImports: an imported HAR exports as a flow of its pages'
// loads, and a Playwright trace (the newest playwright-core through the
// storefront's checkout) as a flow with role and name targets, the masked
// values as parameters and none of them in its bytes.
func TestExportFromImports(t *testing.T) {
	data := t.TempDir()
	out, errOut, code := flightrec(t, "import", "har", "--data", data, "--flow", "checkout", "--json", harFile(t))
	if code != exitOK {
		t.Fatalf("import har: exit %d %s", code, errOut)
	}
	harRec := jsonField(t, out, "id")
	out, errOut, code = flightrec(t, "export", "flow", harRec, "--data", data, "-o", "-")
	if code != exitOK {
		t.Fatalf("export flow of a HAR import: exit %d %s", code, errOut)
	}
	fl, err := flow.Parse("har.flow.yaml", []byte(out))
	if err != nil || len(fl.Steps) != 2 || fl.Steps[0].URL != "{{base}}/product" || fl.Steps[1].URL != "{{base}}/checkout" {
		t.Fatalf("the HAR import's flow: %v\n%s", err, out)
	}

	shop, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	trace, _ := testenv.PlaywrightCheckout(t, shop)
	out, errOut, code = flightrec(t, "import", "playwright", "--data", data, "--verdict", "fail", "--json", trace)
	if code != exitOK {
		t.Fatalf("import playwright: exit %d %s", code, errOut)
	}
	pwRec := jsonField(t, out, "id")
	out, errOut, code = flightrec(t, "export", "flow", pwRec, "--data", data, "-o", "-")
	if code != exitOK {
		t.Fatalf("export flow of a Playwright trace: exit %d %s", code, errOut)
	}
	if _, err := flow.Parse("pw.flow.yaml", []byte(out)); err != nil {
		t.Fatalf("the trace's flow does not parse: %v\n%s", err, out)
	}
	for _, want := range []string{`- fill: {target: textbox "Email", value: "{{email}}"}`, `- click: button "Pay"`,
		`value: "{{card_number}}"`, `- wait: {text: "Gift card applied"}`, `- fill: {target: 'css "#password"', value: "{{password}}"}`, "imported from playwright"} {
		if !strings.Contains(out, want) {
			t.Errorf("the trace's flow lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{demoapp.Card, demoapp.Password} {
		if strings.Contains(out, secret) {
			t.Errorf("the trace's flow holds a masked value (%d bytes)", len(secret))
		}
	}
}

// jsonField reads one string member of a command's --json output.
func jsonField(t *testing.T, out, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("--json output: %v: %s", err, out)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("--json output has no %s: %s", name, out)
	}
	return s
}
