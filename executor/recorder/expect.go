package recorder

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/flow"
)

// expect runs an expect step and sends its check event.
func (s *session) expect(x *flow.Expectation, timeout time.Duration) *event.StepError {
	if x.State != nil {
		return s.expectState(x.State)
	}
	// A text expectation waits like a wait step: the page may still be
	// rendering what the flow expects.
	found := s.poll(timeout, func() bool { return s.pageHasText(x.Text) })
	s.st.emit(event.KindCheck, time.Now(), event.Check{Type: "ui", Target: "page text",
		Expect: mustJSON(map[string]string{"text": x.Text}), Actual: mustJSON(map[string]bool{"found": found}), Passed: found})
	if !found {
		return stepErr(CodeExpectFailed, "the content snapshot after this step shows what the page says",
			"text %q is not on the page (waited %s)", x.Text, timeout)
	}
	return nil
}

// stateAnswer is what a state check saw.
type stateAnswer struct {
	Status int             `json:"status"`
	JSON   json.RawMessage `json:"json,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// expectState makes the state check's request with the browser's cookies
// for its URL, and compares the answer.
func (s *session) expectState(c *flow.StateCheck) *event.StepError {
	target := c.Method + " " + c.URL
	want := stateAnswer{Status: c.Status, JSON: c.JSON}
	got := s.stateRequest(c)
	passed := got.Error == "" && got.Status == c.Status
	if passed && len(c.JSON) > 0 {
		passed = containsJSON(got.JSON, c.JSON)
	}
	s.st.emit(event.KindCheck, time.Now(), event.Check{Type: "state", Target: target,
		Expect: mustJSON(want), Actual: mustJSON(got), Passed: passed})
	if passed {
		return nil
	}
	switch {
	case got.Error != "":
		return stepErr(CodeStateMismatch, "check that the app is running", "%s: %s", target, got.Error)
	case got.Status != c.Status:
		return stepErr(CodeStateMismatch, "this step's check event holds the answer", "%s answered %d, the flow expects %d", target, got.Status, c.Status)
	default:
		return stepErr(CodeStateMismatch, "this step's check event holds the answer", "%s answered JSON that does not contain what the flow expects", target)
	}
}

func (s *session) stateRequest(c *flow.StateCheck) stateAnswer {
	if r := s.cfg.Pins.Network; r != nil {
		// Under the network pin the app's API is not asked: the
		// recording's answer to the same check is the state.
		rec, ok := r.State(c.Method, c.URL)
		if !ok {
			step := s.st.currentStep()
			s.mu.Lock()
			s.misses[step] = append(s.misses[step], replayMiss{c.Method, c.URL})
			s.mu.Unlock()
			return stateAnswer{Error: CodeNetworkNotRecorded + ": the recording has no answer to " + c.Method + " " + c.URL}
		}
		var got stateAnswer
		if err := json.Unmarshal(rec, &got); err != nil {
			return stateAnswer{Error: "the recording's answer is not a state answer"}
		}
		return got
	}
	ctx, cancel := context.WithTimeout(s.pg.ctx, 10*time.Second)
	defer cancel()
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{c.URL}})
	if err != nil {
		return stateAnswer{Error: "reading the browser's cookies: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, c.URL, nil)
	if err != nil {
		return stateAnswer{Error: err.Error()}
	}
	var jar []string
	for _, ck := range cookies.Cookies {
		jar = append(jar, ck.Name+"="+ck.Value)
	}
	if len(jar) > 0 {
		req.Header.Set("Cookie", strings.Join(jar, "; "))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// The error names the URL, never the cookies.
		return stateAnswer{Error: fmt.Sprintf("request failed: %v", err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	got := stateAnswer{Status: resp.StatusCode}
	if json.Valid(body) && len(bytes.TrimSpace(body)) > 0 {
		got.JSON = body
	}
	return got
}

// containsJSON says whether got contains want: every member of an object
// is in got with a contained value; arrays and scalars are equal.
func containsJSON(got, want json.RawMessage) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return false
	}
	return contains(g, w)
}

func contains(g, w any) bool {
	wm, ok := w.(map[string]any)
	if !ok {
		return reflect.DeepEqual(g, w)
	}
	gm, ok := g.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !contains(gv, wv) {
			return false
		}
	}
	return true
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("recorder: " + err.Error())
	}
	return b
}
