package redact

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flightrec/flightrec/event"
)

// TestHARWebSocketMessages: a socket's messages are redacted like bodies
// (JSON by key, binary decoded first), capped at MaxHARBody with the
// message marked, and a harmless message is kept as it was.
func TestHARWebSocketMessages(t *testing.T) {
	req := `{"method":"GET","url":"ws://shop.example/ws/cart","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"queryString":[],"headersSize":-1,"bodySize":0}`
	resp := `{"status":101,"statusText":"Switching Protocols","httpVersion":"HTTP/1.1","cookies":[],"headers":[],"content":{"size":0,"mimeType":"x-unknown"},"redirectURL":"","headersSize":-1,"bodySize":0}`
	bin := base64.StdEncoding.EncodeToString([]byte(`{"password":"binPwSecret555"}`))
	big := `{"note":"` + strings.Repeat("x", event.MaxHARBody+10) + `"}`
	msgs := `"_webSocketMessages":[` +
		`{"type":"send","time":1764483600.5,"opcode":1,"data":` + jsonStr(`{"type":"auth","password":"wsPwSecret444"}`) + `},` +
		`{"type":"receive","time":1764483600.6,"opcode":2,"data":` + jsonStr(bin) + `},` +
		`{"type":"receive","time":1764483600.7,"opcode":1,"data":` + jsonStr(big) + `},` +
		`{"type":"receive","time":1764483600.8,"opcode":1,"data":"{\"type\":\"cart\",\"count\":1}"}]`
	r := redactorOf(t)
	res, err := r.Redact(evOf(t, event.KindHAR, harOf(req, resp, msgs)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"wsPwSecret444", "binPwSecret555", bin} {
		assertNoSecret(t, res.Data, s)
	}
	h := evOf(t, event.KindHAR, string(res.Data)).Payload.(*event.HAR)
	if len(h.WebSocketMessages) != 4 {
		t.Fatalf("messages %+v", h.WebSocketMessages)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(h.WebSocketMessages[0].Data), &sent); err != nil || sent["password"] != Erased || sent["type"] != "auth" {
		t.Errorf("sent message %q", h.WebSocketMessages[0].Data)
	}
	if m := h.WebSocketMessages[2]; len(m.Data) > event.MaxHARBody || !m.Truncated {
		t.Errorf("big message: %d bytes, truncated %v", len(m.Data), m.Truncated)
	}
	if m := h.WebSocketMessages[3]; m.Data != `{"type":"cart","count":1}` || m.Type != "receive" || m.Opcode != 1 || m.Truncated {
		t.Errorf("harmless message changed: %+v", m)
	}
	if !findingsHave(res.Findings, "json-key:password", "/_webSocketMessages/0/data") {
		t.Errorf("no finding at the message; have %+v", res.Findings)
	}
}
