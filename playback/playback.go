// Package playback is flightrec's read API: recordings, their step
// timeline, every event of a step with payloads resolved from the log,
// paged events, and blobs (by CID, or through a recording that references
// them).
package playback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/playback/dom"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// Service answers reads from the index, resolving events from the store.
type Service struct {
	st  *store.Store
	idx store.Index
	rd  *store.Reader
	log *slog.Logger
	dom *dom.Cache // DOM checkpoint sets by recording
	// domRoots is the root each cached DOM set was built from: a
	// recording re-redacted since (on any node: store/copy.go) has its
	// set dropped, not served with what the rewrite erased.
	domRoots sync.Map
	videos   videoBuilds
	// compact keeps compact timelines encoded (timelinecache.go).
	compact   compactCache
	edge      *httpx.Edge // answers, counts and logs error replies
	retention func(ctx context.Context, row store.RecordingRow) wire.Retention
	signer    *attest.Signer
	pseudoKey []byte
	cfg       Config
	audit     *audit.Log
	shares    *access.Shares
	cmu       sync.Mutex // serializes reads of the comments file (changes go through Store.UpdateBeside)
}

// Deps are what a Service reads from; the caller builds them.
type Deps struct {
	Store *store.Store
	Index store.Index
	Log   *slog.Logger
	// Edge answers, counts and logs error replies.
	Edge *httpx.Edge
	// Signer signs attestations (the server's key, kept in the data
	// directory); without one the attestation routes answer 501.
	Signer *attest.Signer
	// Retention, when set, tells a recording's retention (its class,
	// expiry and pins: retention is not playback's), which its metadata
	// carries as "retention".
	Retention func(ctx context.Context, row store.RecordingRow) wire.Retention
	// Audit records comments' changes; nil records nothing.
	Audit *audit.Log
	// Shares makes the share links of a shared evidence card; nil
	// answers POST …/evidence 501.
	Shares *access.Shares
	// PseudonymKey is the redaction pseudonyms' key comments are redacted
	// with: the deployment's in shared mode; nil for the data directory's
	// own (as ingest's).
	PseudonymKey []byte
}

// Config tunes a Service. The zero value is the default.
type Config struct {
	// MaxVideoDuration bounds a video's span (frames' video and the
	// executor's): a longer one is refused before any work (a video's
	// frame count, its encoding time and the bytes held while it is built
	// all grow with it), and a clip of steps asked for instead. 0 is
	// DefaultMaxVideoDuration.
	MaxVideoDuration time.Duration
	// FFmpeg is the ffmpeg binary that encodes frames' video, a path or a
	// name looked up on $PATH; "" is "ffmpeg".
	FFmpeg string
	// PublicURL is the base of the absolute links an evidence card
	// carries; empty, the scheme and host each request came to.
	PublicURL string
}

// DefaultMaxVideoDuration is MaxVideoDuration unless configured: at the
// encoder's 2 Mbit/s cap, a video at most 900 MB.
const DefaultMaxVideoDuration = time.Hour

// New returns a playback service over d's store and index.
func New(cfg Config, d Deps) *Service {
	if cfg.MaxVideoDuration == 0 {
		cfg.MaxVideoDuration = DefaultMaxVideoDuration
	}
	return &Service{st: d.Store, idx: d.Index, rd: d.Store.NewReader(), log: d.Log, edge: d.Edge,
		dom: dom.NewCache(domCacheBytes, dom.DefaultEvery), cfg: cfg, signer: d.Signer, pseudoKey: d.PseudonymKey, retention: d.Retention, audit: d.Audit,
		shares: d.Shares}
}

// Close releases cached segment handles.
func (s *Service) Close() error { return s.rd.Close() }

// Forget drops cached handles of a recording (after it is sealed).
func (s *Service) Forget(id string) {
	s.rd.Forget(id)
	s.dom.Remove(id)
	s.domRoots.Delete(id)
}

// Routes mounts the read API on r. The routes of one recording get it
// loaded first (withRecording); evidence needs it finished.
func (s *Service) Routes(r chi.Router) {
	r.Get(wire.RouteRecordings, s.handleList)
	rec := r.With(s.withRecording)
	rec.Get(wire.RouteRecording, s.handleRecording)
	rec.Get(wire.RouteSteps, s.handleTimeline)
	rec.Get(wire.RouteStep, s.handleStep)
	rec.Get(wire.RouteStepDOM, s.handleDOM)
	rec.Get(wire.RouteEvents, s.handleEvents)
	rec.Get(wire.RouteSnapshotPage, s.handleSnapshotPage)
	rec.Get(wire.RouteRedaction, s.handleRedaction)
	rec.Get(wire.RouteHAR, s.handleHAR)
	rec.Get(wire.RouteRRWeb, s.handleRRWeb)
	rec.Get(wire.RouteVideo, s.handleVideo)
	rec.Get(wire.RouteRecordingSearch, s.handleRecordingSearch)
	rec.Get(wire.RouteAt, s.handleAt)
	s.commentRoutes(rec)
	r.Get(wire.RouteSearch, s.handleSearch)
	rec.With(s.finished).Get(wire.RouteBundle, s.handleBundle)
	rec.With(s.finished).Get(wire.RouteAttestation, s.handleAttestation)
	rec.Get(wire.RouteEvidence, s.handleEvidenceCard)
	// Not withRecording: a POST's unknown recording is the write's 404,
	// as the access guard answers it.
	r.Post(wire.RouteEvidence, s.handleEvidenceShare)
	r.Get(wire.RouteAttestationKey, s.handleAttestationKey)
	r.With(s.withCID, s.withRecording).Get(wire.RouteRecordingBlob, s.handleRecordingBlob)
	r.With(s.withCID).Get(wire.RouteBlob, s.handleBlob)
	r.Get(wire.RouteDiff, s.handleDiff)
	r.Get(wire.RouteDiffGroup, s.handleDiffGroup)
	r.Post(wire.RouteGroups, s.handleCreateGroup)
	r.Get(wire.RouteGroup, s.handleGroup)
}

func badParam(name, want string) error {
	return wire.New(http.StatusBadRequest, "BAD_PARAMETER", "send "+name+" as "+want,
		"query parameter %s is not %s", name, want)
}

// enumParam refuses a filter value outside its enumeration: a filter that
// matched nothing would answer an empty page, which reads as "no such
// recordings" when the caller misspelled the value.
func enumParam(name, v string, allowed []string) error {
	if v == "" || slices.Contains(allowed, v) {
		return nil
	}
	list := strings.Join(allowed, ", ")
	return wire.New(http.StatusBadRequest, "BAD_PARAMETER", "send "+name+" as one of "+list+", or leave it out",
		"query parameter %s is not one of %s", name, list).With("allowed", allowed)
}

// kindNames are the event kinds as filter values.
var kindNames = func() []string {
	out := make([]string, len(event.Kinds))
	for i, k := range event.Kinds {
		out[i] = string(k)
	}
	return out
}()

func notFound() error { return wire.RecordingNotFound(true) }

// RecordingList answers GET /v1/recordings.
type RecordingList struct {
	Recordings []store.RecordingRow `json:"recordings"`
	// Next is the value of ?after= for the next page, absent on the last.
	Next string `json:"next,omitempty"`
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.RecordingFilter{Project: q.Get("project"), Flow: q.Get("flow"), Verdict: q.Get("verdict"),
		State: q.Get("state"), After: q.Get("after")}
	if err := errors.Join(enumParam("state", f.State, []string{store.StateOpen, store.StateFinished}),
		enumParam("verdict", f.Verdict, store.Verdicts)); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	var err error
	if f.Since, err = timeParam(q.Get("since")); err != nil {
		s.edge.Fail(w, r, badParam("since", "RFC 3339 time or unix nanoseconds"))
		return
	}
	if f.Until, err = timeParam(q.Get("until")); err != nil {
		s.edge.Fail(w, r, badParam("until", "RFC 3339 time or unix nanoseconds"))
		return
	}
	if f.Limit, err = intParam(q.Get("limit"), 100, 1, 1000); err != nil {
		s.edge.Fail(w, r, badParam("limit", "an integer 1-1000"))
		return
	}
	if f.After != "" && !store.ValidRecordingID(f.After) {
		s.edge.Fail(w, r, badParam("after", "a recording id"))
		return
	}
	rows, err := s.idx.Recordings(r.Context(), f)
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	out := RecordingList{Recordings: rows}
	if out.Recordings == nil {
		out.Recordings = []store.RecordingRow{}
	}
	if len(rows) == f.Limit {
		out.Next = rows[len(rows)-1].ID
	}
	httpx.JSON(w, http.StatusOK, out)
}

func timeParam(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, err
	}
	return t.UnixNano(), nil
}

func intParam(v string, def, min, max int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, errors.New("out of range")
	}
	return n, nil
}

func indexError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound()
	}
	e := wire.New(http.StatusServiceUnavailable, "INDEX_UNAVAILABLE", "retry after the delay",
		"the index did not answer")
	e.RetryAfter = 1
	return e
}

// recording finds a recording in the index, or, while the index catches up
// with a recording it has not seen yet, in the store.
func (s *Service) recording(ctx context.Context, id string) (store.RecordingRow, error) {
	if !store.ValidRecordingID(id) {
		return store.RecordingRow{}, notFound()
	}
	row, err := s.idx.Recording(ctx, id)
	if err == nil {
		if row.State != store.StateFinished {
			// The index lags the store: a recording finished since its
			// open row was queued is finished, whatever the row says
			// (a read that saw it finished must not see it open again).
			s.sealedState(id, &row)
		}
		return row, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return row, indexError(err)
	}
	meta, merr := s.st.Meta(id)
	if merr != nil {
		return row, notFound()
	}
	row = store.RecordingRow{RecordingMeta: meta, State: store.StateOpen}
	s.sealedState(id, &row)
	return row, nil
}

// sealedState makes row finished, from the manifest, when the store has
// sealed recording id: the store is the truth about a recording's state.
func (s *Service) sealedState(id string, row *store.RecordingRow) {
	if root, _ := s.st.Root(id); root != "" {
		if m, err := s.st.ReadManifest(root); err == nil {
			row.RecordingMeta, row.State, row.Root = m.Recording, store.StateFinished, root
		}
	}
}

type recordingKey struct{}

// withRecording loads the recording of the route's {id} once per request,
// before its handler, and puts it in the request's context (recordingOf
// reads it). A recording that cannot be had is answered here, as
// s.recording says: not found, or the index unavailable. Access control
// (the guard, in front of every route) has already run.
func (s *Service) withRecording(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		row, err := s.recording(r.Context(), chi.URLParam(r, "id"))
		if err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), recordingKey{}, row)))
	})
}

// recordingOf is the recording withRecording loaded.
func recordingOf(r *http.Request) store.RecordingRow {
	return r.Context().Value(recordingKey{}).(store.RecordingRow)
}

func (s *Service) handleRecording(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	// Whether the recording was re-redacted (audit scan --fix) is in its
	// manifest, not in the index's columns.
	if row.Root != "" && row.ReRedacted == nil {
		if m, err := s.st.ReadManifest(row.Root); err == nil {
			row.ReRedacted = m.Recording.ReRedacted
		}
	}
	// The groups it belongs to (GET /v1/groups/{id}); a groups directory
	// that cannot be read leaves them out rather than the recording.
	groups, err := s.st.GroupsOf(row.ID)
	if err != nil {
		s.log.Error("listing a recording's groups failed", "recording", row.ID, "err", err)
	}
	if groups == nil {
		groups = []string{}
	}
	var retention *wire.Retention
	if s.retention != nil {
		ret := s.retention(r.Context(), row)
		retention = &ret
	}
	httpx.JSON(w, http.StatusOK, struct {
		store.RecordingRow
		Retention *wire.Retention `json:"retention,omitempty"`
		Groups    []string        `json:"groups"`
	}{row, retention, groups})
}

func (s *Service) handleTimeline(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	form := r.URL.Query().Get("form")
	if err := enumParam("form", form, []string{"full", "compact"}); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	var page *timelinePage
	if form == "compact" {
		var err error
		if page, err = pageParams(r); err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		if c := s.compact.get(row.ID, row.IndexedTo, row.Root); c != nil {
			writeCompact(w, c, page)
			return
		}
	} else if r.URL.Query().Has("limit") || r.URL.Query().Has("offset") || r.URL.Query().Has("around") {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "add form=compact, or leave out offset, around and limit",
			"only the compact timeline comes in pages"))
		return
	}
	steps, err := s.idx.Timeline(r.Context(), row.ID)
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	if steps == nil {
		steps = []store.StepRow{}
	}
	if form == "compact" {
		c, err := s.compact.put(compactTimeline(row, steps), row.Root)
		if err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		writeCompact(w, c, page)
		return
	}
	httpx.JSON(w, http.StatusOK, wire.Timeline{Recording: row.ID, IndexedThrough: row.IndexedTo, Steps: steps})
}

// timelinePage is a page of the compact timeline: limit steps from
// offset; or, without an offset, about limit steps around the step around
// names or, if it names none, around the first failing step, else from
// the start.
type timelinePage struct {
	offset, limit int
	placed        bool // offset was given
	around        *int
}

// maxTimelinePage bounds limit: a page is meant to be parsed within a
// frame or two, and the whole timeline is there without one.
const maxTimelinePage = 10_000

// pageParams reads offset, around and limit; a request with none of them
// is the whole timeline (nil).
func pageParams(r *http.Request) (*timelinePage, error) {
	q := r.URL.Query()
	if !q.Has("limit") && !q.Has("offset") && !q.Has("around") {
		return nil, nil
	}
	var (
		p   timelinePage
		err error
	)
	if p.limit, err = intParam(q.Get("limit"), 500, 1, maxTimelinePage); err != nil {
		return nil, badParam("limit", fmt.Sprintf("an integer from 1 to %d", maxTimelinePage))
	}
	if p.offset, err = intParam(q.Get("offset"), 0, 0, math.MaxInt32); err != nil {
		return nil, badParam("offset", "a position in the timeline, 0 or more")
	}
	p.placed = q.Has("offset")
	if q.Has("around") {
		a, err := intParam(q.Get("around"), 0, math.MinInt32, math.MaxInt32)
		if err != nil {
			return nil, badParam("around", "a step number")
		}
		if q.Has("offset") {
			return nil, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "send offset or around, not both",
				"offset and around both place the page")
		}
		p.around = &a
	}
	return &p, nil
}

// writeCompact writes the whole compact timeline (page nil), kept encoded,
// or a page of it.
func writeCompact(w http.ResponseWriter, c *compactEntry, page *timelinePage) {
	w.Header().Set("Content-Type", "application/json")
	if page == nil {
		w.Write(c.body)
		return
	}
	t := c.timeline
	n := len(t.Step)
	from := page.offset
	if !page.placed {
		i, ok := 0, false
		if page.around != nil {
			i, ok = slices.BinarySearch(t.Step, *page.around)
		}
		if !ok {
			i = 0
			if len(t.Failed) > 0 {
				i, _ = slices.BinarySearch(t.Step, t.Failed[0])
			}
		}
		from = max(0, min(i-page.limit/2, n-page.limit))
	}
	from = min(from, n)
	to := min(n, from+page.limit)
	t.Offset = from
	t.Step, t.Start, t.End = t.Step[from:to], t.Start[from:to], t.End[from:to]
	t.Action, t.Target, t.Outcome, t.ErrorCode = t.Action[from:to], t.Target[from:to], t.Outcome[from:to], t.ErrorCode[from:to]
	t.HAR, t.Console, t.DOM = t.HAR[from:to], t.Console[from:to], t.DOM[from:to]
	_ = json.NewEncoder(w).Encode(t)
}

func compactTimeline(row store.RecordingRow, steps []store.StepRow) wire.CompactTimeline {
	n := len(steps)
	c := wire.CompactTimeline{Recording: row.ID, IndexedThrough: row.IndexedTo, Form: "compact",
		Step: make([]int, n), Start: make([]int64, n), End: make([]int64, n),
		Action: make([]string, n), Target: make([]string, n), Outcome: make([]string, n), ErrorCode: make([]string, n),
		HAR: make([]int64, n), Console: make([]int64, n), DOM: make([]int64, n), Failed: []int{}, Total: n}
	if n > 0 {
		c.T0 = steps[0].StartTS
	}
	for i, s := range steps {
		c.Step[i] = s.Step
		c.Start[i], c.End[i] = (s.StartTS-c.T0)/1000, (s.EndTS-c.T0)/1000
		c.Action[i], c.Target[i], c.Outcome[i], c.ErrorCode[i] = s.Action, s.Target, s.Outcome, s.ErrorCode
		c.HAR[i], c.Console[i], c.DOM[i] = s.Counts[event.KindHAR], s.Counts[event.KindConsole], s.Counts[event.KindDOM]
		if s.Outcome == "failed" {
			c.Failed = append(c.Failed, s.Step)
		}
		if c.FirstDOM == nil && c.DOM[i] > 0 {
			c.FirstDOM = &s.Step
		}
	}
	return c
}

// maxStepEvents bounds one step view; larger steps page via /events.
const maxStepEvents = 100_000

func (s *Service) handleStep(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	n, err := stepParam(r)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	view := wire.StepView{Recording: row.ID, Step: n, Events: []event.Envelope{}}
	var after uint64
	for len(view.Events) < maxStepEvents {
		rows, evs, err := s.events(r.Context(), store.EventQuery{Recording: row.ID, Step: &n, AfterSeq: after, Limit: 5000})
		if err != nil {
			s.edge.Fail(w, r, err)
			return
		}
		view.Events = append(view.Events, evs...)
		if len(rows) < 5000 {
			break
		}
		after = rows[len(rows)-1].Seq
	}
	if len(view.Events) == 0 {
		steps, err := s.idx.Timeline(r.Context(), row.ID)
		if err == nil && !hasStep(steps, n) {
			s.edge.Fail(w, r, wire.New(http.StatusNotFound, "STEP_NOT_FOUND", "list steps with GET …/steps",
				"the recording has no step %d (yet)", n))
			return
		}
	}
	httpx.JSON(w, http.StatusOK, view)
}

// stepParam reads the {n} of a step route.
func stepParam(r *http.Request) (int, error) {
	n, err := strconv.Atoi(chi.URLParam(r, "n"))
	if err != nil || n < 0 {
		return 0, wire.New(http.StatusBadRequest, "BAD_PARAMETER", "ask for a step number ≥ 0 from …/steps",
			"step is not a number ≥ 0")
	}
	return n, nil
}

func hasStep(steps []store.StepRow, n int) bool {
	for _, s := range steps {
		if s.Step == n {
			return true
		}
	}
	return false
}

// events queries the index and resolves the rows' records from the store.
func (s *Service) events(ctx context.Context, q store.EventQuery) ([]store.EventRow, []event.Envelope, error) {
	rows, err := s.idx.Events(ctx, q)
	if err != nil {
		return nil, nil, indexError(err)
	}
	evs, err := s.resolve(q.Recording, rows)
	return rows, evs, err
}

// resolve reads the records of index rows from the store.
func (s *Service) resolve(id string, rows []store.EventRow) ([]event.Envelope, error) {
	out := make([]event.Envelope, 0, len(rows))
	for _, row := range rows {
		rec, err := s.rd.Read(id, row.Loc)
		if errors.Is(err, store.ErrCorrupt) {
			// A damaged record (flightrec verify reports it, repair
			// seals the recording without it): the records around it
			// stay readable.
			s.log.Error("an indexed event is damaged in the store; left out", "recording", id, "seq", row.Seq,
				"segment", row.Loc.Segment, "offset", row.Loc.Offset, "err", err)
			continue
		}
		if err != nil {
			s.log.Error("reading an indexed event failed", "recording", id, "seq", row.Seq, "err", err)
			return nil, wire.New(http.StatusInternalServerError, "STORE_READ_FAILED",
				"run flightrec verify and flightrec reindex", "event %d could not be read from the store", row.Seq)
		}
		if rec.Seq != row.Seq {
			return nil, wire.New(http.StatusInternalServerError, "INDEX_STALE",
				"run flightrec reindex", "the index points event %d at the wrong record", row.Seq)
		}
		out = append(out, rec.Envelope())
	}
	return out, nil
}

func (s *Service) handleEvents(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	qv := r.URL.Query()
	q := store.EventQuery{Recording: row.ID, Kind: event.Kind(qv.Get("kind"))}
	var err error
	if err = enumParam("kind", string(q.Kind), kindNames); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if v := qv.Get("step"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.edge.Fail(w, r, badParam("step", "a number ≥ 0"))
			return
		}
		q.Step = &n
	}
	if v := qv.Get("after_seq"); v != "" {
		if q.AfterSeq, err = strconv.ParseUint(v, 10, 64); err != nil {
			s.edge.Fail(w, r, badParam("after_seq", "a number ≥ 0"))
			return
		}
	}
	if q.Limit, err = intParam(qv.Get("limit"), 1000, 1, 10000); err != nil {
		s.edge.Fail(w, r, badParam("limit", "an integer 1-10000"))
		return
	}
	rows, evs, err := s.events(r.Context(), q)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	page := wire.EventPage{Recording: row.ID, Events: evs}
	if len(rows) == q.Limit {
		page.NextAfterSeq = rows[len(rows)-1].Seq
	}
	httpx.JSON(w, http.StatusOK, page)
}

// handleRedaction serves the recording's redaction report: rule, channel,
// count and locations (seq, JSON pointer) of what was erased or masked.
func (s *Service) handleRedaction(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	rep, err := s.st.Redaction(row.ID)
	if err != nil {
		s.log.Error("reading a redaction report failed", "recording", row.ID, "err", err)
		s.edge.Fail(w, r, storeReadFailed("the redaction report could not be read"))
		return
	}
	httpx.JSON(w, http.StatusOK, rep)
}

// servedTypes are the only content types a blob is served as; anything
// else is an octet stream, so a blob can never be rendered as HTML.
var servedTypes = map[string]bool{"image/jpeg": true, "image/png": true, "video/webm": true}

// Cache-Control of a blob. Its bytes never change (the CID is their
// hash), but it is served because this caller may read it (a recording
// that references it, or an admin token): no shared cache may keep it
// for others.
const cachePrivate = "private, max-age=31536000, immutable"

// handleBlob serves GET /v1/blobs/{cid}: any stored blob, by CID.
func (s *Service) handleBlob(w http.ResponseWriter, r *http.Request) {
	c := cidOf(r)
	s.serveBlob(w, r, c, cachePrivate)
}

// handleRecordingBlob serves GET /v1/recordings/{id}/blobs/{cid}: a blob
// the recording references, served as GET /v1/blobs/{cid} serves it.
// Identical bytes are one blob across recordings and projects, so a blob
// is answered through a recording only when that recording references it;
// otherwise the answer is the unknown recording's, so a caller learns
// nothing of blobs (or recordings) it cannot read.
func (s *Service) handleRecordingBlob(w http.ResponseWriter, r *http.Request) {
	c := cidOf(r)
	row := recordingOf(r)
	ok, err := s.references(r.Context(), row.ID, c.String())
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if !ok {
		s.edge.Fail(w, r, notFound())
		return
	}
	s.serveBlob(w, r, c, cachePrivate)
}

// references reports whether recording id references blob c: an indexed
// event of it carries c (Index.HasBlob), or, once the recording is
// finished, c is its root (the manifest), one of its manifest's segments,
// or one of the blobs its manifest lists (those its events carry, which
// covers events the index has not caught up with yet).
func (s *Service) references(ctx context.Context, id, c string) (bool, error) {
	ok, err := s.idx.HasBlob(ctx, id, c)
	if err != nil {
		return false, indexError(err)
	}
	if ok {
		return true, nil
	}
	root, err := s.st.Root(id)
	if err != nil {
		s.log.Error("reading a recording's root failed", "recording", id, "err", err)
		return false, storeReadFailed("the recording's root could not be read")
	}
	switch root {
	case "":
		return false, nil // open: no manifest yet
	case c:
		return true, nil
	}
	m, err := s.st.ReadManifest(root)
	if err != nil {
		s.log.Error("reading a manifest failed", "recording", id, "root", root, "err", err)
		return false, storeReadFailed("the recording's manifest could not be read")
	}
	for _, seg := range m.Segments {
		if seg.CID == c {
			return true, nil
		}
	}
	// Blobs is sorted and distinct (Store.Seal), but a manifest is read
	// from disk: a linear search does not depend on that.
	return slices.Contains(m.Blobs, c), nil
}

func storeReadFailed(msg string) error {
	return wire.New(http.StatusInternalServerError, "STORE_READ_FAILED", "run flightrec verify", "%s", msg)
}

type cidKey struct{}

// withCID parses the route's {cid} into the request's context (cidOf reads
// it); a malformed one is answered 400. On a recording's blob route it runs
// before withRecording: a bad CID is refused whatever the recording.
func (s *Service) withCID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := store.ParseCID(chi.URLParam(r, "cid"))
		if err != nil {
			s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_CID",
				"use a CID from an event (CIDv1, raw, sha2-256, base32)", "not a flightrec CID"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cidKey{}, c)))
	})
}

// cidOf is the CID withCID parsed.
func cidOf(r *http.Request) cid.Cid { return r.Context().Value(cidKey{}).(cid.Cid) }

// serveBlob serves blob c's bytes (Range and conditional requests
// included) as a sniffed image or video type, else as an octet stream,
// with nosniff, an ETag of the CID and cache as its Cache-Control.
func (s *Service) serveBlob(w http.ResponseWriter, r *http.Request, c cid.Cid, cache string) {
	f, err := s.st.Blobs.Open(c)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.edge.Fail(w, r, wire.New(http.StatusNotFound, "BLOB_NOT_FOUND", "check the CID", "no such blob"))
			return
		}
		if errors.Is(err, store.ErrBlobCorrupt) {
			s.log.Error("a stored blob is corrupt; not served", "cid", c.String(), "err", err)
			s.edge.Fail(w, r, wire.New(http.StatusInternalServerError, "BLOB_CORRUPT",
				"run flightrec verify --data DIR: it lists the damage", "the blob's stored bytes do not match its CID"))
			return
		}
		s.edge.Fail(w, r, err)
		return
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := f.ReadAt(head, 0)
	ct := http.DetectContentType(head[:n])
	if !servedTypes[ct] {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", cache)
	h.Set("ETag", `"`+c.String()+`"`)
	http.ServeContent(w, r, "", time.Time{}, f)
}
