// Package layout names every path under a flightrec data directory, once.
// The store, its blob store and log, and the features that keep files
// beside them (attestation keys, tokens, pins, the audit log, the policy
// digest, the embedded index) all take their paths from here, and
// docs/design.md § Storage layout lists exactly what Listing returns (a
// test compares the two). It imports nothing of flightrec's, so every
// package may use it.
package layout

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Layout is a data directory: Dir is its root (DATA in the listing).
type Layout struct{ Dir string }

// Of is the layout of the data directory dir.
func Of(dir string) Layout { return Layout{Dir: dir} }

func (l Layout) join(parts ...string) string {
	return filepath.Join(append([]string{l.Dir}, parts...)...)
}

// Names in the data directory that code outside this package matches or
// builds temporaries from.
const (
	// RemovingPrefix starts a recording directory being removed (or an
	// import being staged): not a recording id, so nothing lists it.
	RemovingPrefix = ".removing-"
	// VideoTempPrefix starts the temporaries playback builds videos in,
	// in the data directory itself, so that a built video is moved into
	// the blob store rather than copied.
	VideoTempPrefix = "flightrec-webm-"
	// QuarantineDir is a repaired recording's quarantine, relative to the
	// recording's directory (a manifest's gaps name files under it).
	QuarantineDir = "quarantine"
	// TempPrefix starts a blob or pack being written (BlobTree): a name
	// that never parses as a CID or a pack.
	TempPrefix = ".tmp-"
)

// ValidRecordingID reports whether id has the shape NewRecordingID makes.
// Every route checks it before an id becomes part of a path: a valid id
// names one directory under Recordings, never a path outside it.
func ValidRecordingID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') || c == 'i' || c == 'l' || c == 'o' || c == 'u' {
			return false
		}
	}
	return true
}

// Blobs is the blob store's tree.
func (l Layout) Blobs() BlobTree { return BlobTree{Dir: l.join("blobs")} }

// Recordings is the directory holding one directory per recording.
func (l Layout) Recordings() string { return l.join("recordings") }

// Recording is recording id's directory.
func (l Layout) Recording(id string) string { return l.join("recordings", id) }

// Removing is where recording id's directory is renamed to while it is
// removed.
func (l Layout) Removing(id string) string { return l.join("recordings", RemovingPrefix+id) }

// Meta is recording id's metadata at open (redacted; atomic write).
func (l Layout) Meta(id string) string { return l.join("recordings", id, "meta.json") }

// Plan is the redaction plan recording id was opened with, as a file: in
// a store whose blobs are shared (the cluster), and in stores written
// before PlanRef.
func (l Layout) Plan(id string) string { return l.join("recordings", id, "plan.json") }

// PlanRef names the blob holding the redaction plan recording id was
// opened with (its CID and a newline): the reruns of a flow share one plan.
func (l Layout) PlanRef(id string) string { return l.join("recordings", id, "plan.ref") }

// KnownHashes is recording id's redaction known values, as keyed hashes.
func (l Layout) KnownHashes(id string) string { return l.join("recordings", id, "known.hashes") }

// Log is recording id's append-only log while it is open.
func (l Layout) Log(id string) string { return l.join("recordings", id, "log") }

// Segment is segment n (1-based) of recording id's log.
func (l Layout) Segment(id string, n int) string { return SegmentIn(l.Log(id), n) }

// SegmentIn is segment n (1-based) of the log in dir.
func SegmentIn(dir string, n int) string { return filepath.Join(dir, SegmentName(n)) }

// SegmentName is segment n's file name, NNNNNNNN.seg.
func SegmentName(n int) string { return fmt.Sprintf("%08d.seg", n) }

// SegmentOrdinal parses a segment's file name; ok is false for anything
// else.
func SegmentOrdinal(name string) (n int, ok bool) { return ordinal(name, ".seg") }

// Root holds recording id's manifest CID once it is finished.
func (l Layout) Root(id string) string { return l.join("recordings", id, "ROOT") }

// Quarantine keeps a repaired recording's damaged bytes and its gaps.
func (l Layout) Quarantine(id string) string { return l.join("recordings", id, QuarantineDir) }

// Quarantined is the file keeping the damaged bytes from..to of segment n
// of recording id.
func (l Layout) Quarantined(id string, n int, from, to int64) string {
	return filepath.Join(l.Recording(id), QuarantinedName(n, from, to))
}

// QuarantinedName is Quarantined relative to the recording's directory,
// as a manifest's gap names it.
func QuarantinedName(n int, from, to int64) string {
	return filepath.Join(QuarantineDir, fmt.Sprintf("%08d.seg-%d-%d.bad", n, from, to))
}

// Gaps lists a repair's gaps before the segments are rewritten.
func (l Layout) Gaps(id string) string { return l.join("recordings", id, QuarantineDir, "gaps.json") }

// Signature is a failing recording's failure signature.
func (l Layout) Signature(id string) string { return l.join("recordings", id, "signature") }

// Derived lists the blobs built from recording id and kept (the video).
func (l Layout) Derived(id string) string { return l.join("recordings", id, "derived.json") }

// Pins holds recording id's evidence pins (retention).
func (l Layout) Pins(id string) string { return l.join("recordings", id, "pins.json") }

// Shares holds recording id's share links, never their secrets (beside
// its sealed log).
func (l Layout) Shares(id string) string { return l.join("recordings", id, "shares.json") }

// Comments holds the comments on recording id's steps, redacted.
func (l Layout) Comments(id string) string { return l.join("recordings", id, "comments.json") }

// Views is recording id's viewer audit, a view a line.
func (l Layout) Views(id string) string { return l.join("recordings", id, "views.jsonl") }

// Keys is the directory of the server's keys (mode 0700).
func (l Layout) Keys() string { return l.join("keys") }

// Key is the key file name in Keys (Store.Key makes it on first use).
func (l Layout) Key(name string) string { return l.join("keys", name) }

// AttestationKey is the server's ed25519 attestation key (PKCS#8 PEM).
func (l Layout) AttestationKey() string { return l.Key("attestation.key") }

// AttestationPub is the attestation key's public half (PKIX PEM).
func (l Layout) AttestationPub() string { return l.Key("attestation.pub") }

// PseudonymKeyName is the redaction pseudonyms' HMAC key's name in Keys
// (Store.Key; in shared mode the operator's file instead).
const PseudonymKeyName = "redact-pseudonym.key"

// ShareKeyName is the share links' HMAC key's name in Keys.
const ShareKeyName = "share-link.key"

// ShareKey is the deployment's HMAC key for share links (Store.Key).
func (l Layout) ShareKey() string { return l.Key(ShareKeyName) }

// Groups is the directory of groups of recordings.
func (l Layout) Groups() string { return l.join("groups") }

// Group is group id's file (atomic write).
func (l Layout) Group(id string) string { return l.join("groups", id+".json") }

// Index is the embedded index (a projection).
func (l Layout) Index() string { return l.join("index.sqlite") }

// IndexAside is where reindex moves a damaged embedded index at unix time t.
func (l Layout) IndexAside(t int64) string {
	return l.Index() + ".corrupt-" + strconv.FormatInt(t, 10)
}

// Lock is the data directory's lock file: flock(2) by its one writer.
func (l Layout) Lock() string { return l.join(LockName) }

// LockName is Lock's name in the data directory.
const LockName = "LOCK"

// PolicyDigest holds the digest of the policy serve last ran with.
func (l Layout) PolicyDigest() string { return l.join("policy.digest") }

// Tokens is the access tokens' file.
func (l Layout) Tokens() string { return l.join("tokens.json") }

// AuditLog is the hash-chained audit log.
func (l Layout) AuditLog() string { return l.join("audit.log") }

// ReadyProbe is the file /readyz writes and removes to see that the data
// directory takes writes.
func (l Layout) ReadyProbe() string { return l.join(".ready-probe") }

// VideoTemps matches the video temporaries (a glob pattern).
func (l Layout) VideoTemps() string { return l.join(VideoTempPrefix + "*") }

// BlobTree is the blob store's directory: loose blobs sharded by CID, and
// packs. Dir is DATA/blobs in a data directory; a blob store opened on its
// own takes any directory.
type BlobTree struct{ Dir string }

// Shard is the directory of the loose blobs whose shard is shard.
func (t BlobTree) Shard(shard string) string { return filepath.Join(t.Dir, shard) }

// Loose is the file of the loose blob whose canonical CID string is c:
// its shard is the two characters before the last one ("next-to-last/2").
func (t BlobTree) Loose(c string) string { return filepath.Join(t.Dir, ShardOf(c), c) }

// LooseCompressed is the file of the loose blob c kept compressed (a
// sealed log segment): the same CID, which names the uncompressed bytes,
// and the suffix ".zst" saying how the file holds them.
func (t BlobTree) LooseCompressed(c string) string { return t.Loose(c) + CompressedSuffix }

// CompressedSuffix ends the name of a loose blob kept compressed.
const CompressedSuffix = ".zst"

// ShardOf is the shard of a canonical CID string: next-to-last/2.
func ShardOf(c string) string { return c[len(c)-3 : len(c)-1] }

// Packs is the directory of packs.
func (t BlobTree) Packs() string { return filepath.Join(t.Dir, "packs") }

// Pack is pack n.
func (t BlobTree) Pack(n int) string { return PackFile(t.Packs(), n, ".pack") }

// PackIndex is full pack n's index.
func (t BlobTree) PackIndex(n int) string { return PackFile(t.Packs(), n, ".idx") }

// PackDamaged marks full pack n as holding damage.
func (t BlobTree) PackDamaged(n int) string { return PackFile(t.Packs(), n, ".damaged") }

// PackFile is pack n's file with extension ext in the packs directory dir.
func PackFile(dir string, n int, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%08d%s", n, ext))
}

// PackOrdinal parses a pack file's name with extension ext.
func PackOrdinal(name, ext string) (n int, ok bool) { return ordinal(name, ext) }

// ordinal parses NNNNNNNN<ext>: eight decimal digits, at least 1.
func ordinal(name, ext string) (int, bool) {
	digits, found := strings.CutSuffix(name, ext)
	if !found || len(digits) != 8 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(digits)
	return n, n > 0
}

// Listing is every path Layout names, in the order docs/design.md §
// Storage layout lists them: DATA is the data directory, a directory ends
// in "/", and <id>, <name>, <xy>, <cid>, NNNNNNNN, FROM, TO, TIME and *
// stand for what varies.
func Listing() []string {
	const cid = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaxya" // shard "xy"
	l, b := Of("DATA"), Of("DATA").Blobs()
	dir := func(p string) string { return p + "/" }
	paths := []string{
		l.Lock(),
		dir(b.Dir),
		dir(b.Shard(ShardOf(cid))),
		b.Loose(cid),
		b.LooseCompressed(cid),
		dir(b.Packs()),
		b.Pack(1),
		b.PackIndex(1),
		b.PackDamaged(1),
		dir(l.Recordings()),
		dir(l.Recording("<id>")),
		l.Meta("<id>"),
		l.Plan("<id>"),
		l.PlanRef("<id>"),
		l.KnownHashes("<id>"),
		dir(l.Log("<id>")),
		l.Segment("<id>", 1),
		l.Root("<id>"),
		dir(l.Quarantine("<id>")),
		l.Quarantined("<id>", 1, 1111, 2222),
		l.Gaps("<id>"),
		l.Signature("<id>"),
		l.Derived("<id>"),
		l.Pins("<id>"),
		l.Shares("<id>"),
		l.Comments("<id>"),
		l.Views("<id>"),
		dir(l.Removing("<id>")),
		dir(l.Groups()),
		l.Group("g<id>"),
		dir(l.Keys()),
		l.Key("<name>"),
		l.AttestationKey(),
		l.AttestationPub(),
		l.ShareKey(),
		l.Index(),
		l.IndexAside(3333),
		l.Tokens(),
		l.AuditLog(),
		l.PolicyDigest(),
		l.ReadyProbe(),
		l.VideoTemps(),
	}
	r := strings.NewReplacer(cid, "<cid>", "/xy/", "/<xy>/", "00000001", "NNNNNNNN",
		"-1111-2222", "-FROM-TO", "-3333", "-TIME")
	for i, p := range paths {
		paths[i] = r.Replace(filepath.ToSlash(p))
	}
	return paths
}
