package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/flightrec/flightrec/event"
)

// StepGap is how long a HAR without pages may go quiet before the next
// request starts a new step.
const StepGap = 2 * time.Second

const harFormat = "HAR"

type harNameVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func (nv *harNameVersion) String() string {
	if nv == nil {
		return ""
	}
	return strings.TrimSpace(nv.Name + " " + nv.Version)
}

type harPage struct {
	ID              string `json:"id"`
	Title           string `json:"title"`
	StartedDateTime string `json:"startedDateTime"`
}

// harEntryHead is what the importer reads of an entry; the entry itself
// goes into the event whole.
type harEntryHead struct {
	StartedDateTime string   `json:"startedDateTime"`
	Time            *float64 `json:"time"`
	Pageref         string   `json:"pageref"`
}

// HAR reads a HAR 1.2 document (what Chrome DevTools' "Save all as HAR"
// writes: log.pages and log.entries, entries pointing at their page with
// pageref) and returns its events:
//
//   - seq 1, step 0: a meta event with the HAR's creator (versions.har_creator)
//     and browser (versions.engine), and labels imported_from=har, har_version;
//   - each page becomes a step, numbered 1… in the order of log.pages, starting
//     with a meta event labelled page_id and page_title; an entry goes to its
//     pageref's step (one without a known pageref to the last page started
//     before it, else step 1);
//   - without pages, entries are grouped by time: a request that starts more
//     than StepGap after every earlier one ended starts a new step;
//   - every entry becomes one har event, unchanged, at its startedDateTime;
//     in a step, events are in time order.
//
// An entry too large for one event loses its bodies (with a comment
// saying so). On any problem HAR returns an *InputError and no events.
func HAR(r io.Reader) ([]event.Envelope, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading the HAR: %w", err)
	}
	switch c := firstByte(data); {
	case c == 0:
		return nil, inputErr(harFormat, "the file is empty")
	case !json.Valid(data):
		var v any
		return nil, inputErr(harFormat, "%s", jsonProblem(data, json.Unmarshal(data, &v)))
	case c != '{':
		return nil, inputErr(harFormat, `a HAR file is a JSON object {"log": …}; this one holds %s`, jsonKind(c))
	}
	var doc struct {
		Log json.RawMessage `json:"log"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, inputErr(harFormat, "%s", jsonProblem(data, err))
	}
	if len(doc.Log) == 0 || string(doc.Log) == "null" {
		return nil, inputErr(harFormat, `no "log" member: not a HAR file`)
	}
	if firstByte(doc.Log) != '{' {
		return nil, inputErr(harFormat, "log must be an object")
	}
	var log struct {
		Version string          `json:"version"`
		Creator *harNameVersion `json:"creator"`
		Browser *harNameVersion `json:"browser"`
		Pages   json.RawMessage `json:"pages"`
		Entries json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(doc.Log, &log); err != nil {
		return nil, inputErr(harFormat, "log: %s", describe(err))
	}
	if len(log.Entries) == 0 || string(log.Entries) == "null" {
		return nil, inputErr(harFormat, "log.entries is missing: a HAR lists its requests there")
	}
	var entries []json.RawMessage
	if firstByte(log.Entries) != '[' || json.Unmarshal(log.Entries, &entries) != nil {
		return nil, inputErr(harFormat, "log.entries must be an array")
	}
	if len(entries) == 0 {
		return nil, inputErr(harFormat, "log.entries is empty: nothing to import")
	}
	var pages []harPage
	if len(log.Pages) > 0 && string(log.Pages) != "null" {
		if err := json.Unmarshal(log.Pages, &pages); err != nil {
			return nil, inputErr(harFormat, "log.pages must be an array of pages: %s", describe(err))
		}
	}

	// Pages: steps 1… in array order.
	pageStep := map[string]int{}
	type pageStart struct {
		step int
		ts   int64
	}
	var starts []pageStart
	var items []item
	for i, p := range pages {
		if p.ID == "" {
			return nil, inputErr(harFormat, "log.pages[%d]: id is missing", i)
		}
		if _, dup := pageStep[p.ID]; dup {
			return nil, inputErr(harFormat, "log.pages[%d]: its id is used by an earlier page", i)
		}
		pageStep[p.ID] = i + 1
		var ts int64
		if p.StartedDateTime != "" {
			t, err := parseHARTime(p.StartedDateTime)
			if err != nil {
				return nil, inputErr(harFormat, "log.pages[%d].startedDateTime: %v", i, err)
			}
			ts = t
			starts = append(starts, pageStart{i + 1, ts})
		}
		items = append(items, item{step: i + 1, ts: ts, pos: i, kind: event.KindMeta,
			data: rawJSON(event.Meta{Labels: map[string]string{"page_id": p.ID, "page_title": p.Title}})})
	}
	sort.SliceStable(starts, func(i, j int) bool { return starts[i].ts < starts[j].ts })

	type parsed struct {
		i    int
		ts   int64
		end  int64
		ref  string
		data json.RawMessage
	}
	ps := make([]parsed, len(entries))
	for i, raw := range entries {
		if firstByte(raw) != '{' {
			return nil, inputErr(harFormat, "log.entries[%d] must be an object", i)
		}
		var h harEntryHead
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, inputErr(harFormat, "log.entries[%d]: %s", i, describe(err))
		}
		if h.StartedDateTime == "" {
			return nil, inputErr(harFormat, "log.entries[%d].startedDateTime is missing", i)
		}
		ts, err := parseHARTime(h.StartedDateTime)
		if err != nil {
			return nil, inputErr(harFormat, "log.entries[%d].startedDateTime: %v", i, err)
		}
		end := ts
		if h.Time != nil && *h.Time > 0 {
			end += int64(*h.Time * float64(time.Millisecond))
		}
		raw, err = fitEntry(raw)
		if err != nil {
			return nil, inputErr(harFormat, "log.entries[%d]: %v", i, err)
		}
		if _, err := event.Decode(event.Envelope{Seq: 1, TS: ts, Kind: event.KindHAR, Data: raw}, event.DefaultLimits); err != nil {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "data."), "data: ")
			return nil, inputErr(harFormat, "log.entries[%d]: %s", i, msg)
		}
		ps[i] = parsed{i: i, ts: ts, end: end, ref: h.Pageref, data: raw}
	}

	if len(pages) > 0 {
		for _, p := range ps {
			step, ok := pageStep[p.ref]
			if !ok {
				step = 1
				for _, s := range starts {
					if s.ts <= p.ts {
						step = s.step
					}
				}
			}
			items = append(items, item{step: step, ts: p.ts, pos: len(pages) + p.i, kind: event.KindHAR, data: p.data})
		}
	} else {
		order := make([]parsed, len(ps))
		copy(order, ps)
		sort.SliceStable(order, func(i, j int) bool { return order[i].ts < order[j].ts })
		step, quietFrom := 1, order[0].end
		for k, p := range order {
			if k > 0 && p.ts-quietFrom > int64(StepGap) {
				step++
			}
			quietFrom = max(quietFrom, p.end)
			items = append(items, item{step: step, ts: p.ts, pos: p.i, kind: event.KindHAR, data: p.data})
		}
	}
	// A page meta without a start time takes its first entry's.
	firstTS := map[int]int64{}
	for _, it := range items {
		if it.kind == event.KindHAR && (firstTS[it.step] == 0 || it.ts < firstTS[it.step]) {
			firstTS[it.step] = it.ts
		}
	}
	for k := range items {
		if items[k].kind == event.KindMeta && items[k].ts == 0 {
			items[k].ts = firstTS[items[k].step]
		}
	}
	meta := event.Meta{Versions: map[string]string{}, Labels: map[string]string{"imported_from": "har"}}
	if s := log.Creator.String(); s != "" {
		meta.Versions["har_creator"] = s
	}
	if s := log.Browser.String(); s != "" {
		meta.Versions["engine"] = s
	}
	if log.Version != "" {
		meta.Labels["har_version"] = log.Version
	}
	if len(meta.Versions) == 0 {
		meta.Versions = nil
	}
	sortMetaFirst(items)
	return finish(harFormat, rawJSON(meta), items, false)
}

// sortMetaFirst orders items by step, then a step's meta first, then time,
// then input order, and renumbers their positions so that finish (told not
// to sort by time) keeps that order.
func sortMetaFirst(items []item) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.step != b.step {
			return a.step < b.step
		}
		if (a.kind == event.KindMeta) != (b.kind == event.KindMeta) {
			return a.kind == event.KindMeta
		}
		if a.ts != b.ts {
			return a.ts < b.ts
		}
		return a.pos < b.pos
	})
	for k := range items {
		items[k].pos = k
	}
}

// parseHARTime reads an ISO 8601 time as HAR writes it, to unix ns > 0.
func parseHARTime(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("not an ISO 8601 date and time")
	}
	if t.UnixNano() <= 0 {
		return 0, fmt.Errorf("before 1970")
	}
	return t.UnixNano(), nil
}

// describe says what is wrong with a JSON value without quoting it.
func describe(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("%s must be %s, not JSON %s", te.Field, goToJSON(te.Type.Kind().String()), te.Value)
	}
	return "not the expected shape"
}

func goToJSON(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a number"
}

// maxEntryBytes is the largest entry kept whole: the event limit less room
// for the envelope.
var maxEntryBytes = event.DefaultLimits.MaxEventBytes - 4096

// fitEntry leaves the bodies out of an entry too large for one event,
// saying so in a comment; an entry too large even without them is an
// error.
func fitEntry(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) <= maxEntryBytes {
		return raw, nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not an object")
	}
	note := fmt.Sprintf("body left out on import: the entry is %d bytes, over the event limit", len(raw))
	if rs, ok := m["response"].(map[string]any); ok {
		if c, ok := rs["content"].(map[string]any); ok {
			if _, has := c["text"]; has {
				delete(c, "text")
				delete(c, "encoding")
				c["comment"] = note
			}
		}
	}
	if rq, ok := m["request"].(map[string]any); ok {
		if pd, ok := rq["postData"].(map[string]any); ok {
			if _, has := pd["text"]; has {
				delete(pd, "text")
				delete(pd, "params")
				pd["comment"] = note
			}
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(out) > maxEntryBytes {
		return nil, fmt.Errorf("%d bytes even without bodies, over the event limit of %d", len(out), event.DefaultLimits.MaxEventBytes)
	}
	return out, nil
}
