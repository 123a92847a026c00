package app_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/store"
)

// TestGroupsAPI: a group made by hand answers 201 with its verdict, reads
// back, and shows on its member; malformed requests are BAD_GROUP with a
// next step, never a group of two projects' recordings.
func TestGroupsAPI(t *testing.T) {
	f := newFixture(t)
	alpha, beta := f.rec["alpha"], f.rec["beta"]
	for name, body := range map[string]string{
		"two projects":  `{"ids":["` + alpha + `","` + beta + `"]}`,
		"no recordings": `{"ids":[]}`,
		"other purpose": `{"ids":["` + alpha + `"],"purpose":"vibes"}`,
		"unknown field": `{"ids":["` + alpha + `"],"verdict":"reproduced"}`,
	} {
		r := do(t, "POST", f.base+"/v1/groups", []byte(body))
		if r.status != http.StatusBadRequest || r.errCode(t) != "BAD_GROUP" || !strings.Contains(string(r.body), `"next"`) {
			t.Errorf("%s: %d %s, want 400 BAD_GROUP", name, r.status, r.body)
		}
	}
	r := do(t, "POST", f.base+"/v1/groups", []byte(`{"ids":["`+alpha+`","`+alpha+`"]}`))
	var g store.Group
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r.decode(t, &g)
	// The fixture's runs pass: nothing to reproduce. A repeated id is one member.
	if g.Purpose != store.GroupManual || g.Project != "alpha" || !slices.Equal(g.Members, []string{alpha}) ||
		g.Verdict != store.GroupNotReproduced || g.Of != 1 || g.Summary != "not_reproduced: no failure signature in 1 runs" {
		t.Errorf("group %+v", g)
	}
	var got store.Group
	do(t, "GET", f.base+"/v1/groups/"+g.ID, nil).decode(t, &got)
	if got.ID != g.ID || got.Verdict != g.Verdict || !slices.Equal(got.Members, g.Members) {
		t.Errorf("read back %+v, want %+v", got, g)
	}
	var row struct{ Groups []string }
	do(t, "GET", f.base+"/v1/recordings/"+alpha, nil).decode(t, &row)
	if !slices.Contains(row.Groups, g.ID) {
		t.Errorf("recording %s: groups %v lack %s", alpha, row.Groups, g.ID)
	}
	do(t, "GET", f.base+"/v1/recordings/"+beta, nil).decode(t, &row)
	if slices.Contains(row.Groups, g.ID) {
		t.Errorf("recording %s is listed in alpha's group", beta)
	}
	if r := do(t, "GET", f.base+"/v1/groups/not-a-group", nil); r.status != 404 || r.errCode(t) != "GROUP_NOT_FOUND" {
		t.Errorf("malformed group id: %d %s", r.status, r.body)
	}
}
