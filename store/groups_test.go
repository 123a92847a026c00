package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestGroups: a group stored is read back whole, a recording lists the
// groups it is in (oldest first), an unknown or malformed id is not
// found, and a read-only store refuses to write one.
func TestGroups(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, b := NewRecordingID(time.Now()), NewRecordingID(time.Now().Add(time.Millisecond))
	g1 := Group{ID: NewGroupID(time.Now()), Project: "p", Purpose: GroupRerun, Members: []string{a, b}, Seed: a,
		Verdict: GroupReproduced, Signature: "POST /api/x 500 E", Reproduced: 2, Of: 2, Summary: "reproduced 2 of 2: POST /api/x 500 E",
		Created: time.Now().UTC().Truncate(time.Second)}
	g2 := Group{ID: NewGroupID(time.Now().Add(time.Second)), Project: "p", Purpose: GroupManual, Members: []string{b},
		Verdict: GroupNotReproduced}
	for _, g := range []Group{g1, g2} {
		if err := st.PutGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Group(g1.ID)
	if err != nil || got.Summary != g1.Summary || !slices.Equal(got.Members, g1.Members) || !got.Created.Equal(g1.Created) {
		t.Fatalf("Group: %+v, %v", got, err)
	}
	if ids, err := st.GroupsOf(a); err != nil || !slices.Equal(ids, []string{g1.ID}) {
		t.Errorf("GroupsOf(a) = %v, %v", ids, err)
	}
	if ids, err := st.GroupsOf(b); err != nil || !slices.Equal(ids, []string{g1.ID, g2.ID}) {
		t.Errorf("GroupsOf(b) = %v, %v", ids, err)
	}
	for _, id := range []string{NewGroupID(time.Now().Add(time.Hour)), "g../../etc", a} {
		if _, err := st.Group(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Group(%q): %v, want not found", id, err)
		}
	}
	if err := st.PutGroup(Group{ID: "nope"}); err == nil {
		t.Error("a malformed group id was stored")
	}
	ro, err := OpenStoreReadOnly(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.PutGroup(g1); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only PutGroup: %v", err)
	}
	if ids, _ := ro.GroupsOf(a); len(ids) != 1 {
		t.Errorf("read-only GroupsOf: %v", ids)
	}
}
