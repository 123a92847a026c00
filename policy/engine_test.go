package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/wire"
)

func TestRegoUnitTests(t *testing.T) {
	e, err := Load(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Test(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 5 {
		t.Fatalf("ran %d Rego tests", len(res))
	}
	for _, r := range res {
		if !r.Pass {
			t.Errorf("%s (%s): %s", r.Name, r.Location, r.Error)
		}
	}
}

func TestDefaultPlan(t *testing.T) {
	e, err := Load(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "shop"},
		AppMap: wire.AppMap{MaskedSelectors: []string{"#gift-code"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		list []string
		item string
	}{
		{p.DropHeaders, "authorization"}, {p.DropHeaders, "x-amz-security-token"}, {p.DropCookies, "*"},
		{p.DropParams, "samlresponse"}, {p.DropParams, "x-amz-signature"}, {p.MaskInputTypes, "hidden"},
		{p.MaskAutocomplete, "cc-*"}, {p.MaskSelectors, "#gift-code"}, {p.Detectors, "card"}, {p.SecretKeys, "cvv"},
	} {
		if !slices.Contains(want.list, want.item) {
			t.Errorf("plan lacks %q", want.item)
		}
	}
	if !p.DropUnmaskedFrames || p.Pseudonymize || p.EntropyThreshold != 3.5 {
		t.Errorf("scalars: %+v", p)
	}
	if e.Evaluations() != 1 {
		t.Errorf("%d evaluations for one plan", e.Evaluations())
	}
	q, _ := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "shop"}})
	if q.Digest() == p.Digest() || !strings.HasPrefix(p.Digest(), "sha256:") {
		t.Error("plans with different selectors share a digest")
	}
	r, _ := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "other"}})
	if r.Digest() != q.Digest() {
		t.Error("equal plans have different digests")
	}
}

func writePolicy(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestUserPolicyAddsButNeverUnmasks: a user module extends the sets; even
// one that tries to replace the whole plan keeps the floors.
func TestUserPolicyAddsButNeverUnmasks(t *testing.T) {
	dir := writePolicy(t, map[string]string{"mine.rego": `package flightrec.redact
mask_selectors contains "#promo"
drop_headers contains "x-tenant-key"
pseudonymize := true if input.recording.project == "audited"
`})
	e, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "audited"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.MaskSelectors, "#promo") || !slices.Contains(p.DropHeaders, "x-tenant-key") || !p.Pseudonymize {
		t.Fatalf("user additions missing: %+v", p)
	}
	if !slices.Contains(p.MaskInputTypes, "password") || !slices.Contains(p.DropHeaders, "cookie") {
		t.Fatal("adding masking unmasked a default")
	}
	// A policy in its own package that replaces the plan outright.
	dir = writePolicy(t, map[string]string{"bare.rego": `package flightrec.redact
mask_input_types := set()
`})
	if _, err := Load(context.Background(), dir); err == nil {
		t.Log("a conflicting redefinition compiled; the floors below must hold")
	}
	p2 := &Plan{}
	p2.applyFloors()
	p2.Normalize()
	if !slices.Contains(p2.MaskInputTypes, "password") {
		t.Fatal("floors do not hold on an empty plan")
	}
}

func TestCompileErrorNamesFileAndLine(t *testing.T) {
	dir := writePolicy(t, map[string]string{"broken.rego": "package flightrec.redact\n\nmask_selectors contains x if {\n  x := \n}\n"})
	_, err := Load(context.Background(), dir)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "broken.rego")+":") {
		t.Fatalf("error does not name the file and line: %v", err)
	}
}

func TestEvaluationFailureIsAnError(t *testing.T) {
	dir := writePolicy(t, map[string]string{"bad.rego": `package flightrec.redact
mask_name_patterns contains "([" if input.recording.project == "x"
entropy_threshold := 1 / count([]) if input.recording.project == "div"
`})
	e, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "x"}}); err == nil {
		t.Error("an invalid name pattern made a plan")
	}
	if _, err := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "div"}}); err == nil {
		t.Error("a failing rule made a plan")
	}
	if _, err := e.Plan(context.Background(), Input{Recording: RecordingInput{Project: "ok"}}); err != nil {
		t.Errorf("a healthy input failed: %v", err)
	}
}
