package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// assertNoSecret fails t if secret appears in blob in any of the encodings
// a redacted event could still carry it in: plain, URL-encoded (query and
// path escaping), JSON-escaped (with and without HTML escaping, and
// escaped twice as JSON inside a JSON string), and base64 (standard and
// URL alphabets, padded or not) at each of the three byte alignments — for
// an alignment, the part of the encoding that depends only on the secret's
// bytes (the middle chunk) is what is looked for.
func assertNoSecret(t testing.TB, blob []byte, secret string) {
	t.Helper()
	if secret == "" {
		t.Fatal("assertNoSecret: empty secret")
	}
	s := string(blob)
	check := func(form, enc string) {
		t.Helper()
		if enc != "" && strings.Contains(s, enc) {
			t.Errorf("secret %.6s… survives %s as %q", secret, form, enc)
		}
	}
	check("plain", secret)
	check("url.QueryEscape", url.QueryEscape(secret))
	check("url.PathEscape", url.PathEscape(secret))
	check("lowercase percent-encoding", strings.ToLower(url.QueryEscape(secret)))
	q, _ := json.Marshal(secret)
	check("JSON-escaped", string(q[1:len(q)-1]))
	q2, _ := json.Marshal(string(q[1 : len(q)-1]))
	check("JSON-escaped twice", string(q2[1:len(q2)-1]))
	q3, _ := marshalJSON(secret)
	check("JSON-escaped (no HTML escaping)", string(q3[1:len(q3)-1]))
	for _, enc := range []struct {
		name string
		e    *base64.Encoding
	}{
		{"base64 std", base64.StdEncoding},
		{"base64 url", base64.URLEncoding},
		{"base64 raw std", base64.RawStdEncoding},
		{"base64 raw url", base64.RawURLEncoding},
	} {
		for a, prefix := range []string{"", "x", "xx"} {
			full := enc.e.EncodeToString([]byte(prefix + secret))
			// groups of 3 input bytes lying wholly inside the secret
			g0 := (a + 2) / 3
			g1 := (a + len(secret)) / 3
			if g1-g0 >= 2 { // at least 6 bytes of the secret: 8 characters
				check(enc.name+" (middle chunk, alignment "+string(rune('0'+a))+")", full[g0*4:g1*4])
			}
			if a == 0 {
				check(enc.name, full)
			}
		}
	}
}

// assertFindingsClean fails t if a finding carries a secret.
func assertFindingsClean(t testing.TB, fs []Finding, secrets ...string) {
	t.Helper()
	for _, f := range fs {
		for _, s := range secrets {
			if strings.Contains(f.Rule, s) || strings.Contains(f.Pointer, s) || strings.Contains(f.Channel, s) {
				t.Errorf("finding %+v carries a secret", f)
			}
		}
	}
}

func TestAssertNoSecretCatchesEveryEncoding(t *testing.T) {
	const secret = "p@ss w0rd/with+chars\"and\\more"
	forms := []string{
		secret,
		url.QueryEscape(secret),
		url.PathEscape(secret),
		base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.URLEncoding.EncodeToString([]byte("x" + secret)),
		base64.StdEncoding.EncodeToString([]byte("xx" + secret)),
		"zz" + base64.RawStdEncoding.EncodeToString([]byte("yy"+secret+"tail")) + "zz",
	}
	q, _ := json.Marshal(secret)
	forms = append(forms, string(q))
	for _, f := range forms {
		ft := &fakeT{}
		assertNoSecret(ft, []byte(`{"a":`+strconvQuote(f)+`}`), secret)
		if !ft.failed {
			t.Errorf("assertNoSecret missed the form %q", f)
		}
	}
	ft := &fakeT{}
	assertNoSecret(ft, []byte(`{"a":"[redacted]"}`), secret)
	if ft.failed {
		t.Error("assertNoSecret failed on a clean blob")
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fakeT records failures instead of failing.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Error(...any)          { f.failed = true }
func (f *fakeT) Fatal(...any)          { f.failed = true }
