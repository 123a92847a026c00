package bundle

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/store/blobs"
)

// TestBundleHeader: the header decoder names what is wrong.
func TestBundleHeader(t *testing.T) {
	c := blobs.Sum([]byte("x"))
	good := Header(c)
	if got, err := parseBundleHeader(good); err != nil || got != c {
		t.Fatalf("%v %v", got, err)
	}
	ver2 := bytes.Clone(good)
	ver2[len(ver2)-1] = 2
	twoRoots := append([]byte{0xa2, 0x65, 'r', 'o', 'o', 't', 's', 0x82}, good[8:8+2+2+37]...)
	twoRoots = append(twoRoots, good[8:8+2+2+37]...)
	twoRoots = append(twoRoots, good[len(good)-9:]...)
	swapped := append([]byte{0xa2, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01}, good[1:len(good)-9]...)
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"version 2", "version 2", ver2},
		{"two roots", "2 roots", twoRoots},
		{"keys swapped", "canonical", swapped},
		{"trailing", "after the CBOR map", append(bytes.Clone(good), 0)},
		{"array", "not a CBOR map", []byte{0x80}},
		{"indefinite", "unsupported", []byte{0xbf}},
		{"other key", "unexpected field", []byte{0xa1, 0x61, 'x', 0x01}},
	} {
		if _, err := parseBundleHeader(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
