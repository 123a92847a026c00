package recorder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/flightrec/flightrec/event"
)

// capture follows what a step starts outside its page: downloads and the
// popups or tabs it opens.
//
// Downloads land in the recorder's scratch directory (never the user's:
// Browser.setDownloadBehavior allowAndName names each file by its guid
// there), are hashed when complete and deleted; only their description
// (event.File) is sent, and, when the plan keeps downloads (keep), their
// bytes in a download event, read from the scratch file before it goes.
//
// Without a directory (record --attach) the downloads are the driving
// client's, saved where it said, which the recorder does not know (the
// page's download events carry no path) and must not change: a download
// is described from the events alone (name, URL, size, state), with no
// hash and no bytes.
type capture struct {
	dir  string // scratch: removed with the run ("": not the recorder's)
	keep bool   // the plan keeps downloads' bytes

	mu        sync.Mutex
	changed   chan struct{}       // closed and replaced on every change
	downloads map[string]*dlState // by guid
	popups    map[target.ID]*popup
	openers   map[target.ID]bool // the pages followed: what they open is followed too
	// opened is told of a page a followed page opened and names it (it
	// must not block: it runs on the browser's reader goroutine); closed
	// of a page that went away.
	opened func(tid, opener target.ID) string
	closed func(tid target.ID)
	// raw releases the pages the browser paused at their start (nil: it
	// pauses none); waiting holds the sessions of the popups of followed
	// pages that wait for their follow to be set up.
	raw     *rawTransport
	waiting map[target.ID]target.SessionID
}

type dlState struct {
	step      int
	file      event.File
	data      []byte // the bytes kept (keep), until takeKept
	finishing bool   // finish is under way
	done      bool
}

type popup struct {
	step int
	url  string
	page string // the id its events carry
	by   target.ID
}

func newCapture(dir string, keep bool, first target.ID, raw *rawTransport, opened func(tid, opener target.ID) string, closed func(tid target.ID)) *capture {
	return &capture{dir: dir, keep: keep, changed: make(chan struct{}), downloads: map[string]*dlState{},
		popups: map[target.ID]*popup{}, openers: map[target.ID]bool{first: first != ""}, opened: opened, closed: closed,
		raw: raw, waiting: map[target.ID]target.SessionID{}}
}

// start routes downloads to the scratch directory and listens to the
// browser's target events for popups.
func (c *capture) start(ctx context.Context, stepOf func() int) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	events := true
	if _, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: c.dir, EventsEnabled: &events}); err != nil {
		return err
	}
	if err := chromedp.ListenBrowser(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *target.EventAttachedToTarget:
			if ev.WaitingForDebugger {
				c.hold(ev)
			}
		case *target.EventTargetCreated:
			c.onTarget(ev.TargetInfo, stepOf())
		case *target.EventTargetInfoChanged:
			c.onTarget(ev.TargetInfo, -1)
		case *target.EventTargetDestroyed:
			if c.closed != nil {
				c.closed(ev.TargetID)
			}
		}
	}); err != nil || c.raw == nil {
		return err
	}
	// New pages wait at their start until released (hold): a popup's
	// document request is then its own page's first HAR entry, made after
	// the recorder set up its Network domain.
	_, err := chromedp.CallBrowser(ctx, target.SetAutoAttach, target.SetAutoAttachParams{AutoAttach: true,
		WaitForDebuggerOnStart: true, Flatten: ptr(true), Filter: target.Filter{{Type: "page"}}})
	return err
}

// hold keeps the session of a paused popup of a followed page for its
// follow to release (release), and releases any other page at once
// (browser's reader goroutine: the release is a write, not a call).
func (c *capture) hold(ev *target.EventAttachedToTarget) {
	c.mu.Lock()
	ours := ev.TargetInfo != nil && c.openers[ev.TargetInfo.OpenerID]
	if ours {
		c.waiting[ev.TargetInfo.TargetID] = ev.SessionID
		c.notify()
	}
	c.mu.Unlock()
	if !ours {
		go c.raw.release(context.Background(), ev.SessionID)
	}
}

// paused waits (at most wait) for page tid to be known paused at its
// start, and says whether it is.
func (c *capture) paused(tid target.ID, wait time.Duration) bool {
	if c.raw == nil {
		return false
	}
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		_, ok := c.waiting[tid]
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// release lets page tid, paused at its start, go on.
func (c *capture) release(ctx context.Context, tid target.ID) {
	c.mu.Lock()
	sess, ok := c.waiting[tid]
	delete(c.waiting, tid)
	c.mu.Unlock()
	if ok {
		c.raw.release(ctx, sess)
	}
}

// onTarget notes a page opened by the recorded tab (step ≥ 0), or a known
// popup's new URL (step -1): a popup starts at about:blank.
func (c *capture) onTarget(ti *target.Info, step int) {
	if ti == nil || ti.Type != "page" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.popups[ti.TargetID]
	switch {
	case p != nil:
		p.url = ti.URL
	case step >= 0 && c.openers[ti.OpenerID]:
		p := &popup{step: step, url: ti.URL, by: ti.OpenerID}
		if c.opened != nil {
			p.page = c.opened(ti.TargetID, ti.OpenerID)
			c.openers[ti.TargetID] = true
		}
		c.popups[ti.TargetID] = p
	default:
		return
	}
	c.notify()
}

// onEvent takes the download events (the tab's listener passes them on).
func (c *capture) onEvent(ev any, step int) {
	switch ev := ev.(type) {
	case *browser.EventDownloadWillBegin:
		c.mu.Lock()
		if c.downloads[ev.GUID] == nil { // the tab and the browser may both report it
			c.downloads[ev.GUID] = &dlState{step: step, file: event.File{Name: ev.SuggestedFilename, URL: ev.URL}}
			c.notify()
		}
		c.mu.Unlock()
	case *browser.EventDownloadProgress:
		switch ev.State {
		case browser.DownloadProgressStateCompleted, browser.DownloadProgressStateCanceled:
			c.mu.Lock()
			d := c.downloads[ev.GUID]
			first := d != nil && !d.finishing
			if first {
				d.finishing = true
			}
			c.mu.Unlock()
			if first {
				// Hashing reads the file: off the reader goroutine.
				go c.finish(ev.GUID, ev.State, int64(ev.ReceivedBytes))
			}
		}
	}
}

// maxKeptDownload bounds the bytes of a download kept as a blob: its
// event, base64, stays under the event limit (16 MiB). A larger file is
// described by its hash only.
const maxKeptDownload = 8 << 20

// finish describes a download that ended, keeps its bytes when the plan
// says so, and deletes its file.
func (c *capture) finish(guid string, state browser.DownloadProgressState, received int64) {
	f := event.File{State: string(state), Size: received}
	path := filepath.Join(c.dir, filepath.Base(guid))
	var data []byte
	if state == browser.DownloadProgressStateCompleted && c.dir != "" {
		if fh, err := os.Open(path); err == nil {
			h := sha256.New()
			head := make([]byte, 512)
			n, _ := io.ReadFull(fh, head)
			h.Write(head[:n])
			var kept bytes.Buffer
			var rest io.Writer = h
			if c.keep {
				kept.Write(head[:n])
				rest = io.MultiWriter(h, &kept)
			}
			size, err := io.Copy(rest, fh)
			fh.Close()
			if err == nil {
				f.Size, f.SHA256 = int64(n)+size, hex.EncodeToString(h.Sum(nil))
				f.MIME = http.DetectContentType(head[:n])
				if c.keep && f.Size > 0 && f.Size <= maxKeptDownload {
					data = kept.Bytes()
					f.CID = blobCID(h.Sum(nil))
				}
			}
		}
	}
	if c.dir != "" {
		_ = os.Remove(path)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.downloads[guid]
	d.file.State, d.file.Size, d.file.SHA256, d.file.MIME, d.file.CID = f.State, f.Size, f.SHA256, f.MIME, f.CID
	d.data = data
	d.done = true
	c.notify()
}

// blobCID is the CID the server names a blob of this sha256 digest by
// (store/blobs: CIDv1, raw codec, sha2-256), so a receipt can name the
// blob its step's download event becomes. It repeats blobs.FromDigest on
// purpose: an executor imports only event and wire (executor/imports_test),
// and those take no CID library.
func blobCID(digest []byte) string {
	mh, err := multihash.Encode(digest, multihash.SHA2_256)
	if err != nil {
		panic(err) // a 32-byte sha2-256 digest always encodes
	}
	return cid.NewCidV1(cid.Raw, mh).String()
}

// takeKept returns the bytes kept of step's ended downloads, once, as
// download events.
func (c *capture) takeKept(step int) []event.Download {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []event.Download
	for _, d := range c.downloads {
		if d.step == step && d.data != nil {
			out = append(out, event.Download{Name: d.file.Name, MIME: d.file.MIME, SHA256: d.file.SHA256, Data: d.data})
			d.data = nil
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *capture) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// effects waits (at most wait) for step's downloads to end, then returns
// the downloads and popups the step started.
func (c *capture) effects(step int, wait time.Duration) (files []event.File, popups []string, pages []event.PageRef) {
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		pending := false
		files, popups, pages = nil, nil, nil
		for _, d := range c.downloads {
			if d.step != step {
				continue
			}
			if !d.done {
				pending = true
			}
			files = append(files, d.file)
		}
		for _, p := range c.popups {
			if p.step == step {
				popups = append(popups, p.url)
				if p.page != "" {
					pages = append(pages, event.PageRef{ID: p.page, URL: p.url, Opener: c.pageOf(p.by)})
				}
			}
		}
		ch := c.changed
		c.mu.Unlock()
		if !pending {
			break
		}
		select {
		case <-ch:
			continue
		case <-deadline:
		}
		break
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	sort.Strings(popups)
	sort.Slice(pages, func(i, j int) bool { return pages[i].ID < pages[j].ID })
	return files, popups, pages
}

// pageOf is the id of the followed page with target id ("" the first).
func (c *capture) pageOf(id target.ID) string {
	if p := c.popups[id]; p != nil {
		return p.page
	}
	return ""
}
