package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/flightrec/flightrec/internal/app"
	"github.com/flightrec/flightrec/store"
	"github.com/flightrec/flightrec/store/layout"
	"github.com/flightrec/flightrec/wire"
)

// repairReport is what repair prints with --json.
type repairReport struct {
	Recording  string      `json:"recording"`
	Root       string      `json:"root"`
	Gaps       []store.Gap `json:"gaps"`
	Quarantine string      `json:"quarantine"`
}

// runRepair seals a recording whose log is damaged: the damaged bytes go to
// a quarantine file under the recording's directory, the recording is
// sealed with a manifest that lists the lost seqs as gaps, and it is
// indexed again. With --data it takes the data directory's lock (a running
// server holds it, so repair refuses and says so); with --server it asks
// the running server (POST /v1/recordings/{id}/repair, an admin token in
// FLIGHTREC_TOKEN).
func runRepair(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := newFlags("repair", "repair REC [--data DIR] [--index DSN] [--json]\n"+
		"       flightrec repair REC --server URL [--json]", errOut)
	var sc app.StoreConfig
	storeFlags(fs, &sc)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	server := serverFlag(fs, serverWhenTold, "repair through this running server instead of --data (token in FLIGHTREC_TOKEN)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	ids := fs.Args()
	if len(ids) != 1 || !store.ValidRecordingID(ids[0]) {
		printErr(errOut, *asJSON, wire.New(0, "USAGE", "flightrec repair REC --data DIR (REC as flightrec verify names it)",
			"repair takes one recording id"))
		return exitUsage
	}
	id := ids[0]
	if *server != "" {
		return repairThroughServer(ctx, *server, id, *asJSON, out, errOut)
	}
	st, idx, closeAll, err := openForWrite(sc, "repair")
	if err != nil {
		printErr(errOut, *asJSON, err)
		return exitFailure
	}
	defer closeAll()
	root, gaps, err := st.Repair(id)
	switch {
	case errors.Is(err, store.ErrNotDamaged):
		fmt.Fprintf(out, "recording %s is not damaged: nothing to repair\n", id)
		return exitOK
	case errors.Is(err, store.ErrFinished):
		fmt.Fprintf(out, "recording %s is finished: nothing to repair (flightrec verify checks it)\n", id)
		return exitOK
	case err != nil:
		printErr(errOut, *asJSON, wire.New(0, "REPAIR_FAILED", "see the message; flightrec verify --data DIR lists what is damaged", "%v", err))
		return exitFailure
	}
	// The records after a damaged region moved: index the recording anew.
	if err := idx.DeleteRecording(ctx, id); err == nil {
		err = st.IndexRecording(ctx, idx, id)
	}
	if err != nil {
		printErr(errOut, *asJSON, wire.New(0, "INDEX_FAILED", "run flightrec reindex --data DIR",
			"recording %s is repaired and sealed as %s, but indexing it failed: %v", id, root, err))
		return exitFailure
	}
	printRepair(out, *asJSON, repairReport{Recording: id, Root: root, Gaps: gaps,
		Quarantine: layout.Of(sc.Data).Quarantine(id)})
	return exitOK
}

func printRepair(out io.Writer, asJSON bool, rep repairReport) {
	if asJSON {
		printJSON(out, rep)
		return
	}
	fmt.Fprintf(out, "repaired %s: sealed as %s\n", rep.Recording, rep.Root)
	printGaps(out, rep.Gaps)
	fmt.Fprintf(out, "the damaged bytes are kept in %s\n", rep.Quarantine)
}

// repairThroughServer asks a running server to repair recording id.
func repairThroughServer(ctx context.Context, base, id string, asJSON bool, out, errOut io.Writer) int {
	body, err := callAPI(ctx, "POST", strings.TrimRight(base, "/")+wire.Path(wire.RouteRepair, id), nil)
	if e := (*wire.Error)(nil); errors.As(err, &e) && e.Code == "RECORDING_NOT_DAMAGED" {
		fmt.Fprintf(out, "recording %s is not damaged: nothing to repair\n", id)
		return exitOK
	}
	if err != nil {
		printErr(errOut, asJSON, err)
		return exitFailure
	}
	var rep app.RepairReply
	if err := json.Unmarshal(body, &rep); err != nil {
		printErr(errOut, asJSON, err)
		return exitFailure
	}
	printRepair(out, asJSON, repairReport{Recording: rep.Recording, Root: rep.Root, Gaps: rep.Gaps,
		Quarantine: layout.Of("DATA").Quarantine(id) + " on the server"})
	return exitOK
}
