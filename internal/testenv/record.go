package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/executor/recorder"
	"github.com/flightrec/flightrec/internal/demoapp"
)

// DemoFlow parses one of the storefront's shipped flows.
func DemoFlow(t testing.TB, name string) *flow.Flow {
	t.Helper()
	file, data, err := demoapp.FlowFile(name)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := flow.Parse(file, data)
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

// Record runs fl against the app at appURL in a fresh Chromium and
// streams the recording to the server at base (skipped or failed, as
// RequireChromium says, without a browser).
func Record(t testing.TB, base, appURL string, fl *flow.Flow) recorder.Result {
	t.Helper()
	path := RequireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := recorder.Record(ctx, recorder.Config{Chromium: path}, fl.Expand(appURL), client.New(base))
	if err != nil {
		t.Fatalf("recording %s: %v", fl.Name, err)
	}
	return res
}
