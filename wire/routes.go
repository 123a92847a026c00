package wire

import (
	"net/url"
	"strings"
)

// The API's routes, as chi patterns: {id} is a recording id, {n} a step
// number, {cid} a blob's CID, and the other {…} the ids their names say.
// Servers register these, the access guard and the share scopes match
// requests against them, and clients fill them with Path, so that a route
// is spelled once. docs/design.md "The API" says what each one answers;
// internal/app's OpenAPI test checks that the document lists them all.
const (
	// The write API (ingest), and the recordings collection.
	RouteRecordings = "/v1/recordings"           // POST opens, GET lists
	RouteRecording  = "/v1/recordings/{id}"      // GET: its row
	RouteEvents     = RouteRecording + "/events" // POST appends, GET pages
	RouteFinish     = RouteRecording + "/finish"
	RouteAbort      = RouteRecording + "/abort"

	// One recording's reads.
	RouteSteps           = RouteRecording + "/steps"
	RouteStep            = RouteSteps + "/{n}"
	RouteStepDOM         = RouteStep + "/dom"
	RouteSnapshotPage    = RouteRecording + "/snapshots/{seq}" // a paged snapshot's next page
	RouteRedaction       = RouteRecording + "/redaction"
	RouteHAR             = RouteRecording + "/har"
	RouteRRWeb           = RouteRecording + "/rrweb"
	RouteVideo           = RouteRecording + "/video.webm"
	RouteRecordingSearch = RouteRecording + "/search"
	RouteAt              = RouteRecording + "/at"
	RouteBundle          = RouteRecording + "/bundle"
	RouteAttestation     = RouteRecording + "/attestation"
	RouteEvidence        = RouteRecording + "/evidence" // GET the card, POST shares it
	RouteRecordingBlob   = RouteRecording + "/blobs/{cid}"
	RouteComments        = RouteRecording + "/comments"
	RouteComment         = RouteComments + "/{comment}"
	RouteShares          = RouteRecording + "/shares"
	RouteShare           = RouteShares + "/{sid}"
	RouteViews           = RouteRecording + "/views"
	RouteRetention       = RouteRecording + "/retention"
	RoutePins            = RouteRecording + "/pins"
	RoutePin             = RoutePins + "/{pin}"
	RouteRepair          = RouteRecording + "/repair"

	// Across recordings.
	RouteSearch         = "/v1/search"
	RouteBlob           = "/v1/blobs/{cid}"
	RouteDiff           = "/v1/diff"
	RouteDiffGroup      = "/v1/diff/group"
	RouteGroups         = "/v1/groups"
	RouteGroup          = RouteGroups + "/{id}"
	RouteAttestationKey = "/v1/attestation/key"

	// Operating the server.
	RouteTokens       = "/v1/tokens"
	RouteToken        = RouteTokens + "/{id}"
	RouteAudit        = "/v1/audit"
	RouteSweep        = "/v1/retention/sweep"
	RouteIndexRebuild = "/v1/index/rebuild"
	RouteOpenAPI      = "/v1/openapi.json"

	// A share link (the secret is the credential; it opens the player).
	RouteShareLink = "/s/{secret}"
)

// Path fills route's {…} parameters in order with params, each escaped as
// one path segment; a parameter without a value is left as its pattern.
func Path(route string, params ...string) string {
	var b strings.Builder
	rest := route
	for _, p := range params {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			break
		}
		b.WriteString(rest[:open])
		b.WriteString(url.PathEscape(p))
		rest = rest[open+end+1:]
	}
	b.WriteString(rest)
	return b.String()
}
