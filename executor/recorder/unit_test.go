package recorder

import (
	"encoding/json"
	"testing"
)

func TestURLMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, url string
		want         bool
	}{
		{"http://a/x", "http://a/x", true},
		{"http://a/x", "http://a/x/", false},
		{"http://a/*", "http://a/x/y", true},
		{"http://a/*/y", "http://a/x/y", true},
		{"http://a/*/y", "http://a/x/z", false},
		{"*/checkout", "http://a/checkout", true},
		{"http://a/*?done=*", "http://a/p?done=1", true},
		{"http://a/*?done=*", "http://a/p", false},
	} {
		if got := urlMatches(c.pattern, c.url); got != c.want {
			t.Errorf("urlMatches(%q, %q) = %v", c.pattern, c.url, got)
		}
	}
}

func TestContainsJSON(t *testing.T) {
	got := `{"state":"failed","http_status":500,"items":[1,2],"nested":{"a":1,"b":2}}`
	for _, c := range []struct {
		want string
		ok   bool
	}{
		{`{"state":"failed"}`, true},
		{`{"state":"paid"}`, false},
		{`{"http_status":500,"nested":{"b":2}}`, true},
		{`{"nested":{"c":3}}`, false},
		{`{"items":[1,2]}`, true},
		{`{"items":[1]}`, false}, // arrays are equal, not contained
		{`{"missing":null}`, false},
	} {
		if containsJSON(json.RawMessage(got), json.RawMessage(c.want)) != c.ok {
			t.Errorf("containsJSON(%s) != %v", c.want, c.ok)
		}
	}
}

func TestSnapshotDelta(t *testing.T) {
	r := newRefs()
	r.saw("before", "main\n button \"Pay\" @e1\n textbox \"Email\" @e2")
	r.saw("after", "main\n button \"Pay\" busy @e1\n textbox \"Email\" @e2\n alert \"Payment failed\"")
	want := "- button \"Pay\" @e1\n+ button \"Pay\" busy @e1\n+ alert \"Payment failed\""
	if got := r.delta(); got != want {
		t.Errorf("delta:\n%s\nwant:\n%s", got, want)
	}
	r.saw("before", "a\nb")
	r.saw("after", "a\nb")
	if got := r.delta(); got != "" {
		t.Errorf("delta of an unchanged view: %q", got)
	}
}

func TestTidyText(t *testing.T) {
	got := tidyText("  Title  \n\n\n  line one \n\t\nline two\n\n")
	if want := "Title\n\nline one\n\nline two"; got != want {
		t.Errorf("tidyText = %q, want %q", got, want)
	}
}
