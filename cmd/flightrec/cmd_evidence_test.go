package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/internal/testenv/appserver"
	"github.com/flightrec/flightrec/internal/testgen"
	"github.com/flightrec/flightrec/wire"
)

func evidenceCLI(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"evidence"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestEvidenceCommand: flightrec evidence prints the server's card
// (Markdown, or JSON), and the same card from a stopped server's --data
// directory read-only, with no attestation (that is the server's to sign)
// and a note saying so; an unknown recording exits 3 with the envelope.
func TestEvidenceCommand(t *testing.T) {
	srv := appserver.Start(t)
	id := openRec(t, srv.Base, "shop")
	var lines []string
	for _, e := range testgen.Flood(2000, 8) {
		b, _ := json.Marshal(e)
		lines = append(lines, string(b))
	}
	sendAll(t, srv.Base, id, lines, 100)
	if _, err := client.New(srv.Base).Finish(context.Background(), id, "fail"); err != nil {
		t.Fatal(err)
	}
	waitIndexed(t, srv.Base, id)

	md, errOut, code := evidenceCLI(id, "--server", srv.Base)
	if code != exitOK || !strings.Contains(md, "#### Failing step 1: `click` `button \"Flood\"`") || !strings.Contains(md, "| `POST` | `https://app.example/api/flood/0` | 500 | `FLOOD` |") {
		t.Fatalf("evidence --server: exit %d %s\n%s", code, errOut, md)
	}
	js, errOut, code := evidenceCLI(id, "--server", srv.Base, "--format", "json")
	var viaServer wire.EvidenceCard
	if code != exitOK || json.Unmarshal([]byte(js), &viaServer) != nil || viaServer.Verify.AttestationSHA256 == "" {
		t.Fatalf("evidence --format json: exit %d %s\n%s", code, errOut, js)
	}

	// --share: the card with share links, the links made on the server.
	js, errOut, code = evidenceCLI(id, "--server", srv.Base, "--format", "json", "--share", "2d")
	var shared wire.EvidenceCard
	if code != exitOK || json.Unmarshal([]byte(js), &shared) != nil || !strings.HasPrefix(shared.Links.Video, srv.Base+"/s/frs_") ||
		!strings.Contains(shared.Links.Player, "#share=frs_") || shared.Links.HAR != "" {
		t.Fatalf("evidence --share: exit %d %s\n%s", code, errOut, js)
	}
	if list, err := srv.App.Shares.List(id); err != nil || len(list) != 3 {
		t.Fatalf("shares after --share: %+v %v, want 3", list, err)
	}
	if _, _, code := evidenceCLI(id, "--data", srv.App.Store.Dir(), "--share", "2d"); code != exitUsage {
		t.Fatalf("--share with --data: exit %d, want usage", code)
	}

	srv.Close()
	data := srv.App.Store.Dir()
	js, errOut, code = evidenceCLI(id, "--data", data, "--format", "json", "--base", srv.Base)
	var local wire.EvidenceCard
	if code != exitOK || json.Unmarshal([]byte(js), &local) != nil {
		t.Fatalf("evidence --data: exit %d %s\n%s", code, errOut, js)
	}
	if local.Verify.AttestationSHA256 != "" || len(local.Notes) != 1 || !strings.Contains(local.Notes[0], "no attestation") {
		t.Errorf("--data: attestation %q, notes %q: want none, and a note saying why", local.Verify.AttestationSHA256, local.Notes)
	}
	// Apart from the attestation, the same card.
	local.Verify, local.Notes, viaServer.Verify, viaServer.Notes = wire.CardVerify{}, nil, wire.CardVerify{}, nil
	a, _ := json.Marshal(local)
	b, _ := json.Marshal(viaServer)
	if !bytes.Equal(a, b) {
		t.Errorf("--data and --server cards differ:\n%s\n%s", a, b)
	}

	_, errOut, code = evidenceCLI("00t4cp7wtkfb2t7j123gebgh9s", "--data", data)
	if code != exitFailure || !strings.Contains(errOut, "NOT_FOUND") {
		t.Errorf("unknown recording: exit %d %s", code, errOut)
	}
	if _, _, code = evidenceCLI(id, "--data", data, "--server", "http://127.0.0.1:1"); code != exitUsage {
		t.Errorf("--data with --server: exit %d, want %d", code, exitUsage)
	}
	if _, _, code = evidenceCLI(id, "--data", data, "--format", "html"); code != exitUsage {
		t.Errorf("--format html: exit %d, want %d", code, exitUsage)
	}
}
