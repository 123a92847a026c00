package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestTokenLifecycle drives the CLI as an operator would: a token made
// before the server starts turns authentication on, a reader's token
// reads; while the server runs, the token file is the server's (revoke
// --data is refused with DATA_DIR_LOCKED), and revoking through it with
// --server shuts the reader out at once.
func TestTokenLifecycle(t *testing.T) {
	data := t.TempDir()
	out, errOut, code := flightrec(t, "token", "create", "--data", data, "--project", "shop", "--scope", "read")
	tok := strings.TrimSpace(out)
	if code != exitOK || !strings.HasPrefix(tok, "frt_") || !strings.Contains(errOut, "shown once") {
		t.Fatalf("token create: exit %d, %q %q", code, out, errOut)
	}
	out, _, _ = flightrec(t, "token", "list", "--data", data)
	if !strings.Contains(out, "active") || strings.Contains(out, tok[len("frt_")+13:]) {
		t.Fatalf("token list: %q (must list the grant, never the secret)", out)
	}
	_, errOut, code = flightrec(t, "token", "create", "--data", data, "--project", "shop", "--scope", "read,write")
	if code != exitUsage || !strings.Contains(errOut, `unknown scope "write"`) {
		t.Errorf("bad scope: exit %d, %q", code, errOut)
	}

	admin, _, code := flightrec(t, "token", "create", "--data", data, "--project", "*", "--scope", "admin")
	admin = strings.TrimSpace(admin)
	if code != exitOK {
		t.Fatalf("admin token create: exit %d", code)
	}

	p := &serverProc{t: t, bin: binary(t), addr: freeAddr(t), data: data}
	p.start()
	defer p.stop()
	base := "http://" + p.addr
	if s := get(t, base+"/v1/recordings", ""); s != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", s)
	}
	if s := get(t, base+"/v1/recordings", tok); s != http.StatusOK {
		t.Errorf("reader's token: %d, want 200", s)
	}
	if s := get(t, base+"/healthz", ""); s != http.StatusOK {
		t.Errorf("healthz without a token: %d, want 200", s)
	}
	id := tok[len("frt_") : len("frt_")+12]
	_, errOut, code = flightrec(t, "token", "revoke", "--data", data, id)
	if code != exitFailure || !strings.Contains(errOut, "DATA_DIR_LOCKED") || !strings.Contains(errOut, "--server http://"+p.addr) {
		t.Fatalf("revoke --data beside the server: exit %d %q, want DATA_DIR_LOCKED pointing to --server", code, errOut)
	}
	if s := get(t, base+"/v1/recordings", tok); s != http.StatusOK {
		t.Errorf("reader's token after a refused revoke: %d, want 200", s)
	}
	adminEnv := []string{"FLIGHTREC_TOKEN=" + admin}
	if out, errOut, code := flightrecEnv(t, adminEnv, time.Minute, "token", "revoke", id, "--server", base); code != exitOK {
		t.Fatalf("revoke --server: exit %d %q %q", code, out, errOut)
	}
	if s := get(t, base+"/v1/recordings", tok); s != http.StatusUnauthorized {
		t.Errorf("a token revoked through the server still reads: %d, want 401", s)
	}
	out, _, code = flightrecEnv(t, adminEnv, time.Minute, "token", "list", "--server", base)
	if code != exitOK || !strings.Contains(out, id+"  revoked") {
		t.Errorf("token list --server: exit %d %q, want %s revoked", code, out, id)
	}
	// Without tokens, serve refuses to listen beyond loopback.
	_, errOut, code = flightrecEnv(t, nil, 5*time.Second, "serve", "--addr", "0.0.0.0:1", "--data", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "INSECURE_ADDRESS") || !strings.Contains(errOut, "token create") {
		t.Errorf("serve on all interfaces without tokens: exit %d, %q", code, errOut)
	}
}
