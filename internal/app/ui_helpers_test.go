package app_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flightrec/flightrec/internal/demoapp"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
)

// demoRuns starts the whole server and the storefront (gift-card bug on)
// and records the named demo flows into it in Chromium, waiting until each
// is finished and indexed. It returns the server and the recordings' ids
// in the order of names.
func demoRuns(t *testing.T, names ...string) (*appserver.Server, []string) {
	t.Helper()
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	shop, _ := testenv.Shop(t, demoapp.Options{GiftCardBug: true})
	var ids []string
	for _, name := range names {
		res := testenv.Record(t, srv.Base, shop, testenv.DemoFlow(t, name))
		waitIndexed(t, srv.Base, res.ID, res.Total)
		ids = append(ids, res.ID)
	}
	return srv, ids
}

// artifactDir is where tests leave files for people to look at
// (screenshots): $FLIGHTREC_ARTIFACTS, else flightrec-artifacts in the
// system's temporary directory. It outlives the test.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FLIGHTREC_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "flightrec-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeArtifact writes one artifact and logs where it went.
func writeArtifact(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact: %s (%d bytes)", path, len(data))
	return path
}
