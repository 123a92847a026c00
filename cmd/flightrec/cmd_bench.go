package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/flightrec/flightrec/internal/bench"
)

func runBench(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("bench", "bench [flags]", errOut)
	dir := fs.String("dir", os.TempDir(), "scratch directory on the disk to measure")
	runs := fs.Int("runs", 5, "runs per figure (the median is reported)")
	small := fs.Int("small-events", 200_000, "events per small-event run")
	frames := fs.Int("frames", 5000, "50 KB frames per frame run")
	clients := fs.Int("clients", 4, "concurrent recordings")
	steps := fs.Int("steps", 2000, "steps of the step-view recording")
	videoSeconds := fs.Int("video-seconds", 600, "length of the executor-video stream (1280×800); 0 skips the video benchmark")
	videoRuns := fs.Int("video-runs", 3, "runs per video figure")
	videoOnly := fs.Bool("video-only", false, "run only the executor-video benchmark")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cpuProfile := cpuProfileFlag(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer stopProfile()
	scratch, cleanup, err := bench.ScratchDir(*dir)
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer cleanup()
	var res *bench.Result
	if !*videoOnly {
		res, err = bench.Run(ctx, bench.Options{Dir: scratch, Runs: *runs, SmallEvents: *small, Frames: *frames,
			Clients: *clients, StepSteps: *steps, Progress: errOut})
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	var video *bench.VideoResult
	if *videoSeconds > 0 {
		video, err = bench.RunVideo(ctx, bench.VideoOptions{Dir: scratch, Runs: *videoRuns, Seconds: *videoSeconds,
			Width: 1280, Height: 800}, func(format string, args ...any) { fmt.Fprintf(errOut, format+"\n", args...) })
		if err != nil {
			printErr(errOut, *asJSON, err)
			return exitFailure
		}
	}
	if *asJSON {
		printJSON(out, struct {
			*bench.Result
			Video *bench.VideoResult `json:"video,omitempty"`
		}{res, video})
		return exitOK
	}
	if res != nil {
		fmt.Fprint(out, bench.Report(res))
	}
	if video != nil {
		fmt.Fprint(out, bench.VideoReport(video))
	}
	return exitOK
}
