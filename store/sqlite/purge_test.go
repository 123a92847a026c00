package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/indextest"
)

// purgeSecret is the distinctive text of the deleted recording: mixed case,
// so the text index holds it folded and the file holds it as written, and
// with a character (purgeMark) no other text has, so every trigram holding
// it is the secret's and leaves its bytes in any segment that keeps it
// (terms are prefix-compressed, but the first term with the mark writes it).
const (
	purgeMark   = "ꙮ"
	purgeSecret = "Card 4111-" + purgeMark + "Quixotic-Zephyr-7731 declined"
)

// TestDeletePurgesText deletes a recording whose events hold purgeSecret
// and purges (PurgeDeleted, as a retention sweep does after its deletes)
// (and, separately, resets the index holding it) and then looks for what
// remains: the text index's own vocabulary must have none of the secret's
// trigrams that no kept event has (a tombstoned doc keeps its trigrams in
// its segment until a merge), and the secret's bytes must be in none of the
// index's files (freed pages, and WAL frames written before the delete).
func TestDeletePurgesText(t *testing.T) {
	for _, c := range []struct {
		name string
		del  func(context.Context, *DB) error
	}{
		{"DeleteRecording", func(ctx context.Context, db *DB) error {
			if err := db.DeleteRecording(ctx, "purge-gone"); err != nil {
				return err
			}
			return db.PurgeDeleted(ctx)
		}},
		{"Reset", func(ctx context.Context, db *DB) error { return db.Reset(ctx) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "index", "index.sqlite")
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					db.Close()
				}
			}()
			// A small recording indexed between a large one's batches, so
			// FTS5's merges put its docs in segments with the kept ones, a
			// few tombstones among many live entries: too few for FTS5 to
			// merge them away by itself (deletemerge).
			keep := indextest.BenchRows("purge-keep", 1, 3000)
			gone := indextest.BenchRows("purge-gone", 1, 20)
			for i := range gone {
				gone[i].Text = purgeSecret
				gone[i].URL = "https://shop.example/" + purgeSecret
			}
			for _, id := range []string{"purge-keep", "purge-gone"} {
				if err := db.PutRecording(ctx, store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: id}, State: store.StateFinished}); err != nil {
					t.Fatal(err)
				}
			}
			for from := 0; from < len(keep); from += 500 {
				if err := db.IndexEvents(ctx, "purge-keep", keep[from:from+500], uint64(from+500)); err != nil {
					t.Fatal(err)
				}
				if from == 1500 {
					if err := db.IndexEvents(ctx, "purge-gone", gone, uint64(len(gone))); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The trigrams only the deleted recording has. After Reset no
			// event is kept, so every trigram of the secret must go.
			kept := map[string]bool{}
			if c.name == "DeleteRecording" {
				for _, r := range keep {
					for _, f := range []string{r.URL, r.Text, r.ErrorCode} {
						for _, g := range trigrams(f) {
							kept[g] = true
						}
					}
				}
			}
			var unique []string
			for _, g := range trigrams(purgeSecret) {
				if !kept[g] {
					unique = append(unique, g)
				}
			}
			if len(unique) < 10 {
				t.Fatalf("fixture: only %d of the secret's trigrams are its own", len(unique))
			}
			vocab := vocabulary(t, path)
			for _, g := range unique {
				if !vocab[g] {
					t.Fatalf("fixture: trigram %q of the secret is not in the text index before the delete", g)
				}
			}
			if !fileHolds(t, path, purgeSecret) {
				t.Fatal("fixture: the secret is in no index file before the delete")
			}
			if n := segmentsHolding(t, path, purgeMark); n == 0 {
				t.Fatal("fixture: no segment of the text index holds the secret's trigrams")
			}

			if err := c.del(ctx, db); err != nil {
				t.Fatal(err)
			}

			vocab = vocabulary(t, path)
			for _, g := range unique {
				if vocab[g] {
					t.Errorf("the text index still lists the deleted text's trigram %q", g)
				}
			}
			if n := segmentsHolding(t, path, purgeMark); n != 0 {
				t.Errorf("%d blocks of the text index's segments still hold the deleted text's trigrams", n)
			}
			if fileHolds(t, path, purgeSecret) {
				t.Error("the deleted text is still in an index file")
			}
			closed = true
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if fileHolds(t, path, purgeSecret) {
				t.Error("the deleted text is in an index file after close")
			}
		})
	}
}

// trigrams are the case-folded 3-character windows of s, as the trigram
// tokenizer makes them (ASCII folding suffices for the fixture).
func trigrams(s string) []string {
	r := []rune(strings.ToLower(s))
	var out []string
	for i := 0; i+3 <= len(r); i++ {
		out = append(out, string(r[i:i+3]))
	}
	return out
}

// vocabulary lists the terms of events_fts through an fts5vocab table, on a
// connection of its own (the index's readers are query-only, and a vocab
// table is created in temp).
func vocabulary(t *testing.T, path string) map[string]bool {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	if _, err := conn.Exec(`CREATE VIRTUAL TABLE temp.fts_vocab USING fts5vocab(main, events_fts, 'row')`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(`SELECT term FROM temp.fts_vocab`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	terms := map[string]bool{}
	for rows.Next() {
		var term string
		if err := rows.Scan(&term); err != nil {
			t.Fatal(err)
		}
		terms[term] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return terms
}

// segmentsHolding counts the blocks of events_fts's segments whose bytes
// hold s. fts5vocab cannot show a tombstoned doc's terms (it reads through
// the tombstones), so this reads the segments themselves.
func segmentsHolding(t *testing.T, path, s string) int {
	t.Helper()
	conn, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM events_fts_data WHERE instr(block, CAST(? AS BLOB)) > 0`, s).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fileHolds reports whether the index file, its WAL or its shared-memory
// file holds s, as written or folded.
func fileHolds(t *testing.T, path, s string) bool {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(s)) || bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(s))) {
			t.Logf("%s holds %q", filepath.Base(p), s)
			return true
		}
	}
	return false
}

// TestCheckpointerTruncates: when purgeWAL cannot truncate the WAL itself,
// the background checkpointer does, and the deleted rows' old frames go
// with it.
func TestCheckpointerTruncates(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "index.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := indextest.BenchRows("ck-gone", 1, 50)
	rows[7].Text = purgeSecret
	if err := db.PutRecording(ctx, store.RecordingRow{RecordingMeta: store.RecordingMeta{ID: "ck-gone"}, State: store.StateFinished}); err != nil {
		t.Fatal(err)
	}
	if err := db.IndexEvents(ctx, "ck-gone", rows, 50); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRecording(ctx, "ck-gone"); err != nil {
		t.Fatal(err)
	}
	if !fileHolds(t, path, purgeSecret) {
		t.Fatal("fixture: the deleted text is in no file before the purge")
	}
	db.ck.truncateWAL()
	for i := 0; ; i++ {
		fi, err := os.Stat(path + "-wal")
		if err == nil && fi.Size() == 0 && !db.ck.truncate.Load() {
			break
		}
		if i == 500 {
			t.Fatal("the checkpointer never truncated the WAL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fileHolds(t, path, purgeSecret) {
		t.Error("the deleted text is still in an index file after the checkpointer's TRUNCATE")
	}
}
