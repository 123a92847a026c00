package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightrec/flightrec/event"
	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/policy"
	"github.com/flightrec/flightrec/redact"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/store/lease"
	"github.com/flightrec/flightrec/wire"
)

// Service owns the open recordings: their logs, their next expected seq and
// their size. Appends to one recording are serialized; different recordings
// proceed in parallel.
type Service struct {
	onOpen func(store.RecordingMeta)
	cfg    Config
	st     *store.Store
	proj   *store.Projector
	policy *policy.Engine
	key    []byte // pseudonym key for plans that pseudonymize
	log    *slog.Logger
	edge   *httpx.Edge // answers, counts and logs error replies
	m      *Metrics
	now    func() time.Time

	// bodies is the memory request bodies share.
	bodies *bodyMem

	// maskSlots bounds the ffmpeg processes masking video GOPs at once,
	// across recordings: one per core (each runs one thread).
	maskSlots chan struct{}

	mu   sync.Mutex
	open map[string]*recording
	// Finished recordings' roots and verdicts, so a retried finish is
	// answered without reading the manifest.
	sealed map[string]sealedRec

	stopIdle  chan struct{} // closed by Close: ends expireIdle
	idle      sync.WaitGroup
	closeOnce sync.Once
	// damaged holds the recordings recovery found damaged (damage.go).
	damaged map[string]Damage
	// cl is cluster mode's state (cluster.go); nil on a single node.
	cl *cluster
}

type sealedRec struct{ root, verdict string }

type recording struct {
	mu   sync.Mutex
	meta store.RecordingMeta
	red  *redact.Redactor
	// redStale says red has seen events a failed batch did not store; the
	// next append rebuilds it from the log first.
	redStale bool
	log      *store.Log
	next     uint64 // next expected seq
	bytes    int64  // stored bytes: log plus new blobs
	closed   bool   // sealed or failed; the map entry is on its way out
	// video is the executor's WebM stream in progress, nil when none is.
	video *videoStream
	// lastStep is the newest stored event's step (a server-made event,
	// which finish may append, takes it).
	lastStep int
	// ts is the range of the stored events' ts (checkTimes).
	ts tsRange
	// lastWrite is when the recording was last written (unix ns): its
	// open, or its last append; at recovery, its files' modification time.
	lastWrite atomic.Int64
	// lease is this node's ownership of the recording in cluster mode
	// (zero on a single node).
	lease lease.Lease
	// lastFrame is the last screencast frame stored (cid.Undef before
	// the first, and after a restart): a new frame is kept against it
	// when that pays (store.PutBlobsAfter).
	lastFrame cid.Cid
}

// Deps are what a Service works with; the caller builds them.
type Deps struct {
	Store     *store.Store
	Projector *store.Projector
	Policy    *policy.Engine
	// Registry receives ingest's metrics.
	Registry prometheus.Registerer
	Log      *slog.Logger
	// Edge answers, counts and logs error replies.
	Edge *httpx.Edge
	// OnOpen, when set, hears each recording opened (after it is durable);
	// the server writes its plan digest to the audit log.
	OnOpen func(store.RecordingMeta)
	// PseudonymKey is the redaction pseudonyms' HMAC key: the operator's,
	// one per deployment, in shared mode; nil for the data directory's
	// own (DATA/keys/redact-pseudonym.key, made on first use).
	PseudonymKey []byte
	// Cluster, when set, is cluster mode (cluster.go): ownership by
	// lease, acknowledgements in the shared object store.
	Cluster *Cluster
}

// New returns a Service over d.Store. It recovers every recording there:
// open logs are reopened (cutting torn tails) and the projector is told
// what to index.
func New(cfg Config, d Deps) (*Service, error) {
	st, proj, reg := d.Store, d.Projector, d.Registry
	key := d.PseudonymKey
	if key == nil {
		var err error
		if key, err = st.Key(layout.PseudonymKeyName); err != nil {
			return nil, err
		}
	}
	s := &Service{cfg: cfg, st: st, proj: proj, policy: d.Policy, key: key, log: d.Log, edge: d.Edge, now: time.Now, onOpen: d.OnOpen,
		maskSlots: make(chan struct{}, runtime.NumCPU()), bodies: newBodyMem(cfg.Limits, 10*time.Second),
		open: map[string]*recording{}, sealed: map[string]sealedRec{}, stopIdle: make(chan struct{}), damaged: map[string]Damage{}}
	s.m = newMetrics(reg, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.open))
	}, func() float64 { return float64(proj.Lag()) }, func() float64 { return float64(proj.FailedWrites()) })
	registerDamageMetric(reg, s)
	if d.Cluster != nil {
		s.cl = newCluster(*d.Cluster, s.now, s.edge)
	}
	if err := s.recover(); err != nil {
		s.Close()
		return nil, err
	}
	if s.cl != nil {
		s.cl.done.Add(2)
		go s.cl.every(s.cl.cfg.TTL/3, s.renewLeases)
		go s.cl.every(catchUpEvery*s.cl.cfg.TTL, s.catchUpPass)
	}
	if cfg.OpenIdleTimeout > 0 {
		s.idle.Add(1)
		go s.expireIdle(cfg.OpenIdleTimeout)
	}
	return s, nil
}

func (s *Service) recover() error {
	ids, err := s.st.IDs()
	if err != nil {
		return err
	}
	for _, id := range ids {
		// One damaged recording is reported and contained; the others
		// are served (damage.go).
		if err := s.recoverOne(id); err != nil {
			s.markDamaged(id, err)
		}
	}
	return nil
}

func (s *Service) recoverOne(id string) error {
	meta, err := s.st.Meta(id)
	if err != nil {
		return err
	}
	root, err := s.st.Root(id)
	if err != nil {
		return err
	}
	if root != "" && s.cl != nil {
		// In cluster mode a sealed copy is the recording only once it is
		// published (clusterSealed publishes after its seal won): one
		// sealed here before a crash may have lost to another node, and
		// must be neither published nor served. A copy that was
		// published is fetched again when read.
		if pub, err := s.st.PublishedRoot(id); err != nil || pub != root {
			return os.RemoveAll(s.st.Layout().Recording(id))
		}
	}
	if root != "" {
		m, err := s.st.ReadManifest(root)
		if err != nil {
			return fmt.Errorf("recover %s: %w", id, err)
		}
		if _, err := s.st.Seal(m.Recording); err != nil { // removes a leftover log
			return fmt.Errorf("recover %s: %w", id, err)
		}
		s.sealed[id] = sealedRec{root, m.Recording.Verdict}
		s.proj.Put(store.RecordingRow{RecordingMeta: m.Recording, State: store.StateFinished, Root: root})
		s.proj.Notify(id, m.LastSeq)
		return nil
	}
	if s.cl != nil {
		// In cluster mode an open recording is its objects: a local copy
		// is stale (another node may own it now). Whichever node is asked
		// for it next takes it over from the objects.
		return os.RemoveAll(s.st.Layout().Recording(id))
	}
	// Before the log is opened, which may cut a torn tail and so change
	// its files' times.
	last, err := s.st.LastWrite(id)
	if err != nil {
		return fmt.Errorf("recover %s: %w", id, err)
	}
	lg, err := s.st.OpenLog(id)
	var de *store.DamagedError
	if errors.As(err, &de) {
		// Index what is intact: the projector reads around the damage.
		s.proj.Put(store.RecordingRow{RecordingMeta: meta, State: store.StateOpen})
		s.proj.Notify(id, lastSeqOf(s.st, id))
		return err
	}
	if err != nil {
		return fmt.Errorf("recover %s: %w", id, err)
	}
	if cut := lg.Recovered(); cut > 0 {
		s.log.Warn("cut a torn log tail (never acknowledged)", "recording", id, "bytes", cut)
	}
	red, ts, err := s.rebuildRedactor(id)
	if err != nil {
		lg.Close()
		return fmt.Errorf("recover %s: %w", id, err)
	}
	video, err := resumeVideo(s.st, id, s.videoLimits())
	if err != nil {
		lg.Close()
		return fmt.Errorf("recover %s: %w", id, err)
	}
	r := &recording{meta: meta, red: red, log: lg, next: lg.LastSeq() + 1, bytes: lg.Size(), video: video, ts: ts}
	r.lastWrite.Store(last.UnixNano())
	s.open[id] = r
	s.proj.Put(store.RecordingRow{RecordingMeta: meta, State: store.StateOpen})
	s.proj.Notify(id, lg.LastSeq())
	return nil
}

// lastSeqOf is the last intact seq of a damaged log.
func lastSeqOf(st *store.Store, id string) uint64 {
	var last uint64
	_, _ = st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		last = r.Seq
		return nil
	})
	return last
}

// rebuildRedactor makes an open recording's redactor from its saved plan
// and feeds it the events already stored, so state that spans events (which
// DOM nodes are masked) is what it was before the restart. On the way it
// measures the stored events' ts range.
func (s *Service) rebuildRedactor(id string) (*redact.Redactor, tsRange, error) {
	var ts tsRange
	raw, err := s.st.Plan(id)
	if err != nil {
		return nil, ts, err
	}
	var plan policy.Plan
	if err := json.Unmarshal(raw, &plan); err != nil {
		return nil, ts, fmt.Errorf("plan: %w", err)
	}
	red, err := redact.New(&plan, s.key)
	if err != nil {
		return nil, ts, err
	}
	hashes, err := s.st.KnownHashes(id)
	if err != nil {
		return nil, ts, err
	}
	if err := red.LoadKnownHashes(hashes); err != nil {
		return nil, ts, err
	}
	s.configureVideo(red, id)
	_, err = s.st.Scan(id, store.Pos{}, 0, func(r store.Record, _ store.Locator) error {
		red.Observe(r.Kind, r.Data)
		ts = ts.with(r.TS)
		return nil
	})
	return red, ts, err
}

// Close closes every open log. Recordings stay open on disk.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		close(s.stopIdle)
		if s.cl != nil {
			close(s.cl.stop)
			s.cl.stopBg()
		}
	})
	s.idle.Wait() // no abort runs from here on
	if s.cl != nil {
		s.cl.done.Wait()
	}
	// A recording's lock is taken without s.mu held: finishing one takes
	// s.mu under the recording's lock.
	open := s.openRecordings()
	for _, r := range open {
		r.mu.Lock()
		if !r.closed {
			r.log.Close()
			r.closed = true
			if s.cl != nil {
				s.releaseOnClose(r)
			}
		}
		r.mu.Unlock()
	}
}

// openRecordings is a snapshot of the open recordings, to visit each
// under its own lock without s.mu held.
func (s *Service) openRecordings() []*recording {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := make([]*recording, 0, len(s.open))
	for _, r := range s.open {
		open = append(open, r)
	}
	return open
}

// validateOpen checks an open request before anything is made of it.
func validateOpen(r *wire.OpenRequest) error {
	if r.Project == "" {
		return wire.New(http.StatusBadRequest, "BAD_REQUEST", `send {"project": "…"}`, "project is required")
	}
	if !validName(r.Project) || (r.Flow != "" && !validName(r.Flow)) {
		return wire.New(http.StatusBadRequest, "BAD_REQUEST",
			"use letters, digits, '.', '_', '-' and '/', at most 200 characters",
			"project and flow must be plain names")
	}
	if r.AppMap != nil && len(r.AppMap.MaskedSelectors)+len(r.AppMap.MaskTextSelectors) > 1000 {
		return wire.New(http.StatusBadRequest, "BAD_REQUEST", "send at most 1000 app-map selectors",
			"too many app-map selectors")
	}
	if len(r.Labels) > 64 || len(r.Versions) > 64 {
		return wire.New(http.StatusBadRequest, "BAD_REQUEST", "send at most 64 labels and 64 versions",
			"too many labels or versions")
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// Open creates a recording.
func (s *Service) Open(ctx context.Context, req wire.OpenRequest) (wire.OpenReply, error) {
	if err := validateOpen(&req); err != nil {
		return wire.OpenReply{}, err
	}
	if err := s.checkOpenLimits(req.Project); err != nil {
		return wire.OpenReply{}, err
	}
	now := s.now()
	meta := store.RecordingMeta{
		ID: store.NewRecordingID(now), Project: req.Project, Flow: req.Flow, Labels: req.Labels,
		Executor: req.Executor, Versions: req.Versions, CreatedAt: now.UnixNano(),
	}
	in := policy.Input{Recording: policy.RecordingInput{Project: req.Project, Flow: req.Flow, Labels: req.Labels,
		Executor: req.Executor, Versions: req.Versions}}
	if req.AppMap != nil {
		in.AppMap = *req.AppMap
		meta.AppMap, _ = json.Marshal(req.AppMap)
	}
	plan, err := s.policy.Plan(ctx, in)
	var red *redact.Redactor
	if err == nil {
		red, err = redact.New(plan, s.key)
	}
	if err != nil {
		// Fail closed: a recording whose plan cannot be made is refused,
		// never stored unredacted.
		s.log.Error("redaction policy failed for a recording; refused", "project", req.Project, "err", err)
		return wire.OpenReply{}, wire.New(http.StatusUnprocessableEntity, "POLICY_ERROR",
			"fix the redaction policy (flightrec policy test DIR) and open the recording again",
			"the redaction policy could not be evaluated for this recording")
	}
	// The policy saw the metadata as sent (in memory); what is stored, listed
	// and indexed is redacted like any event.
	rm, mf, err := red.RedactMeta(redact.Meta{Labels: meta.Labels, Executor: meta.Executor, Versions: meta.Versions})
	if err != nil {
		s.log.Error("redacting a recording's metadata failed; refused", "project", req.Project, "err", err)
		return wire.OpenReply{}, wire.New(http.StatusUnprocessableEntity, "REDACTION_FAILED",
			"check the labels, executor and versions; nothing was stored", "the recording's metadata could not be redacted")
	}
	meta.Labels, meta.Executor, meta.Versions = rm.Labels, rm.Executor, rm.Versions
	for _, f := range mf {
		meta.Redactions = append(meta.Redactions, store.Redaction{Rule: f.Rule, Channel: f.Channel, Pointer: f.Pointer})
		s.m.Redactions.WithLabelValues(f.Rule).Inc()
	}
	s.configureVideo(red, meta.ID)
	meta.PlanDigest = plan.Digest()
	planJSON, _ := json.Marshal(plan)
	if err := s.st.Create(meta); err != nil {
		return wire.OpenReply{}, storageError(err)
	}
	if err := s.st.SavePlan(meta.ID, planJSON); err != nil {
		return wire.OpenReply{}, storageError(err)
	}
	hashes := red.TakeKnownHashes()
	if err := s.st.AppendKnownHashes(meta.ID, hashes); err != nil {
		return wire.OpenReply{}, storageError(err)
	}
	lg, err := s.st.OpenLog(meta.ID)
	if err != nil {
		return wire.OpenReply{}, storageError(err)
	}
	r := &recording{meta: meta, red: red, log: lg, next: 1}
	r.lastWrite.Store(now.UnixNano())
	if s.cl != nil {
		if err := s.clusterOpened(ctx, r, planJSON, hashes); err != nil {
			lg.Close()
			return wire.OpenReply{}, err
		}
	}
	s.mu.Lock()
	s.open[meta.ID] = r
	s.mu.Unlock()
	s.proj.Put(store.RecordingRow{RecordingMeta: meta, State: store.StateOpen})
	if s.onOpen != nil {
		s.onOpen(meta)
	}
	mask := plan.MaskRules()
	return wire.OpenReply{ID: meta.ID, PlanDigest: meta.PlanDigest, Mask: &mask, KeepDownloads: plan.KeepDownloads}, nil
}

// lookup finds an open recording, or says why there is none.
func (s *Service) lookup(id string) (*recording, error) {
	if !store.ValidRecordingID(id) {
		return nil, notFound(id)
	}
	s.mu.Lock()
	r := s.open[id]
	_, sealed := s.sealed[id]
	d, damaged := s.damaged[id]
	s.mu.Unlock()
	if damaged {
		return nil, d.Error()
	}
	if r != nil {
		return r, nil
	}
	if sealed {
		return nil, s.sealedError(id)
	}
	return nil, s.goneError(id)
}

// sealedError is the refusal of an append to a closed recording: an
// aborted one says so, since its executor did not finish it.
func (s *Service) sealedError(id string) error {
	s.mu.Lock()
	done, sealed := s.sealed[id]
	s.mu.Unlock()
	if !sealed {
		if err := s.givenUpError(id); err != nil {
			return err // disowned here while the request was read
		}
		// Closed by Close, not sealed: not finished, so the executor
		// must not stop sending.
		return logClosed()
	}
	if done.verdict == store.VerdictAborted {
		return aborted()
	}
	return finished()
}

func aborted() error {
	return wire.New(http.StatusConflict, "RECORDING_ABORTED",
		"the recording was aborted (POST …/abort, or no append for --open-idle-timeout) and sealed with what was acknowledged; open a new recording and send the rest there",
		"the recording was aborted; it takes no more events")
}

func notFound(string) error { return wire.RecordingNotFound(false) }

func finished() error {
	return wire.New(http.StatusConflict, "RECORDING_FINISHED", "open a new recording",
		"the recording is finished; it takes no more events")
}

// Append stores the new events of a decoded batch durably and returns
// what is acknowledged. Events already acknowledged are skipped (a retry),
// and a batch that starts past the next expected seq is refused.
func (s *Service) Append(ctx context.Context, id string, batch []*event.Decoded) (wire.AppendReply, error) {
	r, err := s.lookup(id)
	if err != nil {
		return wire.AppendReply{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return wire.AppendReply{}, s.sealedError(id)
	}
	first := batch[0].Seq
	if first > r.next {
		return wire.AppendReply{}, wire.New(http.StatusConflict, "SEQ_GAP",
			fmt.Sprintf("resend from seq %d", r.next),
			"batch starts at seq %d but the next expected seq is %d", first, r.next).
			With("expected_seq", r.next)
	}
	skip := int(r.next - first)
	if skip > len(batch) {
		skip = len(batch)
	}
	fresh := batch[skip:]
	reply := wire.AppendReply{Duplicates: skip}
	if len(fresh) == 0 {
		s.m.Dups.Add(float64(skip))
		reply.AckedThrough = r.next - 1
		return reply, nil
	}

	ts, err := checkTimes(r.ts, fresh, s.cfg.Limits, s.now())
	if err != nil {
		return wire.AppendReply{}, err
	}
	if r.redStale {
		// An earlier batch failed after redaction had advanced the
		// redactor's state: rebuild it from what is stored.
		red, _, err := s.rebuildRedactor(id)
		if err != nil {
			s.log.Error("rebuilding the redactor failed", "recording", id, "err", err)
			return wire.AppendReply{}, storageError(err)
		}
		r.red, r.redStale = red, false
	}
	// From here to the log append, a failure leaves the redactor ahead of
	// the log (it has seen events that are not stored), and the video
	// stream's parser too: it is restored from this snapshot.
	r.redStale = true
	video, stored := r.video.clone(), false
	defer func() {
		if !stored {
			r.video = video
		}
	}()
	recs, blobs, blobOf, blobSize, err := s.toRecords(ctx, r, fresh)
	if err != nil {
		return wire.AppendReply{}, err
	}
	var frames int64
	for _, rec := range recs {
		frames += int64(len(rec.Data)) + 64
	}
	if max := s.cfg.MaxRecordingBytes; max > 0 && r.bytes+frames+blobSize > max {
		return wire.AppendReply{}, wire.New(http.StatusRequestEntityTooLarge, "RECORDING_TOO_LARGE",
			"finish this recording and continue in a new one, or raise --max-recording-bytes",
			"the recording would exceed %d stored bytes", max)
	}
	before := r.log.Size()
	if err := s.commit(ctx, r, fresh, recs, blobs, blobOf); err != nil {
		return wire.AppendReply{}, err
	}
	r.redStale, stored = false, true
	r.lastStep = recs[len(recs)-1].Step
	r.ts = ts
	r.lastWrite.Store(s.now().UnixNano())
	r.bytes += r.log.Size() - before + blobSize
	r.next = recs[len(recs)-1].Seq + 1
	reply.AckedThrough = r.next - 1
	reply.Stored = len(recs)
	s.m.Events.Add(float64(len(recs)))
	s.m.Dups.Add(float64(skip))
	s.proj.Notify(id, reply.AckedThrough)
	return reply, nil
}

// commit stores the blobs of records about to be appended, completes the
// records with their CIDs and appends them to r's log with one fsync.
// Nothing is acknowledged on failure; a failed append reopens the log.
func (s *Service) commit(ctx context.Context, r *recording, batch []*event.Decoded, recs []store.Record, blobs [][]byte, blobOf []int) error {
	// From storing the blobs until the log record naming them is durable,
	// a garbage collection must not begin: its mark would miss them.
	defer s.st.Blobs.Hold()()
	// The values this batch taught, as keyed hashes, before the records
	// that are redacted with them: a restart after the acknowledgement
	// still masks them.
	hashes := r.red.TakeKnownHashes()
	if err := s.st.AppendKnownHashes(r.meta.ID, hashes); err != nil {
		return storageError(err)
	}
	if len(blobs) > 0 {
		// Other nodes' sweeps read no log of this node: a hold record
		// names the blobs until the recording's manifest is published.
		if err := s.st.HoldBlobs(r.meta.ID, blobs); err != nil {
			return storageError(err)
		}
		cids, err := s.st.PutBlobsAfter(r.lastFrame, blobs)
		if err != nil {
			return storageError(err)
		}
		attachCIDs(recs, batch, blobOf, cids)
		for j := len(blobOf) - 1; j >= 0; j-- {
			if i := blobOf[j]; i >= 0 && recs[i].Kind == event.KindFrame {
				r.lastFrame = cids[j]
				break
			}
		}
	}
	// Large bodies, DOM trees and snapshot texts go to blobs of their
	// own, stored once however many runs repeat them.
	if err := s.st.Outline(recs); err != nil {
		return storageError(err)
	}
	if s.cl != nil {
		// Cluster mode: the batch is acknowledged by its object, before
		// the local log (this node's copy, which a takeover rebuilds).
		if err := s.putBatch(ctx, r, recs, hashes); err != nil {
			return err
		}
	}
	if _, err := r.log.Append(recs); err != nil {
		s.log.Error("log append failed", "recording", r.meta.ID, "err", err)
		// Reopen the log: recovery cuts whatever part of this batch
		// reached the file, so the next append starts clean.
		r.log.Close()
		if lg, oerr := s.st.OpenLog(r.meta.ID); oerr == nil {
			r.log = lg
			r.next = lg.LastSeq() + 1
		} else {
			s.log.Error("reopening the log failed", "recording", r.meta.ID, "err", oerr)
		}
		return storageError(err)
	}
	return nil
}

// addRedactions records what redaction did to an event on its record and
// counts it.
func (s *Service) addRedactions(rec *store.Record, fs []redact.Finding) {
	for _, f := range fs {
		rec.Redactions = append(rec.Redactions, store.Redaction{Rule: f.Rule, Channel: f.Channel, Pointer: f.Pointer})
		s.m.Redactions.WithLabelValues(f.Rule).Inc()
	}
}

// toRecords redacts decoded events and turns them into log records. Binary
// payloads (as redacted: a frame with its mask rectangles painted) are
// pulled out to be stored as blobs; attachCIDs completes their records once
// the blobs are durable. Nothing here has touched the disk yet, so a
// failure refuses the whole batch.
func (s *Service) toRecords(ctx context.Context, r *recording, batch []*event.Decoded) (recs []store.Record, blobs [][]byte, blobOf []int, blobBytes int64, err error) {
	recs = make([]store.Record, len(batch))
	// known[i] is how many values redaction knew before event i: an event
	// redacted before a later one of the batch taught a value is scrubbed
	// again (rescrubKnown) before anything of the batch is written.
	known := make([]int, len(batch))
	defer func() {
		if err == nil {
			err = s.rescrubKnown(r, batch, recs, known)
		}
	}()
	for i, d := range batch {
		var res redact.Result
		var err error
		known[i] = r.red.KnownCount()
		var utf8Fixed []redact.Finding
		if !s.cfg.MeasureWithoutRedaction {
			if d, utf8Fixed, err = sanitizeUTF8(d, s.cfg.MaxStep); err == nil {
				batch[i] = d
				res, err = r.red.Redact(d)
				res.Findings = append(utf8Fixed, res.Findings...)
			}
		}
		if err != nil {
			s.log.Error("redaction failed; batch refused", "recording", r.meta.ID, "seq", d.Seq, "err", err)
			return nil, nil, nil, 0, wire.New(http.StatusUnprocessableEntity, "REDACTION_FAILED",
				"check the event's shape; nothing of this batch was stored",
				"seq %d could not be redacted", d.Seq)
		}
		rec := store.Record{Seq: d.Seq, TS: d.TS, Step: d.Step, Kind: d.Kind}
		s.addRedactions(&rec, res.Findings)
		if v, ok := d.Payload.(*event.Video); ok && !res.Drop {
			// The chunk is not stored: the GOPs it completes are.
			out, err := s.processVideo(ctx, r, d, v, false)
			if err != nil {
				var ae *wire.Error
				if !errors.As(err, &ae) {
					s.log.Error("video ingest failed; batch refused", "recording", r.meta.ID, "seq", d.Seq, "err", err)
					if ctx.Err() != nil {
						return nil, nil, nil, 0, ctx.Err()
					}
					err = wire.New(http.StatusUnprocessableEntity, "REDACTION_FAILED",
						"see the server log; nothing of this batch was stored", "seq %d: its video could not be redacted", d.Seq)
				}
				return nil, nil, nil, 0, err
			}
			rec.Summary = event.Summarize(d)
			for _, b := range s.videoRecord(&rec, out) {
				blobs = append(blobs, b)
				blobOf = append(blobOf, -1)
				blobBytes += int64(len(b))
			}
			recs[i] = rec
			continue
		}
		switch {
		case res.Drop:
			rec.Data = dropped(res.Findings)
			recs[i] = rec
			continue
		case res.Data != nil && !event.HasBinary(d.Kind):
			// Summaries come from the redacted payload only.
			rd, err := event.Decode(event.Envelope{Seq: d.Seq, TS: d.TS, Step: d.Step, Kind: d.Kind, Data: res.Data},
				event.Limits{MaxStep: s.cfg.MaxStep})
			if err != nil {
				s.log.Error("redacted event no longer validates; batch refused", "recording", r.meta.ID, "seq", d.Seq, "err", err)
				return nil, nil, nil, 0, wire.New(http.StatusUnprocessableEntity, "REDACTION_FAILED",
					"report this; nothing of this batch was stored", "seq %d could not be redacted", d.Seq)
			}
			rec.Data, rec.Summary = res.Data, event.Summarize(rd)
		default:
			rec.Data, rec.Summary = d.Data, event.Summarize(d)
		}
		if _, b := event.Binary(d); b != nil {
			if res.Image != nil {
				b = res.Image
			}
			blobs = append(blobs, b)
			blobOf = append(blobOf, i)
			blobBytes += int64(len(b))
			rec.BlobSize = int64(len(b))
		}
		recs[i] = rec
	}
	return recs, blobs, blobOf, blobBytes, nil
}

// sanitizeUTF8 replaces invalid UTF-8 and lone surrogate escapes in an
// event's data with U+FFFD (redact.SanitizeJSON) before anything else reads
// it (DecodeBatch did so for a batch read off the wire; events decoded
// elsewhere come through here), one finding per replacement.
func sanitizeUTF8(d *event.Decoded, maxStep int) (*event.Decoded, []redact.Finding, error) {
	var clean []byte
	n := 0
	if !d.Sanitized { // DecodeBatch's events are clean already: one scan, not two
		clean, n = redact.SanitizeJSON(d.Data)
	}
	nd := d
	if n > 0 {
		var err error
		if nd, err = event.Decode(event.Envelope{Seq: d.Seq, TS: d.TS, Step: d.Step, Kind: d.Kind, Data: clean}, event.Limits{MaxStep: maxStep}); err != nil {
			return d, nil, err
		}
	}
	n += d.Replaced // DecodeBatch's, before the envelope was read
	if n == 0 {
		return d, nil, nil
	}
	fs := make([]redact.Finding, n)
	for i := range fs {
		fs[i] = redact.Finding{Rule: redact.RuleUTF8, Channel: string(d.Kind), Pointer: ""}
	}
	return nd, fs, nil
}

// rescrubKnown scrubs again, with the known values as they stand at the
// end of the batch, the stored data of each event redacted before a value
// was learned. Binary payloads and video chunks carry no text.
func (s *Service) rescrubKnown(r *recording, batch []*event.Decoded, recs []store.Record, known []int) error {
	if s.cfg.MeasureWithoutRedaction {
		return nil
	}
	final := r.red.KnownCount()
	for i := range recs {
		rec := &recs[i]
		if known[i] == final || event.HasBinary(rec.Kind) || rec.Kind == event.KindVideo || rec.Data == nil {
			continue
		}
		data, fs, err := r.red.RescrubKnown(rec.Kind, rec.Data)
		if err == nil && data != nil {
			var rd *event.Decoded
			rd, err = event.Decode(event.Envelope{Seq: rec.Seq, TS: rec.TS, Step: rec.Step, Kind: rec.Kind, Data: data},
				event.Limits{MaxStep: s.cfg.MaxStep})
			if err == nil {
				rec.Data, rec.Summary = data, event.Summarize(rd)
				s.addRedactions(rec, fs)
			}
		}
		if err != nil {
			s.log.Error("scrubbing known values failed; batch refused", "recording", r.meta.ID, "seq", batch[i].Seq, "err", err)
			return wire.New(http.StatusUnprocessableEntity, "REDACTION_FAILED",
				"report this; nothing of this batch was stored", "seq %d could not be redacted", batch[i].Seq)
		}
	}
	return nil
}

// dropped is the stored data of an event redaction refused to keep: the
// seq stays (so the sequence has no hole) but nothing of the payload does.
func dropped(fs []redact.Finding) json.RawMessage {
	rules := make([]string, 0, len(fs))
	for _, f := range fs {
		rules = append(rules, f.Rule)
	}
	b, _ := json.Marshal(map[string]any{"redacted": "dropped", "rules": rules})
	return b
}

// attachCIDs completes the records that carry blobs (blobOf[j] is the
// record of blob j) with their CIDs, splicing the CID into the stored data.
// A GOP (blobOf -1) is named by its video record already: its CID is its
// content's, computed when the record was made (storeGOP).
func attachCIDs(recs []store.Record, batch []*event.Decoded, blobOf []int, cids []cid.Cid) {
	for j, i := range blobOf {
		if i < 0 {
			continue
		}
		c := cids[j].String()
		recs[i].Data = event.StoredData(batch[i], c)
		recs[i].CID = c
	}
}

// Finish seals a recording into its manifest. A retried finish with the
// same verdict returns the same root.
func (s *Service) Finish(ctx context.Context, id string, req wire.FinishRequest) (wire.FinishReply, error) {
	if i := sort.SearchStrings(sortedVerdicts, req.Verdict); i == len(sortedVerdicts) || sortedVerdicts[i] != req.Verdict {
		return wire.FinishReply{}, wire.New(http.StatusBadRequest, "BAD_VERDICT",
			"send verdict pass, fail, flaky, blocked or not_run (aborted is the server's: POST …/abort)", "unknown verdict")
	}
	return s.seal(ctx, id, req.Verdict, nil)
}

// Abort seals an open recording with the verdict aborted: what was
// acknowledged is kept, and appends afterwards are 409 RECORDING_ABORTED.
// A retried abort returns the same root.
func (s *Service) Abort(ctx context.Context, id string) (wire.FinishReply, error) {
	return s.seal(ctx, id, store.VerdictAborted, nil)
}

// seal finishes recording id with verdict, if still holds of it (checked
// under its lock; nil: always).
func (s *Service) seal(ctx context.Context, id, verdict string, still func(*recording) bool) (wire.FinishReply, error) {
	if !store.ValidRecordingID(id) {
		return wire.FinishReply{}, notFound(id)
	}
	s.mu.Lock()
	r := s.open[id]
	done, sealed := s.sealed[id]
	d, damaged := s.damaged[id]
	s.mu.Unlock()
	if damaged {
		return wire.FinishReply{}, d.Error()
	}
	if r == nil {
		if sealed && done.verdict == verdict {
			m, err := s.st.ReadManifest(done.root)
			if err != nil {
				return wire.FinishReply{}, storageError(err)
			}
			return wire.FinishReply{Root: done.root, AckedThrough: m.LastSeq}, nil
		}
		if sealed {
			return wire.FinishReply{}, s.sealedError(id)
		}
		return wire.FinishReply{}, s.goneError(id)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		s.mu.Lock()
		stillOpen := s.open[id] == r
		s.mu.Unlock()
		if stillOpen {
			// Closed but not sealed: Close ran (the server is stopping),
			// or a failed seal could not reopen the log. Asking again
			// would find r again.
			return wire.FinishReply{}, logClosed()
		}
		return s.seal(ctx, id, verdict, still) // sealed meanwhile: answer as a retry
	}
	defer r.mu.Unlock()
	if still != nil && !still(r) {
		return wire.FinishReply{}, errNotStill
	}
	// In cluster mode no check of the lease here: one could pass and go
	// stale before the seal lands (a pause). The seal is fenced by the
	// store instead (clusterSealed).
	if err := s.finishVideo(ctx, r); err != nil {
		return wire.FinishReply{}, err
	}
	if err := r.log.Close(); err != nil {
		return wire.FinishReply{}, storageError(err)
	}
	meta := r.meta
	meta.Verdict = verdict
	meta.FinishedAt = s.now().UnixNano()
	seal := s.st.Seal
	if s.cl != nil {
		// Published only once the seal won the recording's key space
		// (clusterSealed): a node that lost it must not replace what
		// the owner publishes.
		seal = s.st.SealUnpublished
	}
	root, err := seal(meta)
	if err != nil {
		// Keep the recording open: reopen the log so appends and a later
		// finish still work. A log found damaged meanwhile (its reopen
		// says so) is contained like one found at start.
		lg, oerr := s.st.OpenLog(id)
		var de *store.DamagedError
		switch {
		case oerr == nil:
			r.log = lg
		case errors.As(oerr, &de):
			r.closed = true
			s.mu.Lock()
			delete(s.open, id)
			s.mu.Unlock()
			s.markDamaged(id, oerr)
			d, _ := s.DamageOf(id)
			return wire.FinishReply{}, d.Error()
		default:
			r.closed = true
		}
		return wire.FinishReply{}, storageError(err)
	}
	if s.cl != nil {
		if err := s.clusterSealed(ctx, r, root, verdict); err != nil {
			// Not (known to be) the cluster's seal: this copy is
			// forgotten, and the retry goes through claim, which finds
			// the seal object (ours, if it landed) and answers from it,
			// or takes the recording over from its objects.
			if !r.closed {
				s.disown(r, "its seal was not confirmed")
			}
			return wire.FinishReply{}, err
		}
	}
	r.closed = true
	s.mu.Lock()
	delete(s.open, id)
	s.sealed[id] = sealedRec{root, verdict}
	s.mu.Unlock()
	s.proj.Put(store.RecordingRow{RecordingMeta: meta, State: store.StateFinished, Root: root})
	s.proj.Notify(id, r.next-1)
	if s.cl != nil {
		s.indexNow(ctx, id)
	}
	return wire.FinishReply{Root: root, AckedThrough: r.next - 1}, nil
}

// logClosed answers a finish for a recording whose log is closed without
// being sealed: what it acknowledged is on disk, and the next server start
// opens it again.
func logClosed() error {
	e := wire.New(http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE",
		"retry the finish after the delay (a restarted server has the recording open again); its acknowledged events are kept",
		"the recording's log is closed: the server is stopping, or the log could not be reopened")
	e.RetryAfter = 1
	return e
}

// sortedVerdicts are the verdicts an executor may finish with: every one
// but the server's own, aborted.
var sortedVerdicts = func() []string {
	var v []string
	for _, x := range store.Verdicts {
		if x != store.VerdictAborted {
			v = append(v, x)
		}
	}
	sort.Strings(v)
	return v
}()

// AckedThrough reports the highest acknowledged seq of an open recording
// (for GET …/events?after_seq= readers and clients resuming after a crash).
func (s *Service) AckedThrough(id string) (seq uint64, open bool) {
	s.mu.Lock()
	r := s.open[id]
	s.mu.Unlock()
	if r == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next - 1, true
}

// storageError maps a storage failure to the envelope: a full disk is 507,
// anything else 503 (retryable: the log refused nothing acknowledged).
func storageError(err error) error {
	var e *wire.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return wire.New(http.StatusInsufficientStorage, "STORAGE_FULL",
			"free space under the data directory, then resend", "the data directory is full")
	}
	e = wire.New(http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE",
		"retry after the delay; nothing of this batch was acknowledged", "storage write failed")
	e.RetryAfter = 1
	return e
}
