package store

import (
	"errors"
	"os"
	"slices"
	"testing"
	"time"
)

// TestPlanStoredOnce: recordings opened with the same redaction plan
// share one blob (their plan.ref files name it; no plan.json is written),
// each reads it back, References lists it, so a sweep keeps it while a
// recording names it and collects it once none does. A store written
// before plan.ref (a plan.json) still reads, and a damaged reference is
// an error, never "no plan".
func TestPlanStoredOnce(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	plan := []byte(`{"secret_keys":["password"],"drop_unmasked_frames":true}`)
	var ids []string
	for i := range 2 {
		id := NewRecordingID(time.Now().Add(time.Duration(i) * time.Millisecond))
		if err := s.Create(RecordingMeta{ID: id, Project: "p", CreatedAt: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.SavePlan(id, plan); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	c := Sum(plan)
	for _, id := range ids {
		ref, err := os.ReadFile(s.Layout().PlanRef(id))
		if err != nil || string(ref) != c.String()+"\n" {
			t.Fatalf("%s: plan.ref %q, %v; want %s", id, ref, err, c)
		}
		if _, err := os.Stat(s.Layout().Plan(id)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: a plan.json as well: %v", id, err)
		}
		got, err := s.Plan(id)
		if err != nil || string(got) != string(plan) {
			t.Fatalf("%s: Plan = %q, %v", id, got, err)
		}
		refs, err := s.References(id)
		if err != nil || !slices.Contains(refs, c.String()) {
			t.Fatalf("%s: References = %v, %v; want the plan's blob", id, refs, err)
		}
	}
	sweep := func() {
		t.Helper()
		sw := s.Blobs.BeginSweep()
		defer sw.End()
		if _, err := sw.Collect(mark(t, s).has, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		sweep()
		if _, err := s.Blobs.Stat(c); err != nil {
			t.Fatalf("the plan's blob collected while a recording names it: %v", err)
		}
		if _, err := s.RemoveRecording(id); err != nil {
			t.Fatal(err)
		}
	}
	sweep()
	if _, err := s.Blobs.Stat(c); err == nil {
		t.Fatal("the plan's blob outlived every recording naming it")
	}

	legacy := NewRecordingID(time.Now().Add(time.Second))
	if err := s.Create(RecordingMeta{ID: legacy, Project: "p", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Layout().Plan(legacy), plan, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Plan(legacy); err != nil || string(got) != string(plan) {
		t.Fatalf("a plan.json: Plan = %q, %v", got, err)
	}
	if err := os.WriteFile(s.Layout().PlanRef(legacy), []byte("not a cid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Plan(legacy); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("a damaged plan.ref: Plan err = %v", err)
	}
	if _, err := s.References(legacy); err == nil {
		t.Fatal("a damaged plan.ref: References named what it keeps")
	}
}
