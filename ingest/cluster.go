package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flightrec/flightrec/internal/httpx"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/lease"
	"github.com/flightrec/flightrec/store/objstore"
	"github.com/flightrec/flightrec/wire"
)

// Cluster is what cluster mode (serve --cluster-node) gives ingest; nil in
// Deps is the single-node default (no lease, local acknowledgements).
//
// In cluster mode one node at a time owns an open recording, through a
// lease (store/lease) whose holder is the node's advertised URL. The
// owner acknowledges an append only once the batch is an object in the
// shared store, so the recording outlives the owner's process and disk:
// any node that receives a write for a recording it does not own proxies
// it to the owner, or, once the owner's lease has expired, takes the
// lease over (the next epoch), rebuilds the recording from its objects
// and continues. See docs/design.md § Cluster mode.
type Cluster struct {
	// Objects is the deployment's object store (the --blobs one).
	Objects objstore.Store
	// Node names this node in the batches it writes (for people reading
	// the bucket); Advertise is the base URL other nodes proxy to, and the
	// lease's holder.
	Node, Advertise string
	// TTL is an ownership lease's life; it is renewed every TTL/3.
	TTL time.Duration
	// Proxy carries proxied requests (nil: http.DefaultTransport).
	Proxy http.RoundTripper
}

// Object keys of cluster mode, under the object store's prefix.
const (
	clusterLeases  = "cluster/leases"   // + /<id>: the ownership lease
	clusterOpen    = "cluster/open/"    // + <id>.json: meta, plan, first known hashes
	clusterBatches = "cluster/batches/" // + <id>/<first seq, 20 digits>: one batch, or the seal
	clusterSealed  = "cluster/sealed/"  // + <id>.json: the root and verdict once sealed and published
	// + <id>: a sealed recording the index may not hold yet (catchup.go)
	clusterUnindexed = "cluster/unindexed/"
)

// ClusterObjects names every object cluster mode keeps for recording id:
// its lease, its open document, its batches and seal (a prefix), its
// sealed document, and its index catch-up marker. Removing a recording removes them with it
// (objblobs.Options.RecordingObjects), so retention leaves nothing of a
// removed recording in the bucket.
func ClusterObjects(id string) []string {
	return []string{clusterBatches + id + "/", clusterOpen + id + ".json", clusterSealed + id + ".json", clusterLeases + "/" + id, clusterUnindexed + id}
}

// proxiedHeader marks a request one node passed to another, so that a
// request is proxied at most once (a lease moving meanwhile answers 503,
// and the client retries).
const proxiedHeader = "X-Flightrec-Proxied-By"

// NodeHeader names, on an append's reply in cluster mode, the node that
// acknowledged it (its owner, also when another node proxied it there).
const NodeHeader = "X-Flightrec-Node"

type cluster struct {
	cfg    Cluster
	leases *lease.Leases
	proxy  *httputil.ReverseProxy
	// claimMu serializes this node's takeovers: two requests for one
	// recording must not each acquire (and so fence) the other's epoch.
	claimMu sync.Mutex
	// owners caches live owners found by claims (cachedOwner).
	ownersMu sync.Mutex
	owners   map[string]lease.Lease
	// givenUp holds the recordings this node disowned, and when (under
	// the Service's mu): a request admitted while one was open here and
	// answered after it was disowned is told to retry (OWNER_MOVING),
	// not that the recording does not exist.
	givenUp map[string]time.Time
	stop    chan struct{}
	// bg is the context of background work (collecting a sealed
	// recording's batches), cancelled as the service closes: a collection
	// cut short is finished by a later write (answerSealed).
	bg     context.Context
	stopBg context.CancelFunc
	done   sync.WaitGroup
}

// openDoc is cluster/open/<id>.json: what a taker needs to make the
// recording again.
type openDoc struct {
	Meta   store.RecordingMeta `json:"meta"`
	Plan   json.RawMessage     `json:"plan"`
	Hashes []byte              `json:"known_hashes,omitempty"`
}

// batchDoc is one acknowledged batch: its records as stored (redacted,
// blobs already replaced by CIDs of blobs in the shared store) and the
// known-value hashes it taught, written by the owner of Epoch. Each
// record is in the log's own binary encoding, so that a taker's log is
// byte for byte the owner's: the index's locators (segment, offset),
// written by whichever node indexed, stay true of it.
//
// The seal is an object of the same key space: a batchDoc with Seal set
// and no records, at the key after the last acknowledged seq. Every key
// is written create-only and never replaced, so of "the old owner seals
// at seq N" and "a new owner appends seq N" exactly one wins (see
// docs/design.md § Cluster mode for why nothing acknowledged is lost).
type batchDoc struct {
	Epoch   uint64    `json:"epoch"`
	Node    string    `json:"node"`
	First   uint64    `json:"first_seq"`
	Hashes  []byte    `json:"known_hashes,omitempty"`
	Records [][]byte  `json:"records,omitempty"`
	Seal    *sealMark `json:"seal,omitempty"`
}

// sealedDoc is cluster/sealed/<id>.json, written once the recording is
// published: every node answers its writes from it.
type sealedDoc struct {
	Root         string `json:"root"`
	Verdict      string `json:"verdict"`
	AckedThrough uint64 `json:"acked_through"`
}

// sealMark is a seal object's content: the sealed document, and what any
// node needs to publish the sealed recording (its segments and manifest
// are already in the shared store) should its sealer die first.
type sealMark struct {
	sealedDoc
	Meta json.RawMessage `json:"meta"`
	Plan json.RawMessage `json:"plan,omitempty"`
}

func batchKey(id string, first uint64) string {
	return fmt.Sprintf("%s%s/%020d", clusterBatches, id, first)
}

func newCluster(cfg Cluster, now func() time.Time, edge *httpx.Edge) *cluster {
	c := &cluster{cfg: cfg, leases: lease.New(cfg.Objects, clusterLeases, now), stop: make(chan struct{}), owners: map[string]lease.Lease{}, givenUp: map[string]time.Time{}}
	c.bg, c.stopBg = context.WithCancel(context.Background())
	transport := cfg.Proxy
	if transport == nil {
		// An owner that is paused accepts connections and never answers:
		// give up after a lease's life, by when a retry can take over.
		// Connections to the other nodes are kept and reused (each
		// proxied append would otherwise pay a TCP handshake), and bodies
		// pass as they came: the transport must not ask for, nor
		// decompress, a compressed reply.
		transport = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: cfg.TTL, KeepAlive: 30 * time.Second}).DialContext,
			ResponseHeaderTimeout: cfg.TTL,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true,
		}
	}
	c.proxy = &httputil.ReverseProxy{
		Transport:  transport,
		BufferPool: proxyBuffers{},
		Rewrite: func(pr *httputil.ProxyRequest) {
			target, _ := url.Parse(pr.In.Header.Get(proxiedHeader + "-To"))
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Del(proxiedHeader + "-To")
			pr.Out.Header.Set(proxiedHeader, cfg.Node)
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable {
				// The owner would not take it (it lost the recording,
				// or is busy): ask the lease again next time.
				c.forgetOwner(resp.Request.URL.Path)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The owner is unreachable (dead, paused): its lease will
			// lapse and the retry takes the recording over here.
			c.forgetOwner(r.URL.Path)
			edge.Fail(w, r, notOwner("its owning node did not answer"))
		},
	}
	return c
}

// proxyBuffers recycles the buffers a proxied body and reply are copied
// through (without a pool, httputil allocates 32 KiB per request, on the
// path two appends in three take behind a round-robin balancer).
type proxyBuffers struct{}

var proxyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (proxyBuffers) Get() []byte  { return *proxyBufPool.Get().(*[]byte) }
func (proxyBuffers) Put(b []byte) { proxyBufPool.Put(&b) }

// notOwner is the retryable refusal of a write this node cannot take now.
func notOwner(why string) error {
	e := wire.New(http.StatusServiceUnavailable, "OWNER_MOVING",
		"retry after the delay through the same URL; nothing of this request was acknowledged",
		"the recording is changing owner: %s", why)
	e.RetryAfter = 1
	return e
}

// clusterError maps a failure of the cluster's object store to the
// envelope (never its cause's text: it may name the bucket's endpoint).
func clusterError(err error) error {
	var e *wire.Error
	if errors.As(err, &e) {
		return e
	}
	e = wire.New(http.StatusServiceUnavailable, "STORAGE_UNAVAILABLE",
		"retry after the delay; nothing of this batch was acknowledged", "the shared object store did not answer")
	e.RetryAfter = 1
	return e
}

// clusterOpened makes a new recording's objects and takes its lease
// (epoch 1), before the open is answered.
func (s *Service) clusterOpened(ctx context.Context, r *recording, plan []byte, hashes []byte) error {
	c := s.cl
	data, err := json.Marshal(openDoc{Meta: r.meta, Plan: plan, Hashes: hashes})
	if err != nil {
		return err
	}
	if _, err := c.cfg.Objects.Put(ctx, clusterOpen+r.meta.ID+".json", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CreateOnly: true}); err != nil {
		return clusterError(err)
	}
	l, err := c.leases.Acquire(ctx, r.meta.ID, c.cfg.Advertise, c.cfg.TTL)
	if err != nil {
		return clusterError(err)
	}
	r.lease = l
	return nil
}

// putBatch writes an append's batch under its first seq, create-only,
// and checks afterwards that r's lease was still live: only then is it
// acknowledged. r.mu is held.
//
// Every writer writes at the key after the last seq of its log, and its
// log is exactly the objects before that key, so the objects form one
// chain and a taken key means this node's log is behind the chain (see
// keyTaken). A key is never replaced.
func (s *Service) putBatch(ctx context.Context, r *recording, recs []store.Record, hashes []byte) error {
	c := s.cl
	first := recs[0].Seq
	bin := make([][]byte, len(recs))
	for i := range recs {
		bin[i] = recs[i].AppendBinary(nil)
	}
	data, err := json.Marshal(batchDoc{Epoch: r.lease.Epoch, Node: c.cfg.Node, First: first, Hashes: hashes, Records: bin})
	if err != nil {
		return err
	}
	key := batchKey(r.meta.ID, first)
	_, err = c.cfg.Objects.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CreateOnly: true})
	if errors.Is(err, objstore.ErrExists) {
		b, err := s.readBatch(ctx, key)
		if err != nil {
			return err
		}
		return s.lostTo(r, b)
	}
	if err != nil {
		// It may have landed: the next write at this key finds it taken.
		return clusterError(err)
	}
	// The batch is on the chain whatever happens now. A node woken past
	// its lease (its put landed after a taker listed the chain) must not
	// acknowledge it though: that taker's own write at this key is
	// refused, and the recording's next owner rebuilds with this batch,
	// which holds the executor's own events at these seqs.
	if !s.live(r) {
		s.disown(r, "its lease lapsed before the batch was acknowledged")
		return notOwner("this node's lease lapsed")
	}
	return nil
}

// readBatch reads the object at a batch key.
func (s *Service) readBatch(ctx context.Context, key string) (batchDoc, error) {
	var b batchDoc
	raw, _, err := objstore.ReadAll(ctx, s.cl.cfg.Objects, key)
	if err != nil {
		return b, clusterError(err)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, fmt.Errorf("batch %s unreadable: %w", key, err)
	}
	return b, nil
}

// lostTo handles a create-only put of r's that found its key taken by b:
// this node's log is behind the recording's chain, so it drops the
// recording (the retry of the request is served by whoever owns it now,
// or takes it over from the objects, b included). A seal there means the
// recording is finished, and the refusal says so. r.mu is held.
func (s *Service) lostTo(r *recording, b batchDoc) error {
	if b.Seal != nil {
		s.disown(r, fmt.Sprintf("epoch %d by %s sealed it at seq %d", b.Epoch, b.Node, b.First))
		if b.Seal.Verdict == store.VerdictAborted {
			return aborted()
		}
		return finished()
	}
	s.disown(r, fmt.Sprintf("epoch %d by %s wrote seq %d", b.Epoch, b.Node, b.First))
	return notOwner("another node took it over")
}

// live says whether r's lease is live now, with a margin of a fifth of
// its TTL for the nodes' clocks. r.mu is held.
func (s *Service) live(r *recording) bool {
	return s.now().Before(r.lease.Expires.Add(-s.cl.cfg.TTL / 5))
}

// disown drops an open recording this node no longer owns (or whose
// seal it could not confirm): its local log is closed and its local copy
// removed (the recording lives on in the object store and with its new
// owner; a stale copy here would shadow it for reads on this node, its
// index locators running past this copy's end). The copy goes before r
// leaves s.open, so that a takeover here (claim, which runs only for a
// recording not open) never races the removal. r.mu is held.
func (s *Service) disown(r *recording, why string) {
	s.log.Warn("lost ownership of a recording", "recording", r.meta.ID, "epoch", r.lease.Epoch, "why", why)
	if !r.closed {
		r.log.Close()
		r.closed = true
	}
	s.dropLocal(r.meta.ID)
	s.mu.Lock()
	if s.open[r.meta.ID] == r {
		delete(s.open, r.meta.ID)
	}
	s.rememberGivenUp(r.meta.ID)
	s.mu.Unlock()
}

// givenUpFor is how long a node remembers a recording it disowned: far
// longer than a request admitted before the disown takes to reach its
// answer.
const givenUpFor = 10 * time.Minute

// rememberGivenUp notes that recording id was disowned here, and forgets
// the ones disowned more than givenUpFor ago. s.mu is held.
func (s *Service) rememberGivenUp(id string) {
	c := s.cl
	now := s.now()
	for k, at := range c.givenUp {
		if now.Sub(at) > givenUpFor {
			delete(c.givenUp, k)
		}
	}
	c.givenUp[id] = now
}

// goneError is the answer to a write for recording id found neither open
// nor sealed here: OWNER_MOVING when this node disowned it (the request
// was admitted while it was open here; its retry is proxied to the owner),
// else not found.
func (s *Service) goneError(id string) error {
	if err := s.givenUpError(id); err != nil {
		return err
	}
	return notFound(id)
}

// givenUpError is OWNER_MOVING when this node disowned recording id
// lately, else nil.
func (s *Service) givenUpError(id string) error {
	if s.cl == nil {
		return nil
	}
	s.mu.Lock()
	_, given := s.cl.givenUp[id]
	s.mu.Unlock()
	if given {
		return notOwner("this node gave it up while the request was read")
	}
	return nil
}

// clusterSealed makes the seal of r, sealed here (not yet published),
// the recording's for every node: the seal object at the key after its
// last acknowledged seq, create-only. Only if it lands (or is this
// node's own, from an earlier try) is the recording published, told
// every node (cluster/sealed/<id>.json), its lease released and its
// batches collected. A key found taken by a batch means another node
// acknowledged more: this node's seal is a stale copy, removed here, and
// the finish is refused as retryable (its retry reaches the owner). r.mu
// is held.
func (s *Service) clusterSealed(ctx context.Context, r *recording, root, verdict string) error {
	c := s.cl
	id := r.meta.ID
	meta, plan, err := s.st.SealedFiles(id)
	if err != nil {
		return storageError(err)
	}
	mark := &sealMark{sealedDoc: sealedDoc{Root: root, Verdict: verdict, AckedThrough: r.next - 1}, Meta: meta, Plan: plan}
	data, err := json.Marshal(batchDoc{Epoch: r.lease.Epoch, Node: c.cfg.Node, First: r.next, Seal: mark})
	if err != nil {
		return err
	}
	// The marker goes first: once the seal lands, the recording is
	// finished for every node, and only this node is about to index it.
	if err := s.markUnindexed(ctx, id); err != nil {
		return clusterError(err)
	}
	key := batchKey(id, r.next)
	_, err = c.cfg.Objects.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CreateOnly: true})
	if errors.Is(err, objstore.ErrExists) {
		var b batchDoc
		if b, err = s.readBatch(ctx, key); err == nil {
			// Ours, when a put answered as failed had landed: the same
			// seal, so go on. Anything else: this seal lost.
			if b.Seal == nil || b.Seal.Root != root || b.Seal.Verdict != verdict {
				s.lostTo(r, b)
				// The retry is answered by the winner (its seal, or the
				// new owner's log).
				err = notOwner("another node wrote its next seq first")
			}
		}
	}
	if err != nil {
		return clusterError(err)
	}
	if err := s.completeSeal(ctx, id, mark); err != nil {
		return clusterError(err)
	}
	s.releaseSealed(ctx, r.lease)
	s.collectLater(id, r.next)
	return nil
}

// completeSeal publishes a sealed recording from its seal object's mark
// (the segments and manifest are in the shared store already) and then
// writes cluster/sealed/<id>.json. Any node may, any number of times:
// the seal object is immutable, so every run writes the same.
func (s *Service) completeSeal(ctx context.Context, id string, m *sealMark) error {
	if err := s.st.PublishSealed(id, m.Root, m.Meta, m.Plan); err != nil {
		return err
	}
	data, _ := json.Marshal(m.sealedDoc)
	_, err := s.cl.cfg.Objects.Put(ctx, clusterSealed+id+".json", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
	return err
}

// releaseSealed releases the lease l of a sealed recording; a failure
// only leaves it to lapse.
func (s *Service) releaseSealed(ctx context.Context, l lease.Lease) {
	if err := s.cl.leases.Release(ctx, l); err != nil {
		s.log.Warn("releasing a sealed recording's lease failed (it lapses)", "recording", l.Name, "err", err)
	}
}

// dropLocal removes this node's copy of recording id (disown).
func (s *Service) dropLocal(id string) {
	if err := os.RemoveAll(s.st.Layout().Recording(id)); err != nil {
		s.log.Error("removing the stale copy of a recording failed", "recording", id, "err", err)
	}
}

// collectLater collects a published recording's batches in the
// background (collectCluster), under a context cancelled as the service
// closes.
func (s *Service) collectLater(id string, sealSeq uint64) {
	c := s.cl
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		if err := s.collectCluster(c.bg, id, sealSeq); err != nil {
			s.log.Warn("collecting a sealed recording's batches failed (a later write for it retries)", "recording", id, "err", err)
		}
	}()
}

// collectCluster deletes a published recording's batch objects, those
// before its seal object at sealSeq, then its open document. It runs only
// once cluster/sealed/<id>.json exists, so after the recording's ROOT is
// published: no reader needs them, and every write is answered from the
// sealed document before any takeover is tried. The seal object is kept
// for good (it is small): the key after the last acknowledged seq stays
// taken, so an owner that listed the chain before the seal landed can
// never append there. The open document goes last, so that leftovers of
// an interrupted collection are still found under the batch prefix.
func (s *Service) collectCluster(ctx context.Context, id string, sealSeq uint64) error {
	obj := s.cl.cfg.Objects
	sealKey := batchKey(id, sealSeq)
	// One request per 1,000 batches (a recording has one per append).
	if err := objstore.DeleteUnder(ctx, obj, clusterBatches+id+"/", func(key string) bool { return key >= sealKey }); err != nil {
		return err
	}
	return obj.Delete(ctx, clusterOpen+id+".json")
}

// claim is called for a write to a recording that is not open here. It
// answers the request itself (true: proxied to the owner, or refused), or
// takes the recording over and leaves it open here (false: serve it).
// finish is the verdict of a finish or abort ("" for an append).
func (s *Service) claim(w http.ResponseWriter, r *http.Request, id, finish string) bool {
	c := s.cl
	if !store.ValidRecordingID(id) {
		return false
	}
	owner, ok := c.cachedOwner(id, s.now())
	if !ok {
		var handled bool
		if owner, handled = s.claimLocked(w, r, id, finish); owner == "" {
			return handled
		}
	}
	if r.Header.Get(proxiedHeader) != "" {
		s.edge.Fail(w, r, notOwner("proxied here, but owned by another node"))
		return true
	}
	r.Header.Set(proxiedHeader+"-To", owner)
	c.proxy.ServeHTTP(w, r)
	return true
}

// cachedOwner is the owner this node last found holding recording id's
// lease, while that lease is live by what it read: appends that keep
// arriving at a non-owner (a round-robin balancer sends most of them to
// one) are proxied without reading the object store each time.
func (c *cluster) cachedOwner(id string, now time.Time) (string, bool) {
	c.ownersMu.Lock()
	defer c.ownersMu.Unlock()
	o, ok := c.owners[id]
	if ok && !now.Before(o.Expires) {
		delete(c.owners, id)
		ok = false
	}
	return o.Holder, ok
}

// forgetOwner drops the cached owner of the recording a proxied request
// named, when the owner did not answer or would not take it.
func (c *cluster) forgetOwner(path string) {
	// /v1/recordings/{id}/…
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 4)
	if len(parts) >= 3 {
		c.ownersMu.Lock()
		delete(c.owners, parts[2])
		c.ownersMu.Unlock()
	}
}

// claimLocked is claim's part under claimMu: it answers the request
// (handled), names the live owner to proxy to, or takes the recording
// over (both empty/false).
func (s *Service) claimLocked(w http.ResponseWriter, r *http.Request, id, finish string) (owner string, handled bool) {
	c := s.cl
	ctx := r.Context()
	c.claimMu.Lock()
	defer c.claimMu.Unlock()
	s.mu.Lock()
	_, here := s.open[id]
	_, sealedHere := s.sealed[id]
	s.mu.Unlock()
	if here || sealedHere {
		return "", false // taken over by a request that held claimMu before us
	}
	if s.answerSealed(w, r, id, finish) {
		return "", true
	}
	if _, err := c.cfg.Objects.Stat(ctx, clusterOpen+id+".json"); errors.Is(err, objstore.ErrNotExist) {
		return "", false // no such recording anywhere: the usual 404
	} else if err != nil {
		s.edge.Fail(w, r, clusterError(err))
		return "", true
	}
	l, err := c.leases.Acquire(ctx, id, c.cfg.Advertise, c.cfg.TTL)
	var held *lease.HeldError
	if errors.As(err, &held) {
		c.ownersMu.Lock()
		c.owners[id] = held.Lease
		c.ownersMu.Unlock()
		return held.Lease.Holder, false
	}
	if err != nil {
		s.edge.Fail(w, r, clusterError(err))
		return "", true
	}
	// The owner may have sealed it, released the lease and collected its
	// batches since the check above: a sealed recording is never taken
	// over (there may be nothing left to rebuild it from).
	if s.answerSealed(w, r, id, finish) {
		s.releaseSealed(ctx, l)
		return "", true
	}
	err = s.takeOver(ctx, id, l)
	var sealed *sealFound
	if errors.As(err, &sealed) {
		// Its seal object landed but cluster/sealed/<id>.json did not
		// (its sealer died, or is still publishing): finish the seal
		// here, as the sealer would have, and answer from it.
		s.releaseSealed(ctx, l)
		if err := s.completeSeal(ctx, id, sealed.mark); err != nil {
			s.edge.Fail(w, r, clusterError(err))
			return "", true
		}
		var meta store.RecordingMeta
		if json.Unmarshal(sealed.mark.Meta, &meta) == nil && meta.ID == id {
			s.proj.Put(store.RecordingRow{RecordingMeta: meta, State: store.StateFinished, Root: sealed.mark.Root})
		}
		s.proj.Notify(id, sealed.mark.AckedThrough)
		s.indexNow(ctx, id)
		s.answerFrom(w, r, sealed.mark.sealedDoc, finish)
		s.collectLater(id, sealed.mark.AckedThrough+1)
		return "", true
	}
	if err != nil {
		s.log.Error("taking over a recording failed", "recording", id, "epoch", l.Epoch, "err", err)
		s.edge.Fail(w, r, clusterError(err))
		return "", true
	}
	s.log.Info("took over a recording", "recording", id, "epoch", l.Epoch)
	return "", false
}

// answerSealed answers a write for recording id when
// cluster/sealed/<id>.json says it is sealed (a finish with its verdict
// gets the root again; anything else is refused), or a failure to read
// that document; false: not sealed, nothing was answered. A sealed
// recording's leftover batch objects (a collection cut short) are
// collected again.
func (s *Service) answerSealed(w http.ResponseWriter, r *http.Request, id, finish string) bool {
	raw, _, err := objstore.ReadAll(r.Context(), s.cl.cfg.Objects, clusterSealed+id+".json")
	if errors.Is(err, objstore.ErrNotExist) {
		return false
	}
	if err != nil {
		s.edge.Fail(w, r, clusterError(err))
		return true
	}
	var sd sealedDoc
	if err := json.Unmarshal(raw, &sd); err != nil {
		s.edge.Fail(w, r, fmt.Errorf("sealed document of %s unreadable: %w", id, err))
		return true
	}
	if finish == sd.Verdict {
		// A retried finish: its first answer may have been lost with
		// its node, before that node's projector indexed the recording.
		if meta, err := s.st.Meta(id); err == nil {
			s.proj.Put(store.RecordingRow{RecordingMeta: meta, State: store.StateFinished, Root: sd.Root})
		}
		s.proj.Notify(id, sd.AckedThrough)
		s.indexNow(r.Context(), id)
	}
	s.answerFrom(w, r, sd, finish)
	if err := s.collectCluster(r.Context(), id, sd.AckedThrough+1); err != nil {
		s.log.Warn("collecting a sealed recording's batches failed", "recording", id, "err", err)
	}
	return true
}

// indexNow has this node's projector index recording id now, before a
// finish of it is answered: a node indexes only what it appends, takes
// over, or answers a finish for, so a finished recording whose node is
// lost right after answering would otherwise wait for a reindex. It
// waits at most a lease's life. Once the index holds the recording, its
// cluster/unindexed marker is removed; an index that is down is caught
// up later by this node's projector, or, should this node be lost, by
// any node's catch-up (catchup.go), which finds the marker.
func (s *Service) indexNow(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, s.cl.cfg.TTL)
	defer cancel()
	if err := s.proj.Project(ctx, id); err != nil {
		s.log.Warn("indexing a finished recording before answering its finish failed (it is retried)", "recording", id, "err", err)
		return
	}
	s.indexed(ctx, id)
}

// answerFrom answers a write for a sealed recording: a finish with its
// verdict gets the root again; anything else is refused.
func (s *Service) answerFrom(w http.ResponseWriter, r *http.Request, sd sealedDoc, finish string) {
	if finish == sd.Verdict {
		httpx.JSON(w, http.StatusOK, wire.FinishReply{Root: sd.Root, AckedThrough: sd.AckedThrough})
	} else if sd.Verdict == store.VerdictAborted {
		s.edge.Fail(w, r, aborted())
	} else {
		s.edge.Fail(w, r, finished())
	}
}

// sealFound is takeOver's answer when the recording's chain ends in a
// seal object: it is finished, not to be taken over.
type sealFound struct{ mark *sealMark }

func (e *sealFound) Error() string { return "the recording is sealed (" + e.mark.Root + ")" }

// takeOver rebuilds recording id from its objects (open document, then
// every batch in seq order) into this node's data directory and opens it
// here under l.
func (s *Service) takeOver(ctx context.Context, id string, l lease.Lease) error {
	c := s.cl
	raw, _, err := objstore.ReadAll(ctx, c.cfg.Objects, clusterOpen+id+".json")
	if err != nil {
		return err
	}
	var od openDoc
	if err := json.Unmarshal(raw, &od); err != nil {
		return fmt.Errorf("open document: %w", err)
	}
	hashes := append([]byte(nil), od.Hashes...)
	var recs []store.Record
	next := uint64(1)
	for info, err := range c.cfg.Objects.List(ctx, clusterBatches+id+"/") {
		if err != nil {
			return err
		}
		data, _, err := objstore.ReadAll(ctx, c.cfg.Objects, info.Key)
		if err != nil {
			return err
		}
		var b batchDoc
		if err := json.Unmarshal(data, &b); err != nil {
			return fmt.Errorf("batch %s: %w", info.Key, err)
		}
		if b.Seal != nil {
			// Sealed (its sealer may have died before publishing):
			// never taken over; the caller completes the seal.
			return &sealFound{b.Seal}
		}
		if b.First > next {
			return fmt.Errorf("batch %s starts at seq %d, want %d", info.Key, b.First, next)
		}
		hashes = append(hashes, b.Hashes...)
		// Objects form one chain (each at the seq after the last one's
		// last), so a batch never overlaps the one before; records
		// before next would be skipped all the same.
		for _, raw := range b.Records {
			rec, err := store.DecodeRecord(raw)
			if err != nil {
				return fmt.Errorf("batch %s: %w", info.Key, err)
			}
			if rec.Seq == next {
				recs = append(recs, rec)
				next++
			}
		}
	}
	// A local copy (this node owned it before, or before a restart) is
	// stale: the objects are the recording.
	if err := os.RemoveAll(s.st.Layout().Recording(id)); err != nil {
		return err
	}
	if err := s.st.Create(od.Meta); err != nil {
		return err
	}
	if err := s.st.SavePlan(id, od.Plan); err != nil {
		return err
	}
	if err := s.st.AppendKnownHashes(id, hashes); err != nil {
		return err
	}
	lg, err := s.st.OpenLog(id)
	if err != nil {
		return err
	}
	for i := 0; i < len(recs); i += 1000 {
		if _, err := lg.Append(recs[i:min(i+1000, len(recs))]); err != nil {
			lg.Close()
			return err
		}
	}
	red, ts, err := s.rebuildRedactor(id)
	if err != nil {
		lg.Close()
		return err
	}
	video, err := resumeVideo(s.st, id, s.videoLimits())
	if err != nil {
		lg.Close()
		return err
	}
	rec := &recording{meta: od.Meta, red: red, log: lg, next: next, bytes: lg.Size(), video: video, ts: ts, lease: l}
	if len(recs) > 0 {
		rec.lastStep = recs[len(recs)-1].Step
	}
	rec.lastWrite.Store(s.now().UnixNano())
	s.mu.Lock()
	s.open[id] = rec
	s.mu.Unlock()
	s.proj.Put(store.RecordingRow{RecordingMeta: od.Meta, State: store.StateOpen})
	s.proj.Notify(id, next-1)
	return nil
}

// releaseOnClose gives up r's lease as the node stops (SIGTERM), so that
// the next write for it is taken over at once rather than after the
// lease's expiry. Nothing is written for r after this. r.mu is held.
func (s *Service) releaseOnClose(r *recording) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.cl.leases.Release(ctx, r.lease); err != nil {
		s.log.Warn("releasing a recording's lease at shutdown failed (it lapses)", "recording", r.meta.ID, "err", err)
	}
}

// every runs fn every d until the service closes (one of c.done).
func (c *cluster) every(d time.Duration, fn func()) {
	defer c.done.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		fn()
	}
}

// renewLeases renews the leases of the recordings open here (every
// TTL/3); one found lost (taken over while this node was paused or cut
// off) is disowned at once.
func (s *Service) renewLeases() {
	c := s.cl
	for _, r := range s.openRecordings() {
		r.mu.Lock()
		l, closed := r.lease, r.closed
		r.mu.Unlock()
		if closed {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.TTL/3)
		nl, err := c.leases.Renew(ctx, l, c.cfg.TTL)
		cancel()
		r.mu.Lock()
		switch {
		case r.closed || r.lease.Epoch != l.Epoch:
		case errors.Is(err, lease.ErrLost):
			s.disown(r, "its lease was taken over")
		case err != nil:
			s.log.Warn("renewing a recording's lease failed; retrying", "recording", r.meta.ID, "err", err)
		default:
			r.lease = nl
		}
		r.mu.Unlock()
	}
}
