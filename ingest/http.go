package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/wire"
)

// Routes mounts the write API on r.
func (s *Service) Routes(r chi.Router) {
	r.Post(wire.RouteRecordings, s.handleOpen)
	r.Post(wire.RouteEvents, s.handleAppend)
	r.Post(wire.RouteFinish, s.handleFinish)
	r.Post(wire.RouteAbort, s.handleAbort)
}

// maxControlBody bounds the JSON bodies of open and finish.
const maxControlBody = 1 << 20

func (s *Service) handleOpen(w http.ResponseWriter, r *http.Request) {
	var req wire.OpenRequest
	if err := s.decodeJSONBody(r, maxControlBody, &req); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	rep, err := s.Open(r.Context(), req)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	w.Header().Set("Location", wire.Path(wire.RouteRecording, rep.ID))
	if s.cl != nil {
		// The opening node owns it (epoch 1).
		w.Header().Set(wire.OwnerHeader, s.cl.cfg.Advertise)
	}
	httpx.JSON(w, http.StatusCreated, rep)
}

func (s *Service) handleFinish(w http.ResponseWriter, r *http.Request) {
	var req wire.FinishRequest
	if err := s.decodeJSONBody(r, maxControlBody, &req); err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	if s.cl != nil {
		// The body is read: a proxied finish carries it again, decoded.
		raw, _ := json.Marshal(req)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
		r.Header.Del("Content-Encoding")
	}
	if s.elsewhere(w, r, chi.URLParam(r, "id"), req.Verdict) {
		return
	}
	rep, err := s.Finish(r.Context(), chi.URLParam(r, "id"), req)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	httpx.JSON(w, http.StatusOK, rep)
}

// handleAbort seals an open recording with the verdict aborted. It takes
// no body.
func (s *Service) handleAbort(w http.ResponseWriter, r *http.Request) {
	if s.elsewhere(w, r, chi.URLParam(r, "id"), "aborted") {
		return
	}
	rep, err := s.Abort(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	httpx.JSON(w, http.StatusOK, rep)
}

func (s *Service) handleAppend(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := chi.URLParam(r, "id")
	if s.elsewhere(w, r, id, "") {
		return
	}
	if _, err := s.lookup(id); err != nil { // before reading a body we would refuse
		s.edge.Fail(w, r, err)
		return
	}
	body, done, err := s.readBody(r, s.cfg.MaxBatchBytes)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	// Nothing holds the body after Append returns: records were written
	// to the log and blobs copied into their pack.
	defer done()
	s.m.Bytes.Add(float64(len(body)))
	batch, err := DecodeBatch(body, s.cfg.Limits)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	rep, err := s.Append(r.Context(), id, batch)
	if err != nil {
		s.edge.Fail(w, r, err)
		return
	}
	s.m.Batches.Inc()
	s.m.AckLat.Observe(time.Since(start).Seconds())
	if s.cl != nil {
		// Which node acknowledged (the owner, also through a proxy), and
		// where the executor may send the next appends directly.
		w.Header().Set(NodeHeader, s.cl.cfg.Node)
		w.Header().Set(wire.OwnerHeader, s.cl.cfg.Advertise)
	}
	httpx.JSON(w, http.StatusOK, rep)
}

// elsewhere answers, in cluster mode, a write to a recording this node
// does not have open: proxied to its owner, refused, or (false) taken
// over and now open here. On a single node it is always false.
func (s *Service) elsewhere(w http.ResponseWriter, r *http.Request, id, finish string) bool {
	if s.cl == nil {
		return false
	}
	s.mu.Lock()
	_, open := s.open[id]
	_, sealed := s.sealed[id]
	s.mu.Unlock()
	if open || sealed {
		return false
	}
	return s.claim(w, r, id, finish)
}

func (s *Service) decodeJSONBody(r *http.Request, max int64, v any) error {
	body, done, err := s.readBody(r, max)
	if err != nil {
		return err
	}
	defer done()
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return wire.New(http.StatusBadRequest, "BAD_REQUEST", "send a JSON object as documented at /v1/openapi.json",
			"invalid request body: %s", wire.DescribeJSON(err))
	}
	return nil
}

// zstdPool recycles decoders. A decoder's memory is its window and its
// blocks: the window is capped at maxZstdWindow (what zstd's levels 1-19
// use; --long frames are refused), and it decodes on the calling goroutine.
var zstdPool = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderMaxMemory(maxZstdWindow))
	if err != nil {
		panic(err)
	}
	return d
}}

const maxZstdWindow = 8 << 20

// readBody reads a request body, decompressing gzip or zstd, within the
// shared body memory budget (bodyMem), and refuses more than max
// decompressed bytes (so a small compressed bomb cannot exhaust memory,
// nor can many at once). done gives the body's memory back; the bytes
// must not be used after it.
func (s *Service) readBody(r *http.Request, max int64) (body []byte, done func(), err error) {
	var src io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, nil, badEncoding("gzip")
		}
		defer gz.Close()
		src = gz
	case "zstd":
		release, err := s.bodies.decoder(r.Context())
		if err != nil {
			return nil, nil, err
		}
		defer release()
		d := zstdPool.Get().(*zstd.Decoder)
		if err := d.Reset(r.Body); err != nil {
			return nil, nil, badEncoding("zstd")
		}
		defer func() { _ = d.Reset(nil); zstdPool.Put(d) }()
		src = d
	default:
		return nil, nil, wire.New(http.StatusUnsupportedMediaType, "UNSUPPORTED_ENCODING",
			"send the body plain, gzip or zstd", "Content-Encoding %q is not supported", clipHeader(enc))
	}
	hint := int64(-1)
	if src == r.Body {
		hint = r.ContentLength // one allocation for a plain body of known size
	}
	body, done, err = s.bodies.read(r.Context(), src, max, hint)
	if err == nil {
		return body, done, nil
	}
	var mbe *http.MaxBytesError
	var ae *wire.Error
	switch {
	case errors.As(err, &ae):
		return nil, nil, ae
	case errors.As(err, &mbe):
		return nil, nil, tooLarge(max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The server's body deadline (--body-timeout) passed.
		return nil, nil, wire.New(http.StatusRequestTimeout, "BODY_TIMEOUT",
			"send the body faster, or in smaller batches, or raise the server's --body-timeout; nothing of this batch was stored",
			"the request body did not arrive in time")
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, nil, wire.New(http.StatusRequestEntityTooLarge, "BATCH_TOO_LARGE",
			fmt.Sprintf("compress with a zstd window of at most %d MiB (levels 1-19 without --long)", maxZstdWindow>>20),
			"the body's zstd window exceeds %d bytes", maxZstdWindow)
	case r.Header.Get("Content-Encoding") != "":
		return nil, nil, badEncoding(r.Header.Get("Content-Encoding"))
	}
	return nil, nil, wire.New(http.StatusBadRequest, "BAD_BODY", "resend the batch", "reading the body failed")
}

func tooLarge(max int64) error {
	return wire.New(http.StatusRequestEntityTooLarge, "BATCH_TOO_LARGE",
		"send smaller batches or raise --max-batch-bytes",
		"the batch exceeds %d bytes (decompressed)", max)
}

func badEncoding(enc string) error {
	return wire.New(http.StatusBadRequest, "BAD_ENCODING", "check the compression of the body",
		"the body is not valid %s", clipHeader(enc))
}

func clipHeader(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}
