package playback

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	_ "image/gif" // thumbnails of GIF screenshots
	"image/jpeg"
	_ "image/png" // thumbnails of PNG screenshots
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback/card"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// handleEvidenceCard serves GET /v1/recordings/{id}/evidence: the
// recording's evidence card (playback/card), as GitHub-flavoured Markdown
// (format=markdown, the default) or JSON (format=json, wire.EvidenceCard),
// or its failure screenshot as a small image (format=thumbnail, what a
// shared card shows through its evidence link). Its links are absolute,
// from PublicURL or else the request's own host. A GET never makes a
// share link.
func (s *Service) handleEvidenceCard(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if err := enumParam("format", format, []string{"markdown", "json", "thumbnail"}); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if format == "thumbnail" {
		s.serveThumbnail(w, r, recordingOf(r))
		return
	}
	c, err := s.evidenceCard(r.Context(), recordingOf(r), s.linkBase(r), nil)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.writeCard(w, format, http.StatusOK, c)
}

func (s *Service) writeCard(w http.ResponseWriter, format string, status int, c wire.EvidenceCard) {
	if format == "json" {
		httpx.JSON(w, status, c, httpx.NoStore)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(card.Markdown(c)))
}

// handleEvidenceShare answers POST /v1/recordings/{id}/evidence
// ({"share": "7d"}, scope share; ?format= as the GET's): the card whose
// links are share links, made by a POST since a GET must not create
// shares. It makes three links through access.Shares, each audited,
// listed and revocable like any other: a player link (the player, the
// step, the screenshot's place), a video link and an evidence link (this
// card, and the thumbnail of its failure screenshot). 201.
func (s *Service) handleEvidenceShare(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if err := enumParam("format", format, []string{"markdown", "json"}); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	row, err := s.recording(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		if e := wire.From(err); e.Code == "RECORDING_NOT_FOUND" {
			err = wire.RecordingNotFound(false) // a POST's, as the access guard answers it
		}
		s.edge.Fail(w, r, err)
		return
	}
	var req struct {
		Share string `json:"share"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	err = dec.Decode(&req)
	var d time.Duration
	if err == nil {
		d, err = access.ParseExpiresIn(req.Share)
	}
	if err != nil || req.Share == "" {
		s.edge.Fail(w, r, wire.New(http.StatusBadRequest, "BAD_REQUEST",
			`send {"share": "7d"}: how long the links live, up to 90d; GET …/evidence gives the card with token links`,
			"the body is not a shared card request"))
		return
	}
	if s.shares == nil {
		s.edge.Fail(w, r, wire.New(http.StatusNotImplemented, "NOT_IMPLEMENTED",
			"GET …/evidence?format=markdown gives the card with links for readers holding a read token",
			"this server makes no share links"))
		return
	}
	base, by := s.linkBase(r), access.ViewerOf(r.Context()).Name()
	var l card.SharedLinks
	for _, k := range []struct {
		what string
		url  *string
	}{{access.SharePlayer, &l.Player}, {access.ShareVideo, &l.Video}, {access.ShareEvidence, &l.Evidence}} {
		sh, secret, err := s.shares.Create(row.ID, row.Project, k.what, d, by)
		if err != nil {
			if errors.Is(err, access.ErrBadShare) {
				err = wire.New(http.StatusBadRequest, "BAD_REQUEST", `send {"share": "7d"}, at most 90d`, "%v", err)
			}
			s.edge.Fail(w, r, err)
			return
		}
		*k.url, l.ExpiresAt = access.ShareURL(base, r, row.ID, k.what, secret), sh.ExpiresAt
	}
	c, err := s.evidenceCard(r.Context(), row, base, &l)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.writeCard(w, format, http.StatusCreated, c)
}

// thumbnailWidth bounds a thumbnail's width (a comment's column is ~900
// CSS pixels; a thumbnail is a preview that links to the player).
const thumbnailWidth = 480

// maxThumbnailSource bounds the image a thumbnail is decoded from.
const (
	maxThumbnailSource = 16 << 20
	maxThumbnailPixels = 40 << 20
)

// serveThumbnail answers format=thumbnail: the failure screenshot (else
// the failing step's last frame) scaled down to thumbnailWidth as a JPEG,
// or, when it is an image the standard library cannot decode (WebP), the
// stored image itself. A recording without one answers 404
// THUMBNAIL_NOT_FOUND.
func (s *Service) serveThumbnail(w http.ResponseWriter, r *http.Request, row store.RecordingRow) {
	c, err := s.evidenceCard(r.Context(), row, "", nil)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if c.FailingStep == nil || c.FailingStep.Screenshot == "" {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "THUMBNAIL_NOT_FOUND",
			"the card's player link shows the step", "the recording has no failure screenshot"))
		return
	}
	id, err := cid.Decode(c.FailingStep.Screenshot)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	var small []byte
	ok := false
	if f, err := s.st.Blobs.Open(id); err == nil {
		// A screenshot past maxThumbnailSource is served as stored
		// rather than decoded.
		b, err := io.ReadAll(io.LimitReader(f, maxThumbnailSource+1))
		f.Close()
		if err == nil && len(b) <= maxThumbnailSource {
			small, ok = thumbnail(b, thumbnailWidth)
		}
	}
	if !ok {
		s.serveBlob(w, r, id, "private, no-store") // as stored, or the blob's own error
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/jpeg")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	_, _ = w.Write(small)
}

// thumbnail decodes a PNG, JPEG or GIF and scales it to at most width
// pixels wide (each output pixel the mean of a 2×2 sample of its source
// block: no resizing library is needed for a preview), as a JPEG.
func thumbnail(b []byte, width int) ([]byte, bool) {
	// The header first: a small file may declare a huge image.
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width*cfg.Height > maxThumbnailPixels {
		return nil, false
	}
	src, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	sb := src.Bounds()
	if sb.Dx() <= 0 || sb.Dy() <= 0 {
		return nil, false
	}
	dw := min(width, sb.Dx())
	dh := max(1, sb.Dy()*dw/sb.Dx())
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range dh {
		for x := range dw {
			var sum [4]uint32
			for _, o := range [4][2]int{{1, 1}, {3, 1}, {1, 3}, {3, 3}} {
				sx := sb.Min.X + (4*x+o[0])*sb.Dx()/(4*dw)
				sy := sb.Min.Y + (4*y+o[1])*sb.Dy()/(4*dh)
				r, g, bl, a := src.At(sx, sy).RGBA()
				sum[0], sum[1], sum[2], sum[3] = sum[0]+r, sum[1]+g, sum[2]+bl, sum[3]+a
			}
			dst.Set(x, y, color.RGBA64{uint16(sum[0] / 4), uint16(sum[1] / 4), uint16(sum[2] / 4), uint16(sum[3] / 4)})
		}
	}
	var out bytes.Buffer
	if err := jpeg.Encode(&out, dst, &jpeg.Options{Quality: 80}); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}

// linkBase is the base URL of a card's links: PublicURL when set, else the
// scheme and host the request came to.
func (s *Service) linkBase(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// EvidenceCard builds recording id's evidence card with links under base:
// its metadata, groups and root from the store, its first failed step from
// the index, that step's events (console, failed requests, screenshot)
// read in pages, and, for a finished recording on a server with a key, the
// SHA-256 of its attestation. What it cannot include (an index catching
// up, no key) it says in the card's notes rather than failing.
func (s *Service) EvidenceCard(ctx context.Context, id, base string) (wire.EvidenceCard, error) {
	row, err := s.recording(ctx, id)
	if err != nil {
		return wire.EvidenceCard{}, err
	}
	return s.evidenceCard(ctx, row, base, nil)
}

// evidenceCard builds the card; shared, when set, are the share links it
// carries instead of links needing a token. base "" (the thumbnail's
// look-up, which needs only the failing step) skips the attestation.
func (s *Service) evidenceCard(ctx context.Context, row store.RecordingRow, base string, shared *card.SharedLinks) (wire.EvidenceCard, error) {
	steps, err := s.idx.Timeline(ctx, row.ID)
	if err != nil {
		return wire.EvidenceCard{}, indexError(err)
	}
	sig := row.FailureSignature
	if sig == "" && row.State == store.StateFinished {
		sig, _ = s.st.FailureSignature(row.ID)
	}
	meta := card.Meta{ID: row.ID, Project: row.Project, Flow: row.Flow, Executor: row.Executor, State: row.State,
		Verdict: row.Verdict, Signature: sig, Versions: row.Versions, Base: base, Root: row.Root}
	var notes []string
	switch {
	case row.State != store.StateFinished:
		notes = append(notes, "the recording is still open: it has no root to verify yet")
	case base == "":
	case s.signer == nil:
		notes = append(notes, "no attestation: this server has no signing key (flightrec export attestation makes one)")
	default:
		env, err := Attest(ctx, s.st, s.idx, s.signer, row.ID)
		switch {
		case errors.Is(err, ErrIndexBehind):
			notes = append(notes, "no attestation yet: the index is catching up with the recording; ask again in a moment")
		case err != nil:
			s.log.Error("attesting for an evidence card failed", "recording", row.ID, "err", err)
			notes = append(notes, "no attestation: it could not be made (see the server's log)")
		default:
			sum := sha256.Sum256(env)
			meta.AttestationSHA256 = hex.EncodeToString(sum[:])
		}
	}
	b := card.New(meta)
	if shared != nil {
		b.Shared(*shared)
	}
	for _, n := range notes {
		b.Note(n)
	}
	b.Groups(s.cardGroups(row.ID))
	i := slices.IndexFunc(steps, func(st store.StepRow) bool { return st.Outcome == "failed" })
	if i < 0 {
		return b.Card(), nil
	}
	fs := steps[i]
	var receipt event.Receipt
	var after uint64
	read := 0
	for {
		rows, evs, err := s.events(ctx, store.EventQuery{Recording: row.ID, Step: &fs.Step, AfterSeq: after, Limit: 5000})
		if err != nil {
			return wire.EvidenceCard{}, err
		}
		for _, e := range evs {
			if e.Kind == event.KindReceipt {
				_ = json.Unmarshal(e.Data, &receipt) // the last receipt of the step wins, as in the timeline
			}
			b.Add(e)
		}
		read += len(rows)
		if len(rows) < 5000 {
			break
		}
		if read >= maxStepEvents {
			b.Note("the failing step has more events than a card reads; the counts are of its first ones")
			break
		}
		after = rows[len(rows)-1].Seq
	}
	if receipt.Action.Verb == "" {
		// No readable receipt: the index's summary of it.
		receipt = event.Receipt{Step: fs.Step, Action: event.Action{Verb: fs.Action}, Outcome: fs.Outcome}
		if fs.ErrorCode != "" {
			receipt.Error = &event.StepError{Code: fs.ErrorCode}
		}
		if fs.Target != "" {
			receipt.Action.Target = &event.Target{Selector: fs.Target} // already as a person reads it
		}
	}
	b.Failing(fs.Step, receipt, fs.StartTS, fs.EndTS)
	b.Comments(s.stepComments(row.ID, fs.Step))
	return b.Card(), nil
}

// stepComments are the comments on step n of recording id, as stored
// (redacted when written); unreadable comments are logged and left out,
// not the card.
func (s *Service) stepComments(id string, n int) []wire.CardComment {
	cs, err := s.Comments(id)
	if err != nil {
		s.log.Error("reading a recording's comments failed", "recording", id, "err", err)
		return nil
	}
	var out []wire.CardComment
	for _, c := range cs {
		if c.Step == n {
			out = append(out, wire.CardComment{Author: c.Author, T: c.T, Text: c.Text, CreatedAt: c.CreatedAt})
		}
	}
	return out
}

// cardGroups are the groups recording id belongs to, newest first; a group
// that cannot be read is left out (and logged), not the card.
func (s *Service) cardGroups(id string) []wire.CardGroup {
	ids, err := s.st.GroupsOf(id)
	if err != nil {
		s.log.Error("listing a recording's groups failed", "recording", id, "err", err)
		return nil
	}
	var gs []store.Group
	for _, gid := range ids {
		g, err := s.st.Group(gid)
		if err != nil {
			s.log.Error("reading a group failed", "group", gid, "err", err)
			continue
		}
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b store.Group) int { return cmp.Compare(b.Created.UnixNano(), a.Created.UnixNano()) })
	out := make([]wire.CardGroup, len(gs))
	for i, g := range gs {
		out[i] = wire.CardGroup{ID: g.ID, Purpose: g.Purpose, Verdict: g.Verdict, Reproduced: g.Reproduced, Of: g.Of, Summary: g.Summary}
	}
	return out
}
