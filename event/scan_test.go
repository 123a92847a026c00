package event

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// reference decodes a line with encoding/json alone: what ParseEnvelope
// and Decode must agree with.
func reference(line []byte) (Envelope, error) {
	var env Envelope
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	err := dec.Decode(&env)
	return env, err
}

func checkAgainstReference(t *testing.T, line []byte) {
	env, err := ParseEnvelope(line)
	if err != nil {
		return
	}
	d, err := Decode(env, DefaultLimits)
	if err != nil {
		return
	}
	if !json.Valid(line) {
		t.Fatalf("accepted invalid JSON: %q", line)
	}
	var generic any
	if dec := json.NewDecoder(strings.NewReader(string(env.Data))); dec.Decode(&generic) != nil {
		t.Fatalf("accepted data encoding/json refuses: %q", env.Data)
	}
	ref, err := reference(line)
	if err != nil {
		t.Fatalf("encoding/json refuses what was accepted (%v): %q", err, line)
	}
	if ref.Seq != env.Seq || ref.TS != env.TS || ref.Step != env.Step || ref.Kind != env.Kind {
		t.Fatalf("envelope differs from encoding/json's: %+v vs %+v", env, ref)
	}
	var a, b any
	if json.Unmarshal(env.Data, &a) != nil || json.Unmarshal(ref.Data, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("data differs: %q vs %q", env.Data, ref.Data)
	}
	// A binary member: the stored form equals a map-based replacement and
	// the bytes equal a base64 decode by encoding/json.
	field, bin := Binary(d)
	if bin == nil {
		if StoredData(d, "x") == nil {
			t.Fatal("no stored data")
		}
		return
	}
	var m map[string]any
	if err := json.Unmarshal(ref.Data, &m); err != nil {
		t.Fatal(err)
	}
	want, _ := base64.StdEncoding.DecodeString(m[field].(string))
	if string(want) != string(bin) {
		t.Fatalf("binary differs from encoding/json's base64")
	}
	delete(m, field)
	m[field+"_cid"] = "bafkreitest"
	stored := StoredData(d, "bafkreitest")
	var got map[string]any
	if err := json.Unmarshal(stored, &got); err != nil {
		t.Fatalf("stored data is not JSON: %v: %q", err, stored)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("stored data %q, want %v", stored, m)
	}
}

var scanSeeds = []string{
	`{"seq":1,"ts":5,"step":0,"kind":"meta","data":{"versions":{"a":"b"}}}`,
	` { "data" : {"level":"log","text":"a \"quoted\" } ] text"} , "kind":"console","step":2,"ts":9,"seq":3 } `,
	`{"seq":2,"ts":5,"step":1,"kind":"frame","data":{"mime":"image/jpeg","image":"AAEC","width":2,"height":2}}`,
	`{"seq":2,"ts":5,"step":1,"kind":"frame","data":{"image":"AAEC","mime":"image/jpeg","width":2,"height":2,"masks":[{"x":1,"y":1,"w":1,"h":1}]}}`,
	`{"seq":2,"ts":5,"step":1,"kind":"screenshot","data":{"mime":"image/png","width":2,"height":2,"reason":"failure","image":"A\/8="}}`,
	`{"seq":2,"ts":5,"step":1,"kind":"video","data":{"mime":"video/webm","stream_start_ts":1,"chunk":"GkXfow=="}}`,
	`{"seq":2,"ts":5,"step":1,"kind":"frame","data":{"mime":"image/jpeg","image":"AAEC","image":"AAEC","width":2,"height":2}}`,
	`{"seq":2,"ts":5,"step":1,"kind":"dom","data":{"type":2,"timestamp":7,"data":{"node":{"childNodes":[[],{}]}}}}`,
	`{"seq":1.5,"ts":5,"step":0,"kind":"meta","data":{}}`,
	`{"seq":1,"ts":5,"step":0,"kind":"met\u0061","data":{}}`,
	`{"seq":1,"ts":5,"step":0,"kind":"meta","data":{},}`,
	`{"seq":1,"ts":5,"step":0,"kind":"meta","data":{"a":[}}`,
}

func TestScanAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range scanSeeds {
		checkAgainstReference(t, []byte(s))
	}
	// Spot checks that the seeds exercise acceptance and refusal.
	if _, err := ParseEnvelope([]byte(scanSeeds[8])); err == nil {
		t.Error("a fractional seq was accepted")
	}
	env, err := ParseEnvelope([]byte(scanSeeds[9]))
	if err != nil || env.Kind != KindMeta {
		t.Errorf("an escaped kind: %v %q", err, env.Kind)
	}
	for _, bad := range scanSeeds[10:] {
		env, err := ParseEnvelope([]byte(bad))
		if err == nil {
			if _, err = Decode(env, DefaultLimits); err == nil {
				t.Errorf("accepted %s", bad)
			}
		}
	}
	env, _ = ParseEnvelope([]byte(scanSeeds[6]))
	if _, err := Decode(env, DefaultLimits); err == nil {
		t.Error("a frame with two images was accepted")
	}
	for _, dup := range []string{
		`{"level":"log","text":"a","text":"b"}`,
		`{"level":"log","text":"a","x":{"k":1,"y":[{"k":2,"k":3}]}}`,
		`{"level":"log","text":"a","x":{"a1":1,"a2":1,"a3":1,"a4":1,"a5":1,"a6":1,"a7":1,"a8":1,"a9":1,"b1":1,"b2":1,"b3":1,"b4":1,"b5":1,"b6":1,"b7":1,"b8":1,"b9":1,"a5":2}}`,
	} {
		if _, err := Decode(Envelope{Seq: 1, TS: 1, Kind: KindConsole, Data: json.RawMessage(dup)}, DefaultLimits); err == nil {
			t.Errorf("duplicate keys accepted: %s", dup)
		}
	}
	if _, err := Decode(Envelope{Seq: 1, TS: 1, Kind: KindConsole, Data: json.RawMessage(`{"level":"log","text":"a","x":[{"k":1},{"k":2}]}`)}, DefaultLimits); err != nil {
		t.Errorf("the same key in sibling objects refused: %v", err)
	}
	// A raw newline in a string is not JSON, though the base64 decoder
	// would skip it in an image: the data's full check refuses it.
	env, _ = ParseEnvelope([]byte("{\"seq\":2,\"ts\":5,\"step\":1,\"kind\":\"frame\",\"data\":{\"mime\":\"image/jpeg\",\"image\":\"AA\nEC\",\"width\":2,\"height\":2}}"))
	if _, err := Decode(env, DefaultLimits); err == nil {
		t.Error("a frame whose image holds a raw newline (invalid JSON) was accepted")
	}
	env, _ = ParseEnvelope([]byte(`{"seq":2,"ts":5,"step":1,"kind":"frame","data":{"mime":"image/jpeg","image":"AAEC","image_cid":"bafkreix","width":2,"height":2}}`))
	if _, err := Decode(env, DefaultLimits); err == nil || !strings.Contains(err.Error(), "image_cid") {
		t.Errorf("a frame naming its own CID: %v", err)
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkAgainstReference(t, line)
	})
}
