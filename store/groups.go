package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// Group purposes: a rerun's recordings, or a set made by hand.
const (
	GroupRerun  = "rerun"
	GroupManual = "manual"
)

// Group verdicts, in the words of the rerun loop.
const (
	GroupReproduced    = "reproduced"
	GroupNotReproduced = "not_reproduced"
	GroupFlaky         = "flaky"
)

// Group is a stored set of recordings of one project with a purpose and
// the verdict reached over them when it was made.
type Group struct {
	ID      string    `json:"id"`
	Project string    `json:"project"`
	Purpose string    `json:"purpose"`
	Members []string  `json:"members"`
	Created time.Time `json:"created"`
	// Seed is the recording a rerun ran again, when there was one: its
	// failure signature is what the members must show to reproduce it.
	Seed string `json:"seed,omitempty"`
	// Pins and Base say how a rerun ran (clock, random, network; the app).
	Pins []string `json:"pins,omitempty"`
	Base string   `json:"base,omitempty"`
	// Verdict is reproduced, not_reproduced or flaky; Signature the
	// failure signature reproduced (the seed's, else the members' most
	// common); Reproduced of Of members show it; Summary says it in one
	// line ("reproduced 3 of 3: POST /api/checkout 500 GIFT_CARD_STATE").
	Verdict    string     `json:"verdict"`
	Signature  string     `json:"signature,omitempty"`
	Reproduced int        `json:"reproduced"`
	Of         int        `json:"of"`
	Summary    string     `json:"summary"`
	Odd        []GroupOdd `json:"odd,omitempty"`
}

// GroupOdd is a member that did not show the group's signature.
type GroupOdd struct {
	ID        string `json:"id"`
	Signature string `json:"signature,omitempty"`
}

// ValidGroupID says whether id is a group id: "g" and a recording id.
func ValidGroupID(id string) bool {
	return strings.HasPrefix(id, "g") && ValidRecordingID(id[1:])
}

// NewGroupID returns a fresh, time-ordered group id.
func NewGroupID(t time.Time) string { return "g" + NewRecordingID(t) }

func (s *Store) groupPath(id string) string { return s.Layout().Group(id) }

// PutGroup stores g (a new group, or a new verdict for one) atomically.
// The data directory's lock serializes processes; groupsMu serializes
// this store's writers, so a read-modify-write never loses one.
func (s *Store) PutGroup(g Group) error {
	if err := s.writable(); err != nil {
		return err
	}
	if !ValidGroupID(g.ID) {
		return fmt.Errorf("store: %q is not a group id", g.ID)
	}
	b, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		return err
	}
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	if err := os.MkdirAll(s.Layout().Groups(), 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return WriteFileAtomic(s.groupPath(g.ID), b, 0o644)
}

// Group reads a stored group; ErrNotFound when there is none.
func (s *Store) Group(id string) (Group, error) {
	var g Group
	if !ValidGroupID(id) {
		return g, fmt.Errorf("group %s: %w", id, ErrNotFound)
	}
	b, err := os.ReadFile(s.groupPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return g, fmt.Errorf("group %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return g, fmt.Errorf("store: group %s is damaged: %w", id, err)
	}
	return g, nil
}

// GroupsOf lists the ids of the groups recording id belongs to, oldest
// first. Groups are few beside recordings (one per rerun or hand-made
// set), so it reads them all rather than keeping a second index.
func (s *Store) GroupsOf(id string) ([]string, error) {
	ents, err := os.ReadDir(s.Layout().Groups())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		gid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidGroupID(gid) {
			continue
		}
		g, err := s.Group(gid)
		if err != nil {
			return nil, err
		}
		if slices.Contains(g.Members, id) {
			out = append(out, gid)
		}
	}
	sort.Strings(out)
	return out, nil
}
