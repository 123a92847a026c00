package wire

// OpenRequest is the body of POST /v1/recordings.
type OpenRequest struct {
	Project  string            `json:"project"`
	Flow     string            `json:"flow,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Executor string            `json:"executor,omitempty"`
	Versions map[string]string `json:"versions,omitempty"`
	// AppMap is the app's own word on what to mask; the policy sees it.
	AppMap *AppMap `json:"app_map,omitempty"`
}

// OpenReply answers POST /v1/recordings.
type OpenReply struct {
	ID         string `json:"id"`
	PlanDigest string `json:"plan_digest,omitempty"`
	// Mask is the plan's rules for what an executor must mask in the
	// frames it sends: it computes each frame's mask rectangles from
	// them, and the server paints those rectangles before storing.
	Mask *MaskRules `json:"mask,omitempty"`
	// KeepDownloads says the plan keeps downloaded files' bytes: the
	// executor sends each as a download event (the server drops them
	// otherwise).
	KeepDownloads bool `json:"keep_downloads,omitempty"`
}

// OwnerHeader, on the replies to an open and an append in cluster mode,
// is the base URL (the --advertise) of the node that owns the recording
// now. An executor may send the recording's next writes straight there,
// skipping the hop from whichever node a load balancer picks; on any
// failure it goes back to the deployment's base URL, which always works
// (docs/design.md § Cluster mode).
const OwnerHeader = "X-Flightrec-Owner"

// AppendReply answers an append.
type AppendReply struct {
	AckedThrough uint64 `json:"acked_through"`
	Stored       int    `json:"stored"`
	Duplicates   int    `json:"duplicates"`
}

// FinishRequest is the body of POST /v1/recordings/{id}/finish.
type FinishRequest struct {
	Verdict string `json:"verdict"`
}

// FinishReply answers a finish.
type FinishReply struct {
	Root         string `json:"root"`
	AckedThrough uint64 `json:"acked_through"`
}

// AppMap is what the app under test says about itself: which elements hold
// values that must be masked, and which texts.
type AppMap struct {
	MaskedSelectors   []string `json:"masked_selectors,omitempty"`
	MaskTextSelectors []string `json:"mask_text_selectors,omitempty"`
}

// MaskRules are the parts of a plan that say which page elements are
// masked: an executor computes frame mask rectangles from them. They hold
// rules, never values.
type MaskRules struct {
	InputTypes    []string `json:"input_types"`
	Autocomplete  []string `json:"autocomplete"`
	NamePatterns  []string `json:"name_patterns"`
	Selectors     []string `json:"selectors"`
	TextSelectors []string `json:"text_selectors"`
}
