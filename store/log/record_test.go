package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/store/blobs"
)

// fullRecord has every field set, with unicode and extreme numbers.
func fullRecord() Record {
	return Record{
		Seq: math.MaxUint64, TS: math.MinInt64, Step: math.MaxInt, Kind: event.KindHAR,
		CID: blobs.SumString([]byte("body")), BlobSize: math.MaxInt64,
		Summary: event.Summary{
			URL: "https://ünïcode.example/päth?q=✓", Method: "POST", Status: -1,
			Level: "error", Text: "日本語 テキスト 🚀\x00nul", Action: "click",
			Outcome: "failed", ErrorCode: "NOT_ACTIONABLE",
		},
		Data: json.RawMessage(`{"text":"héllo \u2028 🌍","n":[1,2,3]}`),
	}
}

// redactedRecord carries redaction findings: a version 2 record.
func redactedRecord() Record {
	return Record{Seq: 9, TS: 1, Step: 2, Kind: event.KindHAR, Data: json.RawMessage(`{"request":{}}`),
		Redactions: []Redaction{
			{Rule: "header:authorization", Channel: "har", Pointer: "/request/headers/0/value"},
			{Rule: "cookie", Channel: "har", Pointer: "/response/cookies/1/value"},
		}}
}

// videoRecords carry further blobs (a video chunk's GOPs): version 3,
// with redactions and without.
func videoRecords() []Record {
	gops := []BlobRef{{CID: blobs.SumString([]byte("gop 1")), Size: 81920}, {CID: blobs.SumString([]byte("gop 2")), Size: 0}}
	masked := redactedRecord()
	masked.Kind, masked.Blobs = event.KindVideo, gops
	return []Record{
		{Seq: 4, TS: 7, Step: 1, Kind: event.KindVideo, Data: json.RawMessage(`{"gops":[]}`), Blobs: gops[:1]},
		masked,
	}
}

func TestRecordRoundTrip(t *testing.T) {
	recs := []Record{
		fullRecord(),
		{}, // every field zero, Data empty
		{Seq: 1, TS: 1764483600000000000, Step: 0, Kind: event.KindMeta, Data: json.RawMessage(`{}`)},
		{Seq: 2, TS: -5, Step: -3, Kind: "a-kind-from-the-future", Summary: event.Summary{Status: 599}},
		{Seq: 3, Kind: event.KindFrame, CID: blobs.SumString([]byte("jpeg")), BlobSize: 51200, Data: json.RawMessage(`{"image_cid":"x"}`)},
		redactedRecord(),
	}
	recs = append(recs, videoRecords()...)
	for i, r := range recs {
		enc := r.AppendBinary([]byte("prefix"))
		if !bytes.HasPrefix(enc, []byte("prefix")) {
			t.Fatalf("%d: AppendBinary lost the prefix", i)
		}
		enc = enc[len("prefix"):]
		want := byte(recordV1)
		if len(r.Blobs) > 0 {
			want = recordV3
		} else if len(r.Redactions) > 0 {
			want = recordV2
		}
		if enc[0] != want {
			t.Fatalf("%d: version byte %d, want %d", i, enc[0], want)
		}
		got, err := DecodeRecord(enc)
		if err != nil {
			t.Fatalf("%d: decode: %v", i, err)
		}
		if len(r.Data) == 0 {
			r.Data = nil // empty Data decodes as nil
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%d: round trip\n got %+v\nwant %+v", i, got, r)
		}
		if again := got.AppendBinary(nil); !bytes.Equal(again, enc) {
			t.Fatalf("%d: re-encoding differs", i)
		}
	}
}

func TestRecordEnvelope(t *testing.T) {
	r := fullRecord()
	env := r.Envelope()
	want := event.Envelope{Seq: r.Seq, TS: r.TS, Step: r.Step, Kind: r.Kind, Data: r.Data}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("envelope %+v, want %+v", env, want)
	}
}

func TestDecodeRecordDoesNotAlias(t *testing.T) {
	r := fullRecord()
	enc := r.AppendBinary(nil)
	got, err := DecodeRecord(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 0xff
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("decoded record changed when its input was overwritten: %+v", got)
	}
}

func TestDecodeRecordRejectsMalformed(t *testing.T) {
	r := fullRecord()
	enc := r.AppendBinary(nil)
	// Every proper prefix is truncated.
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeRecord(enc[:n]); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("prefix of %d/%d bytes: err %v, want ErrBadRecord", n, len(enc), err)
		}
	}
	bad := map[string][]byte{
		"trailing byte":      append(append([]byte(nil), enc...), 0),
		"unknown version":    append([]byte{2}, enc[1:]...),
		"version zero":       append([]byte{0}, enc[1:]...),
		"non-minimal varint": append([]byte{1, 0x80, 0x00}, (&Record{}).AppendBinary(nil)[2:]...), // Seq 0 spelled in two bytes
		"varint overflow":    {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"huge string length": append([]byte{1, 1, 2, 0}, 0xff, 0xff, 0xff, 0xff, 0x0f),
		// Version 3 without a blob is spelled as version 1 or 2 instead.
		"version 3, no blob":      append(append([]byte{3}, (&Record{}).AppendBinary(nil)[1:]...), 0, 0),
		"version 2, no redaction": append(append([]byte{2}, (&Record{}).AppendBinary(nil)[1:]...), 0),
	}
	for name, p := range bad {
		if _, err := DecodeRecord(p); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: err %v, want ErrBadRecord", name, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	full := fullRecord()
	for _, r := range []Record{full, {}, redactedRecord(), videoRecords()[0], videoRecords()[1], outlinedRecord(), {Seq: 1, TS: 2, Step: 3, Kind: event.KindConsole, Data: json.RawMessage(`{"level":"log"}`)}} {
		enc := r.AppendBinary(nil)
		f.Add(enc)
		f.Add(enc[:len(enc)/2])
		f.Add(append(append([]byte(nil), enc...), 0))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0x80, 0x00})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, p []byte) {
		in := append([]byte(nil), p...)
		r, err := DecodeRecord(p)
		if !bytes.Equal(in, p) {
			t.Fatal("DecodeRecord modified its input")
		}
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		// Decoding accepts exactly the canonical encodings.
		if enc := r.AppendBinary(nil); !bytes.Equal(enc, p) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", enc, p)
		}
	})
}

// TestRecordOutlined: a record whose Data has an outlined part is encoded
// (version 4) without those bytes, decodes to the rest and the blob's
// name, reads as appended once Inline puts the blob back, and encodes to
// the same bytes whether or not the part is inlined; the blob is one of
// the record's blobs. A part that does not fit the stored Data, or a blob
// of the wrong size, is refused.
func TestRecordOutlined(t *testing.T) {
	whole := json.RawMessage(`{"response":{"content":{"text":"` + strings.Repeat("body ", 50) + `"}},"time":3}`)
	at := int64(bytes.Index(whole, []byte(`"body`)))
	end := int64(bytes.LastIndex(whole, []byte(` "`))) + 2
	part := whole[at:end]
	c := blobs.SumString(part)
	r := redactedRecord()
	r.Data = append(json.RawMessage(nil), whole...)
	r.Outline(c, at, end-at)
	enc := r.AppendBinary(nil)
	if enc[0] != recordV4 || bytes.Contains(enc, part) {
		t.Fatalf("version %d; the outlined bytes are encoded: %v", enc[0], bytes.Contains(enc, part))
	}
	got, err := DecodeRecord(enc)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte(nil), whole[:at]...), whole[end:]...); !bytes.Equal(got.Data, want) ||
		*got.Outlined != (Outlined{CID: c, Size: end - at, At: at}) {
		t.Fatalf("decoded Data %s, outlined %+v", got.Data, got.Outlined)
	}
	if again := got.AppendBinary(nil); !bytes.Equal(again, enc) {
		t.Fatal("re-encoding the decoded record differs")
	}
	var names []string
	got.EachBlob(func(cid string, _ int64) { names = append(names, cid) })
	if len(names) != 1 || names[0] != c {
		t.Fatalf("blobs %v, want [%s]", names, c)
	}
	if err := got.Inline(part[1:]); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("a short blob: %v", err)
	}
	if err := got.Inline(part); err != nil || !bytes.Equal(got.Data, whole) {
		t.Fatalf("inlined: %v, %s", err, got.Data)
	}
	if again := got.AppendBinary(nil); !bytes.Equal(again, enc) {
		t.Fatal("re-encoding the inlined record differs")
	}
	// Data changed after it was inlined (a reseal's redaction) is kept
	// whole: the blob no longer holds what belongs at At.
	changed := got
	changed.Data = bytes.Replace(got.Data, []byte("body"), []byte("****"), 1)
	if enc := changed.AppendBinary(nil); enc[0] != recordV2 || !bytes.Contains(enc, changed.Data) {
		t.Fatalf("changed data: version %d, whole %v", enc[0], bytes.Contains(enc, changed.Data))
	}
	// With no redactions and no further blobs, both counts are 0.
	plain := Record{Seq: 1, Kind: event.KindSnapshot, Data: json.RawMessage(`{"text":"xyz"}`)}
	plain.Outline(blobs.SumString([]byte(`"xyz"`)), 8, 5)
	if p, err := DecodeRecord(plain.AppendBinary(nil)); err != nil || string(p.Data) != `{"text":}` {
		t.Fatalf("no redactions, no blobs: %v %s", err, p.Data)
	}
	// At past the stored Data.
	bad := Record{Data: json.RawMessage(`{}`), Outlined: &Outlined{CID: c, Size: 1, At: 3}}
	if _, err := DecodeRecord(bad.AppendBinary(nil)); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("At past the data: %v", err)
	}
}

// outlinedRecord is a version 4 record, as decoded (its Data lacks the
// outlined part).
func outlinedRecord() Record {
	r := redactedRecord()
	r.Data = json.RawMessage(`{"text":}`)
	r.Outlined = &Outlined{CID: blobs.SumString([]byte(`"xyz"`)), Size: 5, At: 8}
	return r
}
