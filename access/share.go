package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flightrec/flightrec/audit"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/wire"
)

// Share links open one recording read-only without a token until they
// expire or are revoked. A link's secret is
//
//	frs_<recording>.<share id>.<signature>
//
// where the signature is base64url(HMAC-SHA256(key, "flightrec share v1\n"
// recording "\n" share id "\n" what "\n" expires_at)) under the
// deployment's share key (DATA/keys/share-link.key). The recording and the
// share id travel in the secret; what and the expiry are read from the
// share's record beside the recording (DATA/recordings/ID/shares.json), so
// a signature made for one recording, one kind or one expiry verifies for
// no other, and deleting the record (revocation, or the recording's
// removal) ends the link. Nothing secret is stored: the signature is
// computed again on each use.
const (
	sharePrefix = "frs_"
	// ShareKeyName is the share key's name under DATA/keys (store.Key).
	ShareKeyName = layout.ShareKeyName
	// DefaultShareFor is a link's life when the request names none;
	// MaxShareFor bounds it.
	DefaultShareFor = 7 * 24 * time.Hour
	MaxShareFor     = 90 * 24 * time.Hour
)

// What a share link opens.
const (
	SharePlayer   = "player"
	ShareEvidence = "evidence"
	ShareVideo    = "video"
)

// ShareKinds lists what a link may open.
var ShareKinds = []string{SharePlayer, ShareEvidence, ShareVideo}

// shareRoutes are the routes (all GET) each kind of link opens, on its
// own recording only: the player's reads (timeline, steps, DOM, video,
// blobs, redaction summary, comments, the evidence card), the card (and
// its thumbnail, ?format=thumbnail) and the blobs it shows,
// the video alone. No list, no other recording, no write, no export.
var shareRoutes = map[string][]string{
	SharePlayer: {wire.RouteRecording, wire.RouteSteps, wire.RouteStep,
		wire.RouteStepDOM, wire.RouteEvents, wire.RouteSnapshotPage, wire.RouteRedaction,
		wire.RouteRecordingBlob, wire.RouteVideo, wire.RouteAt,
		wire.RouteRecordingSearch, wire.RouteComments, wire.RouteEvidence},
	ShareEvidence: {wire.RouteEvidence, wire.RouteRecordingBlob},
	ShareVideo:    {wire.RouteVideo},
}

// Share is one link's record (never its secret).
type Share struct {
	ID        string `json:"id"`
	What      string `json:"what"`
	CreatedAt int64  `json:"created_at"` // unix ns
	ExpiresAt int64  `json:"expires_at"` // unix ns
	// By is the token id that made it ("anonymous" on a server without
	// tokens).
	By        string `json:"by"`
	RevokedAt int64  `json:"revoked_at,omitempty"` // unix ns
}

// Active says whether the link may be used at now.
func (s Share) Active(now time.Time) bool {
	return s.RevokedAt == 0 && now.UnixNano() < s.ExpiresAt
}

// Opens says whether the link lets method reach route of its recording.
func (s Share) Opens(method, route string) bool {
	return (method == "GET" || method == "HEAD") && slices.Contains(shareRoutes[s.What], route)
}

// Shares keeps the share links of every recording, and the viewer audit.
type Shares struct {
	st    *store.Store
	key   []byte
	audit *audit.Log
	clock atomic.Pointer[func() time.Time]

	mu sync.Mutex // serializes reads of the shares file (changes go through Store.UpdateBeside)

	vmu   sync.Mutex
	views map[viewKey]time.Time // last view counted, for the 10-minute rule
}

// NewShares returns the share links of st, signed with key, their changes
// recorded in log (nil records nothing).
func NewShares(st *store.Store, key []byte, log *audit.Log) *Shares {
	s := &Shares{st: st, key: key, audit: log, views: map[viewKey]time.Time{}}
	s.SetClock(time.Now)
	return s
}

// SetClock sets the clock links expire and views are counted by (a test
// moves it; safe while requests are served).
func (s *Shares) SetClock(now func() time.Time) { s.clock.Store(&now) }

func (s *Shares) now() time.Time { return (*s.clock.Load())() }

// ErrBadShare is wrapped by Create for a request it refuses.
var ErrBadShare = errors.New("bad share request")

// Create makes a link to recording id of project opening what, valid for
// d (0: DefaultShareFor), made by the token by. It returns the record and
// the link's secret (shown once).
func (s *Shares) Create(id, project, what string, d time.Duration, by string) (Share, string, error) {
	if what == "" {
		what = SharePlayer
	}
	if !slices.Contains(ShareKinds, what) {
		return Share{}, "", fmt.Errorf("%w: what is not one of %s", ErrBadShare, strings.Join(ShareKinds, ", "))
	}
	if d == 0 {
		d = DefaultShareFor
	}
	if d < 0 || d > MaxShareFor {
		return Share{}, "", fmt.Errorf("%w: expires_in must be positive and at most 90 days", ErrBadShare)
	}
	var idb [6]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return Share{}, "", err
	}
	now := s.now()
	sh := Share{ID: hex.EncodeToString(idb[:]), What: what, CreatedAt: now.UnixNano(), ExpiresAt: now.Add(d).UnixNano(), By: by}
	err := s.st.UpdateBeside(id, store.SharesFile, func(old []byte) ([]byte, error) {
		list, err := decodeShares(id, old)
		if err != nil {
			return nil, err
		}
		return json.Marshal(append(list, sh))
	})
	if err != nil {
		return Share{}, "", err
	}
	s.record(audit.Entry{Kind: audit.KindShare, Recording: id, Project: project, Why: "share link made",
		Details: map[string]any{"share": sh.ID, "what": what, "expires_at": sh.ExpiresAt, "by": by}})
	return sh, sharePrefix + id + "." + sh.ID + "." + s.sign(id, sh), nil
}

// List returns recording id's links, revoked ones included.
func (s *Shares) List(id string) ([]Share, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list, err := s.load(id)
	if list == nil {
		list = []Share{}
	}
	return list, err
}

// ErrNoShare is Revoke's answer for a link recording id does not have.
var ErrNoShare = errors.New("no such share link")

// Revoke ends link sid of recording id at once.
func (s *Shares) Revoke(id, project, sid, by string) (Share, error) {
	var out Share
	var revoked bool
	err := s.st.UpdateBeside(id, store.SharesFile, func(old []byte) ([]byte, error) {
		list, err := decodeShares(id, old)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(list, func(x Share) bool { return x.ID == sid })
		if i < 0 {
			return nil, ErrNoShare
		}
		revoked = list[i].RevokedAt == 0
		if revoked {
			list[i].RevokedAt = s.now().UnixNano()
		}
		out = list[i]
		return json.Marshal(list)
	})
	if err != nil {
		return Share{}, err
	}
	if revoked {
		s.record(audit.Entry{Kind: audit.KindUnshare, Recording: id, Project: project, Why: "share link revoked",
			Details: map[string]any{"share": sid, "by": by}})
	}
	return out, nil
}

// Check verifies a link's secret: its recording and record when the
// signature is the key's for that record and the link is active.
// Anything else (malformed, forged, expired, revoked, a recording that is
// gone) is ok false, which callers answer exactly as an unknown recording.
func (s *Shares) Check(secret string) (id string, sh Share, ok bool) {
	if len(secret) > MaxTokenLen || !strings.HasPrefix(secret, sharePrefix) {
		return "", Share{}, false
	}
	parts := strings.Split(secret[len(sharePrefix):], ".")
	if len(parts) != 3 || !store.ValidRecordingID(parts[0]) {
		return "", Share{}, false
	}
	id, sid, sig := parts[0], parts[1], parts[2]
	s.mu.Lock()
	list, err := s.load(id)
	s.mu.Unlock()
	if err != nil {
		return "", Share{}, false
	}
	i := slices.IndexFunc(list, func(x Share) bool { return x.ID == sid })
	if i < 0 {
		return "", Share{}, false
	}
	sh = list[i]
	if !hmac.Equal([]byte(sig), []byte(s.sign(id, sh))) || !sh.Active(s.now()) {
		return "", Share{}, false
	}
	return id, sh, true
}

// IsShareSecret says whether a bearer credential is a share link's secret
// rather than a token.
func IsShareSecret(s string) bool { return strings.HasPrefix(s, sharePrefix) }

func (s *Shares) sign(id string, sh Share) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "flightrec share v1\n%s\n%s\n%s\n%d", id, sh.ID, sh.What, sh.ExpiresAt)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Shares) load(id string) ([]Share, error) {
	b, err := s.st.ReadBeside(id, store.SharesFile)
	if err != nil {
		return nil, err
	}
	return decodeShares(id, b)
}

// decodeShares decodes recording id's shares file (nil: none).
func decodeShares(id string, b []byte) ([]Share, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var list []Share
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("share links of %s: %w", id, err)
	}
	return list, nil
}

func (s *Shares) record(e audit.Entry) {
	if s.audit != nil {
		_, _ = s.audit.Append(e)
	}
}

// Views.

// What a view is of.
const (
	ViewPlayer   = "player"
	ViewEvidence = "evidence"
	ViewVideo    = "video"
	ViewExport   = "export"
)

// viewOf says which routes are a view: one load of the player (its
// timeline, which it reads once per load), the evidence card, the video
// (not the player's own load of it, marked ?via=player) or an export.
// Every other read is one of the many calls a view makes.
func viewOf(route, via string) string {
	switch route {
	case wire.RouteSteps:
		return ViewPlayer
	case wire.RouteEvidence:
		return ViewEvidence
	case wire.RouteVideo:
		if via == "player" {
			return ""
		}
		return ViewVideo
	case wire.RouteHAR, wire.RouteRRWeb, wire.RouteBundle:
		return ViewExport
	}
	return ""
}

// ViewEvery is how often one viewer's views of one kind are counted.
const ViewEvery = 10 * time.Minute

// View is one entry of the viewer audit.
type View struct {
	At    int64  `json:"at"` // unix ns
	What  string `json:"what"`
	Token string `json:"token,omitempty"` // the token's id
	Share string `json:"share,omitempty"` // the link's id
	// Anonymous is set for a server without tokens.
	Anonymous bool `json:"anonymous,omitempty"`
}

type viewKey struct{ rec, who, what string }

// RecordView adds a view of recording id to its viewer audit unless the
// same viewer's view of the same kind was counted less than ViewEvery ago.
func (s *Shares) RecordView(id string, v Viewer, what string) error {
	now := s.now()
	k := viewKey{id, v.Token + "/" + v.Share, what}
	s.vmu.Lock()
	if last, ok := s.views[k]; ok && now.Sub(last) < ViewEvery {
		s.vmu.Unlock()
		return nil
	}
	if len(s.views) >= maxCache {
		for k, t := range s.views {
			if now.Sub(t) >= ViewEvery {
				delete(s.views, k)
			}
		}
	}
	s.views[k] = now
	s.vmu.Unlock()
	b, _ := json.Marshal(View{At: now.UnixNano(), What: what, Token: v.Token, Share: v.Share, Anonymous: v.Token == "" && v.Share == ""})
	return s.st.AppendBeside(id, store.ViewsFile, append(b, '\n'))
}

// Views returns recording id's viewer audit, oldest first.
func (s *Shares) Views(id string) ([]View, error) {
	b, err := s.st.ReadBeside(id, store.ViewsFile)
	if err != nil {
		return nil, err
	}
	out := []View{}
	for _, line := range strings.Split(string(b), "\n") {
		var v View
		if line == "" || json.Unmarshal([]byte(line), &v) != nil {
			continue // a torn last line (a crash mid-append) is no view
		}
		out = append(out, v)
	}
	return out, nil
}

// Viewer is who a request is from: a token's id, a share link's id, or
// neither (a server without tokens).
type Viewer struct {
	Token string
	Share string
	// Admin is set for a token with the admin scope for every project.
	Admin bool
}

type viewerKey struct{}

// WithViewer returns ctx carrying v.
func WithViewer(ctx context.Context, v Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// ViewerOf returns the viewer the guard put on a request's context.
func ViewerOf(ctx context.Context) Viewer {
	v, _ := ctx.Value(viewerKey{}).(Viewer)
	return v
}

// Name is the viewer as an author or actor: the token's id, "share:" and
// the link's id, or "anonymous".
func (v Viewer) Name() string {
	switch {
	case v.Token != "":
		return v.Token
	case v.Share != "":
		return "share:" + v.Share
	}
	return "anonymous"
}

// ParseExpiresIn reads a link's life: a Go duration ("168h") or days
// ("7d"); "" is the default.
func ParseExpiresIn(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%w: expires_in %q", ErrBadShare, s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: expires_in %q", ErrBadShare, s)
	}
	return d, nil
}
