package store

import (
	"github.com/ipfs/go-cid"

	"github.com/flightrec/flightrec/store/blobs"
)

// The blob store's vocabulary, for callers of the facade (store/blobs
// defines it).
var (
	// ErrBlobCorrupt is a packed blob whose bytes do not match its CID.
	ErrBlobCorrupt = blobs.ErrBlobCorrupt
	// ErrBadCID is a string that is not a CID flightrec could have made.
	ErrBadCID = blobs.ErrBadCID
)

// Sum returns the CID of data: CIDv1, raw codec, sha2-256.
func Sum(data []byte) cid.Cid { return blobs.Sum(data) }

// SumString is Sum in its canonical base32 string form ("bafkrei…").
func SumString(data []byte) string { return blobs.SumString(data) }

// ParseCID parses s and checks that it is a CID flightrec could have made.
func ParseCID(s string) (cid.Cid, error) { return blobs.ParseCID(s) }

// Digest returns the sha2-256 digest a CID names.
func Digest(c cid.Cid) ([]byte, error) { return blobs.Digest(c) }
