package event

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecode is ingest's per-event validation (envelope, duplicate
// keys, payload) on the shapes that dominate a recording: an rrweb full
// snapshot, a small mutation, a console line and a 60 KB frame.
func BenchmarkDecode(b *testing.B) {
	var nodes []string
	for i := 0; i < 2000; i++ {
		nodes = append(nodes, fmt.Sprintf(`{"type":2,"id":%d,"tagName":"li","attributes":{"class":"item i%d","data-k":"v"},"childNodes":[{"type":3,"id":%d,"textContent":"item number %d"}]}`, 10+2*i, i, 11+2*i, i))
	}
	snap := `{"type":2,"timestamp":1,"data":{"node":{"type":0,"id":1,"childNodes":[{"type":2,"id":2,"tagName":"ul","attributes":{},"childNodes":[` + strings.Join(nodes, ",") + `]}]}}}`
	img := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xff\xd8\x00jpegdata", 6000)))
	for _, c := range []struct {
		name string
		kind Kind
		data string
	}{
		{"dom-snapshot", KindDOM, snap},
		{"dom-mutation", KindDOM, `{"type":3,"timestamp":5,"data":{"source":0,"texts":[{"id":11,"value":"changed text"}],"attributes":[{"id":10,"attributes":{"class":"item on"}}],"removes":[],"adds":[]}}`},
		{"console", KindConsole, `{"level":"log","text":"GET /api/items?page=2 200 (12 ms)","args":["a",1,{"k":"v"}]}`},
		{"frame", KindFrame, `{"mime":"image/jpeg","width":1280,"height":800,"image":"` + img + `"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			env := Envelope{Seq: 1, TS: 1, Step: 1, Kind: c.kind, Data: []byte(c.data)}
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := Decode(env, DefaultLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
