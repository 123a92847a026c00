package wire

// EvidenceCard answers GET /v1/recordings/{id}/evidence?format=json: what
// a reviewer needs of a recording in an issue or pull request, redacted as
// stored and bounded in size whatever the recording (playback/card builds
// it and renders it as Markdown). Every text member is clipped with a
// marker ("… [+N bytes]") past its cap, and the lists hold at most
// MaxCardConsole and MaxCardRequests entries, with the totals beside them.
type EvidenceCard struct {
	Recording string `json:"recording"`
	Project   string `json:"project"`
	Flow      string `json:"flow,omitempty"`
	Executor  string `json:"executor,omitempty"`
	State     string `json:"state"`             // open or finished
	Verdict   string `json:"verdict,omitempty"` // pass, fail, flaky, blocked, not_run, aborted
	// Versions are the executor's declared versions (engine, app build,
	// persona, flow revision …), at most MaxCardVersions, sorted by name.
	Versions         []CardVersion `json:"versions,omitempty"`
	FailureSignature string        `json:"failure_signature,omitempty"`
	// Groups are the groups the recording belongs to, each "reproduced k
	// of n" (at most MaxCardGroups, newest first).
	Groups []CardGroup `json:"groups,omitempty"`
	// FailingStep is the first step whose outcome is failed; absent when
	// none failed.
	FailingStep *CardStep `json:"failing_step,omitempty"`
	// Console holds up to MaxCardConsole lines of the failing step (errors
	// first, then in seq order); ConsoleTotal counts them all.
	Console      []CardConsole `json:"console"`
	ConsoleTotal int           `json:"console_total"`
	// FailedRequests holds up to MaxCardRequests requests of the failing
	// step answered 4xx/5xx or not at all; FailedRequestsTotal counts them.
	FailedRequests      []CardRequest `json:"failed_requests"`
	FailedRequestsTotal int           `json:"failed_requests_total"`
	// Comments are people's comments on the failing step (redacted with
	// the recording's plan when they were written), oldest first, at most
	// MaxCardComments; CommentsTotal counts them all.
	Comments      []CardComment `json:"comments,omitempty"`
	CommentsTotal int           `json:"comments_total,omitempty"`
	Links         CardLinks     `json:"links"`
	Verify        CardVerify    `json:"verify"`
	// Notes say what the card could not include and why (an index
	// catching up, a server without a signing key).
	Notes []string `json:"notes,omitempty"`
}

// The caps of an evidence card.
const (
	MaxCardConsole  = 8
	MaxCardRequests = 6
	MaxCardVersions = 16
	MaxCardGroups   = 3
	MaxCardComments = 5
	// MaxCardMarkdown is GitHub's limit on an issue or pull request
	// comment; a card's Markdown is always shorter.
	MaxCardMarkdown = 65536
)

// CardVersion is one declared version.
type CardVersion struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CardGroup is a group the recording belongs to.
type CardGroup struct {
	ID         string `json:"id"`
	Purpose    string `json:"purpose,omitempty"`
	Verdict    string `json:"verdict"` // reproduced, not_reproduced, flaky
	Reproduced int    `json:"reproduced"`
	Of         int    `json:"of"`
	Summary    string `json:"summary"` // "reproduced 3 of 3: POST /api/checkout 500 GIFT_CARD_STATE"
}

// CardStep is the failing step, from its receipt.
type CardStep struct {
	Step     int    `json:"step"`
	Action   string `json:"action"`             // the verb
	Target   string `json:"target,omitempty"`   // role "name", or the selector or ref
	Resolved string `json:"resolved,omitempty"` // what the executor resolved the target to
	Outcome  string `json:"outcome"`
	Code     string `json:"code,omitempty"` // the error code
	Message  string `json:"message,omitempty"`
	Next     string `json:"next,omitempty"`
	// StartTS and EndTS are the step's time range (unix ns).
	StartTS int64 `json:"start_ts,omitempty"`
	EndTS   int64 `json:"end_ts,omitempty"`
	// Screenshot is the CID of the failure screenshot (else the step's
	// last frame), shown through the player at this step.
	Screenshot string `json:"screenshot,omitempty"`
}

// CardConsole is one console line of the failing step.
type CardConsole struct {
	Seq   uint64 `json:"seq"`
	Level string `json:"level"`
	Text  string `json:"text"`
	// Source is where it was logged: the first source-mapped frame
	// ("pay (src/checkout.ts:42:7)") when the executor mapped the stack,
	// else the first frame or the message's url:line:column.
	Source string `json:"source,omitempty"`
	Mapped bool   `json:"mapped,omitempty"`
}

// CardRequest is one failed request of the failing step.
type CardRequest struct {
	Seq    uint64 `json:"seq"`
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"` // 0: no response
	// Code is the error code of a JSON error body ({"error":{"code":X}}).
	Code string `json:"code,omitempty"`
}

// CardComment is one comment on the failing step.
type CardComment struct {
	Author    string  `json:"author"`
	T         float64 `json:"t,omitempty"` // seconds from the recording's start
	Text      string  `json:"text"`
	CreatedAt int64   `json:"created_at"` // unix ns
}

// CardLinks are links into the player and the API (absolute, from the
// server's base URL). A card made by POST …/evidence {"share": …} carries
// share links instead, which open without a token: Player, Step and
// Screenshot open the player through a player link, Video and Thumbnail
// are plain GETs through a video and an evidence link, Evidence is this
// card through the evidence link; StepJSON and HAR (which need a token)
// are left out, and SharesExpireAt says when the links stop working.
type CardLinks struct {
	Player     string `json:"player"`
	Step       string `json:"step,omitempty"`       // the player at the failing step
	Screenshot string `json:"screenshot,omitempty"` // the player at the failing step, where its screenshot shows
	StepJSON   string `json:"step_json,omitempty"`  // GET …/steps/{n}
	HAR        string `json:"har,omitempty"`
	Evidence   string `json:"evidence"` // this card
	// Video and Thumbnail (the failure screenshot as a small image) are
	// share links, on a shared card only.
	Video          string `json:"video,omitempty"`
	Thumbnail      string `json:"thumbnail,omitempty"`
	SharesExpireAt int64  `json:"shares_expire_at,omitempty"` // unix ns
}

// CardVerify is what a reviewer needs to check the recording offline.
type CardVerify struct {
	Root string `json:"root,omitempty"` // the manifest CID (finished recordings)
	// AttestationSHA256 is the hex SHA-256 of the attestation GET
	// …/attestation serves (deterministic for a recording and a key).
	AttestationSHA256 string `json:"attestation_sha256,omitempty"`
	// Commands fetch the bundle, the attestation and the key, and verify
	// them with flightrec verify (shell, one command a line).
	Commands []string `json:"commands,omitempty"`
}
