package demoapp

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The storefront's WebSocket is a minimal RFC 6455 server written on the
// standard library, enough for the cart badge: the handshake, unfragmented
// text frames both ways, ping/pong and close. A dependency for this would
// be larger than the code.

// wsGUID is RFC 6455's magic string for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsConn is one accepted connection; send may be called from any goroutine.
type wsConn struct {
	c   net.Conn
	br  *bufio.Reader
	wmu sync.Mutex
}

// wsAccept upgrades r to a WebSocket, or answers 400 and returns nil.
func wsAccept(w http.ResponseWriter, r *http.Request) *wsConn {
	key := r.Header.Get("Sec-WebSocket-Key")
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || key == "" ||
		!strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		writeJSON(w, http.StatusBadRequest, errBody("NOT_A_WEBSOCKET"))
		return nil
	}
	// Through the controller, a wrapping writer (a test's logger) that
	// has Unwrap still hijacks.
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody("NO_HIJACK"))
		return nil
	}
	sum := sha1.Sum([]byte(key + wsGUID))
	_, err = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
	if err != nil {
		c.Close()
		return nil
	}
	return &wsConn{c: c, br: rw.Reader}
}

// writeFrame writes one unfragmented, unmasked frame (servers never mask).
func (ws *wsConn) writeFrame(op byte, payload []byte) error {
	ws.wmu.Lock()
	defer ws.wmu.Unlock()
	// A peer that stops reading must not hold the shop's lock (pushCount).
	_ = ws.c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	hdr := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, byte(n))
	case n <= 0xffff:
		hdr = append(hdr, 126, byte(n>>8), byte(n))
	default:
		hdr = binary.BigEndian.AppendUint64(append(hdr, 127), uint64(n))
	}
	_, err := ws.c.Write(append(hdr, payload...))
	return err
}

// send writes a text message.
func (ws *wsConn) send(text string) error { return ws.writeFrame(0x1, []byte(text)) }

// errClosed is the peer's close frame.
var errClosed = errors.New("websocket closed")

// read returns the next text message, answering pings and refusing
// fragments and frames over 64 KiB (the cart's messages are tiny).
func (ws *wsConn) read() (string, error) {
	for {
		var h [2]byte
		if _, err := io.ReadFull(ws.br, h[:]); err != nil {
			return "", err
		}
		fin, op, masked := h[0]&0x80 != 0, h[0]&0x0f, h[1]&0x80 != 0
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(ws.br, b[:]); err != nil {
				return "", err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(ws.br, b[:]); err != nil {
				return "", err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if !fin || !masked || n > 64<<10 {
			// RFC 6455 §5.1: a client's frames are masked; fragments are
			// more than this demo needs.
			_ = ws.writeFrame(0x8, []byte{0x03, 0xea}) // 1002 protocol error
			return "", errors.New("websocket: unsupported frame")
		}
		var mask [4]byte
		if _, err := io.ReadFull(ws.br, mask[:]); err != nil {
			return "", err
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(ws.br, p); err != nil {
			return "", err
		}
		for i := range p {
			p[i] ^= mask[i%4]
		}
		switch op {
		case 0x1:
			return string(p), nil
		case 0x8:
			_ = ws.writeFrame(0x8, p)
			return "", errClosed
		case 0x9:
			_ = ws.writeFrame(0xA, p)
		}
	}
}

func (ws *wsConn) close() error { return ws.c.Close() }

// cartSocket serves /ws/cart: the cart's count now and on every change.
func (s *shop) cartSocket(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ss := s.session(r)
	s.mu.Unlock()
	if ss == nil {
		writeJSON(w, http.StatusUnauthorized, errBody("UNAUTHENTICATED"))
		return
	}
	ws := wsAccept(w, r)
	if ws == nil {
		return
	}
	defer ws.close()
	s.mu.Lock()
	if s.sockets[ss] == nil {
		s.sockets[ss] = map[*wsConn]bool{}
	}
	s.sockets[ss][ws] = true
	first := countMessage(ss)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sockets[ss], ws)
		s.mu.Unlock()
	}()
	if ws.send(first) != nil {
		return
	}
	if s.opts.SocketExtra != "" && ws.send(s.opts.SocketExtra) != nil {
		return
	}
	for {
		// The page's messages (its hello) need no answer; reading them
		// is how the close is noticed.
		if _, err := ws.read(); err != nil {
			return
		}
	}
}

func countMessage(ss *session) string {
	b, _ := json.Marshal(map[string]any{"type": "cart", "count": ss.items()})
	return string(b)
}

// pushCount sends the session's count to its open sockets; it runs under
// the shop's lock (a send to a dead peer fails fast, and its reader ends).
func (s *shop) pushCount(ss *session) {
	msg := countMessage(ss)
	for ws := range s.sockets[ss] {
		_ = ws.send(msg)
	}
}
