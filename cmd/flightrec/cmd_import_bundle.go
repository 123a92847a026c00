package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/wire"
)

// runImportBundle is flightrec import bundle FILE.
func runImportBundle(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("import bundle", "import bundle [--data DIR] [--index DSN] [--json] FILE", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	file, code := parseOne(fs, args)
	if code >= 0 {
		return code
	}
	f, err := os.Open(file)
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "READ_FAILED", "check the file path", "%v", err))
		return exitFailure
	}
	defer f.Close()
	st, idx, closeAll, err := openForWrite(sc, "import bundle")
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer closeAll()
	id, root, err := st.ImportBundle(f)
	switch {
	case errors.Is(err, store.ErrBadBundle):
		printErr(errOut, *asJSON, wire.New(0, "MALFORMED_INPUT", "the bundle is damaged and nothing was installed; flightrec verify "+file+" lists the problems",
			"%s: %v", file, err))
		return exitUsage
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrOpen):
		printErr(errOut, *asJSON, wire.New(0, "RECORDING_EXISTS", "the data directory holds another recording of that id; import into another --data DIR",
			"%v", err))
		return exitFailure
	case err != nil:
		printErr(errOut, *asJSON, wire.New(0, "IMPORT_FAILED", "check the data directory", "%s: %v", file, err))
		return exitFailure
	}
	if err := st.IndexRecording(ctx, idx, id); err != nil {
		printErr(errOut, *asJSON, wire.New(0, "INDEX_FAILED", "the recording is stored; run flightrec reindex",
			"recording %s root %s was imported but not indexed: %v", id, root, err))
		return exitFailure
	}
	if *asJSON {
		printJSON(out, map[string]string{"id": id, "root": root})
		return exitOK
	}
	fmt.Fprintf(out, "imported %s root %s\n", id, root)
	return exitOK
}
