package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/access"
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

// listTokens is token list --data --json.
func listTokens(t *testing.T, data string) map[string]access.Grant {
	t.Helper()
	out, errOut, code := flightrec(t, "token", "list", "--data", data, "--json")
	var res struct{ Tokens []access.Grant }
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("token list: exit %d %q %q", code, out, errOut)
	}
	m := map[string]access.Grant{}
	for _, g := range res.Tokens {
		m[g.ID] = g
	}
	return m
}

// TestParallelTokenCommands: 20 token create --data at once all succeed
// (each waits for the directory's lock) and all 20 are listed; a revoke
// racing with creates takes effect, trial after trial.
func TestParallelTokenCommands(t *testing.T) {
	binary(t)
	data := t.TempDir()
	type result struct {
		out, errOut string
		code        int
		err         error
	}
	run := func(n int, args ...string) []result {
		res := make([]result, n)
		var wg sync.WaitGroup
		for i := range res {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &res[i]
				r.out, r.errOut, r.code, r.err = runBin(args...)
			}()
		}
		wg.Wait()
		return res
	}
	created := map[string]bool{}
	for _, r := range run(20, "token", "create", "--data", data, "--project", "shop", "--scope", "read", "--json") {
		var c struct{ Grant access.Grant }
		if r.err != nil || r.code != exitOK || json.Unmarshal([]byte(r.out), &c) != nil {
			t.Fatalf("parallel token create: exit %d %v %q %q", r.code, r.err, r.out, r.errOut)
		}
		created[c.Grant.ID] = true
	}
	listed := listTokens(t, data)
	if len(created) != 20 || len(listed) != 20 {
		t.Fatalf("20 parallel creates: %d distinct tokens printed, %d listed", len(created), len(listed))
	}
	for id := range created {
		if _, ok := listed[id]; !ok {
			t.Errorf("token %s was printed but is not in tokens.json", id)
		}
	}

	for trial := 0; trial < 4; trial++ {
		dir := t.TempDir()
		out, _, code := flightrec(t, "token", "create", "--data", dir, "--project", "shop", "--scope", "read", "--json")
		var victim struct{ Grant access.Grant }
		if code != exitOK || json.Unmarshal([]byte(out), &victim) != nil {
			t.Fatalf("token create: exit %d %q", code, out)
		}
		var wg sync.WaitGroup
		var revoke result
		wg.Add(1)
		go func() {
			defer wg.Done()
			revoke.out, revoke.errOut, revoke.code, revoke.err = runBin("token", "revoke", victim.Grant.ID, "--data", dir)
		}()
		creates := run(8, "token", "create", "--data", dir, "--project", "shop", "--scope", "read")
		wg.Wait()
		if revoke.err != nil || revoke.code != exitOK {
			t.Fatalf("trial %d: revoke: exit %d %v %q", trial, revoke.code, revoke.err, revoke.errOut)
		}
		for _, r := range creates {
			if r.err != nil || r.code != exitOK {
				t.Fatalf("trial %d: create: exit %d %v %q", trial, r.code, r.err, r.errOut)
			}
		}
		listed := listTokens(t, dir)
		if g := listed[victim.Grant.ID]; g.RevokedAt == 0 {
			t.Errorf("trial %d: revoke reported success and the token is still active", trial)
		}
		if len(listed) != 9 {
			t.Errorf("trial %d: %d tokens listed, want 9", trial, len(listed))
		}
	}
}
