package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/log"
)

// ErrNotDamaged is returned by Repair for a recording whose log has no
// damage.
var ErrNotDamaged = errors.New("recording is not damaged")

// Repair seals an open recording whose log is damaged (see logdamage.go):
// the bytes of every damaged region are copied into a quarantine file
// under the recording's directory (DIR/recordings/ID/quarantine/), each
// damaged segment is rewritten without them (atomically: the intact
// frames, in order), and the recording is sealed with a manifest whose
// Gaps list the seqs lost. The verdict stays as it was (none, for a
// recording that never finished). The caller holds the data directory's
// lock, and reindexes the recording afterwards: the locators of the
// records after a damaged region changed.
func (s *Store) Repair(id string) (root string, gaps []Gap, err error) {
	if err := s.writable(); err != nil {
		return "", nil, err
	}
	meta, err := s.Meta(id)
	if err != nil {
		return "", nil, fmt.Errorf("repair %s: its meta.json cannot be read, so it cannot be sealed: %w", id, err)
	}
	if r, err := s.Root(id); err != nil || r != "" {
		if err == nil {
			err = fmt.Errorf("repair %s: %w", id, ErrFinished)
		}
		return "", nil, err
	}
	dir := s.logDir(id)
	damage, err := log.Walk(dir, nil)
	if err != nil {
		return "", nil, fmt.Errorf("repair %s: %w", id, err)
	}
	// A repair a crash interrupted left its gaps: they are sealed along.
	gaps, err = s.pendingGaps(id)
	if err != nil {
		return "", nil, err
	}
	if len(damage) == 0 && len(gaps) == 0 {
		return "", nil, fmt.Errorf("repair %s: %w", id, ErrNotDamaged)
	}
	qdir := s.Layout().Quarantine(id)
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		return "", nil, fmt.Errorf("repair %s: %w", id, err)
	}
	// First the damaged bytes into quarantine and the gaps beside them,
	// durably; only then are the segments rewritten without them.
	segData := map[int][]byte{}
	have := map[string]bool{}
	for _, g := range gaps {
		have[g.Quarantine] = true
	}
	for _, d := range damage {
		b, ok := segData[d.Segment]
		if !ok {
			if b, err = os.ReadFile(s.Layout().Segment(id, d.Segment)); err != nil {
				return "", nil, fmt.Errorf("repair %s: %w", id, err)
			}
			segData[d.Segment] = b
		}
		name := layout.QuarantinedName(d.Segment, d.Offset, d.End)
		if err := WriteFileAtomic(s.Layout().Quarantined(id, d.Segment, d.Offset, d.End), b[d.Offset:d.End], 0o444); err != nil {
			return "", nil, fmt.Errorf("repair %s: quarantine: %w", id, err)
		}
		from, to := d.Lost()
		if have[name] {
			continue // declared by the repair a crash interrupted
		}
		gaps = append(gaps, Gap{From: from, To: to, Quarantine: name,
			Bytes: d.End - d.Offset, Why: fmt.Sprintf("segment %d bytes %d–%d: %s", d.Segment, d.Offset, d.End, d.Why)})
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i].From < gaps[j].From })
	note, err := json.MarshalIndent(gaps, "", " ")
	if err != nil {
		return "", nil, err
	}
	if err := WriteFileAtomic(s.Layout().Gaps(id), note, 0o444); err != nil {
		return "", nil, err
	}
	for n, b := range segData {
		// The intact frames, in order, without the damaged regions (and
		// without a torn tail).
		clean, err := log.Intact(b)
		if err != nil {
			return "", nil, fmt.Errorf("repair %s: %w", id, err)
		}
		if err := WriteFileAtomic(s.Layout().Segment(id, n), clean, 0o644); err != nil {
			return "", nil, fmt.Errorf("repair %s: %w", id, err)
		}
	}
	meta.FinishedAt = time.Now().UnixNano()
	root, err = s.seal(meta, gaps)
	return root, gaps, err
}

// gapsFile, in the quarantine directory, lists a repair's gaps before the
// segments are rewritten, so a repair a crash interrupts is finished by
// the next, and the recording stays refused for appends meanwhile.
const gapsFile = "gaps.json"

// pendingGaps returns the gaps of a repair that began on an open
// recording, nil if none did.
func (s *Store) pendingGaps(id string) ([]Gap, error) {
	b, err := os.ReadFile(s.Layout().Gaps(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", id, err)
	}
	var gaps []Gap
	if err := json.Unmarshal(b, &gaps); err != nil {
		return nil, fmt.Errorf("repair %s: %s: %w", id, gapsFile, err)
	}
	return gaps, nil
}
