// Package store keeps what flightrec records: content-addressed blobs, the
// per-recording append-only log, manifests and root CIDs, and the Index
// interface that store/sqlite and store/clickhouse implement.
//
// It knows nothing of HTTP.
package blobs

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// ErrBadCID is returned for a string that is not a CIDv1 of the raw codec
// with a sha2-256 multihash, the only kind flightrec stores.
var ErrBadCID = errors.New("not a flightrec CID (want CIDv1, raw codec, sha2-256)")

// Sum returns the CID of data: CIDv1, raw codec, sha2-256.
func Sum(data []byte) cid.Cid {
	d := sha256.Sum256(data)
	return FromDigest(d[:])
}

// FromDigest is the CID of a sha2-256 digest (32 bytes).
func FromDigest(d []byte) cid.Cid {
	mh, err := multihash.Encode(d, multihash.SHA2_256)
	if err != nil {
		panic(err) // a 32-byte sha2-256 digest always encodes
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// SumString is Sum in its canonical base32 string form ("bafkrei…").
func SumString(data []byte) string { return Sum(data).String() }

// ParseCID parses s and checks that it is a CID flightrec could have made.
// It rejects other codecs, hashes and versions before touching the disk, so
// a CID can never name a path outside the blob tree.
func ParseCID(s string) (cid.Cid, error) {
	if len(s) < 10 || len(s) > 100 {
		return cid.Undef, ErrBadCID
	}
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: %v", ErrBadCID, err)
	}
	if c.Version() != 1 || c.Type() != cid.Raw {
		return cid.Undef, ErrBadCID
	}
	dm, err := multihash.Decode(c.Hash())
	if err != nil || dm.Code != multihash.SHA2_256 || dm.Length != 32 {
		return cid.Undef, ErrBadCID
	}
	if c.String() != s {
		// Only the canonical base32 spelling names a file.
		return cid.Undef, ErrBadCID
	}
	return c, nil
}

// Digest returns the sha2-256 digest inside a flightrec CID.
func Digest(c cid.Cid) ([]byte, error) {
	dm, err := multihash.Decode(c.Hash())
	if err != nil || dm.Code != multihash.SHA2_256 {
		return nil, ErrBadCID
	}
	return dm.Digest, nil
}
