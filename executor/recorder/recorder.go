// Package recorder is flightrec's reference executor: it drives a headless
// Chromium along a flow file (executor/flow) over the DevTools protocol and
// streams every channel of the run through the ingest API as it happens:
// a receipt per step, interactive and content text snapshots before and
// after each step, rrweb DOM events (rrweb's own recorder, injected),
// HAR entries with bodies, console output with stacks (source-mapped when
// a map is reachable), JPEG screencast frames with mask rectangles, a
// screenshot on failure, and meta.
//
// It is an executor, not a part of the server: everything it sends is
// redacted by the server before it is stored. It masks at the source too
// (rrweb input values and snapshot values of masked fields, computed from
// the plan's mask rules the server returns on open), so a secret typed
// into a masked field does not even cross the loopback.
package recorder

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/executor/cdphar"
	"github.com/flightrec/flightrec/executor/client"
	"github.com/flightrec/flightrec/executor/flow"
	"github.com/flightrec/flightrec/wire"
)

// DefaultChromium is where Debian's chromium package puts the browser.
const DefaultChromium = "/usr/bin/chromium"

// InstallHint says what to install when no browser is found.
const InstallHint = "install Chromium (Debian/Ubuntu: apt-get install chromium), or set $CHROMIUM to a Chromium or Chrome binary"

// FindChromium returns the browser to run when none is configured:
// /usr/bin/chromium, else chromium, chromium-browser or google-chrome on
// $PATH. ok is false when none exists. (cmd/flightrec configures the one
// $CHROMIUM names.)
func FindChromium() (path string, ok bool) {
	if _, err := os.Stat(DefaultChromium); err == nil {
		return DefaultChromium, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return DefaultChromium, false
}

// ErrNoChromium is returned when no browser can be found.
var ErrNoChromium = errors.New("no Chromium found")

// Browser returns the browser Record would run for Config.Chromium path:
// path itself when it runs ("" finds one), or ErrNoChromium.
func Browser(path string) (string, error) {
	if path == "" {
		if p, ok := FindChromium(); ok {
			return p, nil
		}
		return "", ErrNoChromium
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not an executable", ErrNoChromium, path)
	}
	return p, nil
}

// ChromiumOptions are the allocator options of a headless Chromium at path
// with its own profile directory: the flags Debian's chromium needs to run
// as root in a container, and none of the background traffic (updates,
// sync, QUIC) that would show up in a recording's network.
func ChromiumOptions(path, profileDir string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(profileDir),
	}
}

// Config tunes the recorder.
type Config struct {
	Chromium      string        // the browser; "" finds one (FindChromium)
	StepTimeout   time.Duration // how long a step waits for its target or condition
	FrameInterval time.Duration // the least time between two frames
	JPEGQuality   int           // screencast quality, 1-100
	Project       string
	Labels        map[string]string
	// Pins make the run repeatable (flightrec rerun --pin).
	Pins Pins
	// Log hears progress lines (one per step); nil is silent.
	Log io.Writer
}

func (c *Config) defaults() {
	if c.StepTimeout <= 0 {
		c.StepTimeout = 5 * time.Second
	}
	if c.FrameInterval <= 0 {
		c.FrameInterval = 200 * time.Millisecond
	}
	if c.JPEGQuality <= 0 || c.JPEGQuality > 100 {
		c.JPEGQuality = 70
	}
	if c.Project == "" {
		c.Project = "default"
	}
}

// Result is what one recorded run produced.
type Result struct {
	ID      string `json:"id"`
	Flow    string `json:"flow"`
	Root    string `json:"root"`
	Verdict string `json:"verdict"`
	// Steps is how many steps ran; Failed lists the failed ones.
	Steps  int          `json:"steps"`
	Failed []StepResult `json:"failed,omitempty"`
	// Events counts the events sent, by kind, and in all.
	Events     map[event.Kind]int `json:"events"`
	Total      uint64             `json:"total_events"`
	Wall       time.Duration      `json:"wall_ns"`
	BrowserCPU time.Duration      `json:"browser_cpu_ns"` // CPU time of the browser's processes
}

// StepResult is one step's outcome as the receipt said it.
type StepResult struct {
	Step    int    `json:"step"`
	Line    int    `json:"line"`
	Verb    string `json:"verb"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

//go:embed page.js
var pageJS string

// session is one recording in progress: the pages it follows, the stream
// and what the listeners gathered.
type session struct {
	cfg  Config
	st   *stream
	mask wire.MaskRules
	// keepDownloads: the plan keeps downloads' bytes (open reply).
	keepDownloads bool
	refs          *refs
	maps          *sourceMaps
	// scratch is the run's own directory (removed with it): downloads
	// land there and nowhere else.
	scratch string
	cap     *capture
	// raw sends what chromedp cannot: the release of a target paused at
	// its start (nil: the recorder pauses none).
	raw *rawTransport

	// first is the page the run began in; pg the page steps act on now
	// (read and switched by the run's goroutine alone).
	first, pg *followedPage

	mu            sync.Mutex
	pages         []*followedPage // every page followed, the first first
	pageSeq       int             // the last page number given (the first page is 1)
	following     sync.WaitGroup
	consoleErrors map[int]int
	dialogs       map[int][]event.Dialog
	exceptions    map[int]string // the first uncaught exception of each step
	cursor        *event.Point
	misses        map[int][]replayMiss // API requests the network pin could not answer, by step
	replayed      map[string][]string  // "METHOD url" → the notes of its answers from the recording
	vp            event.Viewport       // set before any goroutine reads it
	lastView      map[string]string    // the last interactive view of each document (followedPage.document)

	frames *frames     // the screencast of the page steps act on
	cwork  chan func() // console work, in arrival order, off the reader goroutine
	cdone  chan struct{}
}

// Record runs fl (already expanded against the app's base URL) in a fresh
// headless Chromium and streams the recording to the server c speaks to.
// A step that fails stops the flow unless the failure is the app's (a 5xx
// answer, an uncaught exception), which the receipt records and the flow
// goes on after. The verdict is fail when any step failed.
func Record(ctx context.Context, cfg Config, fl *flow.Flow, c *client.Client) (Result, error) {
	cfg.defaults()
	start := time.Now()
	path, err := Browser(cfg.Chromium)
	if err != nil {
		return Result{}, err
	}
	profile, err := os.MkdirTemp("", "flightrec-chromium-*")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(profile)
	vp := fl.Viewport
	if vp.Width == 0 {
		vp = flow.DefaultViewport
	}
	// Over a websocket the recorder holds (rawTransport): it releases the
	// out-of-process frames it pauses at their start.
	raw := &rawTransport{}
	opts := append(ChromiumOptions(path, profile),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("remote-debugging-address", "127.0.0.1"),
		chromedp.WindowSize(vp.Width, vp.Height),
		chromedp.WithDialer(rawDialer(raw)))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx, quietUnknownSessions())
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		return Result{}, fmt.Errorf("starting %s: %w", path, err)
	}
	ver, err := chromedp.Call(tab, browser.GetVersion, struct{}{})
	if err != nil {
		return Result{}, fmt.Errorf("asking the browser its version: %w", err)
	}

	versions := map[string]string{"engine": ver.Product, "protocol": ver.ProtocolVersion,
		"v8": ver.JsVersion, "recorder": "flightrec record", "rrweb": rrwebVersion}
	if fl.Revision != "" {
		versions["flow_revision"] = fl.Revision
	}
	rep, err := c.Open(ctx, wire.OpenRequest{Project: cfg.Project, Flow: fl.Name, Labels: cfg.Labels,
		Executor: "flightrec record", Versions: versions})
	if err != nil {
		return Result{}, fmt.Errorf("opening the recording: %w", err)
	}
	first := newPage("", tab, nil, "")
	s := &session{cfg: cfg, st: newStream(c, rep.ID), refs: newRefs(), scratch: filepath.Join(profile, "downloads"), raw: raw,
		first: first, pg: first, pages: []*followedPage{first}, pageSeq: 1,
		consoleErrors: map[int]int{}, dialogs: map[int][]event.Dialog{}, exceptions: map[int]string{},
		misses: map[int][]replayMiss{}, replayed: map[string][]string{}, lastView: map[string]string{},
		cwork: make(chan func(), 1024), cdone: make(chan struct{})}
	s.mask, s.keepDownloads = defaultMask(rep.Mask), rep.KeepDownloads
	s.maps = newSourceMaps()
	go s.consoleWorker()
	res := Result{ID: rep.ID, Flow: fl.Name}
	labels := map[string]string{"flow": fl.Name}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	s.st.emitAt(event.KindMeta, start, 0, event.Meta{Versions: versions,
		Viewport: &event.Viewport{Width: vp.Width, Height: vp.Height}, Labels: labels})

	runErr := s.run(fl, vp, &res)

	// Whatever happened, send what was gathered and finish the recording,
	// so a failed run is evidence too.
	s.following.Wait()
	s.drainNetwork(5 * time.Second)
	s.frames.stop()
	close(s.cwork)
	<-s.cdone
	res.Events, res.Total = s.st.stats()
	if cpu, ok := browserCPU(tab); ok {
		res.BrowserCPU = cpu
	}
	for _, p := range s.allPages() {
		p.closeRemotes()
		if p.cancel != nil {
			p.cancel()
		}
	}
	cancelTab()
	if err := s.st.close(); err != nil {
		return res, err
	}
	res.Verdict = "pass"
	if len(res.Failed) > 0 || runErr != nil {
		res.Verdict = "fail"
	}
	fin, err := c.Finish(ctx, rep.ID, res.Verdict)
	if err != nil {
		return res, fmt.Errorf("finishing recording %s: %w", rep.ID, err)
	}
	res.Root = fin.Root
	res.Wall = time.Since(start)
	return res, runErr
}

// run sets up the tab's listeners and runs the flow's steps.
func (s *session) run(fl *flow.Flow, vp flow.Viewport, res *Result) error {
	if err := s.setup(vp); err != nil {
		return err
	}
	if fl.StartURL != "" {
		// Step 0 is before the first action: the start page loads there.
		if e := s.navigate(fl.StartURL, s.cfg.StepTimeout*2); e != nil {
			s.screenshotOnFailure()
			res.Failed = append(res.Failed, StepResult{Step: 0, Verb: "goto", Code: e.Code, Message: e.Message})
			return nil
		}
		s.settle(2 * time.Second)
		s.ensureFrame(0)
		// Step 0 has no receipt: an API request of the start page the
		// network pin could not answer fails the run here.
		if m := s.takeMisses(0); len(m) > 0 {
			res.Failed = append(res.Failed, StepResult{Step: 0, Verb: "goto", Code: CodeNetworkNotRecorded,
				Message: fmt.Sprintf("%s %s is not in the recording", m[0].method, m[0].url)})
		}
	}
	for i, step := range fl.Steps {
		n := i + 1
		out := s.runStep(n, step)
		res.Steps = n
		if s.cfg.Log != nil {
			line := fmt.Sprintf("step %d (line %d) %s: %s", n, step.Line, step.Verb, out.outcome)
			if out.err != nil {
				line += " " + out.err.Code + ": " + out.err.Message
			}
			fmt.Fprintln(s.cfg.Log, line)
		}
		if out.err != nil {
			res.Failed = append(res.Failed, StepResult{Step: n, Line: step.Line, Verb: string(step.Verb),
				Code: out.err.Code, Message: out.err.Message})
			if out.stop {
				break
			}
		}
	}
	return nil
}

// setup routes downloads and follows popups (the browser's), sets up the
// first page and starts its screencast.
func (s *session) setup(vp flow.Viewport) error {
	s.vp = event.Viewport{Width: vp.Width, Height: vp.Height}
	s.cap = newCapture(s.scratch, s.keepDownloads, s.first.target, s.raw, s.opened, s.closed)
	if err := s.cap.start(s.first.ctx, s.st.currentStep); err != nil {
		return fmt.Errorf("setting up downloads and popups: %w", err)
	}
	if err := s.setupPage(s.first, false); err != nil {
		return err
	}
	startFrames(s, s.first)
	return nil
}

// drainNetwork waits (at most wait) for requests in flight and sends the
// HAR entries not sent yet, of every page.
func (s *session) drainNetwork(wait time.Duration) {
	ctx, cancel := context.WithTimeout(s.first.ctx, wait)
	defer cancel()
	for _, p := range s.allPages() {
		for _, h := range p.allHAR() {
			_ = h.WaitIdle(ctx, 100*time.Millisecond)
			s.sendHAR(h.Take(true))
		}
	}
}

// takeHAR takes the complete HAR entries of every page.
func (s *session) takeHAR() []cdphar.Taken {
	var out []cdphar.Taken
	for _, p := range s.allPages() {
		for _, h := range p.allHAR() {
			out = append(out, h.Take(false)...)
		}
	}
	return out
}

// sendHAR sends entries, each at the step its request started in.
func (s *session) sendHAR(entries []cdphar.Taken) {
	for _, e := range entries {
		s.st.emitAt(event.KindHAR, e.Started, e.Step, e.Entry)
	}
}

// browserCPU sums the user and system CPU time of the browser's process
// tree (Linux /proc); ok is false elsewhere.
func browserCPU(tab context.Context) (time.Duration, bool) {
	if runtime.GOOS != "linux" {
		return 0, false
	}
	c := chromedp.FromContext(tab)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return 0, false
	}
	return processTreeCPU(c.Browser.Process().Pid)
}
