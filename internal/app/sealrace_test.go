package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/ingest"
	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/wire"
)

// TestSealRacesClose: appends, finishes, aborts and idle expiry race on
// the same recordings while the service closes. Sealing takes a
// recording's lock and then the service's; nothing may take them the
// other way round, and a seal that finds its recording closed under it
// (by Close) must not wait for the lock it holds. Every call returns, and
// after a restart every acknowledged event is stored.
func TestSealRacesClose(t *testing.T) {
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) { sealRacesClose(t) })
	}
}

func sealRacesClose(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.OpenIdleTimeout = time.Hour
	var cfg app.Config
	cfg.Store.Data = t.TempDir()
	cfg.Ingest.Limits = lim
	a, err := app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	const recs = 12
	ids := make([]string, recs)
	for i := range ids {
		ids[i] = openRec(t, srv.URL)
	}
	// late is still open when Close returns; a finish for it (one that
	// outlived a graceful shutdown's grace) finds it closed.
	late := openRec(t, srv.URL)
	acked(t, appendBatch(t, srv.URL, late, []event.Envelope{consoleAt(1, time.Now().UnixNano())}))
	post := func(url string, body []byte) (int, []byte) {
		resp, err := http.Post(url, "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var mu sync.Mutex
	ackedThrough := map[string]uint64{}
	var wg sync.WaitGroup
	now := time.Now().UnixNano()
	for i, id := range ids {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for seq := uint64(1); seq <= 20; seq++ {
				st, b := post(srv.URL+"/v1/recordings/"+id+"/events", testgen.NDJSON([]event.Envelope{consoleAt(seq, now+int64(seq))}))
				if st != 200 {
					return
				}
				var r wire.AppendReply
				if err := json.Unmarshal(b, &r); err == nil {
					mu.Lock()
					ackedThrough[id] = max(ackedThrough[id], r.AckedThrough)
					mu.Unlock()
				}
			}
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				post(srv.URL+"/v1/recordings/"+id+"/finish", []byte(`{"verdict":"pass"}`))
			} else {
				post(srv.URL+"/v1/recordings/"+id+"/abort", nil)
			}
		}()
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	// Not a timing assertion: a deadlock never ends, and a minute is far
	// past anything these few requests take.
	select {
	case <-all:
	case <-time.After(time.Minute):
		t.Fatal("requests racing Close did not return: a lock-order deadlock")
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
	// A finish or an append after Close is told to retry (503), not
	// that the recording is finished: its executor must keep its events.
	lateDone := make(chan []byte, 2)
	go func() {
		_, b := post(srv.URL+"/v1/recordings/"+late+"/finish", []byte(`{"verdict":"pass"}`))
		lateDone <- b
		_, b = post(srv.URL+"/v1/recordings/"+late+"/events", testgen.NDJSON([]event.Envelope{consoleAt(2, time.Now().UnixNano())}))
		lateDone <- b
	}()
	for range 2 {
		select {
		case b := <-lateDone:
			var env struct{ Error struct{ Code, Next string } }
			if json.Unmarshal(b, &env); env.Error.Code != "STORAGE_UNAVAILABLE" || env.Error.Next == "" {
				t.Errorf("a finish or append after Close: %s; want STORAGE_UNAVAILABLE with a next", b)
			}
		case <-time.After(time.Minute):
			t.Fatal("a finish after Close did not return: it waits for the lock it holds")
		}
	}
	srv.Close()

	cfg.Ingest.OpenIdleTimeout = 10 * time.Millisecond
	a, err = app.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(a.Handler())
	defer func() { srv.Close(); a.Close() }()
	// The restarted server's idle expiry seals what Close left open, so
	// every recording shows finished with what it stored.
	ackedThrough[late] = 1
	for _, id := range append(ids, late) {
		if row := finishedRow(t, srv.URL, id); uint64(row.Events) < ackedThrough[id] {
			t.Errorf("%s: %d events stored after the restart, %d were acknowledged", id, row.Events, ackedThrough[id])
		}
	}
}
