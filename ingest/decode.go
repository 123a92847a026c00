package ingest

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/wire"
)

// DecodeBatch parses an NDJSON batch: one envelope per line, blank lines
// ignored, seqs strictly consecutive. It validates every event before
// returning, so a batch is taken whole or not at all. Errors are
// *wire.Error naming the 1-based line; they never quote input.
func DecodeBatch(body []byte, lim Limits) ([]*event.Decoded, error) {
	var out []*event.Decoded
	line := 0
	for len(body) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			raw, body = body[:i], body[i+1:]
		} else {
			raw, body = body, nil
		}
		raw = bytes.TrimRight(raw, "\r")
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if lim.MaxEventBytes > 0 && len(raw) > lim.MaxEventBytes {
			return nil, wire.New(http.StatusRequestEntityTooLarge, "EVENT_TOO_LARGE",
				"split large payloads or raise --max-event-bytes",
				"line %d: event of %d bytes exceeds the limit of %d bytes", line, len(raw), lim.MaxEventBytes).
				With("line", line)
		}
		if lim.MaxEventsPerBatch > 0 && len(out) >= lim.MaxEventsPerBatch {
			return nil, wire.New(http.StatusRequestEntityTooLarge, "BATCH_TOO_LARGE",
				"send smaller batches",
				"line %d: more than %d events in one batch", line, lim.MaxEventsPerBatch).With("line", line)
		}
		// Real pages emit invalid UTF-8 and lone surrogates; the event is
		// kept with U+FFFD in their place (counted), never refused for one.
		raw, replaced := redact.SanitizeJSON(raw)
		env, err := event.ParseEnvelope(raw)
		if err != nil {
			return nil, badLine(line, err)
		}
		d, err := event.Decode(env, event.Limits{MaxEventBytes: lim.MaxEventBytes, MaxStep: lim.MaxStep})
		if err != nil {
			return nil, badLine(line, err)
		}
		d.Replaced, d.Sanitized = replaced, true
		if v, ok := d.Payload.(*event.Video); ok && lim.MaxVideoChunkBytes > 0 && len(v.Chunk) > lim.MaxVideoChunkBytes {
			return nil, wire.New(http.StatusRequestEntityTooLarge, "VIDEO_CHUNK_TOO_LARGE",
				fmt.Sprintf("split the stream into chunks of at most %d bytes (the split may fall anywhere) or raise --max-video-chunk-bytes; nothing of this batch was stored", lim.MaxVideoChunkBytes),
				"line %d: a video chunk of %d bytes exceeds the limit of %d bytes", line, len(v.Chunk), lim.MaxVideoChunkBytes).
				With("line", line)
		}
		if n := len(out); n > 0 && d.Seq != out[n-1].Seq+1 {
			return nil, wire.New(http.StatusBadRequest, "BAD_SEQUENCE",
				"number the events of a batch consecutively",
				"line %d: seq %d does not follow seq %d of the line before", line, d.Seq, out[n-1].Seq).
				With("line", line)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, wire.New(http.StatusBadRequest, "EMPTY_BATCH", "send at least one NDJSON event line",
			"the batch holds no events")
	}
	return out, nil
}

func badLine(line int, err error) *wire.Error {
	return wire.New(http.StatusBadRequest, "MALFORMED_EVENT",
		"fix that line and resend the batch; nothing of it was stored",
		"line %d: %s", line, err).With("line", line)
}
