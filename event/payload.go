package event

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// PageRef names a page a step opened: the id its events carry, its URL
// when it was seen, and the page that opened it ("" the first).
type PageRef struct {
	ID     string `json:"id"`
	URL    string `json:"url,omitempty"`
	Opener string `json:"opener,omitempty"`
}

// Target names what an action aimed at: an accessibility ref, role and name,
// or a CSS selector.
type Target struct {
	Ref string `json:"ref,omitempty"`
	// Frame names the child frame the element is in (its title, or its
	// origin), as the flow's target did; "" is the top document.
	Frame    string `json:"frame,omitempty"`
	Role     string `json:"role,omitempty"`
	Name     string `json:"name,omitempty"`
	Selector string `json:"selector,omitempty"`
}

// Action is what a step did: a verb, its target and its arguments.
type Action struct {
	Verb   string          `json:"verb"`
	Target *Target         `json:"target,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
}

// StepError is a failed step's code, reason and what to try next.
type StepError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	Next    string `json:"next,omitempty"`
}

// RequestEffect is one request a step caused.
type RequestEffect struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
	// Replayed says the answer came from a recording (a rerun's network
	// pin), and whether its body was redacted or cut there.
	Replayed string `json:"replayed,omitempty"`
}

// Effects are what a step changed besides its own outcome.
type Effects struct {
	Navigation *Navigation `json:"navigation,omitempty"`
	Popups     []string    `json:"popups,omitempty"`
	// Pages are the pages (popups, tabs) the step opened that the
	// recording follows, with the ids their events carry (Popups keeps
	// their URLs, for readers that know only it).
	Pages     []PageRef `json:"pages,omitempty"`
	Dialogs   []Dialog  `json:"dialogs,omitempty"`
	Downloads []string  `json:"downloads,omitempty"`
	// Files describes the downloads one by one (Downloads keeps their
	// names, as a list of strings, for readers that know only it).
	Files         []File          `json:"files,omitempty"`
	Requests      []RequestEffect `json:"requests,omitempty"`
	ConsoleErrors int             `json:"console_errors,omitempty"`
	SnapshotDelta string          `json:"snapshot_delta,omitempty"`
}

// File is a file a step downloaded: its suggested name (redacted on the
// server like any text), size, MIME type (the response's, else sniffed
// from the bytes) and the hex sha256 of its bytes. The bytes themselves
// are not sent.
type File struct {
	Name   string `json:"name"`
	URL    string `json:"url,omitempty"`
	Size   int64  `json:"size"`
	MIME   string `json:"mime,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// State is "completed", or "canceled" when the download did not end
	// (then Size is what arrived and SHA256 is empty).
	State string `json:"state,omitempty"`
	// CID names the file's bytes, kept as a blob by a download event of
	// the same step, when the policy keeps downloads (keep_downloads);
	// empty otherwise (hash only).
	CID string `json:"cid,omitempty"`
}

// Download is a downloaded file's bytes, sent only when the recording's
// policy keeps downloads. On the wire Data holds the bytes (base64 in
// JSON); stored and served, DataCID replaces them. The step's receipt
// describes the file in effects.files, naming the same CID.
type Download struct {
	Name    string `json:"name"`
	MIME    string `json:"mime,omitempty"`
	SHA256  string `json:"sha256"`
	Data    []byte `json:"data,omitempty"`
	DataCID string `json:"data_cid,omitempty"`
}

func (d *Download) validate() *Error {
	if d.DataCID != "" {
		return errf("data_cid", "is set by the server; send the bytes in data")
	}
	if len(d.Data) == 0 {
		return errf("data", "is required (base64 bytes)")
	}
	if sum := sha256.Sum256(d.Data); hex.EncodeToString(sum[:]) != d.SHA256 {
		return errf("sha256", "must be the hex sha256 of data")
	}
	return nil
}

// Navigation is a page change caused by a step.
type Navigation struct {
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}

// Dialog is a JavaScript dialog a step opened.
type Dialog struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

// Outcomes of a step.
const (
	OutcomeDone    = "done"
	OutcomeFailed  = "failed"
	OutcomeUnknown = "outcome_unknown"
)

// Receipt is the executor's account of one step.
type Receipt struct {
	Step int `json:"step"`
	// Page is the page the step acted on: "" the recording's first page,
	// else the id a receipt's effects.pages gave it when it opened.
	Page           string     `json:"page,omitempty"`
	Action         Action     `json:"action"`
	Resolved       *Target    `json:"resolved,omitempty"`
	Outcome        string     `json:"outcome"`
	Error          *StepError `json:"error,omitempty"`
	Effects        *Effects   `json:"effects,omitempty"`
	Rule           string     `json:"rule,omitempty"`
	StartedAt      int64      `json:"started_at,omitempty"`
	EndedAt        int64      `json:"ended_at,omitempty"`
	BrowserSeconds float64    `json:"browser_seconds,omitempty"`
}

func (r *Receipt) validate() *Error {
	if r.Action.Verb == "" {
		return errf("action.verb", "is required")
	}
	switch r.Outcome {
	case OutcomeDone, OutcomeUnknown:
	case OutcomeFailed:
		if r.Error == nil || r.Error.Code == "" {
			return errf("error.code", "is required when outcome is failed")
		}
	case "":
		return errf("outcome", "is required")
	default:
		return errf("outcome", "must be done, failed or outcome_unknown")
	}
	if r.StartedAt != 0 && r.EndedAt != 0 && r.EndedAt < r.StartedAt {
		return errf("ended_at", "is before started_at")
	}
	return nil
}

// Snapshot views and moments.
var (
	snapshotViews = []string{"interactive", "content", "full", "delta"}
	snapshotWhens = []string{"", "before", "after"}
)

// Snapshot is a text rendering of the page.
type Snapshot struct {
	View      string `json:"view"`
	Scope     string `json:"scope,omitempty"`
	When      string `json:"when,omitempty"`
	Origin    string `json:"origin,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
	Page      string `json:"page,omitempty"` // "" the recording's first page
}

func (s *Snapshot) validate() *Error {
	if !oneOf(s.View, snapshotViews) {
		return errf("view", "must be interactive, content, full or delta")
	}
	if !oneOf(s.When, snapshotWhens) {
		return errf("when", "must be before or after")
	}
	return nil
}

// DOM is one rrweb event, unchanged in shape.
type DOM struct {
	Type      *int            `json:"type"`
	Data      json.RawMessage `json:"data"`
	Timestamp int64           `json:"timestamp"`
	// Page is the page the event is of ("" the recording's first page):
	// each page's rrweb stream is a document history of its own.
	Page string `json:"page,omitempty"`
}

func (d *DOM) validate() *Error {
	if d.Type == nil {
		return errf("type", "is required (rrweb event type 0-7)")
	}
	if *d.Type < 0 || *d.Type > 7 {
		return errf("type", "must be an rrweb event type 0-7")
	}
	if d.Timestamp <= 0 {
		return errf("timestamp", "must be unix milliseconds > 0")
	}
	return nil
}

// NameValue is HAR's name/value pair (headers, query strings, params).
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Cookie is a HAR 1.2 cookie.
type Cookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Path     string `json:"path,omitempty"`
	Domain   string `json:"domain,omitempty"`
	Expires  string `json:"expires,omitempty"`
	HTTPOnly bool   `json:"httpOnly,omitempty"`
	Secure   bool   `json:"secure,omitempty"`
}

// PostData is a HAR 1.2 request body.
type PostData struct {
	MimeType string      `json:"mimeType"`
	Params   []NameValue `json:"params,omitempty"`
	Text     string      `json:"text,omitempty"`
}

// HARRequest is a HAR 1.2 request.
type HARRequest struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	QueryString []NameValue `json:"queryString"`
	PostData    *PostData   `json:"postData,omitempty"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
}

// HARContent is a HAR 1.2 response body.
type HARContent struct {
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text,omitempty"`
	Encoding string `json:"encoding,omitempty"`
}

// HARResponse is a HAR 1.2 response. Status 0 means the request failed.
type HARResponse struct {
	Status      int         `json:"status"`
	StatusText  string      `json:"statusText"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	Content     HARContent  `json:"content"`
	RedirectURL string      `json:"redirectURL"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
}

// HAR is one HAR 1.2 entry. Executors send bodies whole (up to the event
// size limit): redaction scans the whole body, then caps what is stored at
// MaxHARBody and sets Truncated, so a secret straddling the cap is found.
type HAR struct {
	StartedDateTime string          `json:"startedDateTime"`
	Time            float64         `json:"time"`
	Request         HARRequest      `json:"request"`
	Response        HARResponse     `json:"response"`
	Timings         json.RawMessage `json:"timings,omitempty"`
	Initiator       json.RawMessage `json:"_initiator,omitempty"`
	Truncated       bool            `json:"_truncated,omitempty"`
	// WebSocketMessages are a WebSocket's messages, in the order they
	// went, on the entry of its handshake (Chrome's HAR extension).
	WebSocketMessages []WebSocketMessage `json:"_webSocketMessages,omitempty"`
	// PageRef is HAR's own member: the page the request was made by ("" or
	// absent: the recording's first page).
	PageRef string `json:"pageref,omitempty"`
}

// WebSocketMessage is one message of a WebSocket connection: Type is
// "send" (page to server) or "receive", Time wall-clock seconds since the
// epoch, Opcode 1 for text and 2 for binary (Data then base64), Data as
// sent, capped like a body (MaxHARBody, then Truncated) after redaction.
type WebSocketMessage struct {
	Type      string  `json:"type"`
	Time      float64 `json:"time"`
	Opcode    int     `json:"opcode"`
	Data      string  `json:"data"`
	Truncated bool    `json:"_truncated,omitempty"`
}

// MaxHARBody is the cap on a HAR body as stored.
const MaxHARBody = 64 << 10

func (h *HAR) validate() *Error {
	if h.Request.Method == "" {
		return errf("request.method", "is required")
	}
	if h.Request.URL == "" {
		return errf("request.url", "is required")
	}
	if h.Response.Status < 0 || h.Response.Status > 999 {
		return errf("response.status", "must be 0 (failed) or an HTTP status")
	}
	return nil
}

// StackFrame is one frame of a console stack.
type StackFrame struct {
	Function string `json:"function,omitempty"`
	URL      string `json:"url,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

var consoleLevels = []string{"log", "debug", "info", "warn", "warning", "error", "trace", "assert", "exception"}

// Console is one console message or uncaught exception.
type Console struct {
	Level       string       `json:"level"`
	Text        string       `json:"text"`
	URL         string       `json:"url,omitempty"`
	Line        int          `json:"line,omitempty"`
	Column      int          `json:"column,omitempty"`
	Stack       []StackFrame `json:"stack,omitempty"`
	MappedStack []StackFrame `json:"mapped_stack,omitempty"`
	Page        string       `json:"page,omitempty"` // "" the recording's first page
}

func (c *Console) validate() *Error {
	if !oneOf(c.Level, consoleLevels) {
		return errf("level", "must be one of %s", strings.Join(consoleLevels, ", "))
	}
	return nil
}

// Rect is a rectangle in CSS pixels of the viewport.
type Rect struct {
	X int `json:"x"`
	Y int `json:"y"`
	W int `json:"w"`
	H int `json:"h"`
}

// Point is a position in CSS pixels of the viewport.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Frame is one video frame. On the wire Image holds the bytes (base64 in
// JSON); stored and served, ImageCID replaces them.
type Frame struct {
	Mime     string `json:"mime"`
	Image    []byte `json:"image,omitempty"`
	ImageCID string `json:"image_cid,omitempty"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Masks    []Rect `json:"masks,omitempty"`
	Cursor   *Point `json:"cursor,omitempty"`
	Page     string `json:"page,omitempty"` // "" the recording's first page
}

func (f *Frame) validate() *Error {
	if f.Mime != "image/jpeg" && f.Mime != "image/png" {
		return errf("mime", "must be image/jpeg or image/png")
	}
	if f.ImageCID != "" {
		return errf("image_cid", "is set by the server; send the bytes in image")
	}
	if len(f.Image) == 0 {
		return errf("image", "is required (base64 bytes)")
	}
	if f.Width <= 0 || f.Height <= 0 {
		return errf("width", "width and height must be > 0")
	}
	for i := range f.Masks {
		if f.Masks[i].W <= 0 || f.Masks[i].H <= 0 {
			return errf("masks", "rectangle %d has no area", i)
		}
	}
	return nil
}

// Screenshot is a frame taken at a checkpoint or on failure.
type Screenshot struct {
	Frame
	Reason string `json:"reason,omitempty"`
}

func (s *Screenshot) validate() *Error {
	if e := s.Frame.validate(); e != nil {
		return e
	}
	if s.Reason != "" && s.Reason != "checkpoint" && s.Reason != "failure" {
		return errf("reason", "must be checkpoint or failure")
	}
	return nil
}

// TimedRect is a mask rectangle over a time range on the recording's clock.
// For video the rectangle is in the video's pixels.
type TimedRect struct {
	Rect
	FromTS int64 `json:"from_ts"`
	ToTS   int64 `json:"to_ts"`
}

// Video is one chunk of an executor-encoded WebM stream (VP8 or VP9).
//
// On the wire an executor sends Mime, StreamStartTS, Chunk (the stream's
// next bytes, split anywhere), Masks (rectangles over time ranges, which
// may also come in an event of their own, without a chunk) and End (the
// stream is over: the group of frames it leaves open is complete). The
// chunk itself is not stored: ingest parses the stream into GOPs (a
// keyframe and the frames up to the next one), redacts each and stores it
// as a blob. The stored event says what the chunk completed instead:
// ChunkBytes, Stream (once the stream's header is parsed), GOPs and
// Dropped, all set by the server.
type Video struct {
	Mime          string      `json:"mime"`
	StreamStartTS int64       `json:"stream_start_ts"`
	Chunk         []byte      `json:"chunk,omitempty"`
	ChunkCID      string      `json:"chunk_cid,omitempty"`
	Masks         []TimedRect `json:"masks,omitempty"`
	End           bool        `json:"end,omitempty"`

	ChunkBytes int          `json:"chunk_bytes,omitempty"`
	Stream     *VideoStream `json:"stream,omitempty"`
	GOPs       []VideoGOP   `json:"gops,omitempty"`
	Dropped    []VideoGOP   `json:"dropped_gops,omitempty"`
	// Resynced counts frames the stream lost: those before its first
	// keyframe, or, after a server restart mid-GOP, those up to the next
	// keyframe Cluster.
	Resynced int `json:"resynced_frames,omitempty"`
}

// VideoStream is what a WebM stream's header says of its video track.
type VideoStream struct {
	Codec  string `json:"codec"` // V_VP8 or V_VP9
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// TimecodeScale is the stream's ns per tick; FrameDuration its
	// DefaultDuration in ns (0 when it gives none).
	TimecodeScale int64  `json:"timecode_scale"`
	FrameDuration int64  `json:"frame_duration,omitempty"`
	CodecPrivate  []byte `json:"codec_private,omitempty"`
}

// VideoGOP is one stored (or dropped) group of frames: a keyframe and
// the frames up to the next. StartTS and EndTS are unix ns on the
// recording's clock: the keyframe's time, and when the last frame stops
// showing (the next keyframe's time, or at the stream's end its last
// frame's time plus a frame).
type VideoGOP struct {
	CID     string `json:"cid,omitempty"` // "" for a dropped GOP
	StartTS int64  `json:"start_ts"`
	EndTS   int64  `json:"end_ts"`
	Frames  int    `json:"frames"`
	Bytes   int64  `json:"bytes,omitempty"`
	// Masked says mask rectangles were painted into it (it was decoded
	// and re-encoded); Rule, on a dropped GOP, says why it was dropped.
	Masked bool   `json:"masked,omitempty"`
	Rule   string `json:"rule,omitempty"`
}

func (v *Video) validate() *Error {
	if v.Mime != "video/webm" {
		return errf("mime", "must be video/webm")
	}
	if v.ChunkCID != "" {
		return errf("chunk_cid", "is set by the server; send the bytes in chunk")
	}
	if v.ChunkBytes != 0 || v.Stream != nil || v.GOPs != nil || v.Dropped != nil || v.Resynced != 0 {
		return errf("gops", "chunk_bytes, stream, gops, dropped_gops and resynced_frames are set by the server")
	}
	if v.StreamStartTS <= 0 {
		return errf("stream_start_ts", "must be unix nanoseconds > 0 (when the stream's time 0 was, on the recording's clock)")
	}
	if len(v.Chunk) == 0 && len(v.Masks) == 0 && !v.End {
		return errf("chunk", "is required (base64 bytes), unless the event carries masks or ends the stream")
	}
	for i := range v.Masks {
		m := &v.Masks[i]
		if m.W <= 0 || m.H <= 0 {
			return errf("masks", "rectangle %d has no area", i)
		}
		if m.ToTS < m.FromTS {
			return errf("masks", "rectangle %d ends (to_ts) before it starts (from_ts)", i)
		}
	}
	return nil
}

// Check is a UI or state check with what was expected and what was seen.
type Check struct {
	Type   string          `json:"type"`
	Target string          `json:"target,omitempty"`
	Expect json.RawMessage `json:"expect,omitempty"`
	Actual json.RawMessage `json:"actual,omitempty"`
	Passed bool            `json:"passed"`
}

func (c *Check) validate() *Error {
	if c.Type != "ui" && c.Type != "state" {
		return errf("type", "must be ui or state")
	}
	return nil
}

// Viewport is the browser's viewport in CSS pixels.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Meta carries versions, the viewport and labels.
type Meta struct {
	Versions map[string]string `json:"versions,omitempty"`
	Viewport *Viewport         `json:"viewport,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}
