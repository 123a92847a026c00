package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// RequireFFmpeg returns the path of one of Debian's ffmpeg package tools
// (ffmpeg, ffprobe). Without it the test is skipped on a developer's
// machine and fails in CI (CI set): a dependency missing in CI is a
// failure, not a skip.
func RequireFFmpeg(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Missing(t, tool+" not found on $PATH (apt-get install ffmpeg)")
	}
	return p
}

// Missing skips the test on a developer's machine and fails it in CI (CI
// set): something the test needs is not there, and in CI that is a
// failure, not a skip.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
