package playback

import (
	"encoding/json"
	"sync"

	"github.com/flightrec/flightrec/wire"
)

// compactCacheBytes bounds the compact timelines kept encoded (a
// 10,000-step one is ~0.7 MB).
const compactCacheBytes = 32 << 20

// compactCache keeps recordings' compact timelines encoded, by recording
// and the index cursor they were read at: the timeline of a recording
// whose cursor has not moved is the same, and reading 10,000 steps from
// the index costs a player's open hundreds of milliseconds each time.
// Within its budget it drops arbitrary entries: it is a cache of a few
// long recordings being looked at, not an index.
type compactCache struct {
	mu    sync.Mutex
	total int
	byID  map[string]*compactEntry
}

// compactEntry is a compact timeline, and its whole encoding; pages are
// cut from the timeline (writeCompact). An entry is never changed once
// made, so readers share it.
type compactEntry struct {
	indexed  uint64
	root     string // the recording's root when made: a re-redacted one's differs
	timeline wire.CompactTimeline
	body     []byte
}

func (c *compactCache) get(id string, indexed uint64, root string) *compactEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok && e.indexed == indexed && e.root == root {
		return e
	}
	return nil
}

// put encodes t, the timeline of a recording at root, and keeps both,
// returning the entry. The budget counts
// the encoding twice, for the columns beside it.
func (c *compactCache) put(t wire.CompactTimeline, root string) (*compactEntry, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	e := &compactEntry{indexed: t.IndexedThrough, root: root, timeline: t, body: b}
	if 2*len(b) > compactCacheBytes/4 {
		return e, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]*compactEntry{}
	}
	if old, ok := c.byID[t.Recording]; ok {
		c.total -= 2 * len(old.body)
	}
	for id, old := range c.byID {
		if c.total+2*len(b) <= compactCacheBytes {
			break
		}
		c.total -= 2 * len(old.body)
		delete(c.byID, id)
	}
	c.byID[t.Recording] = e
	c.total += 2 * len(b)
	return e, nil
}
