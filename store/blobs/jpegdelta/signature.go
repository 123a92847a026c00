package jpegdelta

// Signature is what a writer keeps of a frame to choose a base for a
// later one: its geometry and a hash of each MCU's coefficients. A delta
// of a frame against a base of its geometry codes the MCUs that differ,
// so the base whose signature matches the frame's in the most MCUs
// (Alike) makes about the smallest delta. It is 4 bytes per MCU (6.4 KB
// for an 800×500 4:2:0 frame, against 1.2 MB of coefficients).
type Signature struct {
	geometry []int // width, height, then each component's sampling
	mcus     []uint32
}

// Signature is fr's signature.
func (fr *Frame) Signature() Signature {
	f := fr.f
	s := Signature{geometry: []int{f.width, f.height}, mcus: make([]uint32, f.mcus())}
	for _, c := range f.comps {
		s.geometry = append(s.geometry, c.h, c.v)
	}
	for m := range s.mcus {
		// FNV-1a-like over the MCU's coefficients, four at a time (a
		// run holds whole blocks of 64).
		x := uint64(14695981039346656037)
		f.mcuRuns(m, func(ci, lo, hi int) {
			c := f.comps[ci].coef[lo:hi]
			for i := 0; i+4 <= len(c); i += 4 {
				v := uint64(uint16(c[i])) | uint64(uint16(c[i+1]))<<16 | uint64(uint16(c[i+2]))<<32 | uint64(uint16(c[i+3]))<<48
				x = (x ^ v) * 1099511628211
			}
		})
		s.mcus[m] = uint32(x ^ x>>32)
	}
	return s
}

// IsZero reports whether s is no frame's signature (the zero Signature).
func (s Signature) IsZero() bool { return len(s.geometry) == 0 }

// Alike is the number of MCUs in which frames of signatures a and b hold
// the same coefficients (up to a hash collision), or -1 when no delta of
// one against the other can be made (their geometries differ, or either
// is the zero Signature).
func Alike(a, b Signature) int {
	if len(a.geometry) == 0 || len(a.geometry) != len(b.geometry) || len(a.mcus) != len(b.mcus) {
		return -1
	}
	for i, g := range a.geometry {
		if b.geometry[i] != g {
			return -1
		}
	}
	n := 0
	for m, x := range a.mcus {
		if b.mcus[m] == x {
			n++
		}
	}
	return n
}
