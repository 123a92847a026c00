package cdphar

import (
	"encoding/base64"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/flightrec/flightrec/event"
)

// A WebSocket is one HAR entry, its handshake, whose _webSocketMessages
// (Chrome's HAR extension) list the messages in the order they went. The
// entry is complete when the socket closes; Take(true) also takes sockets
// still open at the end of a run.

// maxSocketMessages bounds what one connection keeps in memory; messages
// past it are counted in the entry's comment, not kept.
const maxSocketMessages = 10000

type socket struct {
	id       network.RequestID
	url      string
	step     int
	wall     time.Time // when the handshake was sent
	mono     float64   // its monotonic timestamp, to place the frames
	reqHdr   network.Headers
	status   int
	statText string
	respHdr  network.Headers
	msgs     []event.WebSocketMessage
	dropped  int
	closed   bool
	taken    bool
}

// handleSocket takes the Network.webSocket* events (under r.mu).
func (r *Recorder) handleSocket(ev any) bool {
	switch ev := ev.(type) {
	case *network.EventWebSocketCreated:
		step := 0
		if r.opts.StepOf != nil {
			step = r.opts.StepOf()
		}
		r.sockets = append(r.sockets, &socket{id: ev.RequestID, url: ev.URL, step: step, wall: time.Now()})
	case *network.EventWebSocketWillSendHandshakeRequest:
		if s := r.socket(ev.RequestID); s != nil {
			s.wall = time.Unix(0, int64(ev.WallTime.Float64()*1e9))
			s.mono = ev.Timestamp.Float64()
			if ev.Request != nil {
				s.reqHdr = ev.Request.Headers
			}
		}
	case *network.EventWebSocketHandshakeResponseReceived:
		if s := r.socket(ev.RequestID); s != nil && ev.Response != nil {
			s.status, s.statText, s.respHdr = int(ev.Response.Status), ev.Response.StatusText, ev.Response.Headers
		}
	case *network.EventWebSocketFrameSent:
		r.frame(ev.RequestID, "send", ev.Timestamp.Float64(), ev.Response)
	case *network.EventWebSocketFrameReceived:
		r.frame(ev.RequestID, "receive", ev.Timestamp.Float64(), ev.Response)
	case *network.EventWebSocketClosed:
		if s := r.socket(ev.RequestID); s != nil {
			s.closed = true
		}
	default:
		return false
	}
	return true
}

func (r *Recorder) socket(id network.RequestID) *socket {
	for i := len(r.sockets) - 1; i >= 0; i-- {
		if r.sockets[i].id == id {
			return r.sockets[i]
		}
	}
	return nil
}

// frame keeps one message. Data over MaxBody is left out whole (never cut
// here: the server caps after redaction has seen all of it).
func (r *Recorder) frame(id network.RequestID, typ string, ts float64, f *network.WebSocketFrame) {
	s := r.socket(id)
	if s == nil || f == nil {
		return
	}
	if len(s.msgs) >= maxSocketMessages {
		s.dropped++
		return
	}
	at := s.wall
	if s.mono > 0 {
		at = s.wall.Add(time.Duration((ts - s.mono) * float64(time.Second)))
	}
	// cdproto hands the decoded bytes: text as is, binary back to base64
	// (the HAR extension's spelling).
	data := string(f.PayloadData)
	if f.Opcode != 1 {
		data = base64.StdEncoding.EncodeToString(f.PayloadData)
	}
	m := event.WebSocketMessage{Type: typ, Time: float64(at.UnixNano()) / 1e9, Opcode: int(f.Opcode), Data: data}
	if r.opts.MaxBody < 0 || len(m.Data) > r.opts.MaxBody {
		m.Data, m.Truncated = "", true
	}
	s.msgs = append(s.msgs, m)
}

// socketEntry is a socket's HAR entry.
func socketEntry(s *socket) *Entry {
	e := &Entry{StartedDateTime: s.wall.UTC().Format("2006-01-02T15:04:05.000Z"), ResourceType: "websocket",
		Timings: Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1}}
	e.Request = Request{Method: "GET", URL: s.url, HTTPVersion: "HTTP/1.1", Headers: headerList(s.reqHdr),
		QueryString: queryString(s.url), HeadersSize: -1, BodySize: 0}
	e.Request.Cookies = requestCookies(e.Request.Headers)
	e.Response = Response{Status: s.status, StatusText: s.statText, HTTPVersion: "HTTP/1.1",
		Headers: headerList(s.respHdr), HeadersSize: -1, BodySize: 0, Cookies: []event.Cookie{}}
	e.Response.Content.MimeType = "x-unknown"
	if s.dropped > 0 {
		e.Response.Content.Comment = "messages past the first 10000 not kept"
	}
	e.WebSocketMessages = append([]event.WebSocketMessage{}, s.msgs...)
	return e
}
