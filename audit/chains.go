package audit

// Per-node chains in an object store (shared mode). Each node keeps its
// own chain: its data directory's audit.log, appended and fsynced as on a
// single node, with no lock shared between nodes. Every entry is then
// copied to the deployment's object store as one object,
//
//	audit/<chain>/<n, 12 digits>   the entry's line (with its newline)
//
// written create-only: a chain's objects are never overwritten. <chain> is
// the first 16 hex digits of the chain's entry 1 hash, so a chain names
// itself (no node id to keep) and a new chain (a log moved aside) gets a
// new name. VerifyChains reads every chain back, checks each as Verify
// checks a file, and checks their union: no entry in two chains, and one
// digest over every chain's head, to remember as a file's head is.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/flightrec/flightrec/store/objstore"
)

// ChainPrefix is where the chains' objects are, under the object store's
// prefix.
const ChainPrefix = "audit/"

// chainName is the name of the chain whose entry 1 has hash h.
func chainName(h string) string { return h[:16] }

func entryKey(chain string, n uint64) string {
	return fmt.Sprintf("%s%s/%012d", ChainPrefix, chain, n)
}

// replica copies a log's entries to an object store.
type replica struct {
	obj  objstore.Store
	mu   sync.Mutex
	done uint64 // entries known to be stored
	err  error  // the last copy's failure, nil once caught up
}

// ErrChainFork: the object store holds another entry under this chain's
// name and number.
var ErrChainFork = errors.New("audit: the object store's copy of this chain differs from the log")

// replicate copies the entries the object store lacks, in order. The
// caller holds wmu (appends are serialized with it). A failure is kept
// (ReplicaErr) and retried at the next append; the local entry is durable
// already.
func (l *Log) replicate(ctx context.Context) error {
	r := l.replica
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := l.snap()
	if err != nil {
		return err
	}
	if s.head.N == 0 {
		return nil
	}
	first, err := l.line(s, 1)
	if err != nil {
		return err
	}
	e1, why, _ := checkLine(first[:len(first)-1])
	if why != "" {
		return fmt.Errorf("audit: entry 1: %s", why)
	}
	chain := chainName(e1.Hash)
	if r.done == 0 {
		// Where an earlier run of this node stopped: the chain's objects
		// are numbered from 1 without gaps.
		for info, err := range r.obj.List(ctx, ChainPrefix+chain+"/") {
			if err != nil {
				r.err = err
				return err
			}
			if n, err := strconv.ParseUint(info.Key[strings.LastIndexByte(info.Key, '/')+1:], 10, 64); err == nil && n <= s.head.N {
				r.done = max(r.done, n)
			}
		}
	}
	for n := r.done + 1; n <= s.head.N; n++ {
		b, err := l.line(s, n)
		if err != nil {
			return err
		}
		key := entryKey(chain, n)
		_, err = r.obj.Put(ctx, key, bytes.NewReader(b), int64(len(b)), objstore.PutOptions{CreateOnly: true})
		if errors.Is(err, objstore.ErrExists) {
			// A copy whose reply was lost, or a fork: compare.
			have, _, rerr := objstore.ReadAll(ctx, r.obj, key)
			if rerr == nil && !bytes.Equal(have, b) {
				rerr = fmt.Errorf("%w: %s", ErrChainFork, key)
			}
			err = rerr
		}
		if err != nil {
			r.err = fmt.Errorf("audit: copying entry %d to %s: %w", n, r.obj, err)
			return r.err
		}
		r.done = n
	}
	r.err = nil
	return nil
}

// line reads entry n's line (with its newline) from a snapshot.
func (l *Log) line(s snapshot, n uint64) ([]byte, error) {
	start, end := s.offsets[n-1], s.size
	if n < s.head.N {
		end = s.offsets[n]
	}
	b := make([]byte, end-start)
	if _, err := s.f.ReadAt(b, start); err != nil {
		return nil, fmt.Errorf("audit: read entry %d: %w", n, err)
	}
	return b, nil
}

// ReplicaErr is the failure of the last copy to the object store (nil
// when every entry is there, or the log has no replica).
func (l *Log) ReplicaErr() error {
	if l.replica == nil {
		return nil
	}
	l.replica.mu.Lock()
	defer l.replica.mu.Unlock()
	return l.replica.err
}

// ChainReport is what VerifyChains found in one chain.
type ChainReport struct {
	Chain string `json:"chain"`
	VerifyReport
}

// ChainsReport is what VerifyChains found: every chain, and their union.
type ChainsReport struct {
	OK     bool          `json:"ok"`
	Chains []ChainReport `json:"chains"`
	// Entries is the union's size: every chain's entries.
	Entries uint64 `json:"entries"`
	// Digest is the sha-256 over every chain's "<chain> <n> <hash>\n",
	// chains in name order: the union's head, to remember.
	Digest string `json:"digest"`
	// Problem says what breaks the union when every chain verifies (an
	// entry in two chains, a chain misnamed), else it is empty.
	Problem string `json:"problem,omitempty"`
}

// Broken names the first chain or union problem ("" when OK).
func (r ChainsReport) Broken() string {
	for _, c := range r.Chains {
		if c.Problem != nil {
			return fmt.Sprintf("chain %s, entry %d: %s: %s", c.Chain, c.Problem.N, c.Problem.Kind, c.Problem.Detail)
		}
	}
	return r.Problem
}

// VerifyChains reads every chain under ChainPrefix in obj and verifies
// each as Verify verifies a file (an object edited, missing, or holding
// another entry is reported by chain and entry), then their union.
func VerifyChains(ctx context.Context, obj objstore.Store) (ChainsReport, error) {
	keys := map[string][]string{}
	for info, err := range obj.List(ctx, ChainPrefix) {
		if err != nil {
			return ChainsReport{}, err
		}
		chain, _, ok := strings.Cut(strings.TrimPrefix(info.Key, ChainPrefix), "/")
		if ok {
			keys[chain] = append(keys[chain], info.Key)
		}
	}
	names := make([]string, 0, len(keys))
	for c := range keys {
		names = append(names, c)
	}
	sort.Strings(names)
	rep := ChainsReport{OK: true}
	seen := map[string]string{} // entry hash -> chain
	digest := sha256.New()
	for _, chain := range names {
		var buf bytes.Buffer
		for _, key := range keys[chain] { // key order is entry order: 12 digits
			b, _, err := objstore.ReadAll(ctx, obj, key)
			if errors.Is(err, objstore.ErrNotExist) {
				continue // removed since the listing: reported as missing
			}
			if err != nil {
				return ChainsReport{}, err
			}
			buf.Write(b)
		}
		var entries []Entry
		vr, p, err := scan(bytes.NewReader(buf.Bytes()), Head{}, func(e Entry, _ int64) { entries = append(entries, e) })
		if err != nil {
			return ChainsReport{}, err
		}
		vr.Problem, vr.OK = p, p == nil
		rep.Chains = append(rep.Chains, ChainReport{Chain: chain, VerifyReport: vr})
		rep.Entries += vr.Entries
		fmt.Fprintf(digest, "%s %d %s\n", chain, vr.Head.N, vr.Head.Hash)
		if p != nil {
			rep.OK = false
			continue
		}
		if len(entries) > 0 && chainName(entries[0].Hash) != chain && rep.Problem == "" {
			rep.Problem = fmt.Sprintf("chain %s: its entry 1 names chain %s: the objects were moved", chain, chainName(entries[0].Hash))
		}
		for _, e := range entries {
			if other, dup := seen[e.Hash]; dup && rep.Problem == "" {
				rep.Problem = fmt.Sprintf("chain %s, entry %d: also in chain %s: a chain was copied into another", chain, e.N, other)
			}
			seen[e.Hash] = chain
		}
	}
	if rep.Problem != "" {
		rep.OK = false
	}
	rep.Digest = hex.EncodeToString(digest.Sum(nil))
	return rep, nil
}
