package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/klauspost/compress/zstd"

	"github.com/flightrec/flightrec/internal/apierr"
)

// Routes mounts the write API on r.
func (s *Service) Routes(r chi.Router) {
	r.Post("/v1/recordings", s.handleOpen)
	r.Post("/v1/recordings/{id}/events", s.handleAppend)
	r.Post("/v1/recordings/{id}/finish", s.handleFinish)
}

func (s *Service) fail(w http.ResponseWriter, err error) {
	e := apierr.From(err)
	s.m.Errors.WithLabelValues(e.Code).Inc()
	if e.Status >= 500 {
		s.log.Error("ingest request failed", "code", e.Code, "err", err)
	}
	apierr.Write(w, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// maxControlBody bounds the JSON bodies of open and finish.
const maxControlBody = 1 << 20

func (s *Service) handleOpen(w http.ResponseWriter, r *http.Request) {
	var req OpenRequest
	if err := decodeJSONBody(r, maxControlBody, &req); err != nil {
		s.fail(w, err)
		return
	}
	rep, err := s.Open(r.Context(), req)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Location", "/v1/recordings/"+rep.ID)
	writeJSON(w, http.StatusCreated, rep)
}

func (s *Service) handleFinish(w http.ResponseWriter, r *http.Request) {
	var req FinishRequest
	if err := decodeJSONBody(r, maxControlBody, &req); err != nil {
		s.fail(w, err)
		return
	}
	rep, err := s.Finish(r.Context(), chi.URLParam(r, "id"), req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Service) handleAppend(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := chi.URLParam(r, "id")
	if _, err := s.lookup(id); err != nil { // before reading a body we would refuse
		s.fail(w, err)
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		// Nothing holds the body after Append returns: records were
		// written to the log and blobs copied into their pack.
		if buf.Cap() <= maxPooledBody {
			bodyPool.Put(buf)
		}
	}()
	body, err := readBodyInto(buf, r, s.cfg.MaxBatchBytes)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.m.Bytes.Add(float64(len(body)))
	batch, err := DecodeBatch(body, s.cfg.Limits)
	if err != nil {
		s.fail(w, err)
		return
	}
	rep, err := s.Append(r.Context(), id, batch)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.m.Batches.Inc()
	s.m.AckLat.Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, rep)
}

func decodeJSONBody(r *http.Request, max int64, v any) error {
	body, err := readBody(r, max)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierr.New(http.StatusBadRequest, "BAD_REQUEST", "send a JSON object as documented at /v1/openapi.json",
			"invalid request body: %s", describe(err))
	}
	return nil
}

var zstdPool = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		panic(err)
	}
	return d
}}

// readBody reads a request body, decompressing gzip or zstd, and refuses
// more than max decompressed bytes (so a small compressed bomb cannot
// exhaust memory).
func readBody(r *http.Request, max int64) ([]byte, error) {
	var buf bytes.Buffer
	return readBodyInto(&buf, r, max)
}

// bodyPool recycles append bodies. A fresh megabyte buffer costs a page
// fault per 4 KiB as the kernel copies the request into it, which measured
// as much as everything else the append does; a reused one does not.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody keeps an unusually large body's buffer out of the pool.
const maxPooledBody = 16 << 20

// readBodyInto is readBody into buf; the bytes it returns alias buf.
func readBodyInto(buf *bytes.Buffer, r *http.Request, max int64) ([]byte, error) {
	var src io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, badEncoding("gzip")
		}
		defer gz.Close()
		src = gz
	case "zstd":
		d := zstdPool.Get().(*zstd.Decoder)
		if err := d.Reset(r.Body); err != nil {
			return nil, badEncoding("zstd")
		}
		defer func() { _ = d.Reset(nil); zstdPool.Put(d) }()
		src = d
	default:
		return nil, apierr.New(http.StatusUnsupportedMediaType, "UNSUPPORTED_ENCODING",
			"send the body plain, gzip or zstd", "Content-Encoding %q is not supported", clipHeader(enc))
	}
	buf.Reset()
	if n := r.ContentLength; n > 0 && src == r.Body && n <= max {
		buf.Grow(int(n) + 1) // one allocation for a plain body of known size
	}
	_, err := buf.ReadFrom(io.LimitReader(src, max+1))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(max)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The server's body deadline (--body-timeout) passed.
			return nil, apierr.New(http.StatusRequestTimeout, "BODY_TIMEOUT",
				"send the body faster, or in smaller batches, or raise the server's --body-timeout; nothing of this batch was stored",
				"the request body did not arrive in time")
		}
		if r.Header.Get("Content-Encoding") != "" {
			return nil, badEncoding(r.Header.Get("Content-Encoding"))
		}
		return nil, apierr.New(http.StatusBadRequest, "BAD_BODY", "resend the batch", "reading the body failed")
	}
	if int64(len(body)) > max {
		return nil, tooLarge(max)
	}
	return body, nil
}

func tooLarge(max int64) error {
	return apierr.New(http.StatusRequestEntityTooLarge, "BATCH_TOO_LARGE",
		"send smaller batches or raise --max-batch-bytes",
		"the batch exceeds %d bytes (decompressed)", max)
}

func badEncoding(enc string) error {
	return apierr.New(http.StatusBadRequest, "BAD_ENCODING", "check the compression of the body",
		"the body is not valid %s", clipHeader(enc))
}

func clipHeader(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}
