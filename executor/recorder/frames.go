package recorder

import (
	"bytes"
	"context"
	"image"
	"slices"
	"sync"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flightrec/flightrec/event"
)

// frames turns the tab's screencast into frame events of at most one per
// FrameInterval: the newest frame the browser offered is sent when the
// interval has passed, so the last state of a change is never lost.
// Each frame carries the mask rectangles of the page's masked elements,
// measured when it is sent; a frame whose masks cannot be measured (the
// page is between documents), or were measured on another document than
// the frame shows, is dropped, not sent unmasked.
type frames struct {
	s    *session
	pg   *followedPage // the page whose screencast this is
	mu   sync.Mutex
	next *page.EventScreencastFrame // newest frame not sent yet
	// nextDoc is the document next shows (followedPage.shownDocument when
	// it arrived: the page's events come in order, so a frame the browser
	// made before a navigation arrives before it): next is sent only with
	// masks measured on that document.
	nextDoc string
	// sentStep is the last step a frame was sent in; -1 before any.
	sentStep int
	quit     chan struct{}
	done     chan struct{}

	// sendMu makes sends one at a time (the ticker's and a step's
	// ensureFrame), so last is the frame emitted last.
	sendMu sync.Mutex
	last   *sentFrame
}

// sentFrame is the last frame sent, kept to compare the next with: a
// frame that shows the same (PixelsDiffering finds no pixel beyond JPEG's
// noise) is not sent again in the same step, and in a later step it is
// sent with the same bytes, so it is stored once (one CID).
type sentFrame struct {
	img     []byte
	pix     image.Image // img decoded; nil when it is not a JPEG (never the same as another)
	decoded bool        // pix is decoded (lazily: see sameAsLast)
	masks   []event.Rect
	cursor  *event.Point
	step    int
}

// pixels decodes the frame once, when a comparison first needs it.
func (sf *sentFrame) pixels() image.Image {
	if !sf.decoded {
		sf.pix, sf.decoded = decodeJPEG(sf.img), true
	}
	return sf.pix
}

// sizesApart says two JPEGs' sizes differ by more than a sixteenth of
// the larger: pictures that differ only by JPEG's noise encode to within
// a few bytes of each other (a caret's blink moves a 43 KB frame by ~30
// bytes), so such a pair is taken as changed without decoding either.
// The gate can only send a frame, never leave one out.
func sizesApart(a, b int) bool {
	return max(a, b)-min(a, b) > max(a, b)/16
}

// startFrames sets s.frames and begins pg's screencast.
func startFrames(s *session, pg *followedPage) {
	f := &frames{s: s, pg: pg, sentStep: -1, quit: make(chan struct{}), done: make(chan struct{})}
	// The first frame can arrive before StartScreencast returns: the
	// reader goroutine must find f already (onEvent).
	s.mu.Lock()
	s.frames = f
	s.mu.Unlock()
	q := int64(s.cfg.JPEGQuality)
	vp := s.vp
	_, err := chromedp.Call(pg.ctx, page.StartScreencast, page.StartScreencastParams{
		Format: page.StartScreencastFormatJpeg, Quality: &q, MaxWidth: int64(vp.Width), MaxHeight: int64(vp.Height), EveryNthFrame: 1})
	if err != nil {
		// No screencast: steps still get a frame each (ensureFrame).
		close(f.done)
		return
	}
	go f.loop()
}

// offer takes a screencast frame from the reader goroutine: it is
// acknowledged at once (the browser sends the next only then) and kept as
// the newest.
func (f *frames) offer(ev *page.EventScreencastFrame) {
	go chromedp.Call(f.pg.ctx, page.ScreencastFrameAck, page.ScreencastFrameAckParams{SessionID: ev.SessionID})
	f.mu.Lock()
	f.next, f.nextDoc = ev, f.pg.shownDocument()
	f.mu.Unlock()
}

func (f *frames) loop() {
	defer close(f.done)
	tick := time.NewTicker(f.s.cfg.FrameInterval)
	defer tick.Stop()
	for {
		select {
		case <-f.quit:
			return
		case <-tick.C:
		}
		f.mu.Lock()
		ev, doc := f.next, f.nextDoc
		f.next = nil
		f.mu.Unlock()
		if ev != nil {
			f.send(ev.Data, doc, "", time.Now())
		}
	}
}

// send sends one image of document doc (as followedPage.document names it
// when the image was made; "" for none, which never matches) as a frame (or, with a reason, a
// screenshot) with the masks measured now. A frame that shows what the last
// one showed is left out or sent with the last one's bytes (sameAsLast).
//
// The image is dropped when the page is on another document once its masks
// are measured: they are that document's, and the image may show the one
// before with its masked fields bare (a frame of a page with a password
// field, taken just before a link led to a page with none, measured after).
func (f *frames) send(img []byte, doc, reason string, ts time.Time) bool {
	s := f.s
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	masks, ok := s.maskRects(f.pg)
	if !ok || f.pg.document() != doc {
		return false
	}
	vp := s.vp
	fr := event.Frame{Mime: "image/jpeg", Image: img, Width: vp.Width, Height: vp.Height, Masks: masks, Page: f.pg.id}
	if len(img) > 8 && img[0] == 0x89 && img[1] == 'P' {
		fr.Mime = "image/png"
	}
	s.mu.Lock()
	if s.cursor != nil {
		c := *s.cursor
		fr.Cursor = &c
	}
	s.mu.Unlock()
	if reason != "" {
		s.st.emit(event.KindScreenshot, ts, event.Screenshot{Frame: fr, Reason: reason})
		return true
	}
	step := s.st.currentStep()
	if fr.Mime == "image/jpeg" {
		var skip bool
		if fr.Image, skip = f.sameAsLast(fr, step); skip {
			return true
		}
	}
	s.st.emit(event.KindFrame, ts, fr)
	f.mu.Lock()
	f.sentStep = step
	f.mu.Unlock()
	return true
}

// sameAsLast compares frame fr of step with the last frame sent and
// returns the bytes to send: the last frame's when fr shows the same
// pixels (within JPEG's noise), so the store keeps one blob for both,
// else fr's own. skip says fr adds nothing at all (the same pixels,
// masks and cursor in the same step): it is not sent. A frame that
// differs in a single pixel beyond the noise is sent as it is.
func (f *frames) sameAsLast(fr event.Frame, step int) (img []byte, skip bool) {
	last := f.last
	next := &sentFrame{img: fr.Image, masks: fr.Masks, cursor: fr.Cursor, step: step}
	same := false
	switch {
	case last == nil:
	case bytes.Equal(fr.Image, last.img):
		same = true
	case !sizesApart(len(fr.Image), len(last.img)):
		a, b := last.pixels(), next.pixels()
		same = a != nil && b != nil && SamePixels(a, b)
	}
	if !same {
		f.last = next
		return fr.Image, false
	}
	if last.step == step && slices.Equal(last.masks, fr.Masks) && samePoint(last.cursor, fr.Cursor) {
		return nil, true
	}
	next.img, next.pix, next.decoded = last.img, last.pix, last.decoded
	f.last = next
	return last.img, false
}

func samePoint(a, b *event.Point) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// stop ends the screencast loop.
func (f *frames) stop() {
	if f == nil {
		return
	}
	select {
	case <-f.quit:
	default:
		close(f.quit)
	}
	<-f.done
	ctx, cancel := context.WithTimeout(f.pg.ctx, 2*time.Second)
	defer cancel()
	_, _ = chromedp.Call(ctx, page.StopScreencast, struct{}{})
}

// ensureFrame makes sure step n has a frame: when the screencast sent
// none in it (nothing on screen changed), it captures one.
func (s *session) ensureFrame(n int) {
	s.frames.mu.Lock()
	ev, doc := s.frames.next, s.frames.nextDoc
	s.frames.next = nil
	has := s.frames.sentStep == n
	s.frames.mu.Unlock()
	if ev != nil {
		if s.frames.send(ev.Data, doc, "", time.Now()) {
			return
		}
	}
	if has {
		return
	}
	// Twice: a navigation during the first capture drops it.
	for range 2 {
		doc := s.frames.pg.document()
		if img, ok := s.capture("jpeg"); !ok || s.frames.send(img, doc, "", time.Now()) {
			return
		}
	}
}

// screenshotOnFailure sends a PNG screenshot of the viewport.
func (s *session) screenshotOnFailure() {
	doc := s.frames.pg.document()
	if img, ok := s.capture("png"); ok {
		s.frames.send(img, doc, "failure", time.Now())
	}
}

func (s *session) capture(format string) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(s.frames.pg.ctx, 5*time.Second)
	defer cancel()
	p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormat(format)}
	if format == "jpeg" {
		q := int64(s.cfg.JPEGQuality)
		p.Quality = &q
	}
	res, err := chromedp.Call(ctx, page.CaptureScreenshot, p)
	if err != nil || len(res.Data) == 0 {
		return nil, false
	}
	return res.Data, true
}

// maskRects measures the masked elements' rectangles now. ok is false
// when the page cannot be asked (between documents): the caller drops the
// frame rather than send it unmasked.
func (s *session) maskRects(pg *followedPage) ([]event.Rect, bool) {
	ctx, cancel := context.WithTimeout(pg.ctx, 2*time.Second)
	defer cancel()
	rects, err := evaluate[[]event.Rect](ctx, `window.__flightrec ? window.__flightrec.maskRects() : null`)
	if err == nil && rects != nil {
		// A cross-origin frame's masks come from its own helper; when the
		// frames cannot be listed the frame is dropped, not sent unmasked.
		rects, err = frameMaskRects(ctx, pg, rects)
		return rects, err == nil
	}
	// No helper (about:blank, an error page) or no answer: the frame is
	// safe only on a page that has no form control at all.
	n, err := evaluate[int](ctx, `document.querySelectorAll("input,textarea,select,[contenteditable],iframe").length`)
	if err != nil || n > 0 {
		return nil, false
	}
	return nil, true
}
