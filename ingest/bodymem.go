package ingest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/flightrec/flightrec/wire"
)

// bodyMem bounds the memory request bodies being read take together
// (--max-body-memory), so a compressed bomb, which reaches the batch limit
// for a few KB sent, holds at most that limit, and ten at once no more
// than the budget.
//
// Two tiers keep it free of deadlock: every body first takes a buffer of
// at most smallBody from a shared pool of bytes (waiting for nothing else
// meanwhile); a body that grows past smallBody then waits for one of a few
// large slots, each worth a body at the batch limit (and the small buffer
// it grew from). A body holding a large slot never waits for
// the small pool, so no body waits on one that waits on it.
type bodyMem struct {
	small *semaphore.Weighted
	large *semaphore.Weighted
	// zstd bounds the zstd decoders at work, each holding a window of up
	// to maxZstdWindow. A body takes its decoder before any buffer, so a
	// body waiting for a decoder holds no memory anyone waits for.
	zstd *semaphore.Weighted
	size int64 // the budget, for messages
	// wait bounds how long a body waits its turn before 503.
	wait time.Duration

	mu      sync.Mutex
	freeing bool // a hand-back to the OS is scheduled
}

// smallBody is the buffer a body may take without a large slot: more than
// an executor's usual batch (the recorder sends at most 4 MiB).
const smallBody = 4 << 20

// smallPool is the memory the small tier shares.
const smallPool = 32 << 20

// zstdDecoders is how many zstd bodies are decoded at once.
const zstdDecoders = 4

func newBodyMem(l Limits, wait time.Duration) *bodyMem {
	per := max(l.MaxBatchBytes, 0) + 1 + smallBody
	slots := max((l.MaxBodyMemory-smallPool)/per, 1)
	return &bodyMem{small: semaphore.NewWeighted(smallPool), large: semaphore.NewWeighted(slots),
		zstd: semaphore.NewWeighted(zstdDecoders), size: smallPool + slots*per + zstdDecoders*maxZstdWindow, wait: wait}
}

// bodyPool recycles body buffers up to smallBody. A fresh megabyte buffer
// costs a page fault per 4 KiB as the kernel copies the request into it,
// which measured as much as everything else the append does; a reused one
// does not.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// minBodyBuf is a body buffer's first size when the length is unknown.
const minBodyBuf = 64 << 10

// acquire waits up to m.wait for n of sem.
func (m *bodyMem) acquire(ctx context.Context, sem *semaphore.Weighted, n int64) error {
	wctx, cancel := context.WithTimeout(ctx, m.wait)
	defer cancel()
	if err := sem.Acquire(wctx, n); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e := wire.New(http.StatusServiceUnavailable, "BODY_MEMORY_BUSY",
			"retry after the delay (the server is reading other large bodies); nothing of this batch was stored",
			"no memory for this body within %s: the bodies being read hold the server's --max-body-memory (%d bytes)", m.wait, m.size)
		e.RetryAfter = 1
		return e
	}
	return nil
}

// decoder waits for a zstd decoder's turn; release gives it back.
func (m *bodyMem) decoder(ctx context.Context) (release func(), err error) {
	if err := m.acquire(ctx, m.zstd, 1); err != nil {
		return nil, err
	}
	return func() { m.zstd.Release(1) }, nil
}

// read reads src, at most max bytes (hint is the length when known, else
// -1), into a buffer within the budget. done gives the memory back; the
// bytes must not be used after it. More than max bytes is
// *http.MaxBytesError.
//
// A body takes what it starts with from the small pool (waiting, holding
// nothing), grows there while the pool has room (never waiting), and past
// smallBody or when the pool is full waits for a large slot, which lets it
// grow to the limit. A buffer from bodyPool is written only as far as the
// memory taken for it.
func (m *bodyMem) read(ctx context.Context, src io.Reader, max, hint int64) (body []byte, done func(), err error) {
	limit := max + 1 // one byte more than allowed says there was more
	first := int64(minBodyBuf)
	if hint >= 0 && hint < limit {
		first = hint + 1
	}
	first = min(first, limit)
	var smallHeld int64
	large := false
	p := bodyPool.Get().(*[]byte)
	buf := (*p)[:0]
	done = func() {
		if cap(buf) <= smallBody {
			*p = buf[:0]
			bodyPool.Put(p)
		}
		m.small.Release(smallHeld)
		if large {
			m.large.Release(1)
			m.giveBack()
		}
	}
	fail := func(err error) ([]byte, func(), error) {
		done()
		return nil, nil, err
	}
	// room is how far buf may be filled with the memory held.
	room := func() int {
		if large {
			return cap(buf)
		}
		return int(min(int64(cap(buf)), smallHeld))
	}
	// resize makes buf's capacity at least n.
	resize := func(n int64) {
		if int64(cap(buf)) < n {
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
	}
	if first > smallBody {
		if err := m.acquire(ctx, m.large, 1); err != nil {
			return fail(err)
		}
		large = true
	} else {
		if err := m.acquire(ctx, m.small, first); err != nil {
			return fail(err)
		}
		smallHeld = first
	}
	resize(first)
	for {
		if len(buf) == room() {
			if int64(len(buf)) >= limit {
				break
			}
			next := min(int64(len(buf))*2, limit)
			switch {
			case large:
				resize(limit)
			case next <= smallBody && m.small.TryAcquire(next-smallHeld):
				smallHeld = next
				resize(next)
			default:
				if err := m.acquire(ctx, m.large, 1); err != nil {
					return fail(err)
				}
				// The slot is worth a body at the limit: grow there at
				// once rather than leave a trail of halved buffers for
				// the collector (pages never written stay unmapped).
				large = true
				resize(limit)
			}
		}
		n, err := src.Read(buf[len(buf):room()])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(err)
		}
	}
	if int64(len(buf)) > max {
		return fail(&http.MaxBytesError{Limit: max})
	}
	return buf, done, nil
}

// giveBack returns freed heap to the OS a second after a large body ends
// (once for a burst of them): the runtime would otherwise keep the pages
// for minutes, and the process's RSS would stay at its peak.
func (m *bodyMem) giveBack() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freeing {
		return
	}
	m.freeing = true
	time.AfterFunc(time.Second, func() {
		m.mu.Lock()
		m.freeing = false
		m.mu.Unlock()
		debug.FreeOSMemory()
	})
}
