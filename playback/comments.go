package playback

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"crypto/rand"
	"encoding/hex"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/access"
	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/wire"
)

// Comments on a recording's steps live beside the recording
// (DATA/recordings/ID/comments.json), never in its sealed log: they change
// after it is finished without touching its root, and go when it goes.
// Their text is redacted with the recording's own plan before it is
// stored.

// Comment is one comment on a step.
type Comment struct {
	ID   string `json:"id"`
	Step int    `json:"step"`
	// T is a moment inside the step, seconds from the recording's start
	// (0: the step as a whole).
	T    float64 `json:"t,omitempty"`
	Text string  `json:"text"`
	// Author is the token id that wrote it ("anonymous" on a server
	// without tokens).
	Author    string `json:"author"`
	CreatedAt int64  `json:"created_at"`          // unix ns
	EditedAt  int64  `json:"edited_at,omitempty"` // unix ns
}

// MaxCommentBytes bounds a comment's text; MaxComments a recording's
// comments.
const (
	MaxCommentBytes = 8 << 10
	MaxComments     = 1000
)

// Comments returns recording id's comments, ordered by step then time
// (the evidence card shows a step's).
func (s *Service) Comments(id string) ([]Comment, error) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.loadComments(id)
}

func (s *Service) loadComments(id string) ([]Comment, error) {
	b, err := s.st.ReadBeside(id, store.CommentsFile)
	if err != nil {
		return nil, err
	}
	return decodeComments(id, b)
}

// decodeComments decodes recording id's comments file, by step and time.
func decodeComments(id string, b []byte) ([]Comment, error) {
	out := []Comment{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("comments of %s: %w", id, err)
		}
	}
	slices.SortStableFunc(out, func(a, b Comment) int {
		if a.Step != b.Step {
			return a.Step - b.Step
		}
		return int(a.CreatedAt - b.CreatedAt)
	})
	return out, nil
}

// updateComments changes recording id's comments with change, without
// losing a concurrent change on this node or another (Store.UpdateBeside:
// change may run more than once).
func (s *Service) updateComments(id string, change func(list []Comment) ([]Comment, error)) error {
	return s.st.UpdateBeside(id, store.CommentsFile, func(old []byte) ([]byte, error) {
		list, err := decodeComments(id, old)
		if err != nil {
			return nil, err
		}
		if list, err = change(list); err != nil {
			return nil, err
		}
		return json.Marshal(list)
	})
}

// redactComment masks text as the recording's plan masks its events.
func (s *Service) redactComment(id, text string) (string, error) {
	raw, err := s.st.Plan(id)
	if err != nil {
		return "", err
	}
	var plan policy.Plan
	if err := json.Unmarshal(raw, &plan); err != nil {
		return "", fmt.Errorf("plan of %s: %w", id, err)
	}
	key := s.pseudoKey
	if key == nil {
		if key, err = s.st.Key(layout.PseudonymKeyName); err != nil {
			return "", err
		}
	}
	red, err := redact.New(&plan, key)
	if err != nil {
		return "", err
	}
	if kh, err := s.st.KnownHashes(id); err == nil && len(kh) > 0 {
		if err := red.LoadKnownHashes(kh); err != nil {
			return "", err
		}
	}
	return red.RedactString(text)
}

func (s *Service) commentRoutes(rec chi.Router) {
	rec.Get(wire.RouteComments, s.handleComments)
	rec.Post(wire.RouteComments, s.handleAddComment)
	rec.Patch(wire.RouteComment, s.handleEditComment)
	rec.Delete(wire.RouteComment, s.handleDeleteComment)
}

func (s *Service) handleComments(w http.ResponseWriter, r *http.Request) {
	list, err := s.Comments(recordingOf(r).ID)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	httpx.JSON(w, http.StatusOK, map[string]any{"comments": list})
}

type commentRequest struct {
	Step *int     `json:"step"`
	T    *float64 `json:"t"`
	Text *string  `json:"text"`
}

func decodeComment(r *http.Request) (commentRequest, error) {
	var req commentRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxCommentBytes*4))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, badComment("the body is not a comment")
	}
	if req.Text != nil {
		t := strings.TrimSpace(*req.Text)
		if t == "" || len(t) > MaxCommentBytes || !utf8.ValidString(t) {
			return req, badComment("text must be 1 to 8192 bytes of UTF-8")
		}
		req.Text = &t
	}
	if req.T != nil && *req.T < 0 {
		return req, badComment("t must be ≥ 0 seconds")
	}
	return req, nil
}

func badComment(msg string) error {
	return wire.New(http.StatusBadRequest, "BAD_REQUEST", `send {"step": 9, "t": 83.5, "text": "…"} (t optional)`, "%s", msg)
}

func newCommentID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Service) handleAddComment(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	req, err := decodeComment(r)
	if err == nil && (req.Step == nil || req.Text == nil) {
		err = badComment("a comment needs step and text")
	}
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	steps, err := s.idx.Timeline(r.Context(), row.ID)
	if err != nil {
		s.edge.Fail(w, r, indexError(err))
		return
	}
	if !hasStep(steps, *req.Step) {
		s.edge.Fail(w, r, wire.New(http.StatusNotFound, "STEP_NOT_FOUND", "list steps with GET …/steps", "no such step"))
		return
	}
	text, err := s.redactComment(row.ID, *req.Text)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	c := Comment{ID: newCommentID(), Step: *req.Step, Text: text, Author: access.ViewerOf(r.Context()).Name(),
		CreatedAt: time.Now().UnixNano()}
	if req.T != nil {
		c.T = *req.T
	}
	err = s.updateComments(row.ID, func(list []Comment) ([]Comment, error) {
		if len(list) >= MaxComments {
			return nil, wire.New(http.StatusConflict, "TOO_MANY_COMMENTS", "delete comments that are no longer needed",
				"this recording has %d comments, the most it keeps", MaxComments)
		}
		return append(list, c), nil
	})
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.auditComment(audit.KindComment, row, c, r)
	httpx.JSON(w, http.StatusCreated, c)
}

// editable finds comment cid of the request's recording for a change by
// its author or an admin.
func (s *Service) editable(r *http.Request, list []Comment) (int, error) {
	cid := chi.URLParam(r, "comment")
	i := slices.IndexFunc(list, func(c Comment) bool { return c.ID == cid })
	if i < 0 {
		return 0, wire.New(http.StatusNotFound, "COMMENT_NOT_FOUND", "list comments with GET …/comments", "no such comment")
	}
	v := access.ViewerOf(r.Context())
	if !v.Admin && list[i].Author != v.Name() {
		return 0, wire.New(http.StatusForbidden, "FORBIDDEN", "ask the comment's author or an admin",
			"only a comment's author or an admin changes it")
	}
	return i, nil
}

func (s *Service) handleEditComment(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	req, err := decodeComment(r)
	if err == nil && (req.Text == nil || req.Step != nil) {
		err = badComment(`send {"text": "…"}: a comment's text changes, its step does not`)
	}
	var text string
	if err == nil {
		text, err = s.redactComment(row.ID, *req.Text)
	}
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	c, err := s.changeComment(r, row.ID, func(list []Comment, i int) []Comment {
		list[i].Text, list[i].EditedAt = text, time.Now().UnixNano()
		if req.T != nil {
			list[i].T = *req.T
		}
		return list
	})
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.auditComment(audit.KindCommentEdit, row, c, r)
	httpx.JSON(w, http.StatusOK, c)
}

func (s *Service) handleDeleteComment(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	c, err := s.changeComment(r, row.ID, func(list []Comment, i int) []Comment { return slices.Delete(list, i, i+1) })
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.auditComment(audit.KindCommentDelete, row, c, r)
	w.WriteHeader(http.StatusNoContent)
}

// changeComment applies change to the request's comment (by its author or
// an admin, editable) in recording id's comments and saves them; it
// returns the comment as changed (as it was, when deleted).
func (s *Service) changeComment(r *http.Request, id string, change func(list []Comment, i int) []Comment) (Comment, error) {
	var after Comment
	err := s.updateComments(id, func(list []Comment) ([]Comment, error) {
		i, err := s.editable(r, list)
		if err != nil {
			return nil, err
		}
		before := list[i]
		list = change(list, i)
		after = before
		if i < len(list) && list[i].ID == before.ID {
			after = list[i]
		}
		return list, nil
	})
	return after, err
}

// auditComment records a comment's change: which comment, step and
// author, and who changed it, never its text.
func (s *Service) auditComment(kind string, row store.RecordingRow, c Comment, r *http.Request) {
	if s.audit == nil {
		return
	}
	_, err := s.audit.Append(audit.Entry{Kind: kind, Recording: row.ID, Project: row.Project,
		Details: map[string]any{"comment": c.ID, "step": c.Step, "author": c.Author, "by": access.ViewerOf(r.Context()).Name()}})
	if err != nil {
		s.log.Error("writing the audit log failed", "kind", kind, "recording", row.ID, "err", err)
	}
}
