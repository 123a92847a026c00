package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/wire"
)

func TestDecodeBatchNamesTheLine(t *testing.T) {
	good := testgen.NDJSON(testgen.Recording(testgen.Options{Seed: 3, Steps: 2, EventsPerStep: 2}))
	lines := bytes.Split(bytes.TrimSpace(good), []byte("\n"))
	cases := []struct {
		name string
		line int
		bad  string
		code string
	}{
		{"syntax", 2, `{"seq":2,`, "MALFORMED_EVENT"},
		{"unknown envelope field", 3, `{"seq":3,"ts":5,"step":1,"kind":"meta","data":{},"sequence":3}`, "MALFORMED_EVENT"},
		{"no data", 2, `{"seq":2,"ts":5,"step":1,"kind":"meta"}`, "MALFORMED_EVENT"},
		{"receipt without verb", 2, `{"seq":2,"ts":5,"step":1,"kind":"receipt","data":{"outcome":"done","action":{}}}`, "MALFORMED_EVENT"},
		{"failed receipt without code", 2, `{"seq":2,"ts":5,"step":1,"kind":"receipt","data":{"outcome":"failed","action":{"verb":"click"}}}`, "MALFORMED_EVENT"},
		{"rrweb type 9", 2, `{"seq":2,"ts":5,"step":1,"kind":"dom","data":{"type":9,"timestamp":5,"data":{}}}`, "MALFORMED_EVENT"},
		{"frame without image", 2, `{"seq":2,"ts":5,"step":1,"kind":"frame","data":{"mime":"image/jpeg","width":1,"height":1}}`, "MALFORMED_EVENT"},
		{"frame not base64", 2, `{"seq":2,"ts":5,"step":1,"kind":"frame","data":{"mime":"image/jpeg","image":"%%%","width":1,"height":1}}`, "MALFORMED_EVENT"},
		{"seq out of order", 3, `{"seq":9,"ts":5,"step":1,"kind":"meta","data":{}}`, "BAD_SEQUENCE"},
		{"negative step", 2, `{"seq":2,"ts":5,"step":-1,"kind":"meta","data":{}}`, "MALFORMED_EVENT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ls := append([][]byte(nil), lines...)
			ls[c.line-1] = []byte(c.bad)
			_, err := DecodeBatch(bytes.Join(ls, []byte("\n")), DefaultLimits)
			var e *wire.Error
			if !errors.As(err, &e) || e.Code != c.code || e.Extra["line"] != c.line {
				t.Fatalf("got %v, want %s on line %d", err, c.code, c.line)
			}
		})
	}
	if _, err := DecodeBatch([]byte("\n\n"), DefaultLimits); err == nil {
		t.Fatal("an empty batch was accepted")
	}
	evs, err := DecodeBatch(append([]byte("\r\n"), bytes.ReplaceAll(good, []byte("\n"), []byte("\r\n\n"))...), DefaultLimits)
	if err != nil || len(evs) != len(lines) {
		t.Fatalf("CRLF and blank lines: %d events, %v", len(evs), err)
	}
}

// TestDecodeErrorsQuoteNoValues: a message names fields and lines, never a
// value from the input, which may be a secret.
func TestDecodeErrorsQuoteNoValues(t *testing.T) {
	const canary = "sk_live_CANARY123"
	for _, line := range []string{
		`{"seq":1,"ts":5,"step":1,"kind":"` + canary + `","data":{}}`,
		`{"seq":1,"ts":5,"step":1,"kind":"console","data":{"level":"` + canary + `","text":"x"}}`,
		`{"seq":1,"ts":5,"step":1,"kind":"console","data":{"level":"log","text":["` + canary + `"]}}`,
		`{"seq":1,"ts":5,"step":1,"kind":"har","data":{"request":{"method":"GET","url":"` + canary + `"},"response":{"status":` + canary + `}}}`,
		`{"seq":1,"ts":5,"step":1,"kind":"meta","data":{},"` + canary + `":1}`,
		`{"seq":1,"ts":5,"step":1,"kind":"snapshot","data":{"view":"` + canary + `","text":""}}`,
		`{"seq":1,"ts":5,"step":1,"kind":"meta","data":{"versions":{"` + canary + `":7}}}`,
		`{"seq":1,"ts":5,"step":1,"kind":"meta","data":{"labels":{"a":{"` + canary + `":1}}}}`,
	} {
		_, err := DecodeBatch([]byte(line), DefaultLimits)
		if err == nil {
			t.Fatalf("accepted %s", line)
		}
		if strings.Contains(err.Error(), "CANARY") {
			t.Fatalf("error quotes the input: %v", err)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(testgen.NDJSON(testgen.Recording(testgen.Options{Seed: 1, Steps: 2, EventsPerStep: 5, FrameBytes: 64})))
	f.Add([]byte(`{"seq":1,"ts":1,"step":0,"kind":"meta","data":{}}`))
	f.Add([]byte("{\"seq\":1,\"ts\":1,\"step\":0,\"kind\":\"dom\",\"data\":{\"type\":2,\"timestamp\":1,\"data\":{}}}\n{"))
	f.Add([]byte(`{"seq":18446744073709551615,"ts":-1,"step":2147483648,"kind":"frame","data":{"image":""}}`))
	f.Add([]byte("\n\r\n"))
	lim := DefaultLimits
	lim.MaxEventBytes = 1 << 16
	lim.MaxEventsPerBatch = 100
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := DecodeBatch(body, lim)
		if err != nil {
			var e *wire.Error
			if !errors.As(err, &e) || e.Code == "" || e.Next == "" || e.Status < 400 || e.Status > 499 {
				t.Fatalf("error is not a 4xx envelope: %#v", err)
			}
			if len(evs) != 0 {
				t.Fatal("events returned with an error")
			}
			return
		}
		// Every accepted event is valid, consecutive, and re-decodes the same.
		for i, d := range evs {
			if i > 0 && d.Seq != evs[i-1].Seq+1 {
				t.Fatalf("seqs not consecutive: %d after %d", d.Seq, evs[i-1].Seq)
			}
			if !d.Kind.Valid() || d.Seq == 0 || d.Step < 0 {
				t.Fatalf("invalid event accepted: %+v", d.Envelope)
			}
			line, err := json.Marshal(d.Envelope)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := event.Decode(d.Envelope, event.DefaultLimits); err != nil {
				t.Fatalf("accepted event no longer validates: %v (%s)", err, line)
			}
		}
	})
}
