package playback

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/flightrec/flightrec/diffrun"
	"github.com/flightrec/flightrec/playback/attest"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// noSigner answers the attestation routes of a service given no key.
func noSigner() error {
	return wire.New(http.StatusNotImplemented, "NO_SIGNING_KEY", "start the server with a data directory it can write (DATA/keys)",
		"this server has no attestation key")
}

// recordingOpen is the answer for evidence of a recording not sealed yet:
// a bundle and an attestation are about a root, which only finish makes.
func recordingOpen() error {
	return wire.New(http.StatusConflict, "RECORDING_OPEN", "finish the recording (POST …/finish), then ask again",
		"the recording is still open: it has no root yet")
}

// finished answers RECORDING_OPEN for a recording withRecording loaded
// that is not sealed yet: a bundle and an attestation are about its root.
func (s *Service) finished(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if recordingOf(r).State != store.StateFinished {
			s.edge.Fail(w, r, recordingOpen())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// evidenceError maps the store's answers about a recording's manifest.
func (s *Service) evidenceError(id, what string, err error) error {
	switch {
	case errors.Is(err, store.ErrOpen):
		return recordingOpen()
	case errors.Is(err, store.ErrNotFound):
		return notFound()
	}
	s.log.Error("building evidence failed", "what", what, "recording", id, "err", err)
	return storeReadFailed("the recording's manifest or blobs could not be read; run flightrec verify")
}

// handleBundle serves GET /v1/recordings/{id}/bundle: the finished
// recording as one CARv1 file (store.WriteBundle), the manifest first.
// The store checks the recording before the first byte, so a missing or
// open one still gets its status; a failure mid-stream (a damaged blob)
// cuts the body short, which the client sees as a truncated bundle that
// flightrec verify refuses.
func (s *Service) handleBundle(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	if _, _, _, err := s.st.ManifestBytes(row.ID); err != nil {
		s.edge.Fail(w, r, s.evidenceError(row.ID, "bundle", err))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.ipld.car; version=1")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.car"`, row.ID))
	w.Header().Set("ETag", `"`+row.Root+`"`)
	s.statedGaps(w, row)
	if _, err := s.st.WriteBundle(w, row.ID); err != nil {
		s.log.Error("writing a bundle failed mid-stream", "recording", row.ID, "err", err)
		panic(http.ErrAbortHandler) // cut the response: never a complete-looking bundle
	}
}

// handleAttestation serves GET /v1/recordings/{id}/attestation: a DSSE
// envelope of an in-toto statement about the finished recording's
// manifest, signed with the server's key (attest.Signer). ed25519
// signatures are deterministic, so the same recording always gets the
// same bytes.
func (s *Service) handleAttestation(w http.ResponseWriter, r *http.Request) {
	row := recordingOf(r)
	if s.Signer == nil {
		s.edge.Fail(w, r, noSigner())
		return
	}
	env, err := Attest(r.Context(), s.st, s.idx, s.Signer, row.ID)
	if err != nil {
		if errors.Is(err, ErrIndexBehind) {
			e := wire.New(http.StatusServiceUnavailable, "INDEX_CATCHING_UP", "retry in a moment",
				"the index has not read the whole recording yet, so its failure signature is not known")
			e.RetryAfter = 1
			s.edge.Fail(w, r, e)
			return
		}
		s.edge.Fail(w, r, s.evidenceError(row.ID, "attestation", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.intoto.json"`, row.ID))
	_, _ = w.Write(env)
}

// ErrIndexBehind says the index has not read all of a finished recording.
var ErrIndexBehind = errors.New("the index has not caught up with the recording")

// Attest signs finished recording id's attestation (attest.Signer), with
// its failure signature (none for a passing run). The signature is not in
// the manifest: it is the one the projector records once the index holds
// the whole recording (diffrun.RecordSignature), recorded here first if the
// projector has not yet. The index must hold the whole recording, or the
// signature could be of a prefix: then the error wraps ErrIndexBehind.
func Attest(ctx context.Context, st *store.Store, idx store.Index, signer *attest.Signer, id string) ([]byte, error) {
	raw, man, root, err := st.ManifestBytes(id)
	if err != nil {
		return nil, err
	}
	if n, err := idx.Cursor(ctx, id); err != nil {
		return nil, err
	} else if n < man.LastSeq {
		return nil, fmt.Errorf("recording %s indexed through %d of %d: %w", id, n, man.LastSeq, ErrIndexBehind)
	}
	if err := diffrun.RecordSignature(ctx, st, idx, id); err != nil {
		return nil, err
	}
	if man.Recording.FailureSignature, err = st.FailureSignature(id); err != nil {
		return nil, err
	}
	return signer.Attest(man, raw, root)
}

// handleAttestationKey serves GET /v1/attestation/key: the public key
// attestations verify with (PKIX PEM), and its id in X-Key-Id. It is
// public: a verifier needs it before it holds any token, and it proves
// nothing without a signature.
func (s *Service) handleAttestationKey(w http.ResponseWriter, r *http.Request) {
	if s.Signer == nil {
		s.edge.Fail(w, r, noSigner())
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("X-Key-Id", s.Signer.KeyID())
	_, _ = w.Write(s.Signer.PublicKeyPEM())
}
