package playback

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/playback/card"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// handleEvidenceCard serves GET /v1/recordings/{id}/evidence: the
// recording's evidence card (playback/card), as GitHub-flavoured Markdown
// (format=markdown, the default) or JSON (format=json, wire.EvidenceCard).
// Its links are absolute, from PublicURL or else the request's own host.
func (s *Service) handleEvidenceCard(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if err := enumParam("format", format, []string{"markdown", "json"}); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	c, err := s.evidenceCard(r.Context(), recordingOf(r), s.linkBase(r))
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if format == "json" {
		httpx.JSON(w, http.StatusOK, c)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(card.Markdown(c)))
}

// handleEvidenceShare answers POST /v1/recordings/{id}/evidence
// ({"share": "7d"}, scope share): a card whose links are share links, made
// by a POST since a GET must not create shares. Share links are not built
// yet, so after the recording is found it answers 501 with what works now.
func (s *Service) handleEvidenceShare(w http.ResponseWriter, r *http.Request) {
	if _, err := s.recording(r.Context(), chi.URLParam(r, "id")); err != nil {
		if e := wire.From(err); e.Code == "RECORDING_NOT_FOUND" {
			err = wire.RecordingNotFound(false) // a POST's, as the access guard answers it
		}
		s.edge.Fail(w, r, err)
		return
	}
	s.edge.Fail(w, r, wire.New(http.StatusNotImplemented, "NOT_IMPLEMENTED",
		"GET …/evidence?format=markdown gives the card with links for readers holding a read token",
		"evidence cards with share links are not built yet"))
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
	return s.evidenceCard(ctx, row, base)
}

func (s *Service) evidenceCard(ctx context.Context, row store.RecordingRow, base string) (wire.EvidenceCard, error) {
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
	return b.Card(), nil
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
