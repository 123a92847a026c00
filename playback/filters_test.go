package playback_test

import (
	"encoding/json"
	"image/color"
	"net/http"
	"strings"
	"testing"
)

// TestUnknownFilterValues: a filter value outside its enumeration is
// refused with 400, the allowed values and a next, on the list, the
// events page and search; known values still answer 200. Before, an
// unknown state or verdict answered an empty list, which reads as "no such
// recordings".
func TestUnknownFilterValues(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.record(t, "shop", [][]byte{pngOf(t, color.White)}, true, false)
	for _, c := range []struct {
		path    string
		allowed []string
	}{
		{"/v1/recordings?state=weird", []string{"open", "finished"}},
		{"/v1/recordings?verdict=weird", []string{"pass", "fail", "flaky", "blocked", "not_run"}},
		{"/v1/recordings?state=open&verdict=PASS", []string{"pass", "not_run"}},
		{"/v1/recordings/" + rec.id + "/events?kind=weird", []string{"receipt", "frame", "meta"}},
		{"/v1/search?q=kind:weird", []string{"receipt", "frame", "meta"}},
		{"/v1/recordings/" + rec.id + "/search?q=kind:weird+x", []string{"receipt", "frame", "meta"}},
	} {
		r := get(t, e.base+c.path)
		var env struct {
			Error struct{ Code, Message, Next string }
		}
		if err := json.Unmarshal(r.body, &env); err != nil || r.status != http.StatusBadRequest ||
			env.Error.Code != "BAD_PARAMETER" || env.Error.Next == "" {
			t.Fatalf("%s: %d %s; want 400 BAD_PARAMETER with a next", c.path, r.status, r.body)
		}
		for _, a := range c.allowed {
			if !strings.Contains(env.Error.Message+env.Error.Next, a) {
				t.Errorf("%s: %q does not name the allowed value %s", c.path, env.Error.Message, a)
			}
		}
	}
	for _, ok := range []string{"/v1/recordings?state=finished&verdict=pass", "/v1/recordings?state=open",
		"/v1/recordings/" + rec.id + "/events?kind=frame"} {
		if r := get(t, e.base+ok); r.status != http.StatusOK {
			t.Errorf("%s: %d %s; want 200", ok, r.status, r.body)
		}
	}
	var list struct{ Recordings []struct{ ID string } }
	if err := json.Unmarshal(get(t, e.base+"/v1/recordings?state=finished&verdict=pass").body, &list); err != nil ||
		len(list.Recordings) != 1 || list.Recordings[0].ID != rec.id {
		t.Errorf("finished+pass lists %+v, %v; want %s", list, err, rec.id)
	}
}
