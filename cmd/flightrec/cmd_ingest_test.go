package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIngestRefusesMalformedInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.ndjson")
	os.WriteFile(file, []byte("{\"seq\":1}\n{\"seq\":3}\n"), 0o644)
	_, errOut, code := flightrec(t, "ingest", "--server", "http://127.0.0.1:1", file)
	if code != exitUsage || !strings.Contains(errOut, "MALFORMED_INPUT") || !strings.Contains(errOut, "line 2") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
