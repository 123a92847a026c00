package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/internal/testenv"
)

// TestDemoWithoutChromium: on a machine without a browser, demo and
// record say what to install and exit non-zero at once, storing nothing.
func TestDemoWithoutChromium(t *testing.T) {
	data := t.TempDir()
	noBrowser := []string{"CHROMIUM=/nonexistent/chromium"}
	_, errOut, code := flightrecEnv(t, noBrowser, time.Minute, "demo", "--data", data, "--addr", freeAddr(t), "--exit")
	if code != exitFailure || !strings.Contains(errOut, "NO_CHROMIUM") || !strings.Contains(errOut, "apt-get install chromium") {
		t.Errorf("demo without Chromium: exit %d, %q", code, errOut)
	}
	flowFile := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(flowFile, []byte("name: f\nsteps:\n  - goto: http://127.0.0.1:1/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = flightrecEnv(t, noBrowser, time.Minute, "record", "--data", data, flowFile)
	if code != exitFailure || !strings.Contains(errOut, "NO_CHROMIUM") || !strings.Contains(errOut, "next:") {
		t.Errorf("record without Chromium: exit %d, %q", code, errOut)
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Errorf("the data directory was written without a browser: %d entries", len(ents))
	}
}

// TestDemoRecordsBothFlows runs the README's first command as a user
// would (with --exit, so it returns): both flows are recorded, the failing
// one fails at Pay with the 500, and the playback URLs it prints answer.
func TestDemoRecordsBothFlows(t *testing.T) {
	testenv.RequireChromium(t)
	data := t.TempDir()
	out, errOut, code := flightrecEnv(t, nil, 5*time.Minute, "demo", "--data", data, "--addr", freeAddr(t), "--exit")
	if code != exitOK {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`recording [0-9a-z]{26} \(checkout-passes\): pass, 20 steps`),
		regexp.MustCompile(`recording [0-9a-z]{26} \(checkout-with-gift-card-fails\): fail, 18 steps`),
		regexp.MustCompile(`step 15 failed: APP_ERROR: POST http://127\.0\.0\.1:\d+/api/checkout answered 500`),
		regexp.MustCompile(`http://127\.0\.0\.1:\d+/v1/recordings/[0-9a-z]{26}/steps`),
		regexp.MustCompile(`compare: http://127\.0\.0\.1:\d+/compare\?a=[0-9a-z]{26}&b=[0-9a-z]{26} \(API: http://127\.0\.0\.1:\d+/v1/diff\?a=`),
		regexp.MustCompile(`player: http://127\.0\.0\.1:\d+/r/[0-9a-z]{26}\n`),
		regexp.MustCompile(`page before the failed step: http://127\.0\.0\.1:\d+/v1/recordings/[0-9a-z]{26}/steps/15/dom\?at=before`),
		regexp.MustCompile(`runs diverge at step 16 of a, step 15 of b \(click button "Pay"\): POST /api/checkout 200 → 500 GIFT_CARD_STATE`),
	} {
		if !want.MatchString(out) {
			t.Errorf("demo output lacks %s:\n%s", want, out)
		}
	}
	// The store it leaves verifies.
	vout, verr, code := flightrec(t, "verify", "--data", data)
	if code != exitOK {
		t.Errorf("verify after demo: exit %d\n%s\n%s", code, vout, verr)
	}
}
