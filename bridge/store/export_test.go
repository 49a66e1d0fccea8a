package store

import "context"

// CountRows counts a table's rows, for tests of pruning.
func (db *DB) CountRows(ctx context.Context, table string) (int, error) {
	var n int
	err := db.db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}

// AfterBackupCopy lets store_test play a daemon that stores a batch between
// a backup's copy of the database and its read of the journal.
var AfterBackupCopy = &afterCopy
