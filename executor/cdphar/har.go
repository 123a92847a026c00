package cdphar

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"

	"github.com/flightrec/flightrec/event"
)

// Entry is one HAR 1.2 entry as this package writes it: event.HAR's fields
// plus the ones event.HAR passes through unmodelled (cache, serverIPAddress,
// connection, the underscore extensions). Field names are HAR's.
type Entry struct {
	StartedDateTime string     `json:"startedDateTime"`
	Time            float64    `json:"time"`
	Request         Request    `json:"request"`
	Response        Response   `json:"response"`
	Cache           struct{}   `json:"cache"`
	Timings         Timings    `json:"timings"`
	ServerIPAddress string     `json:"serverIPAddress,omitempty"`
	Connection      string     `json:"connection,omitempty"`
	Initiator       *Initiator `json:"_initiator,omitempty"`
	ResourceType    string     `json:"_resourceType,omitempty"`
	// WebSocketMessages are a WebSocket's messages (websocket.go).
	WebSocketMessages []event.WebSocketMessage `json:"_webSocketMessages,omitempty"`
	PageRef           string                   `json:"pageref,omitempty"` // Options.PageRef
}

// Request is a HAR request.
type Request struct {
	Method      string            `json:"method"`
	URL         string            `json:"url"`
	HTTPVersion string            `json:"httpVersion"`
	Cookies     []event.Cookie    `json:"cookies"`
	Headers     []event.NameValue `json:"headers"`
	QueryString []event.NameValue `json:"queryString"`
	PostData    *PostData         `json:"postData,omitempty"`
	HeadersSize int64             `json:"headersSize"`
	BodySize    int64             `json:"bodySize"`
}

// PostData is a HAR request body. Like the browsers' own HAR export, a
// form body has both text and params. A body that is not UTF-8 is base64
// in text with _encoding "base64" (HAR has no encoding for postData).
type PostData struct {
	MimeType string            `json:"mimeType"`
	Params   []event.NameValue `json:"params,omitempty"`
	Text     string            `json:"text"`
	Encoding string            `json:"_encoding,omitempty"`
	Comment  string            `json:"comment,omitempty"`
}

// Response is a HAR response. Status 0 with _error is a request that got
// no response.
type Response struct {
	Status      int               `json:"status"`
	StatusText  string            `json:"statusText"`
	HTTPVersion string            `json:"httpVersion"`
	Cookies     []event.Cookie    `json:"cookies"`
	Headers     []event.NameValue `json:"headers"`
	Content     Content           `json:"content"`
	RedirectURL string            `json:"redirectURL"`
	HeadersSize int64             `json:"headersSize"`
	BodySize    int64             `json:"bodySize"`
	Error       string            `json:"_error,omitempty"`
}

// Content is a HAR response body.
type Content struct {
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

// Timings are HAR timings in milliseconds; -1 where a phase does not apply
// or is unknown (send, wait and receive are never -1).
type Timings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
}

// Initiator is what caused a request, in CDP's shape (as Chrome's own HAR
// export keeps it), without script ids.
type Initiator struct {
	Type         string `json:"type"`
	URL          string `json:"url,omitempty"`
	LineNumber   *int64 `json:"lineNumber,omitempty"`
	ColumnNumber *int64 `json:"columnNumber,omitempty"`
	RequestID    string `json:"requestId,omitempty"`
	Stack        *Stack `json:"stack,omitempty"`
}

// Stack is a JavaScript stack, with the async parent chain.
type Stack struct {
	Description string       `json:"description,omitempty"`
	CallFrames  []StackFrame `json:"callFrames"`
	Parent      *Stack       `json:"parent,omitempty"`
}

// StackFrame is one frame of an initiator stack (0-based line/column).
type StackFrame struct {
	FunctionName string `json:"functionName"`
	URL          string `json:"url"`
	LineNumber   int64  `json:"lineNumber"`
	ColumnNumber int64  `json:"columnNumber"`
}

// build turns a hop and its ExtraInfo events into a HAR entry.
func build(h *hop, x extraInfo) *Entry {
	rq := h.sent.Request
	if rq == nil {
		rq = &network.Request{}
	}
	e := &Entry{
		StartedDateTime: wallTime(h.sent.WallTime.Float64()),
		Initiator:       initiator(h.sent.Initiator),
		ResourceType:    string(h.resType),
	}
	version := httpVersion(h.resp, x.resp)

	// Request: the raw headers as sent, when the browser gave them.
	hdr := rq.Headers
	switch {
	case x.req != nil && len(x.req.Headers) > 0:
		hdr = x.req.Headers
	case h.resp != nil && len(h.resp.RequestHeaders) > 0:
		hdr = h.resp.RequestHeaders
	}
	e.Request = Request{
		Method:      rq.Method,
		URL:         rq.URL,
		HTTPVersion: version,
		Headers:     headerList(hdr),
		QueryString: queryString(rq.URL),
		HeadersSize: -1,
	}
	e.Request.Cookies = requestCookies(e.Request.Headers)
	if body, note := postBody(h); body != nil || note != "" {
		e.Request.PostData = postData(headerValue(e.Request.Headers, "Content-Type"), body, note)
		e.Request.BodySize = int64(len(body))
	}

	// Response.
	e.Response = Response{HTTPVersion: version, HeadersSize: -1, BodySize: -1,
		RedirectURL: h.redirectTo, Cookies: []event.Cookie{}, Headers: []event.NameValue{}}
	if h.resp != nil {
		r := h.resp
		e.Response.Status = int(r.Status)
		e.Response.StatusText = r.StatusText
		rh := r.Headers
		if x.resp != nil && len(x.resp.Headers) > 0 {
			rh = x.resp.Headers
		}
		e.Response.Headers = headerList(rh)
		e.Response.Cookies = responseCookies(e.Response.Headers, r.ResponseTime.Float64())
		e.Response.Content.MimeType = r.MimeType
		if r.Charset != "" && r.MimeType != "" && !strings.Contains(r.MimeType, "charset") {
			e.Response.Content.MimeType += "; charset=" + r.Charset
		}
		e.ServerIPAddress = r.RemoteIPAddress
		if r.ConnectionID > 0 {
			e.Connection = fmt.Sprint(int64(r.ConnectionID))
		}
	} else if x.resp != nil && x.resp.StatusCode > 0 {
		// No responseReceived (a CORS failure, say) but the wire saw one.
		e.Response.Status = int(x.resp.StatusCode)
		e.Response.Headers = headerList(x.resp.Headers)
		e.Response.Cookies = responseCookies(e.Response.Headers, 0)
	}
	if e.Response.StatusText == "" && e.Response.Status > 0 {
		e.Response.StatusText = http.StatusText(e.Response.Status)
	}
	if x.resp != nil && x.resp.HeadersText != "" {
		e.Response.HeadersSize = int64(len(x.resp.HeadersText))
	}
	switch {
	case h.redirectTo != "":
		e.Response.BodySize = 0
	case h.finished != nil && h.finished.EncodedBodyLength > 0:
		e.Response.BodySize = int64(h.finished.EncodedBodyLength)
	case h.finished != nil && e.Response.HeadersSize >= 0 && int64(h.finished.EncodedDataLength) >= e.Response.HeadersSize:
		// The bytes received less the raw headers' (HTTP/1.x only).
		e.Response.BodySize = int64(h.finished.EncodedDataLength) - e.Response.HeadersSize
	case h.finished != nil && h.body != nil && headerValue(e.Response.Headers, "Content-Encoding") == "":
		e.Response.BodySize = int64(len(h.body))
	}
	c := &e.Response.Content
	c.Comment = h.bodyNote
	if h.body != nil {
		c.Size = int64(len(h.body))
		if h.body64 {
			c.Text, c.Encoding = base64.StdEncoding.EncodeToString(h.body), "base64"
		} else {
			c.Text = string(h.body)
		}
	} else if e.Response.BodySize > 0 {
		c.Size = e.Response.BodySize
	}
	if h.failed != nil {
		e.Response.Error = h.failed.ErrorText
		if e.Response.Error == "" {
			e.Response.Error = "failed"
		}
		if h.failed.Canceled {
			e.Response.Error += " (canceled)"
		}
		if h.failed.BlockedReason != "" {
			e.Response.Error += " (blocked: " + string(h.failed.BlockedReason) + ")"
		}
	}

	var timing *network.ResourceTiming
	if h.resp != nil {
		timing = h.resp.Timing
	}
	e.Timings = timings(h.sent.Timestamp.Float64(), timing, h.respAt, h.end)
	e.Time = total(e.Timings)
	return e
}

// wallTime formats CDP's seconds since the epoch as RFC 3339 with
// milliseconds, in UTC.
func wallTime(sec float64) string {
	if sec <= 0 {
		return time.Unix(0, 0).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	s, frac := math.Modf(sec)
	return time.Unix(int64(s), int64(frac*1e9)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// httpVersion spells the protocol the way HAR files do.
func httpVersion(r *network.Response, x *network.EventResponseReceivedExtraInfo) string {
	if x != nil && strings.HasPrefix(x.HeadersText, "HTTP/") {
		if v, _, ok := strings.Cut(x.HeadersText, " "); ok {
			return v
		}
	}
	if r == nil {
		return ""
	}
	switch p := strings.ToLower(r.Protocol); p {
	case "":
		return ""
	case "http/1.0", "http/1.1":
		return strings.ToUpper(p)
	case "h2":
		return "HTTP/2"
	case "h3":
		return "HTTP/3"
	default:
		return p
	}
}

// headerList flattens CDP headers into HAR's list, one entry per line:
// CDP joins repeated headers (every Set-Cookie, say) with "\n". Names sort
// case-insensitively so that entries are stable.
func headerList(h network.Headers) []event.NameValue {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := strings.ToLower(names[i]), strings.ToLower(names[j])
		if a != b {
			return a < b
		}
		return names[i] < names[j]
	})
	out := make([]event.NameValue, 0, len(names))
	for _, k := range names {
		var v string
		switch x := h[k].(type) {
		case string:
			v = x
		case nil:
		default:
			v = fmt.Sprint(x)
		}
		for _, line := range strings.Split(v, "\n") {
			out = append(out, event.NameValue{Name: k, Value: line})
		}
	}
	return out
}

func headerValue(h []event.NameValue, name string) string {
	for _, nv := range h {
		if strings.EqualFold(nv.Name, name) {
			return nv.Value
		}
	}
	return ""
}

// requestCookies parses every Cookie header: "a=1; b=2".
func requestCookies(h []event.NameValue) []event.Cookie {
	out := []event.Cookie{}
	for _, nv := range h {
		if !strings.EqualFold(nv.Name, "Cookie") {
			continue
		}
		for _, part := range strings.Split(nv.Value, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			name, value, _ := strings.Cut(part, "=")
			out = append(out, event.Cookie{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
		}
	}
	return out
}

// responseCookies parses every Set-Cookie line. respTime (seconds since
// the epoch, 0 if unknown) turns Max-Age into an expiry.
func responseCookies(h []event.NameValue, respTime float64) []event.Cookie {
	out := []event.Cookie{}
	for _, nv := range h {
		if !strings.EqualFold(nv.Name, "Set-Cookie") || strings.TrimSpace(nv.Value) == "" {
			continue
		}
		out = append(out, parseSetCookie(nv.Value, respTime))
	}
	return out
}

// parseSetCookie reads one Set-Cookie line leniently: a value Go's parser
// refuses is still a cookie, and still a secret, so it is kept as sent.
func parseSetCookie(line string, respTime float64) event.Cookie {
	parts := strings.Split(line, ";")
	name, value, _ := strings.Cut(parts[0], "=")
	c := event.Cookie{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)}
	var maxAge *int64
	for _, attr := range parts[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(attr), "=")
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "path":
			c.Path = v
		case "domain":
			c.Domain = v
		case "expires":
			if t, err := http.ParseTime(v); err == nil {
				c.Expires = t.UTC().Format(time.RFC3339)
			} else if c.Expires == "" {
				c.Expires = v
			}
		case "max-age":
			var n int64
			if _, err := fmt.Sscan(v, &n); err == nil {
				maxAge = &n
			}
		case "httponly":
			c.HTTPOnly = true
		case "secure":
			c.Secure = true
		}
	}
	if maxAge != nil { // Max-Age wins over Expires
		base := time.Now()
		if respTime > 0 {
			s, frac := math.Modf(respTime)
			base = time.Unix(int64(s), int64(frac*1e9))
		}
		if *maxAge <= 0 {
			c.Expires = time.Unix(0, 0).UTC().Format(time.RFC3339)
		} else {
			c.Expires = base.Add(time.Duration(*maxAge) * time.Second).UTC().Format(time.RFC3339)
		}
	}
	return c
}

// queryString lists a URL's query parameters in order, decoded.
func queryString(raw string) []event.NameValue {
	out := []event.NameValue{}
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	return appendPairs(out, u.RawQuery)
}

// appendPairs splits a=1&b=2 (a query or a form body) and decodes each
// side; a part that does not decode is kept as it was.
func appendPairs(out []event.NameValue, s string) []event.NameValue {
	for _, part := range strings.Split(s, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if d, err := url.QueryUnescape(k); err == nil {
			k = d
		}
		if d, err := url.QueryUnescape(v); err == nil {
			v = d
		}
		out = append(out, event.NameValue{Name: k, Value: v})
	}
	return out
}

// postBody is the request body: CDP's postDataEntries, or what
// Network.getRequestPostData returned.
func postBody(h *hop) ([]byte, string) {
	rq := h.sent.Request
	if rq == nil {
		return nil, ""
	}
	if len(rq.PostDataEntries) > 0 {
		var b []byte
		for _, pe := range rq.PostDataEntries {
			if pe != nil {
				b = append(b, pe.Bytes...)
			}
		}
		return b, ""
	}
	if h.post != nil {
		return h.post, ""
	}
	if rq.HasPostData {
		if h.postNote != "" {
			return nil, h.postNote
		}
		return nil, "request body not available"
	}
	return nil, ""
}

func postData(mime string, body []byte, note string) *PostData {
	p := &PostData{MimeType: mime, Comment: note}
	if utf8.Valid(body) {
		p.Text = string(body)
		if strings.HasPrefix(strings.ToLower(mime), "application/x-www-form-urlencoded") {
			p.Params = appendPairs(nil, p.Text)
		}
	} else {
		p.Text, p.Encoding = base64.StdEncoding.EncodeToString(body), "base64"
	}
	return p
}

func initiator(in *network.Initiator) *Initiator {
	if in == nil {
		return nil
	}
	out := &Initiator{Type: string(in.Type), URL: in.URL, RequestID: string(in.RequestID),
		Stack: stack(in.Stack, 0)}
	if in.Type == network.InitiatorTypeParser || in.LineNumber != 0 || in.ColumnNumber != 0 {
		l, c := int64(in.LineNumber), int64(in.ColumnNumber)
		out.LineNumber, out.ColumnNumber = &l, &c
	}
	return out
}

// maxStackDepth bounds the async parent chain kept.
const maxStackDepth = 8

func stack(s *runtime.StackTrace, depth int) *Stack {
	if s == nil || depth >= maxStackDepth {
		return nil
	}
	out := &Stack{Description: s.Description, CallFrames: make([]StackFrame, 0, len(s.CallFrames)),
		Parent: stack(s.Parent, depth+1)}
	for _, f := range s.CallFrames {
		if f == nil {
			continue
		}
		out.CallFrames = append(out.CallFrames, StackFrame{FunctionName: f.FunctionName, URL: f.URL,
			LineNumber: f.LineNumber, ColumnNumber: f.ColumnNumber})
	}
	return out
}

// timings splits a request's time into HAR's phases. start is when
// requestWillBeSent fired, respAt when the response headers were seen and
// end when loading finished or failed, all in monotonic seconds. t, when
// the browser gave it, holds offsets in ms from t.RequestTime (seconds),
// with -1 for phases that did not happen (a reused connection has no DNS or
// connect).
func timings(start float64, t *network.ResourceTiming, respAt, end float64) Timings {
	ms := func(s float64) float64 { return round3(math.Max(0, s*1000)) }
	if t == nil || t.RequestTime <= 0 {
		out := Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1}
		switch {
		case respAt > 0:
			out.Wait = ms(respAt - start)
			out.Receive = ms(end - respAt)
		case end > 0:
			out.Wait = ms(end - start)
		}
		return out
	}
	span := func(a, b float64) float64 {
		if a < 0 || b < a {
			return -1
		}
		return round3(b - a)
	}
	out := Timings{
		DNS:     span(t.DNSStart, t.DNSEnd),
		Connect: span(t.ConnectStart, t.ConnectEnd),
		SSL:     span(t.SslStart, t.SslEnd),
		Send:    round3(math.Max(0, t.SendEnd-t.SendStart)),
	}
	// Blocked: from requestWillBeSent to the first phase that happened.
	first := t.SendStart
	for _, v := range []float64{t.ConnectStart, t.DNSStart} {
		if v >= 0 && v < first {
			first = v
		}
	}
	out.Blocked = round3(math.Max(0, (t.RequestTime-start)*1000+math.Max(0, first)))
	headers := t.ReceiveHeadersEnd
	if t.ReceiveHeadersStart > 0 {
		headers = t.ReceiveHeadersStart
	}
	out.Wait = round3(math.Max(0, headers-t.SendEnd))
	if end > 0 {
		out.Receive = round3(math.Max(0, (end-t.RequestTime)*1000-headers))
	}
	return out
}

// total is the entry's time: the sum of the phases that apply (ssl is
// already inside connect).
func total(t Timings) float64 {
	sum := 0.0
	for _, v := range []float64{t.Blocked, t.DNS, t.Connect, t.Send, t.Wait, t.Receive} {
		if v > 0 {
			sum += v
		}
	}
	return round3(sum)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
