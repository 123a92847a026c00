package wire_test

import (
	"testing"

	"github.com/flightrec/flightrec/wire"
)

// TestPath: a route's parameters are filled in order and escaped as one
// segment each; unfilled ones stay patterns.
func TestPath(t *testing.T) {
	for _, c := range []struct {
		route  string
		params []string
		want   string
	}{
		{wire.RouteRecordings, nil, "/v1/recordings"},
		{wire.RouteFinish, []string{"r1"}, "/v1/recordings/r1/finish"},
		{wire.RouteRecordingBlob, []string{"r1", "bafk"}, "/v1/recordings/r1/blobs/bafk"},
		{wire.RouteStepDOM, []string{"a/b", "7"}, "/v1/recordings/a%2Fb/steps/7/dom"},
		{wire.RouteStep, []string{"r1"}, "/v1/recordings/r1/steps/{n}"},
		{wire.RouteShareLink, []string{"s e"}, "/s/s%20e"},
	} {
		if got := wire.Path(c.route, c.params...); got != c.want {
			t.Errorf("Path(%q, %q) = %q, want %q", c.route, c.params, got, c.want)
		}
	}
}
