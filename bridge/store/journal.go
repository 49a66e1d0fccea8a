package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// JournalName is the value journal's name inside the data directory.
const JournalName = "switch-values.journal"

// Journal is an append-only file of switch values, so that a command's new
// values are durable before it is answered at the cost of one write(2)
// rather than a SQLite transaction: like the database's WAL with
// synchronous=NORMAL it survives a crash or kill -9 of the process (the
// data is in the kernel's page cache), not a power cut in the same instant.
// The daemon folds the journal into the database in batches (Compact) and
// replays it at start-up (Replay). Only the daemon uses it: the
// administration commands never touch switch values.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	size int64 // the file's length: only this Journal writes it
}

// OpenJournal opens (creating) the journal in dataDir.
func OpenJournal(dataDir string) (*Journal, error) {
	path := filepath.Join(dataDir, JournalName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("value journal: %w", err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("value journal: %w", err)
	}
	return &Journal{f: f, path: path, size: size}, nil
}

// Append writes values in one write. A line is "<unix ms> <value> <switch
// id>": switch ids have no spaces (config.SwitchIDPattern).
func (j *Journal) Append(vs []SwitchValue) error {
	if len(vs) == 0 {
		return nil
	}
	var b []byte
	for _, v := range vs {
		b = strconv.AppendInt(b, unix(v.At), 10)
		b = append(b, ' ')
		b = append(b, v.Value...)
		b = append(b, ' ')
		b = append(b, v.SwitchID...)
		b = append(b, '\n')
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(b); err != nil {
		// A short write (a full disk) would leave a line without its
		// newline, which would swallow the next line appended.
		j.f.Truncate(j.size)
		return err
	}
	j.size += int64(len(b))
	return nil
}

// Replay folds what the journal holds into db, in the order it was written
// (everything in the journal is newer than the database: each batch
// written to the database empties it), and empties the journal. A torn
// last line, from a process killed in the middle of a write, is skipped.
func (j *Journal) Replay(db *DB) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	vs := parseJournal(j.f)
	if err := db.SaveSwitchValues(context.Background(), vs); err != nil {
		return 0, err
	}
	return len(vs), j.truncateLocked()
}

// Compact empties the journal. Call it only after everything appended so
// far has been saved in the database, with no Append in between.
func (j *Journal) Compact() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.truncateLocked()
}

func (j *Journal) truncateLocked() error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	j.size = 0
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// ReadJournal returns the values in the journal of dataDir without changing
// it: what a restart would replay.
func ReadJournal(dataDir string) ([]SwitchValue, error) {
	f, err := os.Open(filepath.Join(dataDir, JournalName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseJournal(f), nil
}

// parseJournal reads complete lines only: a last line without its newline
// was torn by a kill in the middle of a write, and its switch id may be cut
// short, so it is dropped.
func parseJournal(r io.Reader) []SwitchValue {
	var out []SwitchValue
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out // io.EOF, with or without a torn fragment
		}
		parts := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(parts) != 3 {
			continue
		}
		ms, perr := strconv.ParseInt(parts[0], 10, 64)
		v := bridge.Value(parts[1])
		if perr != nil || (v != bridge.On && v != bridge.Off) || parts[2] == "" || strings.ContainsAny(parts[2], " \t") {
			continue
		}
		out = append(out, SwitchValue{SwitchID: parts[2], Value: v, At: time.UnixMilli(ms)})
	}
}
