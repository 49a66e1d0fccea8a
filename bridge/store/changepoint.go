package store

// The change log's points: the log is written by the schema's triggers
// (migrations), and what a point in it is (its sequence, its tag, the
// floor compaction leaves) is read here, where the copy to PostgreSQL
// checks that both sides end at the same point, and by the platform's
// change feed (bridge/platform/accounts).

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/switchbridge/switchbridge/bridge"
)

// NewestChange returns, in tx, the sequence of the newest change, its tag, and
// the floor below which the log was compacted. AUTOINCREMENT never reuses
// a sequence, even once compaction emptied the log: the floor then is the
// newest, with the tag of the entry it dropped last.
func NewestChange(ctx context.Context, tx *sql.Tx) (newest, floor int64, tag string, err error) {
	var floorTag string
	if err := tx.QueryRowContext(ctx, `SELECT seq, tag FROM change_floor WHERE id = 1`).Scan(&floor, &floorTag); err != nil {
		return 0, 0, "", err
	}
	var e ChangeEntry
	err = tx.QueryRowContext(ctx, `SELECT seq, kind, location_id, key, at FROM changes ORDER BY seq DESC LIMIT 1`).
		Scan(&e.seq, &e.kind, &e.loc, &e.key, &e.at)
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && e.seq <= floor):
		return floor, floor, floorTag, nil
	case err != nil:
		return 0, 0, "", err
	}
	return e.seq, floor, e.Tag(), nil
}

// ChangeEntry is one entry of the change log (seq, kind, loc, key, at:
// its columns), as its points are told apart by Tag.
type ChangeEntry struct {
	seq, loc  int64
	kind, key string
	at        int64
}

// tag identifies the entry beyond its sequence: a platform restored from
// a backup reuses the sequences past the backup for other entries, made at
// other times. It is a digest of the entry's fields, so it needs no column
// the triggers would have to fill.
func (e ChangeEntry) Tag() string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%d\x00%s\x00%d", e.seq, e.kind, e.loc, e.key, e.at))
	return hex.EncodeToString(h[:8])
}

// CheckCursor returns bridge.ErrCursorGone unless the change log holds the
// point (seq, tag) a hub is at: the entry at seq with that tag, or the
// floor compaction left there.
func (db *DB) CheckCursor(ctx context.Context, seq int64, tag string) error {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, floor, _, err := NewestChange(ctx, tx)
	if err != nil {
		return err
	}
	var have string
	switch e, err := ChangeAt(ctx, tx, seq); {
	case err == nil:
		have = e.Tag()
	case !errors.Is(err, sql.ErrNoRows):
		return err
	case seq == floor:
		if err := tx.QueryRowContext(ctx, `SELECT tag FROM change_floor WHERE id = 1`).Scan(&have); err != nil {
			return err
		}
	default:
		return bridge.ErrCursorGone
	}
	if seq < floor || subtle.ConstantTimeCompare([]byte(have), []byte(tag)) != 1 {
		return bridge.ErrCursorGone
	}
	return nil
}

// CursorFromElsewhere reports whether a hub's cursor (seq, tag) names a
// point this change log never held: past its newest entry, or an entry it
// holds with another tag. That is a platform restored from a backup older
// than what the hub followed (or another platform). A cursor compaction
// dropped is not: the log may well have held it.
func (db *DB) CursorFromElsewhere(ctx context.Context, seq int64, tag string) (bool, error) {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	newest, floor, _, err := NewestChange(ctx, tx)
	if err != nil {
		return false, err
	}
	switch {
	case seq > newest:
		return true, nil
	case seq <= floor:
		return false, nil
	}
	e, err := ChangeAt(ctx, tx, seq)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare([]byte(e.Tag()), []byte(tag)) != 1, nil
}

// ChangeAt reads the change log's entry at seq in tx; sql.ErrNoRows when
// there is none.
func ChangeAt(ctx context.Context, tx *sql.Tx, seq int64) (ChangeEntry, error) {
	e := ChangeEntry{seq: seq}
	err := tx.QueryRowContext(ctx, `SELECT kind, location_id, key, at FROM changes WHERE seq = ?`, seq).Scan(&e.kind, &e.loc, &e.key, &e.at)
	return e, err
}
