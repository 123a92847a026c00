package app_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
)

// TestErrorsCountedAndLogged: retention, access (its routes and its guard)
// and audit answer their errors through the one edge: each error reply is
// counted in flightrec_errors_total by code, and logged at its level, a
// refusal at debug with its route and ids, a failure at error with the
// cause that its reply does not show.
func TestErrorsCountedAndLogged(t *testing.T) {
	srv := appserver.Start(t) // its log: JSON, at debug
	id := openRec(t, srv.Base)
	// A byte of the audit log changed under the server (opening the
	// recording wrote its plan there).
	path := filepath.Join(srv.App.Store.Dir(), audit.FileName)
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 21 {
		t.Fatalf("the audit log: %v, %d bytes", err, len(b))
	}
	b[20] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	type errorCase struct {
		room, method, path string
		status             int
		code, level, route string
		ids                map[string]string
	}
	cases := []errorCase{
		{"retention", "DELETE", "/v1/recordings/" + id + "/pins/nosuchpin", 404, "PIN_NOT_FOUND", "DEBUG",
			"/v1/recordings/{id}/pins/{pin}", map[string]string{"id": id, "pin": "nosuchpin"}},
		{"access", "DELETE", "/v1/tokens/0123456789ab", 404, "TOKEN_NOT_FOUND", "DEBUG",
			"/v1/tokens/{id}", map[string]string{"id": "0123456789ab"}},
		{"audit", "GET", "/v1/audit", 500, "AUDIT_LOG_CORRUPT", "ERROR", "/v1/audit", nil},
	}
	for _, c := range cases {
		r := do(t, c.method, srv.Base+c.path, nil)
		if r.status != c.status || r.errCode(t) != c.code {
			t.Fatalf("%s: %d %s", c.room, r.status, short(r.body))
		}
		if c.status >= 500 && bytes.Contains(r.body, []byte("(entry ")) {
			t.Errorf("%s: the reply repeats the cause: %s", c.room, r.body)
		}
	}
	// The guard's refusal, once a token exists.
	admin := adminToken(t, srv.App)
	if r := do(t, "GET", srv.Base+"/v1/recordings", nil); r.status != 401 || r.errCode(t) != "UNAUTHENTICATED" {
		t.Fatalf("guard: %d %s", r.status, short(r.body))
	}
	cases = append(cases, errorCase{"guard", "GET", "/v1/recordings", 401, "UNAUTHENTICATED", "DEBUG", "/v1/recordings", nil})

	metrics := string(do(t, "GET", srv.Base+"/metrics", nil, "Authorization", "Bearer "+admin).body)
	lines := edgeLines(t, srv.Log.Bytes())
	for _, c := range cases {
		if want := `flightrec_errors_total{code="` + c.code + `"} 1`; !strings.Contains(metrics, want) {
			t.Errorf("%s: metrics lack %s", c.room, want)
		}
		l, ok := lines[c.code]
		if !ok {
			t.Errorf("%s: no log line of %s", c.room, c.code)
			continue
		}
		if l["level"] != c.level || l["route"] != c.route || l["method"] != c.method {
			t.Errorf("%s: logged as %v", c.room, l)
		}
		for k, v := range c.ids {
			if l[k] != v {
				t.Errorf("%s: logged %s %v, want %s", c.room, k, l[k], v)
			}
		}
		cause, _ := l["err"].(string)
		if (c.level == "ERROR") != strings.Contains(cause, "(entry ") {
			t.Errorf("%s: logged err %q", c.room, cause)
		}
	}
}

// edgeLines are the edge's log lines ("request refused", "request
// failed"), by code.
func edgeLines(t *testing.T, log []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var l map[string]any
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("a log line is not JSON: %s", line)
		}
		if code, _ := l["code"].(string); code != "" && (l["msg"] == "request refused" || l["msg"] == "request failed") {
			out[code] = l
		}
	}
	return out
}
