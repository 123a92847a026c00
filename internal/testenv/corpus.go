package testenv

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	_ "modernc.org/sqlite" // the "sqlite" driver, to dump the index logically

	"github.com/flightrec/flightrec/store/blobs"
)

// Corpus is every byte a secret search looks at, by where it came from:
// files, index rows, API replies, log lines. Redaction tests fill it and
// ask Hits for every spelling of every secret.
type Corpus map[string][]byte

// Snapshot lists the corpus's byte slices.
func (c Corpus) Snapshot() [][]byte {
	out := make([][]byte, 0, len(c))
	for _, b := range c {
		out = append(out, b)
	}
	return out
}

// FollowCIDs calls fetch for every blob CID the corpus names, again for
// those the fetched bytes name, until no CID is new; it returns how many it
// fetched. fetch adds what it reads to the corpus.
func (c Corpus) FollowCIDs(fetch func(cid string)) int {
	fetched := map[string]bool{}
	for more := true; more; {
		more = false
		for _, b := range c.Snapshot() {
			for _, cid := range cidRE.FindAllString(string(b), -1) {
				if !fetched[cid] {
					fetched[cid] = true
					fetch(cid)
					more = true
				}
			}
		}
	}
	return len(fetched)
}

var cidRE = regexp.MustCompile(`bafkrei[a-z2-7]{52}`)

// Size is the corpus's total size in bytes.
func (c Corpus) Size() int {
	n := 0
	for _, b := range c {
		n += len(b)
	}
	return n
}

// Count is how many places start with prefix.
func (c Corpus) Count(prefix string) int {
	n := 0
	for k := range c {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// AddFiles reads every regular file under dir, and the decompressed
// contents of any that are gzip, zstd or a seekable compressed blob (a
// sealed segment), so compression cannot hide a hit.
func (c Corpus) AddFiles(t testing.TB, dir, when string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		c["file "+rel+" ("+when+")"] = b
		if plain := decompress(b); plain != nil {
			c["file "+rel+" ("+when+", decompressed)"] = plain
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func decompress(b []byte) []byte {
	// A sealed segment is a seekable blob: zstd frames behind a marker,
	// so it does not start with zstd's magic.
	if plain, err := blobs.DecodeSeekable(b); err == nil {
		return plain
	}
	switch {
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil
		}
		out, _ := io.ReadAll(io.LimitReader(zr, 256<<20))
		return out
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil
		}
		defer d.Close()
		out, _ := d.DecodeAll(b, nil)
		return out
	}
	return nil
}

// AddSQLite dumps every row of every table of the index: a value that
// spans SQLite's overflow pages is split in the raw file, not here.
func (c Corpus) AddSQLite(t testing.TB, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	for _, tb := range tables {
		var dump bytes.Buffer
		rs, err := db.Query(`SELECT * FROM "` + strings.ReplaceAll(tb, `"`, `""`) + `"`)
		if err != nil {
			continue // a virtual table whose module is not loaded: its shadow tables are dumped
		}
		cols, _ := rs.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rs.Next() {
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case []byte:
					dump.Write(v)
				default:
					fmt.Fprint(&dump, v)
				}
				dump.WriteByte(0)
			}
		}
		rs.Close()
		c["index table "+tb] = dump.Bytes()
	}
}

// SecretForms are the spellings a secret survives in, by name: as is,
// URL-encoded, JSON-escaped (once, and again as JSON inside a JSON string),
// and base64 (std and URL alphabets) alone and at each of the
// three alignments it can take inside a longer base64 text (a base64
// response body).
func SecretForms(secret string) (names, forms []string) {
	add := func(name, f string) {
		for _, g := range forms {
			if g == f {
				return
			}
		}
		names, forms = append(names, name), append(forms, f)
	}
	add("plain", secret)
	add("query-escaped", url.QueryEscape(secret))
	add("path-escaped", url.PathEscape(secret))
	if j, err := json.Marshal(secret); err == nil {
		add("json-escaped", string(j[1:len(j)-1]))
		add("json-escaped twice", strings.Trim(strconv.Quote(string(j[1:len(j)-1])), `"`))
	}
	for _, enc := range []struct {
		name string
		enc  *base64.Encoding
	}{{"base64", base64.StdEncoding}, {"base64url", base64.URLEncoding}} {
		add(enc.name, enc.enc.EncodeToString([]byte(secret)))
		for k := 0; k < 3; k++ {
			b := enc.enc.EncodeToString(append(make([]byte, k), secret...))
			// The characters free of the neighbouring bytes' bits.
			lo, hi := (k*8+5)/6, (k+len(secret))*8/6
			if hi-lo >= 8 {
				add(fmt.Sprintf("%s inside (offset %d)", enc.name, k), b[lo:hi])
			}
		}
	}
	return names, forms
}

// Hits names every place any form of any secret appears. A secret is
// named by its label, so the output repeats no value.
func (c Corpus) Hits(secrets, labels []string) []string {
	var out []string
	for i, s := range secrets {
		names, forms := SecretForms(s)
		for fi, f := range forms {
			for where, b := range c {
				if n := bytes.Count(b, []byte(f)); n > 0 {
					out = append(out, fmt.Sprintf("%s (%s): %d× in %s", labels[i], names[fi], n, where))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
