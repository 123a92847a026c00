package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/flightrec/flightrec/store"
)

// Search answers substring queries over url, text and error_code through
// the text index events_fts (FTS5, trigram tokenizer), so a rare string
// costs what its matches cost, whatever the size of the store. The index
// only narrows, to the events having all the string's trigrams: the
// candidates then pass searchWhere, the condition the scan applies, so
// both paths give the same rows. The scan remains for what the index
// cannot answer:
//
//   - strings under ftsMinRunes characters (they have no trigram), not
//     valid UTF-8, or holding a NUL;
//   - queries with neither Text nor URL (recording, project, status and
//     error code narrow through indexes, then scan);
//   - strings so common that the candidates would outnumber
//     ftsMaxCandidates: a page of them is found sooner by the scan, which
//     reads in result order and stops when the page is full, than by
//     sorting every match;
//   - queries narrowed by recording or project to fewer events than the
//     string has candidates in the whole store;
//   - an index opened read-only at a schema version without events_fts.

// ftsMinRunes is the shortest string the trigram index can find.
const ftsMinRunes = 3

// ftsMaxCandidates bounds the rows the index path fetches and sorts; above
// it the scan is the faster way to a page (see Search).
const ftsMaxCandidates = 10_000

// Statements keeping events_fts in step with events. hasText: an event with
// no searchable text gets no doc, since no substring matches three empty
// fields.
const (
	hasText = `(url != '' OR text != '' OR error_code != '')`
	// insertDocsSQL gives every event with text a doc (the migration).
	insertDocsSQL = `INSERT INTO event_docs (rec, seq)
		SELECT rec, seq FROM events WHERE ` + hasText + ` ORDER BY rec, seq`
	// insertBatchDocsSQL gives the events of one batch's seq range their
	// docs; OR IGNORE skips the rows of the range indexed before.
	insertBatchDocsSQL = `INSERT OR IGNORE INTO event_docs (rec, seq)
		SELECT rec, seq FROM events WHERE rec = ?1 AND seq BETWEEN ?2 AND ?3 AND ` + hasText
	lastDocSQL = `SELECT coalesce(max(doc), 0) FROM event_docs`
	// deleteFTSSQL: the tokens of a recording's docs, by rowid.
	deleteFTSSQL  = `DELETE FROM events_fts WHERE rowid IN (SELECT doc FROM event_docs WHERE rec = ?)`
	deleteDocsSQL = `DELETE FROM event_docs WHERE rec = ?`
	// resetFTSSQL empties a contentless FTS5 table.
	resetFTSSQL = `INSERT INTO events_fts (events_fts) VALUES ('delete-all')`
	// optimizeFTSSQL merges every segment of events_fts into one. A
	// delete from a contentless_delete table only writes a tombstone: the
	// deleted doc's trigrams stay in their segment's b-tree (readable in the
	// file, and through fts5vocab) until a merge rewrites it. 'optimize' is
	// the merge that takes every segment, so none survives it.
	optimizeFTSSQL = `INSERT INTO events_fts (events_fts) VALUES ('optimize')`
)

// insertFTSSQL indexes the text of the docs numbered above after (a literal
// or a parameter).
func insertFTSSQL(after string) string {
	return `INSERT INTO events_fts (rowid, url, text, error_code)
		SELECT d.doc, e.url, e.text, e.error_code
		FROM event_docs d JOIN events e ON e.rec = d.rec AND e.seq = d.seq
		WHERE d.doc > ` + after
}

// indexText adds the text of the events of recording rid with seqs in
// [lo, hi] that have no doc yet; IndexEvents calls it in its transaction,
// after inserting them.
func indexText(ctx context.Context, tx *sql.Tx, rid int64, lo, hi uint64) error {
	var last int64
	if err := tx.QueryRowContext(ctx, lastDocSQL).Scan(&last); err != nil {
		return fmt.Errorf("text index: last doc: %w", err)
	}
	if _, err := tx.ExecContext(ctx, insertBatchDocsSQL, rid, int64(lo), int64(hi)); err != nil {
		return fmt.Errorf("text index: docs: %w", err)
	}
	if _, err := tx.ExecContext(ctx, insertFTSSQL(`?`), last); err != nil {
		return fmt.Errorf("text index: %w", err)
	}
	return nil
}

// ftsMaxTerms bounds the trigrams a query asks for: FTS5 nests an AND
// chain as deep as it is long (and refuses past 256), and a few dozen
// trigrams narrow as well as all of them.
const ftsMaxTerms = 32

// ftsTerms is the FTS5 query for the docs that have every trigram of s
// (at most ftsMaxTerms of them, spread over s): a superset of the docs
// with s as a substring in some column. Each trigram is a quoted string,
// in which every character but the double quote (doubled) is literal, so
// AND, OR, NEAR, *, ^, ':' and parentheses in s are text. ok is false for a
// string the index cannot find, and for one holding a NUL, where FTS5's
// query parser would stop (LIKE stops there too, and the scan keeps that).
func ftsTerms(s string) (query string, ok bool) {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", false
	}
	r := []rune(s)
	if len(r) < ftsMinRunes {
		return "", false
	}
	seen := map[string]bool{}
	var terms []string
	for i := 0; i+ftsMinRunes <= len(r); i++ {
		t := string(r[i : i+ftsMinRunes])
		if !seen[t] {
			seen[t] = true
			terms = append(terms, `"`+strings.ReplaceAll(t, `"`, `""`)+`"`)
		}
	}
	if len(terms) > ftsMaxTerms {
		spread := make([]string, ftsMaxTerms)
		for i := range spread {
			spread[i] = terms[i*(len(terms)-1)/(ftsMaxTerms-1)] // first and last included
		}
		terms = spread
	}
	return strings.Join(terms, " AND "), true
}

// ftsPlan is how the index narrows a query: rows whose docs match match,
// and, when bySignature, every row of a recording whose failure signature
// contains Text (Text matches those without any text of their own).
type ftsPlan struct {
	match       string
	bySignature bool
}

// planFTS returns the plan for q, ok false when the index cannot narrow it.
// Every row q matches is a candidate: Text is a substring of url, text or
// error_code (its trigrams, in the doc) or of the failure signature (the
// signature arm); URL one of url. With both, either one narrows enough;
// URL alone is used when Text may match by signature, since a match by
// signature need not have Text's trigrams anywhere.
func planFTS(q store.SearchQuery) (ftsPlan, bool) {
	text, textOK := ftsTerms(q.Text)
	url, urlOK := ftsTerms(q.URL)
	switch {
	case urlOK && textOK && q.EventsOnly:
		return ftsPlan{match: text + ` AND ` + url}, true
	case urlOK:
		return ftsPlan{match: url}, true
	case textOK:
		return ftsPlan{match: text, bySignature: !q.EventsOnly}, true
	}
	return ftsPlan{}, false
}

// signatureArm selects every event of the recordings whose failure
// signature contains the pattern: O(recordings) to find them, then their
// events' primary key ranges. Left to itself the planner would rather scan
// events and look each one's recording up; CROSS JOIN fixes the order.
const signatureArm = ` UNION SELECT e.rec, e.seq FROM recordings r CROSS JOIN events e ON e.rec = r.rid
	WHERE r.failure_signature LIKE ? ESCAPE '` + likeEscape + `'`

// estimateSQL counts a plan's candidates, up to just past the bound (the
// matching docs, plus the events of the recordings matching by signature),
// and the scan's scope: the events of the recordings q narrows to, or -1
// when it does not narrow by recording or project.
func (p ftsPlan) estimateSQL(q store.SearchQuery) (string, []any) {
	s := `SELECT (SELECT count(*) FROM (SELECT 1 FROM events_fts WHERE events_fts MATCH ? LIMIT ?))`
	args := []any{p.match, ftsMaxCandidates + 1}
	if p.bySignature {
		s += ` + (SELECT coalesce(sum(events), 0) FROM recordings WHERE failure_signature LIKE ? ESCAPE '` + likeEscape + `')`
		args = append(args, containsPattern(q.Text))
	}
	var where []string
	if q.Recordings != nil {
		where = append(where, `id IN (?`+strings.Repeat(`, ?`, len(q.Recordings)-1)+`)`)
		args = append(args, anys(q.Recordings)...)
	}
	if q.Project != "" {
		where = append(where, `project = ?`)
		args = append(args, q.Project)
	}
	if len(where) == 0 {
		return s + `, -1`, args
	}
	return s + `, (SELECT coalesce(sum(events), 0) FROM recordings WHERE ` + strings.Join(where, ` AND `) + `)`, args
}

// useFTS decides between the paths: the index's when its candidates are
// few, and fewer than the events the scan would read at most.
func (db *DB) useFTS(ctx context.Context, q store.SearchQuery) (ftsPlan, bool, error) {
	p, ok := planFTS(q)
	if !ok || !db.fts {
		return p, false, nil
	}
	var candidates, scope int64
	s, args := p.estimateSQL(q)
	if err := db.r.QueryRowContext(ctx, s, args...).Scan(&candidates, &scope); err != nil {
		return p, false, fmt.Errorf("count candidates: %w", err)
	}
	return p, candidates <= ftsMaxCandidates && (scope < 0 || candidates < scope), nil
}

// ftsSearchQuery builds the index path's SQL: the candidates (rec, seq),
// then their events by primary key, filtered by the scan's own condition.
// CROSS JOIN fixes the join order, so the planner cannot choose to scan
// events and probe the candidates instead.
func ftsSearchQuery(q store.SearchQuery, p ftsPlan) (string, []any) {
	s := `WITH hits (rec, seq) AS (SELECT d.rec, d.seq FROM events_fts
		JOIN event_docs d ON d.doc = events_fts.rowid WHERE events_fts MATCH ?`
	args := []any{p.match}
	if p.bySignature {
		s += signatureArm
		args = append(args, containsPattern(q.Text))
	}
	s += `) SELECT r.id, ` + eventCols + ` FROM hits h
		CROSS JOIN events e ON e.rec = h.rec AND e.seq = h.seq
		CROSS JOIN recordings r ON r.rid = e.rec`
	return searchTail(q, s, args)
}

// Search finds events across recordings, ordered by recording id and seq:
// through the text index when it can narrow the query (see the top of this
// file), else by the scan of searchQuery.
func (db *DB) Search(ctx context.Context, q store.SearchQuery) ([]store.EventRow, error) {
	if q.Recordings != nil && len(q.Recordings) == 0 {
		return nil, nil // restricted to no recording at all
	}
	p, ok, err := db.useFTS(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqlite index: search: %w", err)
	}
	sqlText, args := searchQuery(q)
	if ok {
		sqlText, args = ftsSearchQuery(q, p)
	}
	return db.runSearch(ctx, sqlText, args)
}

// scanSearch is Search by scanning alone, as before the text index: the
// benchmark's and the tests' reference.
func (db *DB) scanSearch(ctx context.Context, q store.SearchQuery) ([]store.EventRow, error) {
	sqlText, args := searchQuery(q)
	return db.runSearch(ctx, sqlText, args)
}

func (db *DB) runSearch(ctx context.Context, sqlText string, args []any) ([]store.EventRow, error) {
	out, err := db.queryEvents(ctx, sqlText, args, "")
	if err != nil {
		return nil, fmt.Errorf("sqlite index: search: %w", err)
	}
	return out, nil
}
