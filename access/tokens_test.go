package access

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func openTokens(t *testing.T) (*Tokens, string) {
	t.Helper()
	dir := t.TempDir()
	tk, err := OpenTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tk, dir
}

func TestCreateVerifyRevoke(t *testing.T) {
	tk, dir := openTokens(t)
	if !tk.Empty() {
		t.Fatal("a new data directory has tokens")
	}
	tok, g, err := tk.Create("shop", []string{"read", "ingest", "read"}, 0, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "frt_"+g.ID+"_") || len(tok) != len("frt_")+idLen+1+secretLen {
		t.Fatalf("token shape %q (id %s)", tok, g.ID)
	}
	if strings.Join(g.Scopes, ",") != "ingest,read" {
		t.Errorf("scopes %v, want ingest,read (sorted, deduplicated)", g.Scopes)
	}
	got, err := tk.Verify(tok)
	if err != nil || got.ID != g.ID || got.Project != "shop" {
		t.Fatalf("verify: %+v %v", got, err)
	}
	// Only the hash is on disk, readable by the owner alone.
	b, err := os.ReadFile(filepath.Join(dir, TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	secret := tok[len("frt_")+idLen+1:] // the secret's alphabet has '_' too
	if strings.Contains(string(b), secret) {
		t.Fatal("the token's secret is in the token file")
	}
	if fi, _ := os.Stat(filepath.Join(dir, TokensFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	// Another writer's change (the file replaced under a running server)
	// is seen within a second.
	other, err := OpenTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Revoke(g.ID); err != nil {
		t.Fatal(err)
	}
	tk.checked = time.Time{} // as if a second passed
	if _, err := tk.Verify(tok); !errors.Is(err, ErrRevoked) {
		t.Errorf("a revoked token verifies: %v", err)
	}
	if tk.Empty() {
		t.Error("revoked grants count: a server that had tokens must not fall back to anonymous access")
	}
}

func TestExpiry(t *testing.T) {
	tk, _ := openTokens(t)
	now := time.Now()
	tk.now = func() time.Time { return now }
	tok, _, err := tk.Create("shop", []string{"read"}, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Verify(tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if _, err := tk.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Errorf("an expired token verifies: %v", err)
	}
}

func TestVerifyRefusesHostileTokens(t *testing.T) {
	tk, _ := openTokens(t)
	tok, g, err := tk.Create("shop", []string{"read"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// The same token with one secret character changed (mid-secret, so
	// its shape stays valid).
	flip := []byte(tok)
	k := len(flip) - 10
	if flip[k] == 'A' {
		flip[k] = 'B'
	} else {
		flip[k] = 'A'
	}
	for name, c := range map[string]struct {
		token string
		want  error
	}{
		"empty":               {"", ErrMalformed},
		"over-long":           {tok + strings.Repeat("A", 4096), ErrMalformed},
		"just over the limit": {strings.Repeat("a", MaxTokenLen+1), ErrMalformed},
		"no prefix":           {strings.TrimPrefix(tok, "frt_"), ErrMalformed},
		"upper-case id":       {"frt_" + strings.ToUpper(g.ID) + tok[len("frt_")+idLen:], ErrMalformed},
		"path in id":          {"frt_../../etc/pa" + tok[len("frt_")+idLen:], ErrMalformed},
		"NUL":                 {tok[:20] + "\x00" + tok[21:], ErrMalformed},
		"not base64":          {tok[:len(tok)-1] + "!", ErrMalformed},
		"stray low bits":      {tok[:len(tok)-1] + "B", ErrMalformed},
		"wrong secret":        {string(flip), ErrUnknown},
		"unknown id":          {"frt_000000000000" + tok[len("frt_")+idLen:], ErrUnknown},
		"short":               {tok[:len(tok)-1], ErrMalformed},
	} {
		if _, err := tk.Verify(c.token); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestVerifyComparesInConstantTime: every verification of a well-formed
// token, whatever the outcome, compares two full-length digests with the
// constant-time comparison, an unknown id included, so the time a check
// takes says nothing about which part was wrong.
func TestVerifyComparesInConstantTime(t *testing.T) {
	tk, _ := openTokens(t)
	tok, _, err := tk.Create("shop", []string{"read"}, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var calls []int
	orig := compareHashes
	compareHashes = func(a, b []byte) int {
		if len(a) != 32 || len(b) != 32 {
			t.Errorf("compared %d and %d bytes, want two 32-byte SHA-256 digests", len(a), len(b))
		}
		calls = append(calls, len(a))
		return orig(a, b)
	}
	defer func() { compareHashes = orig }()
	wrong := tok[:len(tok)-2] + "AA"
	if wrong == tok {
		wrong = tok[:len(tok)-2] + "BB"
	}
	for _, s := range []string{tok, wrong, "frt_ffffffffffff" + tok[len("frt_")+idLen:]} {
		before := len(calls)
		_, _ = tk.Verify(s)
		if len(calls) != before+1 {
			t.Errorf("verify made %d constant-time comparisons, want 1", len(calls)-before)
		}
	}
}
