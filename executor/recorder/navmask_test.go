package recorder_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/internal/testenv"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
)

// TestFrameMasksOfItsDocument: a frame is sent only with masks measured
// on the document it shows. Page /a holds a large masked field (a
// password input, painted red) and keeps painting (an animation), so a
// frame of it is always waiting to be sent; its link leads to /b, whose
// first paint waits 400 ms for a script and which has no masked element.
// A frame of /a taken before the navigation and sent after it, with the
// masks of /b (none), would show the red field: no frame may, and none
// may rely on the server's dropping of unmasked frames (7 of 56 were
// dropped so before the recorder checked the document).
func TestFrameMasksOfItsDocument(t *testing.T) {
	testenv.RequireChromium(t)
	srv := appserver.Start(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>A</title>
<style>@keyframes spin{to{transform:rotate(360deg)}} #s{width:40px;height:40px;background:#36c;animation:spin .5s linear infinite}</style>
<div id="s"></div>
<p><a href="/b">to b</a></p>
<input type="password" name="pin" aria-label="PIN" style="width:600px;height:300px;background:#f00;border:0">`)
	})
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>B</title><script src="/slow.js"></script><p>page b</p><p><a href="/a">to a</a></p>`)
	})
	mux.HandleFunc("/slow.js", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond)
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `// slow`)
	})
	app := httptest.NewServer(mux)
	defer app.Close()
	var steps strings.Builder
	for range 6 {
		steps.WriteString("  - wait: {text: \"to b\"}\n  - click: link \"to b\"\n  - wait: {text: \"page b\"}\n  - click: link \"to a\"\n")
	}
	fl, err := flow.Parse("navmask.yaml", []byte("name: navmask\nrevision: r1\nstart_url: \"{{base}}/a\"\nviewport: {width: 1280, height: 800}\nsteps:\n"+steps.String()))
	if err != nil {
		t.Fatal(err)
	}
	res := testenv.Record(t, srv.Base, app.URL, fl)
	indexed(t, srv.Base, res.ID, res.Total)
	frames, red := 0, 0
	perStep := map[int]int{}
	for _, e := range allEvents(t, srv.Base, res.ID) {
		if e.Kind != event.KindFrame {
			continue
		}
		frames++
		perStep[e.Step]++
		f := decode[event.Frame](t, e)
		if f.ImageCID == "" {
			// The server drops a frame without masks while its view of the
			// page holds a masked field: the last line of defence, which a
			// frame sent with its own document's masks never reaches.
			t.Errorf("frame %d (step %d) dropped by the server: %s", e.Seq, e.Step, e.Data)
			continue
		}
		img := fetchImage(t, srv.Base, f.ImageCID)
		b := img.Bounds()
		n := 0
		for y := b.Min.Y; y < b.Max.Y; y += 2 {
			for x := b.Min.X; x < b.Max.X; x += 2 {
				r, g, bl, _ := img.At(x, y).RGBA()
				if r>>8 > 200 && g>>8 < 60 && bl>>8 < 60 {
					n++
				}
			}
		}
		if n > 100 {
			red++
			t.Errorf("frame %d (step %d) shows the masked field (%d red samples) with masks %v", e.Seq, e.Step, n, f.Masks)
		}
	}
	t.Logf("%d frames, %d show the masked field", frames, red)
	// Dropping a frame never leaves a step without one.
	for n := 1; n <= res.Steps; n++ {
		if perStep[n] == 0 {
			t.Errorf("step %d has no frame", n)
		}
	}
}
