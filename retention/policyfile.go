package retention

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/statedoc"
	"github.com/flightrec/flightrec/wire"
)

// The policy digest document holds the digest of the policy serve last ran
// with (policy.Engine.Digest): DATA/policy.digest on a single node, one
// object of the shared object store in shared mode (internal/app chooses).
// A sweep from the command line compares its own policy with it: a cron
// job that forgot --policy would otherwise delete what the server's policy
// keeps.

// PolicyFile is DATA/policy.digest, the single node's policy digest
// document.
func PolicyFile(dataDir string) statedoc.Doc {
	return statedoc.File(layout.Of(dataDir).PolicyDigest(), 0o644)
}

// RecordPolicy records digest in doc.
func RecordPolicy(doc statedoc.Doc, digest string) error {
	return doc.Update(context.Background(), func([]byte) ([]byte, error) { return []byte(digest + "\n"), nil })
}

// RecordedPolicy is the digest serve last recorded, "" when no serve has
// (a store only ever written by commands).
func RecordedPolicy(doc statedoc.Doc) (string, error) {
	b, err := doc.Read(context.Background())
	if err != nil {
		return "", fmt.Errorf("retention: reading the recorded policy digest: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// CheckPolicy refuses with POLICY_MISMATCH when serve recorded a policy
// other than digest, unless changed says the operator means it.
func CheckPolicy(doc statedoc.Doc, digest string, changed bool) error {
	served, err := RecordedPolicy(doc)
	if err != nil || served == "" || served == digest || changed {
		return err
	}
	return wire.New(http.StatusConflict, "POLICY_MISMATCH",
		"sweep under the policy the server runs with (--policy DIR or FLIGHTREC_POLICY, as for serve), or sweep through the server (--server URL); if the policy changed on purpose, add --policy-changed",
		"the server last ran with policy %s; this sweep would run with policy %s", served, digest).
		With("served_digest", served).With("sweep_digest", digest)
}
