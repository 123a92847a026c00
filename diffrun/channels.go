package diffrun

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flightrec/flightrec/event"
)

// maxListed bounds the examples one aggregated difference lists.
const maxListed = 3

// ---- network ----

// reqRel is a request's template relative to its run's origin.
func reqRel(q *Request, origin string) string {
	t := q.Template
	if t == "" {
		t = Template(q.URL)
	}
	if origin != "" && strings.HasPrefix(t, origin) {
		if o, rest := splitOrigin(t); o == origin {
			return rest
		}
	}
	return t
}

// Status classes beyond status/100.
const (
	classFailed  = 0  // no response: a network error
	classAborted = -1 // cancelled or aborted: the page moved on
	classUnknown = -2 // no status and no error recorded
)

func reqClass(q *Request) int {
	switch {
	case q.Status > 0 && q.Failed == "":
		return q.Status / 100
	case q.Failed != "" && aborted(q.Failed):
		return classAborted
	case q.Failed != "":
		return classFailed
	}
	return classUnknown
}

func aborted(f string) bool {
	f = strings.ToLower(f)
	return strings.Contains(f, "abort") || strings.Contains(f, "cancel")
}

func badClass(c int) bool { return c == classFailed || c >= 4 }

// fetchLike: a document, fetch or XHR-like request, whose failure is the
// application's (not an image, script or style; not /favicon.ico).
func fetchLike(q *Request) bool {
	switch strings.ToLower(q.Type) {
	case "document", "xhr", "fetch", "eventsource", "websocket":
		return true
	case "", "other":
		p := q.URL
		if i := strings.IndexAny(p, "?#"); i >= 0 {
			p = p[:i]
		}
		p = strings.ToLower(p)
		if strings.HasSuffix(p, "/favicon.ico") {
			return false
		}
		for _, ext := range staticExts {
			if strings.HasSuffix(p, ext) {
				return false
			}
		}
		return true
	}
	return false
}

var staticExts = []string{".js", ".mjs", ".css", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".avif",
	".ico", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".map", ".mp4", ".webm", ".mp3"}

// failing: an answer the application should not give: a 5xx, a network
// error (not an abort), or a 4xx document.
func failing(q *Request) bool {
	c := reqClass(q)
	return c == classFailed || c >= 5 || c == 4 && strings.EqualFold(q.Type, "document")
}

func statusText(q *Request) string {
	var s string
	switch c := reqClass(q); {
	case c == classFailed || c == classAborted:
		s = "failed " + q.Failed
	case c == classUnknown:
		s = "(no response)"
	default:
		s = strconv.Itoa(q.Status)
	}
	if q.ErrorCode != "" {
		s += " " + q.ErrorCode
	}
	return s
}

// network compares the requests of two steps, matched in order by method
// and URL template (relative to each run's origin). Material: a status
// class change into or out of a failure (2xx→5xx, 200→network error,
// 500→200, 404→500), another error code on an error answer, and a new
// document/fetch/XHR request that fails. New successful requests, missing
// requests and changes within a class (200→304) are reported, never
// material. Then the WebSocket messages that went during the steps
// (socketMessages), material between two aligned steps; a step only one
// run has is the difference itself, so its messages are reported only.
func (d *differ) network(diffs []Difference, x, y *Step) []Difference {
	diffs = d.requests(diffs, x, y)
	return socketMessages(diffs, x.Sockets, y.Sockets, x != &emptyStep && y != &emptyStep)
}

func (d *differ) requests(diffs []Difference, x, y *Step) []Difference {
	ra, rb := x.Requests, y.Requests
	if len(ra) == 0 && len(rb) == 0 {
		return diffs
	}
	// Fast path: the same requests in the same order with the same answers.
	if len(ra) == len(rb) {
		same := true
		for k := range ra {
			qa, qb := &ra[k], &rb[k]
			if qa.Method != qb.Method || qa.Status != qb.Status || qa.ErrorCode != qb.ErrorCode ||
				qa.Failed != qb.Failed || reqRel(qa, d.oa) != reqRel(qb, d.ob) {
				same = false
				break
			}
		}
		if same {
			return diffs
		}
	}
	used := make([]bool, len(rb))
	var statusChanged, missing, added []string
	for k := range ra {
		qa := &ra[k]
		ka := reqRel(qa, d.oa)
		m := -1
		for l := range rb {
			if !used[l] && rb[l].Method == qa.Method && reqRel(&rb[l], d.ob) == ka {
				m = l
				break
			}
		}
		if m < 0 {
			missing = append(missing, qa.Method+" "+ka+" "+statusText(qa))
			continue
		}
		used[m] = true
		qb := &rb[m]
		ca, cb := reqClass(qa), reqClass(qb)
		if qa.Status == qb.Status && qa.ErrorCode == qb.ErrorCode && ca == cb {
			continue
		}
		detail := qa.Method + " " + ka + " " + statusText(qa) + " → " + statusText(qb)
		material := ca >= classFailed && cb >= classFailed &&
			(ca != cb && (badClass(ca) || badClass(cb)) ||
				badClass(ca) && badClass(cb) && qa.ErrorCode != qb.ErrorCode)
		if material {
			diffs = append(diffs, Difference{ChannelNetwork, "status", detail, true})
		} else {
			statusChanged = append(statusChanged, detail)
		}
	}
	for l := range rb {
		if used[l] {
			continue
		}
		qb := &rb[l]
		desc := qb.Method + " " + reqRel(qb, d.ob) + " " + statusText(qb)
		if failing(qb) && fetchLike(qb) {
			diffs = append(diffs, Difference{ChannelNetwork, "new_failed_request", "new request " + desc, true})
		} else {
			added = append(added, desc)
		}
	}
	diffs = appendListed(diffs, ChannelNetwork, "status", "", statusChanged, false)
	diffs = appendListed(diffs, ChannelNetwork, "new_requests", "new: ", added, false)
	diffs = appendListed(diffs, ChannelNetwork, "missing_requests", "missing: ", missing, false)
	return diffs
}

// messageKey is what a WebSocket message is compared by: direction,
// opcode and normalized payload (NormalizeText: ids, times and tokens
// become placeholders).
func messageKey(m event.WebSocketMessage) string {
	return m.Type + " " + strconv.Itoa(m.Opcode) + " " + NormalizeText(m.Data)
}

// socketMessages compares the WebSocket messages of two steps as
// multisets: a message one run has and the other lacks is a difference
// (the socket told the page something else, or the page said something
// else), material when the steps are aligned.
func socketMessages(diffs []Difference, a, b []string, material bool) []Difference {
	if slices.Equal(a, b) {
		return diffs
	}
	count := map[string]int{}
	for _, k := range a {
		count[k]++
	}
	var added []string
	for _, k := range b {
		if count[k] > 0 {
			count[k]--
		} else {
			added = append(added, k)
		}
	}
	var missing []string
	for _, k := range a {
		if count[k] > 0 {
			count[k]--
			missing = append(missing, k)
		}
	}
	diffs = appendListed(diffs, ChannelNetwork, "socket_messages", "new message ", added, material)
	return appendListed(diffs, ChannelNetwork, "socket_messages", "missing message ", missing, material)
}

// listed joins up to maxListed items, saying how many more there are.
func listed(prefix string, items []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for k, s := range items {
		if k == maxListed {
			fmt.Fprintf(&b, " (+%d more)", len(items)-maxListed)
			break
		}
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// ---- console ----

func consoleKey(c *ConsoleLine, origin string) (key string, isErr bool) {
	n := c.Normalized
	if n == "" {
		n = NormalizeText(c.Text)
	}
	n = stripOrigin(n, origin)
	isErr = c.Level != "warn" && c.Level != "warning"
	if isErr {
		return "error\x00" + n, true
	}
	return "warn\x00" + n, false
}

func consoleText(key string) string {
	_, t, _ := strings.Cut(key, "\x00")
	return strconv.Quote(clip(t, 200))
}

// console compares error-level console messages (error, exception,
// assert) and warnings, normalized. A new error in b is material, unless a
// logged the same in the step before or after (the message moved by a
// step); vanished errors and warnings are reported, never material.
func (d *differ) console(diffs []Difference, x, y *Step, na, nb int) []Difference {
	ca, cb := x.Console, y.Console
	if len(ca) == 0 && len(cb) == 0 {
		return diffs
	}
	ka := make([]string, len(ca))
	for k := range ca {
		ka[k], _ = consoleKey(&ca[k], d.oa)
	}
	used := make([]bool, len(ca))
	var moved, warns []string
	for l := range cb {
		key, isErr := consoleKey(&cb[l], d.ob)
		found := false
		for k := range ka {
			if !used[k] && ka[k] == key {
				used[k], found = true, true
				break
			}
		}
		if found {
			continue
		}
		switch {
		case !isErr:
			warns = append(warns, consoleText(key))
		case d.aHasConsole(na, key) || d.aHasConsole(nb, key):
			moved = append(moved, consoleText(key))
		default:
			diffs = append(diffs, Difference{ChannelConsole, "new_error", "new console " + levelOf(&cb[l]) + " " + consoleText(key), true})
		}
	}
	var vanished []string
	for k := range ka {
		if !used[k] && strings.HasPrefix(ka[k], "error\x00") {
			vanished = append(vanished, consoleText(ka[k]))
		}
	}
	diffs = appendListed(diffs, ChannelConsole, "moved_error", "logged a step earlier or later in a: ", moved, false)
	diffs = appendListed(diffs, ChannelConsole, "new_warning", "new warning: ", warns, false)
	diffs = appendListed(diffs, ChannelConsole, "vanished_error", "gone: ", vanished, false)
	return diffs
}

func levelOf(c *ConsoleLine) string {
	if c.Level == "" {
		return "error"
	}
	return c.Level
}

func (d *differ) aHasConsole(i int, key string) bool {
	if i < 0 || i >= len(d.a.Steps) {
		return false
	}
	s := &d.a.Steps[i]
	for k := range s.Console {
		if kk, _ := consoleKey(&s.Console[k], d.oa); kk == key {
			return true
		}
	}
	return false
}

// ---- checks ----

func checkKey(c *Check, origin string) string {
	return c.Type + " " + strconv.Quote(stripOrigin(NormalizeText(c.Target), origin))
}

// checks compares checks matched in order by type and target. A check
// that passed in a and fails in b, or a failing check only b has, is
// material; a check that now passes, or one b lacks, is not.
func (d *differ) checks(diffs []Difference, x, y *Step) []Difference {
	if len(x.Checks) == 0 && len(y.Checks) == 0 {
		return diffs
	}
	ka := make([]string, len(x.Checks))
	for k := range x.Checks {
		ka[k] = checkKey(&x.Checks[k], d.oa)
	}
	used := make([]bool, len(ka))
	for l := range y.Checks {
		cb := &y.Checks[l]
		key := checkKey(cb, d.ob)
		m := -1
		for k := range ka {
			if !used[k] && ka[k] == key {
				m = k
				break
			}
		}
		if m < 0 {
			if cb.Passed {
				diffs = append(diffs, Difference{ChannelCheck, "new_check", "new check " + key + " passed", false})
			} else {
				diffs = append(diffs, Difference{ChannelCheck, "new_failed_check", "new check " + key + " failed", true})
			}
			continue
		}
		used[m] = true
		ca := &x.Checks[m]
		switch {
		case ca.Passed && !cb.Passed:
			diffs = append(diffs, Difference{ChannelCheck, "failed", "check " + key + " passed → failed", true})
		case !ca.Passed && cb.Passed:
			diffs = append(diffs, Difference{ChannelCheck, "fixed", "check " + key + " failed → passed", false})
		}
	}
	for k := range ka {
		if !used[k] {
			diffs = append(diffs, Difference{ChannelCheck, "missing_check", "check " + ka[k] + " not in b", false})
		}
	}
	return diffs
}

// ---- interactive snapshot ----

// snapshot is a parsed interactive snapshot: its normalized lines and, to
// compare quickly, their canonical text.
type snapshot struct {
	lines []snapLine
	canon string
}

func (d *differ) parsed(cache map[string]*snapshot, text string) *snapshot {
	if s, ok := cache[text]; ok {
		return s
	}
	s := &snapshot{lines: parseSnapLines(text, d.lines)}
	n := 0
	for _, l := range s.lines {
		n += len(l.Key) + len(l.Rest) + 2
	}
	var b strings.Builder
	b.Grow(n)
	for _, l := range s.lines {
		b.WriteString(l.Key)
		b.WriteByte(' ')
		b.WriteString(l.Rest)
		b.WriteByte('\n')
	}
	s.canon = b.String()
	cache[text] = s
	return s
}

// lineGroup is the lines of one element (role and name) of a snapshot.
type lineGroup struct {
	rests      []string
	actionable bool
}

// groupLines groups a snapshot's lines by element, keys in first-seen
// order.
func groupLines(lines []snapLine) (map[string]*lineGroup, []string) {
	groups := make(map[string]*lineGroup, len(lines))
	var order []string
	for _, l := range lines {
		g := groups[l.Key]
		if g == nil {
			g = &lineGroup{}
			groups[l.Key] = g
			order = append(order, l.Key)
		}
		g.rests = append(g.rests, l.Rest)
		g.actionable = g.actionable || l.Actionable
	}
	return groups, order
}

// snapshot compares the interactive views after two steps, element by
// element (role and name). Material: an actionable element of a that b
// does not have at all, or that b shows disabled where a did not. New
// elements, context lines (headings, alerts), fewer or more of the same
// element and other state or value changes are reported, never material.
// Nor is any difference of an observed step (an attached recording's):
// its view was read at another moment than the driven step's, so what it
// lacks may be the next step's doing.
func (d *differ) snapshot(diffs []Difference, x, y *Step) []Difference {
	from := len(diffs)
	diffs = d.snapshotViews(diffs, x, y)
	if x.Observed || y.Observed {
		for k := from; k < len(diffs); k++ {
			diffs[k].Material = false
		}
	}
	return diffs
}

func (d *differ) snapshotViews(diffs []Difference, x, y *Step) []Difference {
	if x.Interactive == "" || y.Interactive == "" {
		return diffs
	}
	sa, sb := d.parsed(d.snapA, x.Interactive), d.parsed(d.snapB, y.Interactive)
	if sa.canon == sb.canon {
		return diffs
	}
	ga, order := groupLines(sa.lines)
	gb, orderB := groupLines(sb.lines)
	var missing, gone, added, count, changed, disabled []string
	for _, k := range order {
		g, h := ga[k], gb[k]
		switch {
		case h == nil && g.actionable:
			missing = append(missing, k)
		case h == nil:
			gone = append(gone, k)
		case len(g.rests) != len(h.rests):
			count = append(count, fmt.Sprintf("%s ×%d → ×%d", k, len(g.rests), len(h.rests)))
		case len(g.rests) == 1 && g.rests[0] != h.rests[0]:
			desc := k + ": " + orNone(g.rests[0]) + " → " + orNone(h.rests[0])
			if g.actionable && hasState(h.rests[0], "disabled") && !hasState(g.rests[0], "disabled") {
				disabled = append(disabled, desc)
			} else {
				changed = append(changed, desc)
			}
		case len(g.rests) > 1 && !sameMultiset(g.rests, h.rests):
			changed = append(changed, k+" (states or values)")
		}
	}
	for _, k := range orderB {
		if ga[k] == nil {
			added = append(added, k)
		}
	}
	diffs = appendListed(diffs, ChannelSnapshot, "missing_element", "missing ", missing, true)
	diffs = appendListed(diffs, ChannelSnapshot, "disabled_element", "now disabled: ", disabled, true)
	diffs = appendListed(diffs, ChannelSnapshot, "changed_element", "changed: ", changed, false)
	diffs = appendListed(diffs, ChannelSnapshot, "element_count", "", count, false)
	diffs = appendListed(diffs, ChannelSnapshot, "new_element", "new: ", added, false)
	diffs = appendListed(diffs, ChannelSnapshot, "context_gone", "gone: ", gone, false)
	return diffs
}

// hasState reports whether a line's rest (states, then value="…") has
// the state word w.
func hasState(rest, w string) bool {
	if i := strings.Index(rest, `value="`); i >= 0 {
		rest = rest[:i]
	}
	for f := range strings.FieldsSeq(rest) {
		if f == w {
			return true
		}
	}
	return false
}

func sameMultiset(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]int, len(a))
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		if m[s] == 0 {
			return false
		}
		m[s]--
	}
	return true
}

// appendListed adds one difference listing items, when there are any.
func appendListed(diffs []Difference, channel, kind, prefix string, items []string, material bool) []Difference {
	if len(items) == 0 {
		return diffs
	}
	return append(diffs, Difference{channel, kind, listed(prefix, items), material})
}
