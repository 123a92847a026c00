package retention

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/wire"
)

// DATA/policy.digest holds the digest of the policy serve last ran with
// (policy.Engine.Digest). A sweep from the command line compares its own
// policy with it: a cron job that forgot --policy would otherwise delete
// what the server's policy keeps.

// RecordPolicy writes digest to DATA/policy.digest (atomically).
func RecordPolicy(dataDir, digest string) error {
	return store.WriteFileAtomic(layout.Of(dataDir).PolicyDigest(), []byte(digest+"\n"), 0o644)
}

// RecordedPolicy is the digest serve last recorded, "" when no serve has
// (a store only ever written by commands).
func RecordedPolicy(dataDir string) (string, error) {
	b, err := os.ReadFile(layout.Of(dataDir).PolicyDigest())
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("retention: reading the recorded policy digest: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// CheckPolicy refuses with POLICY_MISMATCH when serve recorded a policy
// other than digest, unless changed says the operator means it.
func CheckPolicy(dataDir, digest string, changed bool) error {
	served, err := RecordedPolicy(dataDir)
	if err != nil || served == "" || served == digest || changed {
		return err
	}
	return wire.New(http.StatusConflict, "POLICY_MISMATCH",
		"sweep under the policy the server runs with (--policy DIR or FLIGHTREC_POLICY, as for serve), or sweep through the server (--server URL); if the policy changed on purpose, add --policy-changed",
		"the server last ran with policy %s; this sweep would run with policy %s", served, digest).
		With("served_digest", served).With("sweep_digest", digest)
}
