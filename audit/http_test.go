package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/wire"
)

func serve(t *testing.T, l *Log) *httptest.Server {
	t.Helper()
	r := chi.NewRouter()
	Routes(r, l, httpx.NewEdge(nil, slog.New(slog.DiscardHandler)))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	return resp.StatusCode, b
}

func TestHTTPPages(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	fill(t, l, 7)
	l.Append(Entry{Kind: KindPin, Recording: "r<&>", Why: "html <b> & \"quotes\""})
	srv := serve(t, l)
	file, _ := os.ReadFile(filepath.Join(dir, FileName))
	headN, headHash := l.Head()

	var got []Entry
	after := uint64(0)
	for {
		status, body := get(t, srv.URL+"/v1/audit?limit=3&after="+itoa(after))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		var p Page
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Head != (Head{headN, headHash}) {
			t.Fatalf("head %+v", p.Head)
		}
		// Every entry is served as its line's bytes.
		for _, e := range p.Entries {
			raw, _ := e.MarshalJSON()
			if !bytes.Contains(body, raw) || !bytes.Contains(file, append(raw, '\n')) {
				t.Fatalf("entry %d is not served as its line", e.N)
			}
		}
		if len(p.Entries) == 0 {
			if p.NextAfter != after {
				t.Fatalf("next_after %d on an empty page after %d", p.NextAfter, after)
			}
			if !strings.Contains(string(body), `"entries":[]`) {
				t.Fatalf("empty page %s", body)
			}
			break
		}
		if p.NextAfter != p.Entries[len(p.Entries)-1].N {
			t.Fatalf("next_after %d", p.NextAfter)
		}
		got = append(got, p.Entries...)
		after = p.NextAfter
	}
	// A client checks the chain from the pages alone.
	if len(got) != 8 {
		t.Fatalf("%d entries", len(got))
	}
	prev := ZeroHash
	for i, e := range got {
		h, err := e.ComputeHash()
		if err != nil || h != e.Hash || e.Prev != prev || e.N != uint64(i+1) {
			t.Fatalf("entry %d does not verify from the API: %v", i+1, err)
		}
		prev = e.Hash
	}
	if prev != headHash {
		t.Fatal("the pages do not end at the head")
	}
	// Default limit, and past the head.
	status, body := get(t, srv.URL+"/v1/audit")
	var p Page
	json.Unmarshal(body, &p)
	if status != 200 || len(p.Entries) != 8 || p.NextAfter != 8 {
		t.Fatalf("default: %d %s", status, body)
	}
	status, body = get(t, srv.URL+"/v1/audit?after=99")
	json.Unmarshal(body, &p)
	if status != 200 || len(p.Entries) != 0 || p.NextAfter != 99 || p.Head.N != 8 {
		t.Fatalf("past the head: %d %s", status, body)
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestHTTPErrors(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	fill(t, l, 3)
	srv := serve(t, l)
	for _, q := range []string{"after=-1", "after=x", "after=1.5", "limit=0", "limit=1001", "limit=x", "limit=-3"} {
		status, body := get(t, srv.URL+"/v1/audit?"+q)
		e := wire.Decode(status, body)
		if status != http.StatusBadRequest || e.Code != "BAD_REQUEST" || e.Next == "" {
			t.Fatalf("%s: %d %s", q, status, body)
		}
	}
	// The file edited under the server.
	path := filepath.Join(dir, FileName)
	b, _ := os.ReadFile(path)
	b[20] ^= 1
	os.WriteFile(path, b, 0o600)
	status, body := get(t, srv.URL+"/v1/audit")
	e := wire.Decode(status, body)
	if status != http.StatusInternalServerError || e.Code != "AUDIT_LOG_CORRUPT" {
		t.Fatalf("corrupt: %d %s", status, body)
	}
	// Closed: the generic internal error, not the cause.
	l.Close()
	status, body = get(t, srv.URL+"/v1/audit")
	if e := wire.Decode(status, body); status != 500 || e.Code != "INTERNAL" {
		t.Fatalf("closed: %d %s", status, body)
	}
}
