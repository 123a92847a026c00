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
// reads, and revoking it with the CLI while the server runs shuts it out
// within a couple of seconds.
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
	if out, errOut, code := flightrec(t, "token", "revoke", "--data", data, id); code != exitOK {
		t.Fatalf("revoke: exit %d %q %q", code, out, errOut)
	}
	deadline := time.Now().Add(10 * time.Second)
	for get(t, base+"/v1/recordings", tok) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("a revoked token still reads 10 s after revoke")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Without tokens, serve refuses to listen beyond loopback.
	_, errOut, code = flightrecEnv(t, nil, 5*time.Second, "serve", "--addr", "0.0.0.0:1", "--data", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "INSECURE_ADDRESS") || !strings.Contains(errOut, "token create") {
		t.Errorf("serve on all interfaces without tokens: exit %d, %q", code, errOut)
	}
}
