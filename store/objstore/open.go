package objstore

import (
	"errors"
	"strings"
)

// Open opens the store a flag names: s3://BUCKET/PREFIX?… (ParseS3URL;
// creds sign its requests), or file:///DIR or a plain directory path (a
// Local store, which the caller closes: it is an io.Closer). Nothing is
// sent to S3 yet; call (*S3).Check to refuse a wrong bucket or
// credentials at start.
func Open(target string, creds Credentials) (Store, error) {
	switch {
	case strings.HasPrefix(target, "s3://"):
		cfg, err := ParseS3URL(target)
		if err != nil {
			return nil, err
		}
		cfg.Credentials = creds
		return NewS3(cfg)
	case strings.HasPrefix(target, "file://"):
		return NewLocal(strings.TrimPrefix(target, "file://"))
	case strings.Contains(target, "://"):
		return nil, errors.New("objstore: unknown store " + strings.SplitN(target, "://", 2)[0] + "://… (want s3://BUCKET/PREFIX or a directory)")
	case target == "":
		return nil, errors.New("objstore: no store named (want s3://BUCKET/PREFIX or a directory)")
	}
	return NewLocal(target)
}
