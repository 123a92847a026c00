package event

// rrweb's vocabulary, as the recorder stores it in dom events (rrweb 2.x):
// what redaction and playback both read of an rrweb stream.

// rrweb event types (the envelope's "type").
const (
	RRWebFullSnapshot = 2
	RRWebIncremental  = 3
	RRWebMeta         = 4
)

// rrweb incremental snapshot sources (data.source) read by flightrec.
const (
	RRWebMutation = 0
	RRWebInput    = 5
)

// rrweb-snapshot serialized node types (node.type).
const (
	RRWebNodeDocument = 0
	RRWebNodeDocType  = 1
	RRWebNodeElement  = 2
	RRWebNodeText     = 3
	RRWebNodeCDATA    = 4
	RRWebNodeComment  = 5
)
