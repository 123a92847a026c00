package store

import (
	"slices"
	"testing"
	"time"
)

// TestDerivedBlobsAreReferenced: a derived blob is found again by name,
// References lists it (so a sweep keeps it), and replacing it drops the
// old one from References.
func TestDerivedBlobsAreReferenced(t *testing.T) {
	s, err := OpenStore(t.TempDir(), LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := NewRecordingID(time.Now())
	if err := s.Create(RecordingMeta{ID: id, Project: "p", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Derived(id, "video.webm"); err != nil || ok {
		t.Fatalf("before any put: ok=%v err=%v", ok, err)
	}
	c1, err := s.PutDerived(id, "video.webm", []byte("first build"))
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Derived(id, "video.webm")
	if err != nil || !ok || !got.Equals(c1) {
		t.Fatalf("Derived = %v %v %v, want %v", got, ok, err, c1)
	}
	refs, err := s.References(id)
	if err != nil || !slices.Contains(refs, c1.String()) {
		t.Fatalf("References = %v, %v; want it to hold %s", refs, err, c1)
	}
	c2, err := s.PutDerived(id, "video.webm", []byte("second build"))
	if err != nil {
		t.Fatal(err)
	}
	refs, _ = s.References(id)
	if slices.Contains(refs, c1.String()) || !slices.Contains(refs, c2.String()) {
		t.Fatalf("after replacing: References = %v", refs)
	}
	if _, err := s.PutDerived(id, "../escape", []byte("x")); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
	if _, err := s.PutDerived(NewRecordingID(time.Now()), "video.webm", []byte("x")); err == nil {
		t.Fatal("a derived blob of a recording that does not exist was recorded")
	}
}
