package playback

import (
	"encoding/json"
	"sync"
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
	byID  map[string]compactEntry
}

type compactEntry struct {
	indexed uint64
	body    []byte
}

func (c *compactCache) get(id string, indexed uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok && e.indexed == indexed {
		return e.body
	}
	return nil
}

// put encodes t and keeps it, returning the encoding.
func (c *compactCache) put(t CompactTimeline) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if len(b) > compactCacheBytes/4 {
		return b, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]compactEntry{}
	}
	c.total -= len(c.byID[t.Recording].body)
	for id, e := range c.byID {
		if c.total+len(b) <= compactCacheBytes {
			break
		}
		c.total -= len(e.body)
		delete(c.byID, id)
	}
	c.byID[t.Recording] = compactEntry{indexed: t.IndexedThrough, body: b}
	c.total += len(b)
	return b, nil
}
