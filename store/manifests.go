package store

import (
	"io"

	"github.com/flightrec/flightrec/store/bundle"
	"github.com/flightrec/flightrec/store/layout"
)

// The manifest's and bundle's vocabulary, for callers of the facade
// (store/bundle defines it).
type (
	RecordingMeta   = bundle.RecordingMeta
	ReRedaction     = bundle.ReRedaction
	Manifest        = bundle.Manifest
	SegmentRef      = bundle.SegmentRef
	Gap             = bundle.Gap
	RedactionReport = bundle.RedactionReport
	RuleCount       = bundle.RuleCount
	Location        = bundle.Location
	Problem         = bundle.Problem
	BundleReport    = bundle.BundleReport
)

const (
	// MaxReportLocations bounds the locations listed per rule and channel.
	MaxReportLocations = bundle.MaxReportLocations
	// MaxBundleHeader bounds a bundle's header.
	MaxBundleHeader = bundle.MaxBundleHeader
	// MaxBundleSection bounds one section of a bundle.
	MaxBundleSection = bundle.MaxBundleSection
)

// ErrBadBundle is a bundle that fails verification.
var ErrBadBundle = bundle.ErrBadBundle

// VerifyBundle reads a bundle from r and reports what is wrong with it
// (bundle.VerifyBundle).
func VerifyBundle(r io.Reader) (*BundleReport, error) { return bundle.VerifyBundle(r) }

// ReadBundleManifest reads a bundle's header and root section only
// (bundle.ReadBundleManifest).
func ReadBundleManifest(r io.Reader) (root string, manifest []byte, err error) {
	return bundle.ReadBundleManifest(r)
}

// ValidRecordingID reports whether id has the shape NewRecordingID makes
// (layout.ValidRecordingID).
func ValidRecordingID(id string) bool { return layout.ValidRecordingID(id) }
