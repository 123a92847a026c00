package webmstream_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"unicode"

	"github.com/at-wat/ebml-go"

	"github.com/flightrec/flightrec/ingest/webmstream"
)

// fuzzLimits are small so that the fuzzer reaches the limits.
var fuzzLimits = webmstream.Limits{MaxBlock: 4 << 10, MaxGOP: 16 << 10}

var fuzzTrack = webmstream.Track{Codec: "V_VP8", Width: 64, Height: 48, TimecodeScale: 1_000_000}

// fuzzOutcome is everything observable of a parse, for comparing parses of
// the same bytes split differently.
type fuzzOutcome struct {
	gops    []webmstream.GOP
	code    string
	offset  int64
	skipped int
}

// fuzzParse feeds data in chunks from next. At chunk cloneAt it clones the
// parser; the clone, fed the rest in other chunks, must end the same.
func fuzzParse(t *testing.T, p *webmstream.Parser, data []byte, next chunker, cloneAt int) (o fuzzOutcome) {
	bound := fuzzLimits.MaxGOP + fuzzLimits.MaxBlock + webmstream.HeldOverhead
	var clone *webmstream.Parser
	var cloneGOPs []webmstream.GOP
	var cloneData []byte
	defer func() {
		if clone != nil {
			c := fuzzParse(t, clone, cloneData, fixed(7), -1)
			c.gops = append(cloneGOPs, c.gops...)
			sameOutcome(t, "clone", o, c)
		}
	}()
	fail := func(err error) fuzzOutcome {
		var e *webmstream.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is a %T, not a *webmstream.Error", err, err)
		}
		switch e.Code {
		case webmstream.CodeNotWebM, webmstream.CodeUnknownCodec, webmstream.CodeTruncated, webmstream.CodeMalformed, webmstream.CodeTooLarge:
		default:
			t.Fatalf("error code %q", e.Code)
		}
		for _, r := range e.Msg {
			if !unicode.IsPrint(r) {
				t.Fatalf("unprintable message %q", e.Msg)
			}
		}
		if e.Offset < 0 || e.Offset > p.Offset() {
			t.Fatalf("error offset %d, consumed %d", e.Offset, p.Offset())
		}
		o.code, o.offset = e.Code, e.Offset
		return o
	}
	for i := 0; len(data) > 0; i++ {
		if i == cloneAt {
			clone, cloneGOPs, cloneData = p.Clone(), append([]webmstream.GOP(nil), o.gops...), data
		}
		n := min(max(next(), 1), len(data))
		g, err := p.Write(data[:n])
		o.gops = append(o.gops, g...)
		if h := p.Held(); h > bound {
			t.Fatalf("Held %d > %d", h, bound)
		}
		if err != nil {
			return fail(err)
		}
		data = data[n:]
	}
	g, err := p.End()
	if g != nil {
		o.gops = append(o.gops, *g)
	}
	o.skipped = p.Skipped()
	if err != nil {
		return fail(err)
	}
	return o
}

func sameOutcome(t *testing.T, what string, a, b fuzzOutcome) {
	t.Helper()
	if a.code != b.code || a.offset != b.offset {
		t.Fatalf("%s: error %q at %d, whole %q at %d", what, b.code, b.offset, a.code, a.offset)
	}
	if d := diffGOPs(b.gops, a.gops); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
	if a.code == "" && a.skipped != b.skipped {
		t.Fatalf("%s: skipped %d, whole %d", what, b.skipped, a.skipped)
	}
}

func checkFuzzGOPs(t *testing.T, gops []webmstream.GOP) {
	for i, g := range gops {
		if len(g.Frames) == 0 || !g.Frames[0].Key {
			t.Fatalf("GOP %d does not start with a keyframe", i)
		}
		for j, f := range g.Frames {
			if j > 0 && (f.Key || f.TS < g.Frames[j-1].TS) {
				t.Fatalf("GOP %d frame %d: key %v, TS %d after %d", i, j, f.Key, f.TS, g.Frames[j-1].TS)
			}
		}
		if g.End < g.Frames[len(g.Frames)-1].TS {
			t.Fatalf("GOP %d ends before its last frame", i)
		}
	}
}

func addSeeds(f *testing.F) {
	for _, name := range []string{"testdata/tiny_vp8.webm", "testdata/tiny_vp9_pipe.webm"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(1))
		f.Add(b[:min(len(b), 400)], uint64(2))
	}
	// Hand-built: BlockGroups, an unknown-size segment, a Void, a laced
	// block.
	f.Add(handStream(f, hsTrack("V_VP9"),
		hsCluster{Timecode: 0, BlockGroup: []hsBlockGroup{{Block: sb(0, false, 1, 2)}, {Block: sb(200, false, 3), ReferenceBlock: []int64{-200}}}},
		hsCluster{Timecode: 400, SimpleBlock: []ebml.Block{sb(0, true, 4), sb(200, false, 5)}},
	), uint64(3))
	f.Add(append(handStream(f, hsTrack("V_VP8"), hsCluster{SimpleBlock: []ebml.Block{sb(0, true, 1)}}), 0xEC, 0x82, 0, 0), uint64(4))
	laced := ebml.Block{TrackNumber: 1, Keyframe: true, Lacing: ebml.LacingEBML, Data: [][]byte{{1}, {2, 3}, {4}}}
	f.Add(handStream(f, hsTrack("V_VP8"), hsCluster{SimpleBlock: []ebml.Block{laced}}), uint64(5))
}

// FuzzParser feeds arbitrary bytes in random splits, to a new parser and to
// a Resume parser: no panic, only *Error failures, Held bounded, and the
// same GOPs or the same error whatever the split (and across a Clone).
func FuzzParser(f *testing.F) {
	addSeeds(f)
	f.Fuzz(fuzzParser)
}

func fuzzParser(t *testing.T, data []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 9))
	maxChunk := 1 + r.IntN(300)
	cloneAt := r.IntN(8)
	// A Resume parser on the same bytes every other input, to keep
	// executions fast.
	for _, resume := range []bool{false, true}[:1+int(seed&1)] {
		mk := func() *webmstream.Parser {
			if resume {
				return webmstream.Resume(fuzzTrack, fuzzLimits)
			}
			return webmstream.NewParser(fuzzLimits)
		}
		whole := fuzzParse(t, mk(), data, fixed(len(data)+1), -1)
		checkFuzzGOPs(t, whole.gops)
		split := fuzzParse(t, mk(), data, random(seed, maxChunk), cloneAt)
		sameOutcome(t, "split", whole, split)
		// Byte by byte for small inputs; larger ones in small chunks,
		// to keep executions (and minimizing) fast.
		small := fixed(1)
		if len(data) > 1024 {
			small = fixed(1 + int(seed%13))
		}
		bytewise := fuzzParse(t, mk(), data, small, -1)
		sameOutcome(t, "small chunks", whole, bytewise)
	}
}

// FuzzDecodeGOP reads arbitrary bytes as a GOP blob: no panic, only *Error
// failures, and what decodes is a valid GOP that encodes and decodes back to
// itself.
func FuzzDecodeGOP(f *testing.F) {
	tr := webmstream.Track{Codec: "V_VP9", Width: 64, Height: 48, CodecPrivate: []byte{1, 2}, TimecodeScale: 1_000_000, FrameDuration: 200_000_000}
	// Small GOPs (tiny frames) keep the fuzzer's inputs short; the second
	// spans two clusters.
	tiny := func(n int, step int64) webmstream.GOP {
		g := webmstream.GOP{End: int64(n) * step}
		for i := range n {
			g.Frames = append(g.Frames, webmstream.Frame{TS: int64(i) * step, Key: i == 0, Data: []byte{byte(i), 0x9d}})
		}
		return g
	}
	for _, g := range []webmstream.GOP{tiny(3, 200_000_000), tiny(20, 2_000_000_000)} {
		b, err := webmstream.EncodeGOP(tr, g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	b, err := os.ReadFile("testdata/tiny_vp8.webm")
	if err != nil {
		f.Fatal(err)
	}
	p := webmstream.NewParser(webmstream.Limits{})
	gops, err := p.Write(b)
	if err != nil || len(gops) == 0 {
		f.Fatal(err)
	}
	vt, _ := p.Track()
	blob, err := webmstream.EncodeGOP(vt, gops[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(blob)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, g, err := webmstream.DecodeGOP(data)
		if err != nil {
			var e *webmstream.Error
			if !errors.As(err, &e) {
				t.Fatalf("%T", err)
			}
			return
		}
		if len(g.Frames) == 0 || !g.Frames[0].Key || g.Frames[0].TS != 0 || g.End < 0 {
			t.Fatalf("decoded an invalid GOP: %d frames, End %d", len(g.Frames), g.End)
		}
		again, err := webmstream.EncodeGOP(tr, g)
		if err != nil {
			t.Fatalf("a decoded GOP does not encode: %v", err)
		}
		tr2, g2, err := webmstream.DecodeGOP(again)
		if err != nil {
			t.Fatalf("a re-encoded GOP does not decode: %v", err)
		}
		if !sameTrack(tr, tr2) {
			t.Fatalf("track %+v, then %+v", tr, tr2)
		}
		// End goes through a float Duration: exact while it is below 2^53.
		if g.End < 1<<52 && g2.End != g.End {
			t.Fatalf("End %d, then %d", g.End, g2.End)
		}
		g2.End = g.End
		if d := diffGOPs([]webmstream.GOP{g2}, []webmstream.GOP{g}); d != "" {
			t.Fatal(d)
		}
		if !bytes.Equal(again, mustEncode(t, tr2, g2)) {
			t.Fatal("encoding is not a fixed point")
		}
	})
}

func mustEncode(t *testing.T, tr webmstream.Track, g webmstream.GOP) []byte {
	b, err := webmstream.EncodeGOP(tr, g)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
