package store

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
// The daemon folds the journal into the database in batches
// (DB.FoldJournalAudited with a Mark, then CompactTo) and replays it at
// start-up (Replay). Only the daemon writes it:
// the administration commands never touch switch values, and backup only
// reads it.
//
// Each generation of the file (from empty to the next compaction) starts with
// a line "#gen N", N random. Folding records (N, bytes folded) in the
// database in the same transaction as the values, so a replay or a backup
// knows which lines the database already holds, even when the daemon was
// killed between that commit and emptying the file.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	size int64 // the file's length: only this Journal writes it
	gen  int64 // the generation of what the file holds, or of the next first line
}

// JournalMark is how far a generation of the journal has been folded into
// the database.
type JournalMark struct {
	Generation int64
	Size       int64
}

// maxJournalLine bounds one line: a timestamp, a value and a switch id are
// far shorter; anything longer is damage and is skipped, not buffered.
const maxJournalLine = 1024

const saveFold = `INSERT INTO journal_fold (id, generation, size) VALUES (1, ?, ?)
	ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, size = excluded.size`

// OpenJournal opens (creating) the journal in dataDir.
func OpenJournal(dataDir string) (*Journal, error) {
	path := filepath.Join(dataDir, JournalName)
	os.Remove(path + journalNext)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, FileMode)
	if err != nil {
		return nil, ExplainDiskFull(fmt.Errorf("value journal: %w", err), dataDir)
	}
	// The mode given to OpenFile is masked by the umask and ignored for a
	// file that exists already.
	if err := f.Chmod(FileMode); err != nil {
		f.Close()
		return nil, fmt.Errorf("value journal: %w", err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("value journal: %w", err)
	}
	j := &Journal{f: f, path: path, size: size, gen: newGeneration()}
	if size > 0 {
		rep, err := parseJournal(io.NewSectionReader(f, 0, size))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("value journal: %w", err)
		}
		j.gen = rep.Generation // appends continue that generation
	}
	return j, nil
}

func newGeneration() int64 { return rand.Int64N(1<<62) + 1 } // never 0, the generation of a journal without a first line

// Append writes values in one write. A line is "<unix ms> <value> <switch
// id>": switch ids have no spaces (config.SwitchIDPattern).
func (j *Journal) Append(vs []SwitchValue) error {
	return j.AppendAudited(vs, nil)
}

// AppendAudited writes values and a command's audit records in one write:
// the audit log costs no write of its own. An audit line is "<unix ms>
// audit <JSON record>" (JSON escapes every byte a line could break on).
func (j *Journal) AppendAudited(vs []SwitchValue, recs []bridge.AuditRecord) error {
	if len(vs) == 0 && len(recs) == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	// A value's line is under 64 bytes, a record's about 250.
	b := make([]byte, 0, 32+64*len(vs)+256*len(recs))
	if j.size == 0 {
		b = append(b, "#gen "...)
		b = strconv.AppendInt(b, j.gen, 10)
		b = append(b, '\n')
	}
	for _, v := range vs {
		b = strconv.AppendInt(b, unix(v.At), 10)
		b = append(b, ' ')
		b = append(b, v.Value...)
		b = append(b, ' ')
		b = append(b, v.SwitchID...)
		b = append(b, '\n')
	}
	for _, r := range recs {
		b = strconv.AppendInt(b, unix(r.At), 10)
		b = append(b, " audit "...)
		var err error
		if b, err = appendAuditJSON(b, r); err != nil {
			return err
		}
		b = append(b, '\n')
	}
	if _, err := j.f.Write(b); err != nil {
		// A short write (a full disk) would leave a line without its
		// newline, which would swallow the next line appended.
		j.f.Truncate(j.size)
		return err
	}
	j.size += int64(len(b))
	return nil
}

// Mark is how far the journal is written now. Saving a batch with
// DB.FoldJournal(batch, Mark()) records that everything up to here is in
// the database; the caller must make sure no Append comes in between.
func (j *Journal) Mark() JournalMark {
	j.mu.Lock()
	defer j.mu.Unlock()
	return JournalMark{Generation: j.gen, Size: j.size}
}

// FoldJournal stores values and, in the same transaction, that the journal
// is folded up to mark.
func (db *DB) FoldJournal(ctx context.Context, vs []SwitchValue, mark JournalMark) error {
	return db.saveValues(ctx, vs, nil, &mark)
}

// FoldJournalAudited is FoldJournal with the audit records journaled
// beside the values, stored in the same transaction.
func (db *DB) FoldJournalAudited(ctx context.Context, vs []SwitchValue, recs []bridge.AuditRecord, mark JournalMark) error {
	return db.saveValues(ctx, vs, recs, &mark)
}

// journalFold is the last mark folded, ok false when none was.
func (db *DB) journalFold(ctx context.Context) (m JournalMark, ok bool, err error) {
	err = db.db.QueryRowContext(ctx, `SELECT generation, size FROM journal_fold WHERE id = 1`).Scan(&m.Generation, &m.Size)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	return m, err == nil, err
}

// JournalReport is what Replay found in the journal, for the log: nothing
// the journal held is dropped without being counted here.
type JournalReport struct {
	// Replayed is how many values went into the database; AuditReplayed
	// how many audit records.
	Replayed, AuditReplayed int
	// Folded is how many lines the database already held: a daemon killed
	// between storing a batch and emptying the journal.
	Folded int
	// Unreadable counts lines that are not "<ms> on|off <switch id>";
	// UnreadableAt holds the byte offsets of the first few.
	Unreadable   int
	UnreadableAt []int64
	// TornBytes is the length of a last line without its newline, at
	// TornAt: a write cut short. It was never acknowledged, and is cut.
	TornAt, TornBytes int64
	// Overridden lists journaled values that replaced a stored value with
	// a later time stamp (the clock stepped back between them).
	Overridden []Override
}

// Override is a journaled value that replaced a value stored with a later
// time: the journal is replayed in the order it was written, so it wins.
type Override struct {
	SwitchID              string
	Journaled, Stored     bridge.Value
	JournaledAt, StoredAt time.Time
}

// maxReported bounds the offsets and overrides a report lists.
const maxReported = 20

// Replay folds what the journal holds and the database does not yet into
// db, in the order it was written (every line not yet folded is newer than
// the database), and empties the journal. It reports what it skipped.
func (j *Journal) Replay(db *DB) (*JournalReport, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ctx := context.Background()
	size, err := j.f.Seek(0, io.SeekEnd) // all there is, appended by whichever process
	if err != nil {
		return nil, err
	}
	j.size = size
	parsed, err := parseJournal(io.NewSectionReader(j.f, 0, j.size))
	if err != nil {
		return nil, err
	}
	fold, folded, err := db.journalFold(ctx)
	if err != nil {
		return nil, err
	}
	rep := &JournalReport{Unreadable: parsed.Unreadable, UnreadableAt: parsed.UnreadableAt, TornAt: parsed.TornAt, TornBytes: parsed.TornBytes}
	vs := parsed.unfolded(fold, folded)
	recs := parsed.unfoldedAudit(fold, folded)
	rep.Folded = len(parsed.Values) - len(vs)
	rep.Overridden, err = db.overrides(ctx, vs)
	if err != nil {
		return nil, err
	}
	if len(vs) > 0 || j.size > 0 {
		if err := db.FoldJournalAudited(ctx, vs, recs, JournalMark{Generation: parsed.Generation, Size: j.size}); err != nil {
			return nil, err
		}
	}
	rep.Replayed, rep.AuditReplayed = len(vs), len(recs)
	if j.size == 0 {
		return rep, nil // nothing to empty (and the file may not be one that truncates)
	}
	return rep, j.truncateLocked()
}

// overrides lists the values in vs (their last per switch) that replace a
// different stored value stamped later.
func (db *DB) overrides(ctx context.Context, vs []SwitchValue) ([]Override, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	last := map[string]SwitchValue{}
	var order []string
	for _, v := range vs {
		if _, seen := last[v.SwitchID]; !seen {
			order = append(order, v.SwitchID)
		}
		last[v.SwitchID] = v
	}
	var out []Override
	for _, id := range order {
		var stored string
		var at int64
		err := db.db.QueryRowContext(ctx, `SELECT value, updated_at FROM switch_states WHERE switch_id = ?`, id).Scan(&stored, &at)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		v := last[id]
		if bridge.Value(stored) != v.Value && unix(v.At) < at && len(out) < maxReported {
			out = append(out, Override{SwitchID: id, Journaled: v.Value, JournaledAt: v.At, Stored: bridge.Value(stored), StoredAt: fromUnix(at)})
		}
	}
	return out, nil
}

// CompactTo drops what the database holds of the journal once a fold
// stored it with mark (DB.FoldJournalAudited), while appends went on
// during the fold's transaction. When nothing was appended since the
// mark, the file is emptied. Else the lines appended since go to a new
// file of a new generation, renamed over the journal: at every instant
// the file and the database's mark hold each line once (the old file's
// lines past the mark, or the new file whole, since the mark names a
// generation it is not). A mark of an older generation, or of an empty
// journal, leaves it alone.
func (j *Journal) CompactTo(mark JournalMark) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if mark.Generation != j.gen || mark.Size == 0 || mark.Size > j.size {
		return nil
	}
	if mark.Size == j.size {
		return j.truncateLocked()
	}
	tail := make([]byte, j.size-mark.Size)
	if _, err := j.f.ReadAt(tail, mark.Size); err != nil {
		return err
	}
	gen := newGeneration()
	b := append(strconv.AppendInt([]byte("#gen "), gen, 10), '\n')
	b = append(b, tail...)
	next := j.path + journalNext
	f, err := os.OpenFile(next, os.O_CREATE|os.O_TRUNC|os.O_RDWR|os.O_APPEND, FileMode)
	if err != nil {
		return err
	}
	err = f.Chmod(FileMode) // the mode given to OpenFile is masked by the umask
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = os.Rename(next, j.path)
	}
	if err != nil {
		f.Close()
		os.Remove(next)
		return err
	}
	j.f.Close()
	j.f, j.size, j.gen = f, int64(len(b)), gen
	return nil
}

// journalNext names, after the journal's, the file CompactTo writes before
// renaming it over the journal; one left by a crash in between is a copy
// of lines the journal still holds, and is removed.
const journalNext = ".next"

func (j *Journal) truncateLocked() error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	j.size = 0
	j.gen = newGeneration()
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// ReadJournal returns the values in the journal of dataDir without changing
// it, whether or not the database already holds them.
func ReadJournal(dataDir string) ([]SwitchValue, error) {
	p, err := readJournalFile(dataDir)
	if err != nil || p == nil {
		return nil, err
	}
	return p.Values, nil
}

func readJournalFile(dataDir string) (*parsedJournal, error) {
	f, err := os.Open(filepath.Join(dataDir, JournalName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Only what is there now: the daemon may be appending.
	return parseJournal(io.NewSectionReader(f, 0, st.Size()))
}

type parsedJournal struct {
	Generation   int64
	Values       []SwitchValue
	Ends         []int64 // the offset just past each value's line
	Audit        []bridge.AuditRecord
	AuditEnds    []int64 // the offset just past each audit line
	Unreadable   int
	UnreadableAt []int64
	TornAt       int64
	TornBytes    int64
}

// unfolded is the values the database does not hold yet, given its fold
// mark: those past the mark in the same generation, or all of another.
func (p *parsedJournal) unfolded(fold JournalMark, ok bool) []SwitchValue {
	if !ok || fold.Generation != p.Generation {
		return p.Values
	}
	for i, end := range p.Ends {
		if end > fold.Size {
			return p.Values[i:]
		}
	}
	return nil
}

// unfoldedAudit is unfolded for the audit records.
func (p *parsedJournal) unfoldedAudit(fold JournalMark, ok bool) []bridge.AuditRecord {
	if !ok || fold.Generation != p.Generation {
		return p.Audit
	}
	for i, end := range p.AuditEnds {
		if end > fold.Size {
			return p.Audit[i:]
		}
	}
	return nil
}

// parseJournal reads complete lines only: a last line without its newline
// was torn by a write cut short (a full disk, a power cut), and its switch
// id may be cut short, so it is dropped and reported. Lines that do not
// parse are counted with their offsets, never silently skipped. Memory is
// bounded by the number of lines, not their length.
func parseJournal(r io.Reader) (*parsedJournal, error) {
	p := &parsedJournal{}
	br := bufio.NewReaderSize(r, maxJournalLine)
	var off int64
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		start := off
		off += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			// Too long to be a line we wrote: skip to its end.
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				off += int64(len(line))
			}
			if err == io.EOF {
				p.TornAt, p.TornBytes = start, off-start
				return p, nil
			}
			if err != nil {
				return nil, err
			}
			p.unreadable(start)
			continue
		}
		if err == io.EOF {
			if len(line) > 0 {
				p.TornAt, p.TornBytes = start, int64(len(line))
			}
			return p, nil
		}
		if err != nil {
			return nil, err
		}
		text := string(bytes.TrimSuffix(line, []byte{'\n'}))
		if n == 0 && strings.HasPrefix(text, "#gen ") {
			if g, err := strconv.ParseInt(strings.TrimPrefix(text, "#gen "), 10, 64); err == nil && g > 0 {
				p.Generation = g
				continue
			}
		}
		if r, isAudit, ok := parseAuditLine(text); isAudit {
			if !ok {
				p.unreadable(start)
				continue
			}
			p.Audit = append(p.Audit, r)
			p.AuditEnds = append(p.AuditEnds, off)
			continue
		}
		v, ok := parseJournalLine(text)
		if !ok {
			p.unreadable(start)
			continue
		}
		p.Values = append(p.Values, v)
		p.Ends = append(p.Ends, off)
	}
}

func (p *parsedJournal) unreadable(at int64) {
	p.Unreadable++
	if len(p.UnreadableAt) < maxReported {
		p.UnreadableAt = append(p.UnreadableAt, at)
	}
}

// parseAuditLine reads "<ms> audit <JSON>"; isAudit is whether the line
// is one, ok whether it reads.
func parseAuditLine(line string) (r bridge.AuditRecord, isAudit, ok bool) {
	ms, rest, found := strings.Cut(line, " audit ")
	if !found {
		return r, false, false
	}
	if _, err := strconv.ParseInt(ms, 10, 64); err != nil {
		return r, false, false
	}
	if err := json.Unmarshal([]byte(rest), &r); err != nil || r.SwitchID == "" || r.InstallationID == "" {
		return r, true, false
	}
	return r, true, true
}

func parseJournalLine(line string) (SwitchValue, bool) {
	parts := strings.SplitN(line, " ", 3)
	if len(parts) != 3 {
		return SwitchValue{}, false
	}
	ms, perr := strconv.ParseInt(parts[0], 10, 64)
	v := bridge.Value(parts[1])
	if perr != nil || (v != bridge.On && v != bridge.Off) || parts[2] == "" || strings.ContainsAny(parts[2], " \t\x00") {
		return SwitchValue{}, false
	}
	return SwitchValue{SwitchID: parts[2], Value: v, At: time.UnixMilli(ms)}, true
}
