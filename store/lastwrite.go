package store

import (
	"os"
	"path/filepath"
	"time"
)

// LastWrite is when an open recording was last written on disk: the
// newest modification time of its log segments and its metadata. Ingest
// measures an open recording's idleness from it across restarts.
func (s *Store) LastWrite(id string) (time.Time, error) {
	fi, err := os.Stat(s.metaPath(id))
	if err != nil {
		return time.Time{}, err
	}
	last := fi.ModTime()
	segs, err := filepath.Glob(filepath.Join(s.logDir(id), "*.seg"))
	if err != nil {
		return last, err
	}
	for _, p := range segs {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last, nil
}
