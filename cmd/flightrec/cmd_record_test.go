package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flightrecEnv runs the binary with extra environment and a deadline.
func flightrecEnv(t testing.TB, env []string, timeout time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("flightrec %v did not finish within %s:\n%s\n%s", args, timeout, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	default:
		t.Fatal(err)
		return "", "", -1
	}
}

// TestRecordRefusesBadFlow: a flow with an unknown step is refused with
// its file and line before any browser starts, and nothing is stored.
func TestRecordRefusesBadFlow(t *testing.T) {
	data := t.TempDir()
	flowFile := filepath.Join(t.TempDir(), "bad.yaml")
	src := "name: bad\nstart_url: \"{{base}}/\"\nsteps:\n  - click: button \"Go\"\n  - hover: link \"Menu\"\n"
	if err := os.WriteFile(flowFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := flightrecEnv(t, nil, time.Minute, "record", "--data", data, "--base", "http://127.0.0.1:1", flowFile)
	if code != exitUsage || !strings.Contains(errOut, "BAD_FLOW") || !strings.Contains(errOut, "bad.yaml:5:") ||
		!strings.Contains(errOut, "hover") {
		t.Errorf("unknown step: exit %d, %q", code, errOut)
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Errorf("a refused flow wrote %d entries to the data directory", len(ents))
	}
	// A flow with {{base}} and no --base is a usage error, not a run
	// against a wrong address.
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte("name: good\nstart_url: \"{{base}}/\"\nsteps:\n  - click: button \"Go\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = flightrecEnv(t, nil, time.Minute, "record", "--data", data, good)
	if code != exitUsage || !strings.Contains(errOut, "--base") {
		t.Errorf("no --base: exit %d, %q", code, errOut)
	}
}
