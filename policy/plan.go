// Package policy evaluates Rego: the redaction policy is compiled once at
// start and evaluated once per recording into a Plan, the concrete list of
// what redact must drop, scrub and mask in that recording.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"

	"github.com/flightrec/flightrec/wire"
)

// Plan is what redaction does to one recording. It is the result of
// evaluating data.flightrec.redact.plan with the recording's metadata and
// app map as input, normalized (lowercased where matching is
// case-insensitive, sorted, deduplicated) so that equal plans have equal
// digests.
type Plan struct {
	// Headers whose values are dropped from HAR requests and responses,
	// lowercase. Cookie headers are among them by default.
	DropHeaders []string `json:"drop_headers"`
	// Cookies whose values are dropped from HAR cookies[] arrays; "*" is
	// every cookie.
	DropCookies []string `json:"drop_cookies"`
	// Query, form and fragment parameters whose values are scrubbed,
	// lowercase (matched case-insensitively).
	DropParams []string `json:"drop_params"`
	// JSON keys whose values are masked wherever they appear in bodies,
	// checks and payloads, lowercase; matched after removing '_', '-'.
	SecretKeys []string `json:"secret_keys"`
	// Input types masked in the DOM (lowercase), e.g. "password", "hidden".
	MaskInputTypes []string `json:"mask_input_types"`
	// Autocomplete tokens masked in the DOM; a trailing '*' matches a
	// prefix ("cc-*").
	MaskAutocomplete []string `json:"mask_autocomplete"`
	// Regular expressions (RE2, matched case-insensitively) on an input's
	// name or id that mark it masked, e.g. "card|cc-?num|cvv|pass".
	MaskNamePatterns []string `json:"mask_name_patterns"`
	// CSS selectors whose elements' values are masked (from the policy and
	// the app map's masked selectors).
	MaskSelectors []string `json:"mask_selectors"`
	// CSS selectors whose elements' text content is masked.
	MaskTextSelectors []string `json:"mask_text_selectors"`
	// Detectors run over bodies, texts, URLs and header values: "jwt",
	// "pem", "aws", "github", "slack", "generic", "card".
	Detectors []string `json:"detectors"`
	// Minimum Shannon entropy (bits per character) for the "generic"
	// key=value detector to flag a value.
	EntropyThreshold float64 `json:"entropy_threshold"`
	// Mime types whose bodies are dropped; a trailing "/*" matches a type.
	DropBodyMimes []string `json:"drop_body_mimes"`
	// Pseudonymize replaces erased values with keyed pseudonyms
	// ("[redacted:<8 hex>]", HMAC-SHA256 under the server's key) so the
	// same secret correlates within a recording; otherwise "[redacted]".
	Pseudonymize bool `json:"pseudonymize"`
	// DropUnmaskedFrames drops a frame or screenshot that arrives with no
	// mask rectangles while a masked field is on the page.
	DropUnmaskedFrames bool `json:"drop_unmasked_frames"`
	// KeepDownloads keeps a downloaded file's bytes as a blob (a download
	// event; the receipt's effects.files entry names its CID). Off, the
	// default, a download is described by name, size, type and sha256
	// only, and a download event is dropped. Omitted when false, so the
	// digests of plans made before it are unchanged.
	KeepDownloads bool `json:"keep_downloads,omitempty"`
}

// MaskRules returns the plan's masking rules.
func (p *Plan) MaskRules() wire.MaskRules {
	return wire.MaskRules{InputTypes: p.MaskInputTypes, Autocomplete: p.MaskAutocomplete,
		NamePatterns: p.MaskNamePatterns, Selectors: p.MaskSelectors, TextSelectors: p.MaskTextSelectors}
}

// Normalize lowercases the case-insensitive lists, sorts and dedupes every
// list. Evaluate calls it; tests that build plans by hand call it too.
func (p *Plan) Normalize() {
	lower := func(xs []string) []string {
		for i := range xs {
			xs[i] = strings.ToLower(strings.TrimSpace(xs[i]))
		}
		return xs
	}
	p.DropHeaders = set(lower(p.DropHeaders))
	p.DropCookies = set(p.DropCookies)
	p.DropParams = set(lower(p.DropParams))
	p.SecretKeys = set(lower(p.SecretKeys))
	p.MaskInputTypes = set(lower(p.MaskInputTypes))
	p.MaskAutocomplete = set(lower(p.MaskAutocomplete))
	p.MaskNamePatterns = set(p.MaskNamePatterns)
	p.MaskSelectors = set(p.MaskSelectors)
	p.MaskTextSelectors = set(p.MaskTextSelectors)
	p.Detectors = set(lower(p.Detectors))
	p.DropBodyMimes = set(lower(p.DropBodyMimes))
}

func set(xs []string) []string {
	out := make([]string, 0, len(xs))
	seen := map[string]bool{}
	for _, x := range xs {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// Digest is "sha256:" and the hex digest of the plan's canonical JSON
// (normalized, fixed field order). The manifest records it.
func (p *Plan) Digest() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Plan always marshals
	}
	d := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(d[:])
}
