package objblobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/flightrec/flightrec/store/blobs"
)

// seedPack is a version-2 pack of a compressible blob, a random-looking
// one and an empty one.
func seedPack() []byte {
	datas := [][]byte{bytes.Repeat([]byte("frame 0123456789 "), 400), []byte("\x8f\x01\xa3\x77\x10\xee\x42"), {}}
	ents := make([]entry, len(datas))
	for i, d := range datas {
		ents[i] = entry{d: sha256.Sum256(d), raw: int64(len(d))}
	}
	return encodePack(ents, storedForms(ents, datas))
}

// seedPackV1 is the same blobs in a version-1 pack.
func seedPackV1() []byte { return V1Pack([][]byte{[]byte("one"), []byte("two!")}) }

// FuzzPackHeader: parseHeader, on any object and any prefix of it a
// first read may return, neither panics nor allocates past what it was
// given; what it accepts lies within the object and follows packFormat's
// rules, and a version-2 header it accepts is exactly what appendEntry
// writes for its entries.
func FuzzPackHeader(f *testing.F) {
	for _, p := range [][]byte{seedPack(), seedPackV1()} {
		f.Add(p, uint16(len(p)))
		f.Add(p, uint16(20))
		f.Add(p[:len(p)/2], uint16(len(p)))
	}
	f.Add([]byte("FRPACK2\n\xff\xff\xff\xff"), uint16(12))
	f.Fuzz(func(t *testing.T, obj []byte, first uint16) {
		size := int64(len(obj))
		p := obj[:min(len(obj), int(first))]
		ents, need, err := parseHeader(p, size)
		if err == nil && need > 0 {
			if need <= int64(len(p)) || need > size {
				t.Fatalf("asked to read %d bytes, had %d of %d", need, len(p), size)
			}
			p = obj[:need]
			if ents, need, err = parseHeader(p, size); need != 0 {
				t.Fatalf("asked again for %d bytes", need)
			}
		}
		if err != nil {
			return
		}
		v2 := string(p[:len(packMagic)]) == packMagic
		eb := int64(entryBytesV1)
		if v2 {
			eb = entryBytes
		}
		hlen := int64(headerFixed) + int64(len(ents))*eb
		if hlen > int64(len(p)) {
			t.Fatalf("%d entries from %d bytes", len(ents), len(p))
		}
		var again []byte
		for i, e := range ents {
			if e.off < hlen || e.n < 0 || e.off+e.n > size {
				t.Fatalf("entry %d (%d, %d) outside [%d, %d)", i, e.off, e.n, hlen, size)
			}
			if !e.z && e.raw != e.n || e.raw < 0 || e.z && e.raw > blobs.PackMaxBlob || !v2 && e.z {
				t.Fatalf("entry %d: %+v", i, e)
			}
			again = appendEntry(again, e)
		}
		if v2 && !bytes.Equal(again, p[headerFixed:hlen]) {
			t.Fatal("the entries accepted do not write back as read")
		}
		// An entry accepted is safe to read as Open does: a damaged frame
		// is an error, never a panic or more than raw bytes.
		for _, e := range ents {
			if e.z {
				if out, err := blobs.DecompressPacked(obj[e.off:e.off+e.n], e.raw); err == nil && int64(len(out)) != e.raw {
					t.Fatalf("decoded %d bytes, entry names %d", len(out), e.raw)
				}
			}
		}
	})
}

// FuzzSnapshot: parseSnapshot never panics, and every entry it indexes
// names at most maxSnapshotEntry stored bytes (PackMaxBlob when
// compressed) and follows packFormat's rules.
func FuzzSnapshot(f *testing.F) {
	key := "packs/abc"
	for _, magic := range []string{snapshotMagic, snapshotMagicV1} {
		p := seedPack()
		eb := entryBytes
		if magic == snapshotMagicV1 {
			p, eb = seedPackV1(), entryBytesV1
		}
		count := int(binary.BigEndian.Uint32(p[len(packMagic):]))
		b := append([]byte(magic), binary.BigEndian.AppendUint16(nil, uint16(len(key)))...)
		b = append(b, key...)
		b = binary.BigEndian.AppendUint32(b, uint32(count))
		b = append(b, p[headerFixed:headerFixed+count*eb]...)
		f.Add(b)
		f.Add(append(b, b[len(magic):]...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		parseSnapshot(b, func(k string, ents []entry) {
			if len(ents)*entryBytesV1 > len(b) {
				t.Fatalf("%d entries from %d bytes", len(ents), len(b))
			}
			for i, e := range ents {
				if e.off < 0 || e.n < 0 || e.n > maxSnapshotEntry || e.raw < 0 || e.z && e.raw > blobs.PackMaxBlob || !e.z && e.raw != e.n {
					t.Fatalf("pack %q entry %d: %+v", k, i, e)
				}
			}
		})
	})
}
