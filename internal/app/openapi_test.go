package app_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
)

// TestOpenAPIMatchesRoutes keeps the OpenAPI document honest: every chi
// route is documented, and every documented route exists.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	a, _ := server(t, ingest.DefaultLimits)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(app.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not OpenAPI 3: %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
			var o struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(op, &o); err != nil || len(o.Responses) == 0 {
				t.Errorf("%s %s documents no responses", method, path)
			}
		}
	}
	routed := map[string]bool{}
	err := chi.Walk(a.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, stale []string
	for r := range routed {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !routed[r] {
			stale = append(stale, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("routes not documented: %v\ndocumented routes that do not exist: %v", missing, stale)
	}
	if len(routed) < 10 {
		t.Fatalf("walked only %d routes", len(routed))
	}
}
