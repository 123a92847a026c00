package dom

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// Fill adds to cp, in seq order, the recording's dom events with seq >
// from, and returns the seq through which it has read the recording — all
// of its events, dom or not, so that a recording whose last events are not
// dom events is not read again. It may stop early (a page limit, a
// cancelled request) and return what it reached; an error keeps whatever
// was added.
type Fill func(cp *Checkpoints, from uint64) (through uint64, err error)

// Cache holds the checkpoint sets of recordings, by recording id, within a
// byte budget, dropping the least recently used. Building a set reads the
// whole recording once; the cache makes that a cost per recording rather
// than per request, and extends a set as an open recording grows instead
// of building it again. It is safe for concurrent use; requests for one
// recording wait for one fill rather than each reading the recording.
type Cache struct {
	mu    sync.Mutex
	max   int64
	every int
	total int64
	lru   list.List // of *cacheEntry, most recent first
	byID  map[string]*list.Element

	loaded, built atomic.Int64
}

// Keep is how a cache keeps a finished recording's set across restarts
// (a derived blob in the store): Load returns the stored set and the seq
// the recording was read through, nil when there is none or it cannot be
// used; Save stores a set just filled through upTo. Either may be nil.
type Keep struct {
	Load func() (cp *Checkpoints, through uint64)
	Save func(cp *Checkpoints, through uint64)
}

type cacheEntry struct {
	id    string
	fill  sync.Mutex // held while the set is filled
	cp    *Checkpoints
	read  uint64 // the seq through which the recording has been read
	done  bool   // filled at least once
	kept  bool   // loaded from, or saved to, its Keep
	bytes int64  // as last accounted
}

// NewCache returns a cache of at most maxBytes (as Checkpoints.Bytes
// counts; 0 keeps nothing) whose sets keep a state every every events
// (DefaultEvery when every <= 0).
func NewCache(maxBytes int64, every int) *Cache {
	return &Cache{max: maxBytes, every: every, byID: make(map[string]*list.Element)}
}

// Get returns the checkpoint set of recording id, read through at least
// seq upTo: built with fill if the cache has none, extended with fill
// (from where the last fill stopped) if it was read through less. A
// finished recording passes its last seq; an open one its last seq so
// far. An error from fill is returned with the set as far as it got,
// which the next Get goes on from.
//
// A set larger than the whole budget is returned but not kept.
func (c *Cache) Get(id string, upTo uint64, fill Fill) (*Checkpoints, error) {
	return c.GetKept(id, upTo, fill, nil)
}

// GetKept is Get for a recording whose set may be kept (keep non-nil: a
// finished recording): a set the cache does not hold is loaded with
// keep.Load before any fill, and a set filled through upTo that was not
// loaded is saved with keep.Save, once.
func (c *Cache) GetKept(id string, upTo uint64, fill Fill, keep *Keep) (*Checkpoints, error) {
	c.mu.Lock()
	el, ok := c.byID[id]
	if ok {
		c.lru.MoveToFront(el)
	} else {
		el = c.lru.PushFront(&cacheEntry{id: id, cp: NewCheckpoints(c.every)})
		c.byID[id] = el
	}
	e := el.Value.(*cacheEntry)
	c.mu.Unlock()

	cp, err := c.update(e, upTo, fill, keep)
	c.account(e, cp)
	return cp, err
}

// Counts is how many sets were loaded from their Keep and how many were
// built from a recording's first event.
func (c *Cache) Counts() (loaded, built int64) { return c.loaded.Load(), c.built.Load() }

func (c *Cache) update(e *cacheEntry, upTo uint64, fill Fill, keep *Keep) (*Checkpoints, error) {
	e.fill.Lock()
	defer e.fill.Unlock()
	if !e.done && keep != nil && keep.Load != nil {
		if cp, through := keep.Load(); cp != nil {
			e.cp, e.read, e.done, e.kept = cp, through, true, true
			c.loaded.Add(1)
		}
	}
	if !e.done || e.read < upTo {
		if !e.done && e.read == 0 {
			c.built.Add(1)
		}
		through, err := fill(e.cp, e.read)
		e.read = max(e.read, through, e.cp.LastSeq())
		if err != nil {
			return e.cp, err
		}
		e.done = true
	}
	if keep != nil && keep.Save != nil && !e.kept && e.read >= upTo {
		keep.Save(e.cp, e.read)
		e.kept = true
	}
	return e.cp, nil
}

// account updates an entry's size and evicts from the cold end until the
// cache is within budget.
func (c *Cache) account(e *cacheEntry, cp *Checkpoints) {
	b := cp.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[e.id]
	if !ok || el.Value.(*cacheEntry) != e {
		return // evicted meanwhile
	}
	c.total += b - e.bytes
	e.bytes = b
	for c.total > c.max && c.lru.Len() > 0 {
		c.evict(c.lru.Back())
	}
}

func (c *Cache) evict(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.byID, e.id)
	c.total -= e.bytes
}

// Remove drops a recording's set (the recording was deleted).
func (c *Cache) Remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.evict(el)
	}
}

// Bytes is the memory the cached sets hold, as last accounted.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Len is the number of recordings cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
