package wire_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/store"
)

// The write API's types as an executor built before the house (tag
// house-before) declared them: ingest.OpenRequest and its replies, with
// policy.AppMap and policy.MaskRules. They are copied, not imported, so a
// change to wire's types cannot change what this test expects.
type (
	oldMaskRules struct {
		InputTypes    []string `json:"input_types"`
		Autocomplete  []string `json:"autocomplete"`
		NamePatterns  []string `json:"name_patterns"`
		Selectors     []string `json:"selectors"`
		TextSelectors []string `json:"text_selectors"`
	}
	oldAppMap struct {
		MaskedSelectors   []string `json:"masked_selectors,omitempty"`
		MaskTextSelectors []string `json:"mask_text_selectors,omitempty"`
	}
	oldOpenRequest struct {
		Project  string            `json:"project"`
		Flow     string            `json:"flow,omitempty"`
		Labels   map[string]string `json:"labels,omitempty"`
		Executor string            `json:"executor,omitempty"`
		Versions map[string]string `json:"versions,omitempty"`
		AppMap   *oldAppMap        `json:"app_map,omitempty"`
	}
	oldOpenReply struct {
		ID         string        `json:"id"`
		PlanDigest string        `json:"plan_digest,omitempty"`
		Mask       *oldMaskRules `json:"mask,omitempty"`
	}
	oldAppendReply struct {
		AckedThrough uint64 `json:"acked_through"`
		Stored       int    `json:"stored"`
		Duplicates   int    `json:"duplicates"`
	}
	oldFinishRequest struct {
		Verdict string `json:"verdict"`
	}
	oldFinishReply struct {
		Root         string `json:"root"`
		AckedThrough uint64 `json:"acked_through"`
	}
	// internal/apierr's envelope; the client rewinds to
	// details.expected_seq on SEQ_GAP.
	oldEnvelope struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Next    string         `json:"next"`
			Extra   map[string]any `json:"details,omitempty"`
		} `json:"error"`
	}
)

// exchange is testdata/old-executor/exchange.json: what the old client
// sent to the old server (bodies in files beside it, exactly as sent, the
// appends gzipped) and what the old server answered (made by capture.go).
type exchange struct {
	Events int `json:"events"`
	Steps  []struct {
		Method          string          `json:"method"`
		Path            string          `json:"path"` // {id} stands for the opened recording
		ContentType     string          `json:"content_type"`
		ContentEncoding string          `json:"content_encoding"`
		Body            string          `json:"body"`
		Status          int             `json:"status"`
		Reply           json.RawMessage `json:"reply"`
	} `json:"steps"`
}

var cidRE = regexp.MustCompile(`^bafkrei[a-z2-7]{52}$`)

// TestOldExecutorExchange replays an old executor's open, appends (one of
// them a batch acknowledged before, one past a gap) and finish byte for byte against today's server with plain net/http: every
// reply must decode into the old shapes with the values the old server
// gave (ids and roots, which differ per run, must be well formed and
// agree with the store), and the recording must be sealed with a root.
func TestOldExecutorExchange(t *testing.T) {
	dir := filepath.Join("testdata", "old-executor")
	var ex exchange
	readJSON(t, filepath.Join(dir, "exchange.json"), &ex)
	if len(ex.Steps) < 3 {
		t.Fatalf("the exchange has %d steps; it needs an open, appends and a finish", len(ex.Steps))
	}
	srv := appserver.Start(t)

	var open oldOpenRequest
	readJSON(t, filepath.Join(dir, ex.Steps[0].Body), &open)
	var id, root string
	var acked uint64
	var openRep oldOpenReply
	for i, st := range ex.Steps {
		if strings.Contains(st.Path, "{id}") && id == "" {
			t.Fatalf("step %d (%s) needs a recording id, and no open came before it", i, st.Path)
		}
		body, err := os.ReadFile(filepath.Join(dir, st.Body))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(st.Method, srv.Base+strings.ReplaceAll(st.Path, "{id}", id), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", st.ContentType)
		if st.ContentEncoding != "" {
			req.Header.Set("Content-Encoding", st.ContentEncoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("step %d %s %s: %v", i, st.Method, st.Path, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != st.Status {
			t.Fatalf("step %d %s %s: status %d, the old server said %d: %s", i, st.Method, st.Path, resp.StatusCode, st.Status, got)
		}
		// Every member the old client could read is still there (a
		// renamed member would otherwise decode as its zero value).
		missingMembers(t, st.Path, st.Reply, got)

		switch {
		case st.Status >= 400:
			var was, now oldEnvelope
			decode(t, st.Reply, &was)
			decode(t, got, &now)
			if now.Error == nil || now.Error.Code != was.Error.Code || now.Error.Next == "" ||
				!reflect.DeepEqual(now.Error.Extra, was.Error.Extra) {
				t.Errorf("%s %s: %s, the old server said %s", st.Path, st.Body, got, st.Reply)
			}
		case st.Path == "/v1/recordings":
			var was oldOpenReply
			decode(t, st.Reply, &was)
			decode(t, got, &openRep)
			if !store.ValidRecordingID(openRep.ID) {
				t.Fatalf("open: id %q is not a recording id", openRep.ID)
			}
			if !strings.HasPrefix(openRep.PlanDigest, "sha256:") || len(openRep.PlanDigest) != len(was.PlanDigest) {
				t.Errorf("open: plan_digest %q is not shaped like the old one, %q", openRep.PlanDigest, was.PlanDigest)
			}
			// The app map the old executor sent comes back as mask rules,
			// with the floor no policy takes away.
			if openRep.Mask == nil {
				t.Fatal("open: no mask rules; the old executor masks frames by them")
			}
			if !slices.Equal(openRep.Mask.Selectors, open.AppMap.MaskedSelectors) ||
				!slices.Equal(openRep.Mask.TextSelectors, open.AppMap.MaskTextSelectors) {
				t.Errorf("open: mask selectors %q and text selectors %q, want the app map's %q and %q",
					openRep.Mask.Selectors, openRep.Mask.TextSelectors, open.AppMap.MaskedSelectors, open.AppMap.MaskTextSelectors)
			}
			if !slices.Contains(openRep.Mask.InputTypes, "password") {
				t.Errorf("open: mask input types %q lack password", openRep.Mask.InputTypes)
			}
			id = openRep.ID
		case strings.HasSuffix(st.Path, "/events"):
			var was, now oldAppendReply
			decode(t, st.Reply, &was)
			decode(t, got, &now)
			if now != was {
				t.Errorf("append %s: %+v, the old server said %+v", st.Body, now, was)
			}
			acked = now.AckedThrough
		case strings.HasSuffix(st.Path, "/finish"):
			var was, now oldFinishReply
			decode(t, st.Reply, &was)
			decode(t, got, &now)
			if !cidRE.MatchString(now.Root) || now.AckedThrough != was.AckedThrough {
				t.Errorf("finish: %+v, want a root CID and acked_through %d as the old server said (%+v)", now, was.AckedThrough, was)
			}
			root = now.Root
		default:
			t.Fatalf("step %d: %s is not a write route this test knows", i, st.Path)
		}
	}
	if acked != uint64(ex.Events) {
		t.Errorf("acked through %d, the exchange sent %d events", acked, ex.Events)
	}

	// The recording is sealed as the old executor described it.
	m, sealed, err := srv.App.Store.Manifest(id)
	if err != nil {
		t.Fatalf("reading the manifest of %s: %v", id, err)
	}
	var fin oldFinishRequest
	readJSON(t, filepath.Join(dir, ex.Steps[len(ex.Steps)-1].Body), &fin)
	rec := m.Recording
	if sealed != root || m.Events != int64(ex.Events) || m.LastSeq != uint64(ex.Events) || rec.Verdict != fin.Verdict ||
		rec.Project != open.Project || rec.Flow != open.Flow || rec.Executor != open.Executor ||
		rec.PlanDigest != openRep.PlanDigest {
		t.Errorf("manifest under root %s (finish said %s): %d events through seq %d, verdict %q, project %q, flow %q, executor %q, plan %s; want %d events, verdict %q, %q/%q by %q, plan %s",
			sealed, root, m.Events, m.LastSeq, rec.Verdict, rec.Project, rec.Flow, rec.Executor, rec.PlanDigest,
			ex.Events, fin.Verdict, open.Project, open.Flow, open.Executor, openRep.PlanDigest)
	}
	// Several kinds crossed the wire, each stored.
	if len(m.Counts) < 5 {
		t.Errorf("the manifest counts kinds %v; the exchange holds at least five", m.Counts)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, b, v)
}

// decode reads JSON as the old client did (encoding/json, unknown members
// ignored).
func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s into %T: %v", b, v, err)
	}
}

// missingMembers reports members of the old reply (at any depth of
// objects) that the new reply lacks.
func missingMembers(t *testing.T, where string, old, now json.RawMessage) {
	t.Helper()
	var o, n map[string]json.RawMessage
	if json.Unmarshal(old, &o) != nil {
		return // not an object: the decode that follows compares it
	}
	if err := json.Unmarshal(now, &n); err != nil {
		t.Errorf("%s: the reply is not a JSON object like the old one: %s", where, now)
		return
	}
	for k, ov := range o {
		nv, ok := n[k]
		if !ok {
			t.Errorf("%s: the reply lacks %q, which the old one had", where, k)
			continue
		}
		missingMembers(t, where+"."+k, ov, nv)
	}
}
