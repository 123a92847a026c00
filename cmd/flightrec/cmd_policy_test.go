package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyCommands(t *testing.T) {
	out, _, code := flightrec(t, "policy", "test")
	if code != exitOK || !strings.Contains(out, "0 failed") || !strings.Contains(out, "PASS data.flightrec.redact_test") {
		t.Fatalf("policy test: exit %d: %s", code, out)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x.rego"), []byte("package flightrec.redact\n\nmask_selectors contains s if {\n  s := \n}\n"), 0o644)
	_, errOut, code := flightrec(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--policy", dir)
	if code == exitOK || !strings.Contains(errOut, filepath.Join(dir, "x.rego")+":") {
		t.Fatalf("serve with a broken policy: exit %d: %s", code, errOut)
	}
	out, _, code = flightrec(t, "policy", "plan", "--project", "shop")
	if code != exitOK || !strings.Contains(out, `"digest": "sha256:`) || !strings.Contains(out, "set-cookie") {
		t.Fatalf("policy plan: exit %d: %s", code, out)
	}
}
