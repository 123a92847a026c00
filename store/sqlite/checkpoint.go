package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"time"
)

// SQLite's default is to checkpoint inside the commit that grows the WAL
// past 1,000 pages: that commit then copies the WAL into the database file
// and fsyncs both, stalling IndexEvents for the duration. The writer turns
// automatic checkpoints off and this goroutine does them instead, on its own
// connection, so the copying and syncing overlap with the next batches.
const (
	// checkpointDelay lets a burst of commits share one checkpoint, so
	// pages they all touch (index interiors, steps, the recording row) are
	// copied once.
	checkpointDelay = 200 * time.Millisecond
	// restartFrames bounds the WAL. A PASSIVE checkpoint never waits, so
	// under continuous writes it may never catch up with the end of the WAL,
	// which is only reused from the start once fully checkpointed; past this
	// many frames (64 MiB of 4 KiB pages) a RESTART checkpoint waits for the
	// writer, so the next transaction starts the WAL over.
	restartFrames = 16384
)

type checkpointer struct {
	conn *sql.DB
	// truncate: a purge wants the WAL cut to nothing (purgeWAL) and could
	// not do it itself; the next checkpoints are TRUNCATE until one is.
	truncate atomic.Bool
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

func startCheckpointer(conn *sql.DB) *checkpointer {
	c := &checkpointer{conn: conn, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// truncateWAL asks for TRUNCATE checkpoints until one succeeds. It never
// blocks.
func (c *checkpointer) truncateWAL() {
	c.truncate.Store(true)
	c.wrote()
}

// wrote tells the checkpointer that a transaction committed. It never
// blocks.
func (c *checkpointer) wrote() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	mode := "PASSIVE"
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointDelay):
		}
		truncate := c.truncate.Load()
		if truncate {
			mode = "TRUNCATE"
		}
		var busy, frames, copied int
		// PRAGMA takes no bound parameters; mode is one of three constants.
		err := c.conn.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(`+mode+`)`).
			Scan(&busy, &frames, &copied)
		if truncate {
			if err != nil || busy != 0 {
				// A reader (or another checkpoint) still holds the WAL:
				// try again after the delay, whether or not a commit comes.
				c.wrote()
				continue
			}
			c.truncate.Store(false)
		}
		if err != nil {
			// The next commit retries; until then the WAL just grows.
			slog.Warn("sqlite index: checkpoint failed", "mode", mode, "err", err)
			continue
		}
		mode = "PASSIVE"
		if frames > restartFrames {
			mode = "RESTART"
			c.wrote() // do it now rather than at the next commit
		}
	}
}

// close stops the goroutine. Closing the last connection then checkpoints
// whatever remains.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.conn.Close()
}
