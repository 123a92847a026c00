package app_test

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
)

// cidOf builds a CID of the given codec and hash function over data.
func cidOf(t *testing.T, codec uint64, hash uint64, data []byte) string {
	t.Helper()
	mh, err := multihash.Sum(data, hash, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(codec, mh).String()
}

// TestHostilePaths: path traversal and malformed ids and CIDs in every
// route that takes one, with an admin token for every project (so the
// request reaches the handlers): never a 2xx, never a 5xx, never a byte of
// a file outside the store.
func TestHostilePaths(t *testing.T) {
	f := newFixture(t)
	admin, _, err := f.app.Tokens.Create("*", []string{"admin", "read", "ingest", "pin"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("x"))
	v0, _ := multihash.Encode(sum[:], multihash.SHA2_256)
	badCIDs := map[string]string{
		"dot-dot":         "..",
		"encoded dot-dot": "%2e%2e",
		"traversal":       "..%2f..%2f..%2fetc%2fpasswd",
		"absolute":        "%2fetc%2fpasswd",
		"NUL":             "bafkrei%00",
		"wrong codec":     cidOf(t, cid.DagProtobuf, multihash.SHA2_256, []byte("x")),
		"wrong hash":      cidOf(t, cid.Raw, multihash.SHA2_512, []byte("x")),
		"identity hash":   cidOf(t, cid.Raw, multihash.IDENTITY, []byte("/etc/passwd")),
		"CIDv0":           cid.NewCidV0(v0).String(),
		"upper case":      strings.ToUpper(f.shared),
		"over-long":       strings.Repeat("b", 4096),
	}
	badIDs := map[string]string{
		"dot-dot":         "..",
		"encoded dot-dot": "%2e%2e",
		"traversal":       "..%2f..%2f..%2fetc%2fpasswd",
		"absolute":        "%2fetc%2fpasswd",
		"NUL":             "00t4ay%00",
		"over-long":       strings.Repeat("0", 4096),
		"upper case":      strings.ToUpper(f.rec["alpha"]),
	}
	check := func(what, method, url string, body []byte) {
		t.Helper()
		r := do(t, method, url, body, "Authorization", "Bearer "+admin)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s: %s %s: %d %s", what, method, url, r.status, short(r.body))
		}
		if bytes.Contains(r.body, []byte("root:")) {
			t.Errorf("%s: %s %s served a system file", what, method, url)
		}
	}
	for name, c := range badCIDs {
		check("cid "+name, "GET", f.base+"/v1/blobs/"+c, nil)
		check("cid "+name, "GET", f.base+"/v1/recordings/"+f.rec["alpha"]+"/blobs/"+c, nil)
	}
	for name, id := range badIDs {
		for _, p := range []string{"", "/steps", "/steps/1", "/events", "/redaction", "/blobs/" + f.shared} {
			check("id "+name, "GET", f.base+"/v1/recordings/"+id+p, nil)
		}
		check("id "+name, "POST", f.base+"/v1/recordings/"+id+"/events", []byte(`{"seq":1,"ts":1,"step":0,"kind":"meta","data":{}}`+"\n"))
		check("id "+name, "POST", f.base+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`))
		check("id "+name, "DELETE", f.base+"/v1/tokens/"+id, nil)
	}
	// The good CID through its recording, as the control.
	if r := do(t, "GET", f.base+"/v1/recordings/"+f.rec["alpha"]+"/blobs/"+f.shared, nil, "Authorization", "Bearer "+admin); r.status != 200 {
		t.Fatalf("control: the shared blob through alpha's recording: %d %s", r.status, short(r.body))
	}
}

// TestHostileTokens: an over-long token, a revoked one, an expired one and
// garbage all get 401 with the envelope and a challenge; every refusal is
// counted, and no token reaches the log.
func TestHostileTokens(t *testing.T) {
	srv := appserver.Start(t)
	a := srv.App
	good, g, err := a.Tokens.Create("shop", []string{"read"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	revoked, rg, err := a.Tokens.Create("shop", []string{"read"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Tokens.Revoke(rg.ID); err != nil {
		t.Fatal(err)
	}
	expired, _, err := a.Tokens.Create("shop", []string{"read"}, time.Millisecond, "")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	long := "frt_" + strings.Repeat("A", 60<<10)
	cases := map[string]string{
		"over-long":      "Bearer " + long,
		"revoked":        "Bearer " + revoked,
		"expired":        "Bearer " + expired,
		"garbage":        "Bearer not-a-token",
		"wrong secret":   "Bearer " + good[:len(good)-4] + "AAAA",
		"basic auth":     "Basic dXNlcjpwYXNz",
		"empty bearer":   "Bearer ",
		"no header":      "",
		"space in token": "Bearer " + good[:10] + " " + good[11:],
		"token in case":  "bearer " + strings.ToUpper(good),
	}
	for name, h := range cases {
		var hdr []string
		if h != "" {
			hdr = []string{"Authorization", h}
		}
		r := do(t, "GET", srv.Base+"/v1/recordings", nil, hdr...)
		if r.status != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="flightrec"`) {
			t.Errorf("%s: %d %q %s", name, r.status, r.header.Get("WWW-Authenticate"), short(r.body))
			continue
		}
		r.errCode(t)
	}
	if r := do(t, "GET", srv.Base+"/v1/recordings", nil, "Authorization", "Bearer "+good); r.status != 200 {
		t.Fatalf("control: the good token: %d %s", r.status, short(r.body))
	}
	// A denied request of a valid token (no admin scope) is counted too.
	if r := do(t, "GET", srv.Base+"/v1/tokens", nil, "Authorization", "Bearer "+good); r.status != http.StatusForbidden ||
		!strings.Contains(string(r.body), "admin") {
		t.Errorf("reader on an admin route: %d %s", r.status, short(r.body))
	}
	metrics := string(do(t, "GET", srv.Base+"/metrics", nil, "Authorization", "Bearer "+adminToken(t, a)).body)
	for _, want := range []string{`flightrec_access_denied_total{reason="unauthenticated"} 10`, `flightrec_access_denied_total{reason="missing scope"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	logs := srv.Log.Bytes()
	for _, secret := range []string{good, revoked, expired, long[:64], g.Hash} {
		// The secret without its frt_ prefix (base64url secrets may hold
		// '_' themselves, so cut the prefix only).
		secret = strings.TrimPrefix(secret, "frt_")
		if bytes.Contains(logs, []byte(secret)) {
			t.Errorf("a token secret is in the log")
		}
	}
	if !bytes.Contains(logs, []byte("request denied")) {
		t.Error("denied requests are not logged")
	}
}

func adminToken(t *testing.T, a *app.App) string {
	t.Helper()
	tok, _, err := a.Tokens.Create("*", []string{"admin"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRequireTokens: a server told to require tokens (serve on a
// non-loopback address) refuses anonymous requests even while no token
// exists; the health routes stay open.
func TestRequireTokens(t *testing.T) {
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = ingest.DefaultLimits
	cfg.RequireTokens = true
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	defer func() { hs.Close(); a.Close() }()
	if r := do(t, "GET", hs.URL+"/v1/recordings", nil); r.status != http.StatusUnauthorized {
		t.Errorf("anonymous list: %d", r.status)
	}
	if r := do(t, "POST", hs.URL+"/v1/recordings", []byte(`{"project":"p"}`)); r.status != http.StatusUnauthorized {
		t.Errorf("anonymous open: %d", r.status)
	}
	for _, p := range []string{"/healthz", "/readyz", "/v1/openapi.json"} {
		if r := do(t, "GET", hs.URL+p, nil); r.status != http.StatusOK {
			t.Errorf("%s: %d", p, r.status)
		}
	}
}
