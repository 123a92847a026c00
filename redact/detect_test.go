package redact

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/policy"
)

const (
	tJWT    = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	tGHP    = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
	tGHPAT  = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghij"
	tSlack  = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	tHook   = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
	tAWSID  = "AKIAIOSFODNN7EXAMPLE"
	tAWSSec = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func pemBlock(label string) string {
	return "-----BEGIN " + label + "-----\nMIIEowIBAAKCAQEA1x2y3z4AbCdEf/GhIjKlMnOp+QrStUvWxYz0123456789\nQrStUvWxYz0123456789abcdefAbCdEf==\n-----END " + label + "-----"
}

func testDetectors(t testing.TB) *detectors {
	t.Helper()
	d, err := newDetectors(testPlan())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// covered reports whether the spans erase every byte of secret in s.
func covered(s string, sp []dspan, secret string) bool {
	i := strings.Index(s, secret)
	if i < 0 {
		return false
	}
	for k := i; k < i+len(secret); k++ {
		in := false
		for _, x := range sp {
			if x.start <= k && k < x.end {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return true
}

func TestDetectorPositives(t *testing.T) {
	jsonEsc := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	ghp2 := "gho_" + strings.Repeat("Ab1", 12)
	cases := []struct {
		rule, text, secret string
	}{
		{"jwt", "token " + tJWT + " end", tJWT},
		{"jwt", "Authorization: Bearer " + tJWT, tJWT},
		{"jwt", jsonEsc(`{"id_token":"` + tJWT + `"}`), tJWT},
		{"jwt", "https://app.example/cb?next=" + url.QueryEscape("/x?t="+tJWT), tJWT},
		{"jwt", "unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. ok", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0."},
		{"pem", "key:\n" + pemBlock("RSA PRIVATE KEY") + "\nbye", pemBlock("RSA PRIVATE KEY")},
		{"pem", pemBlock("EC PRIVATE KEY"), pemBlock("EC PRIVATE KEY")},
		{"pem", pemBlock("OPENSSH PRIVATE KEY"), pemBlock("OPENSSH PRIVATE KEY")},
		{"pem", pemBlock("PRIVATE KEY"), pemBlock("PRIVATE KEY")},
		{"pem", pemBlock("ENCRYPTED PRIVATE KEY"), pemBlock("ENCRYPTED PRIVATE KEY")},
		{"pem", jsonEsc(pemBlock("RSA PRIVATE KEY")), jsonEsc(pemBlock("RSA PRIVATE KEY"))},
		{"pem", "truncated -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"},
		{"aws", "creds " + tAWSID + " here", tAWSID},
		{"aws", "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"},
		{"aws", "X-Amz-Credential=" + tAWSID + "%2F20260101%2Fus-east-1", tAWSID},
		{"aws", "aws_secret_access_key = " + tAWSSec, tAWSSec},
		{"aws", `{"SecretAccessKey":"` + tAWSSec + `"}`, tAWSSec},
		{"aws", jsonEsc(`{"AWS_SECRET_ACCESS_KEY":"` + tAWSSec + `"}`), tAWSSec},
		{"github", "push with " + tGHP, tGHP},
		{"github", ghp2, ghp2},
		{"github", "GITHUB_TOKEN=" + tGHPAT, tGHPAT},
		{"slack", "slack " + tSlack, tSlack},
		{"slack", "post to " + tHook + " now", tHook},
		{"slack", jsonEsc(`{"webhook":"` + tHook + `"}`), "hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"},
		{"generic", "login password=hunter2 ok", "hunter2"},
		{"generic", "db_password: s3cr3t!x", "s3cr3t!x"},
		{"generic", `{"api_key":"abc123def"}`, "abc123def"},
		{"generic", `client_secret="zzz9 with space"`, "zzz9 with space"},
		{"generic", jsonEsc(`{"session":"abc123"}`), "abc123"},
		{"generic", "X-Session-Token: Q2lzY29TZWNyZXQ", "Q2lzY29TZWNyZXQ"},
		{"generic", "using api key 8f3Kq9ZpL2mXv7RtY1wB4nC6 for the call", "8f3Kq9ZpL2mXv7RtY1wB4nC6"},
		{"generic", "Bearer Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5"},
		{"generic", `{"cvv":"123"}`, "123"},
		{"generic", "Authorization: Basic dXNlcjpwYXNz", "Basic dXNlcjpwYXNz"},
		{"card", "pay 4242 4242 4242 4242 now", "4242 4242 4242 4242"},
		{"card", "4242-4242-4242-4242", "4242-4242-4242-4242"},
		{"card", "n=4242424242424242;", "4242424242424242"},
		{"card", "amex 378282246310005.", "378282246310005"},
		{"card", "amex 3782 822463 10005", "3782 822463 10005"},
		{"card", `{"number":"5555555555554444"}`, "5555555555554444"},
		{"card", "qty 2 4242 4242 4242 4242", "4242 4242 4242 4242"},
		{"card", "19 digits 6011000990139424000", ""}, // placeholder replaced below
	}
	// a 19-digit Luhn-valid number
	cases[len(cases)-1].text = "19 digits " + luhnComplete("601100099013942400") + " end"
	cases[len(cases)-1].secret = luhnComplete("601100099013942400")
	d := testDetectors(t)
	for _, c := range cases {
		sp := d.scan(c.text)
		if !covered(c.text, sp, c.secret) {
			t.Errorf("%s: %q: spans %v do not cover %q", c.rule, c.text, sp, c.secret)
			continue
		}
		ok := false
		for _, x := range sp {
			if x.rule == c.rule {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: %q: spans %v name no %s", c.rule, c.text, sp, c.rule)
		}
		// the pre-filter agrees
		if !d.found(c.text) {
			t.Errorf("%s: found() is false for %q", c.rule, c.text)
		}
	}
}

// luhnComplete appends the check digit that makes digits Luhn-valid.
func luhnComplete(digits string) string {
	for c := '0'; c <= '9'; c++ {
		if cardDigitsOK(digits + string(c)) {
			return digits + string(c)
		}
	}
	panic("unreachable")
}

func TestDetectorNegatives(t *testing.T) {
	d := testDetectors(t)
	cases := []string{
		"4242 4242 4242 4241",                      // Luhn-invalid
		"4242424242424241",                         // Luhn-invalid
		"ts=1764483600000000000 and 1764483600123", // timestamps (first digit 1)
		"call +1 415 555 2671 or +44 20 7946 0958",
		"2024-01-15 12:30:45.123456",
		"12345678901234567890123", // longer run than any card
		"id 4242424242424242424242",
		"a4242424242424242", // glued to letters: an id
		"uuid 123e4567-e89b-12d3-a456-426614174000",
		"uuid 550e8400-e29b-41d4-a716-446655440000",
		"commit 5f2b9c1e and 0a1b2c3d4e5f",
		"Session expired, please log in again.",
		"Session: expired",
		"The password must be at least 8 characters long.",
		"token: null",
		"author=John",
		":authority: example.com",
		"eyJust kidding, eyJhbGciOiJIUzI1NiJ9 alone",
		"AKIAIOSFODNN7EXAMPL is short",
		"ghp_short and gho_",
		"xoxo-kisses",
		"Uncaught TypeError: Cannot read properties of undefined (reading 'map') at https://app.example/static/app.js:10:4",
		"GET https://app.example/api/orders?last=1&page=2 200",
		"internationalization is a long word in a sentence",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		`{"level":"error","text":"step 1 message 0: value=42","url":"https://app.example/static/app.js","line":10}`,
		"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	}
	for _, c := range cases {
		if sp := d.scan(c); len(sp) > 0 {
			t.Errorf("%q: unexpected spans %v (%q)", c, sp, c[sp[0].start:sp[0].end])
		}
	}
}

func TestDetectorsOnlyPlanned(t *testing.T) {
	p := testPlan()
	p.Detectors = []string{"jwt"}
	d, err := newDetectors(p)
	if err != nil {
		t.Fatal(err)
	}
	if sp := d.scan("password=hunter2 4242 4242 4242 4242"); sp != nil {
		t.Errorf("detectors not in the plan ran: %v", sp)
	}
	if sp := d.scan("x " + tJWT); len(sp) != 1 {
		t.Errorf("jwt detector did not run: %v", sp)
	}
	p.Detectors = []string{"jwt", "nosuch"}
	if _, err := newDetectors(p); err == nil {
		t.Error("an unknown detector was accepted")
	}
	p = testPlan()
	p.MaskNamePatterns = []string{"("}
	if _, err := newDetectors(p); err == nil {
		t.Error("an invalid mask name pattern was accepted")
	}
}

func TestDetectorsMergeOverlaps(t *testing.T) {
	d := testDetectors(t)
	s := "Authorization: Bearer " + tJWT
	sp := d.scan(s)
	if len(sp) != 1 || sp[0].rule != detJWT {
		t.Fatalf("spans %v, want one jwt span", sp)
	}
	if got := s[sp[0].start:sp[0].end]; !strings.Contains(got, tJWT) {
		t.Errorf("span %q does not hold the token", got)
	}
}

func TestSecretish(t *testing.T) {
	yes := []string{"password", "db_password", "x-api-key", "API_KEY", "client_secret", "sessionid",
		"csrftoken", "authorization", "oauth", "auth", "private_key", "AccessKey", "PHPSESSID", "credentials", "pwd"}
	no := []string{"author", "authority", "authors", "name", "value", "level", "url", "keyboard", "passenger"}
	for _, k := range yes {
		if !secretishName(k) {
			t.Errorf("%q should look secret", k)
		}
	}
	for _, k := range no {
		if secretishName(k) {
			t.Errorf("%q should not look secret", k)
		}
	}
}

func TestMaskedName(t *testing.T) {
	d := testDetectors(t)
	for _, n := range []string{"Card number", "CVV", "Password", "Enter PIN", "One-time code OTP", "cc-number", "Passcode"} {
		if !d.maskedName(n) {
			t.Errorf("%q should be masked", n)
		}
	}
	for _, n := range []string{"Email", "Apply", "Quantity", "Search"} {
		if d.maskedName(n) {
			t.Errorf("%q should not be masked", n)
		}
	}
	if !impliesPassword("Enter your PIN") || impliesPassword("Shipping address") || impliesPassword("spinbutton") {
		t.Error("impliesPassword: PIN is a word, not a substring")
	}
}

func TestScanCleanDoesNotAllocate(t *testing.T) {
	d := testDetectors(t)
	s := cleanConsoleText
	if a := testing.AllocsPerRun(100, func() { _ = d.scan(s) }); a != 0 {
		t.Errorf("scan of clean text allocates %.0f times", a)
	}
}

const cleanConsoleText = `Uncaught TypeError: Cannot read properties of undefined (reading 'items') at renderCart (https://app.example/static/js/main.8f3a2c.js:10:4) at HTMLButtonElement.onClick (https://app.example/static/js/main.8f3a2c.js:212:17); step 12 message 3: value=4812 status=ok (retry 2 of 3, elapsed 412ms)`

const dirtyConsoleText = `Request failed: POST https://api.example/v1/charge?access_token=abc123 Authorization: Bearer ` + tJWT + ` card 4242 4242 4242 4242 password=hunter2`

func BenchmarkDetectorsClean(b *testing.B) {
	d := testDetectors(b)
	s := cleanConsoleText
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if d.scan(s) != nil {
			b.Fatal("clean text flagged")
		}
	}
}

func BenchmarkDetectorsDirty(b *testing.B) {
	d := testDetectors(b)
	s := dirtyConsoleText
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if d.scan(s) == nil {
			b.Fatal("dirty text not flagged")
		}
	}
}

var _ = policy.Plan{}

func FuzzDetectors(f *testing.F) {
	for _, s := range []string{cleanConsoleText, dirtyConsoleText, "4242 4242 4242 4242", pemBlock("RSA PRIVATE KEY"),
		"x?token=1&b=2#id_token=3", `{\"password\":\"x\"}`, "https://u:p@h/", "ghp_" + strings.Repeat("a", 40), "AKIA"} {
		f.Add(s)
	}
	d, err := newDetectors(testPlan())
	if err != nil {
		f.Fatal(err)
	}
	r := redactorOf(f)
	f.Fuzz(func(t *testing.T, s string) {
		sp := d.scan(s)
		last := 0
		for _, x := range sp {
			if x.start < last || x.end < x.start || x.end > len(s) {
				t.Fatalf("bad spans %v for %q", sp, s)
			}
			last = x.end
		}
		w := &scrubber{r: r, channel: "console"}
		out, changed := w.str(s)
		if !changed && out != s {
			t.Fatalf("unchanged but different")
		}
		paramAt(s, strings.IndexByte(s, '=')+0*len(s))
		_ = rawEscapeHides(s) || rawPercentHides(s) || rawUserinfo(s) || rawDropParam(d, s)
	})
}

// BenchmarkScrubAdversarial measures the scrubbers on inputs built to make
// them quadratic (a unit repeated to 16, 64 and 256 KiB); ns/byte should
// stay flat as the size grows. A benchmark, not a timed test: speed is
// measured, never asserted.
func BenchmarkScrubAdversarial(b *testing.B) {
	r := redactorOf(b)
	units := []string{"password=[", "?a=", "?token=1&", "eyJaaaaaaaaaaaa", "eyJ", "4242 ", `value="x" `,
		"password:\"", "ghp_", "a://b@", "token: {", `\"`, "-----BEGIN PRIVATE KEY-----", "aaaaaaaaaaaaaaaaaaaaaaaa "}
	for _, u := range units {
		for _, n := range []int{16 << 10, 64 << 10, 256 << 10} {
			s := strings.Repeat(u, n/len(u))
			b.Run(fmt.Sprintf("%q/%dKiB", u, n>>10), func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for i := 0; i < b.N; i++ {
					w := &scrubber{r: r, channel: "console"}
					w.str(s)
					w.snapshotText(s)
					r.rawNeedsWork([]byte(s))
				}
			})
		}
	}
}
