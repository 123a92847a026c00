package webm

import (
	"strconv"
	"strings"
)

// slot is one output frame.
type slot struct {
	// at is the frame's time in ns after the video's start; it shows the
	// newest input frame at or before it.
	at int64
	// ms is its block timestamp (TimecodeScale is 1 ms), at rounded down.
	ms int64
	// key asks ffmpeg for a keyframe here (which begins a cluster, with a
	// cue).
	key bool
}

// timeline lays out the output frames of a video of dur ns: a constant
// rate of fps, the last frame starting before dur (dur > 0). Keyframes: the first
// frame; for each chapter start (ns after the video's start) the frame on
// screen at that instant, the last one at or before it; and frames so that
// keyframes are at most keyInterval ns apart.
//
// The chapter's keyframe is the frame at or before its start, not after:
// a player seeking to the start looks for the last keyframe at or before
// it and decodes up to the frame on screen then, which is this very
// frame, so the seek costs one frame. A keyframe after the start would
// leave the seek to decode from the keyframe before.
func timeline(dur int64, fps int, chapterStarts []int64, keyInterval int64) []slot {
	const ns = int64(1e9)
	n := (dur*int64(fps) + ns - 1) / ns // ceil
	n = max(n, 1)
	slots := make([]slot, n)
	for i := range n {
		at := i * ns / int64(fps)
		slots[i] = slot{at: at, ms: at / 1e6}
	}
	// The last frame shows the newest input frame before the end, not
	// only before its own time: the recording's final state (often the
	// failure being looked for) must not fall between two frames.
	slots[n-1].at = dur - 1
	for _, c := range chapterStarts {
		if c >= 0 && c < dur {
			slots[min(c*int64(fps)/ns, n-1)].key = true
		}
	}
	gap := max(keyInterval*int64(fps)/ns, 1) // in frames
	last := int64(0)
	slots[0].key = true
	for i := range n {
		if i-last >= gap {
			slots[i].key = true
		}
		if slots[i].key {
			last = i
		}
	}
	thinKeys(slots, fps)
	return slots
}

// maxForceArg bounds -force_key_frames's value: Linux refuses a single
// argument over 128 KiB.
const maxForceArg = 100_000

// thinKeys drops keyframe requests, keeping ones further and further
// apart, until their list fits maxForceArg. Only videos with tens of
// thousands of steps get here; they lose the keyframe at some chapter
// starts (their seeks decode a few more frames), never correctness.
func thinKeys(slots []slot, fps int) {
	for gap := 2; len(forceKeyFrames(slots, fps)) > maxForceArg; gap *= 2 {
		last := -gap
		for i := range slots {
			if !slots[i].key {
				continue
			}
			if i == 0 || i-last >= gap {
				last = i
				continue
			}
			slots[i].key = false
		}
	}
}

// forceKeyFrames is ffmpeg's -force_key_frames list: the key slots' times
// on ffmpeg's clock, where frame k is at k/fps s. Each is written in µs,
// rounded down; ffmpeg rounds it to the nearest frame of the 1/fps time
// base, which is k. (ffmpeg's "expr:" form would take frame numbers but
// fails past about a hundred terms.)
func forceKeyFrames(slots []slot, fps int) string {
	var b strings.Builder
	for k, s := range slots {
		if !s.key {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		us := int64(k) * 1_000_000 / int64(fps)
		b.WriteString(strconv.FormatInt(us/1_000_000, 10))
		b.WriteByte('.')
		frac := strconv.FormatInt(us%1_000_000, 10)
		b.WriteString(strings.Repeat("0", 6-len(frac)))
		b.WriteString(frac)
	}
	return b.String()
}
