package webm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ivfReader reads the IVF stream ffmpeg writes: a 32-byte file header
// ("DKIF", version, header size, fourcc, width, height, time base
// denominator and numerator, frame count), then per frame a 12-byte header
// (u32le size, u64le pts) and the frame. IVF is the plainest container
// libvpx output comes in: no muxer state to undo, one packet per frame.
type ivfReader struct {
	r      *bufio.Reader
	fourcc string
	width  int
	height int
}

// maxIVFFrame bounds one frame's declared size: a corrupt size must not
// make the reader allocate gigabytes.
const maxIVFFrame = 64 << 20

func newIVFReader(r io.Reader) (*ivfReader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var h [32]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, fmt.Errorf("ivf header: %w", err)
	}
	if string(h[0:4]) != "DKIF" {
		return nil, errors.New("ivf header: no DKIF signature")
	}
	hs := int(binary.LittleEndian.Uint16(h[6:8]))
	if hs < 32 {
		return nil, fmt.Errorf("ivf header: size %d", hs)
	}
	if _, err := br.Discard(hs - 32); err != nil {
		return nil, fmt.Errorf("ivf header: %w", err)
	}
	return &ivfReader{
		r:      br,
		fourcc: string(h[8:12]),
		width:  int(binary.LittleEndian.Uint16(h[12:14])),
		height: int(binary.LittleEndian.Uint16(h[14:16])),
	}, nil
}

// next returns the next frame; io.EOF at a clean end of the stream.
func (v *ivfReader) next() (pts int64, data []byte, err error) {
	var h [12]byte
	if _, err := io.ReadFull(v.r, h[:]); err != nil {
		if err == io.EOF {
			return 0, nil, io.EOF
		}
		return 0, nil, fmt.Errorf("ivf frame header: %w", err)
	}
	n := binary.LittleEndian.Uint32(h[0:4])
	if n == 0 || n > maxIVFFrame {
		return 0, nil, fmt.Errorf("ivf frame size %d", n)
	}
	data = make([]byte, n)
	if _, err := io.ReadFull(v.r, data); err != nil {
		return 0, nil, fmt.Errorf("ivf frame: %w", err)
	}
	return int64(binary.LittleEndian.Uint64(h[4:12])), data, nil
}

// vp8Keyframe reports whether a VP8 frame is a keyframe: bit 0 of its
// frame tag is 0 for key frames (RFC 6386, 9.1).
func vp8Keyframe(frame []byte) bool { return len(frame) > 0 && frame[0]&1 == 0 }
