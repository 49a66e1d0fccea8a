package store

// Moving a platform from SQLite to PostgreSQL, once (migrate-storage).
//
// The copy knows no table by name but the few a fresh schema fills: it
// lists the tables of the SQLite schema, copies each by its columns' names
// into the table of the same name, parents before children, and checks
// that the two schemas agree first. New tables and columns therefore move
// without a change here, as long as both dialects' migrations add them.
//
// What hubs hold must stay true on the target: a hub's cursor names an
// entry of the change log by its sequence and a digest of its fields
// (changeEntry.tag), and every cached grant is checked against the access
// generation. So the change log, its floor and the access generation are
// copied as they are, with PostgreSQL's triggers (which would append to
// the log and move the generation for every row copied) disabled for the
// copy, and the log's sequence continues after the highest one SQLite ever
// handed out. A hub following the platform then resumes where it is,
// without a snapshot.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// TableRows is how many rows of one table were copied.
type TableRows struct {
	Table string
	Rows  int64
}

// CopyReport says what CopyToPostgres copied and what it checked.
type CopyReport struct {
	// Tables in the order copied: parents before children.
	Tables []TableRows
	// Cursor and CursorTag are the newest point of the change log, on
	// both sides (the floor compaction left, when the log is empty). A
	// hub at any point the source held resumes from there on the target.
	Cursor    int64
	CursorTag string
	// NextChange is the sequence the target's next change gets.
	NextChange int64
}

// ErrTargetNotEmpty is CopyToPostgres's refusal of a database that holds
// switchbridge records already: a copy never merges two platforms.
var ErrTargetNotEmpty = errors.New("the PostgreSQL database holds switchbridge records already; migrate-storage moves a platform into a new, empty database only (it never merges)")

// ErrSourceIsReplica is CopyToPostgres's refusal of a hub's database: it
// holds a replica of its platform, and a hub stays on SQLite.
var ErrSourceIsReplica = errors.New("the SQLite database is a hub's (it holds a replica of its platform's records): a hub keeps its SQLite; only a platform moves to PostgreSQL")

// postgresOnly are the tables only the PostgreSQL schema has: SQLite
// keeps the schema version in PRAGMA user_version.
var postgresOnly = map[string]bool{"schema_version": true}

// freshRows are the rows PostgreSQL's migrations write into an otherwise
// empty schema, as conditions a fresh row meets: a database whose tables
// hold these and nothing else holds no switchbridge records. A migration
// that seeds another table must add it here (the copy tests fail until it
// does: a fresh database would look used).
var freshRows = map[string]string{
	"change_floor":      "id = 1 AND seq = 0 AND tag = ''",
	"id_high_water":     "name = 'users' AND value = 0",
	"access_generation": "id = 1 AND n = 0",
}

// afterCopyTable runs after each table is copied, inside the target's
// transaction; tests replace it to make a copy fail half way.
var afterCopyTable = func(table string) {}

// CopyToPostgres copies every record of src, a platform's SQLite database,
// into dst, a PostgreSQL database with a fresh schema, in one PostgreSQL
// transaction: on any error nothing is left in dst. It reads src through
// one read transaction (a consistent snapshot), yet the platform should be
// stopped: what it writes after the snapshot is not copied.
//
// It refuses a dst that holds any switchbridge record (ErrTargetNotEmpty),
// a src that is a hub's replica (ErrSourceIsReplica), and two schemas that
// do not have the same tables and columns. Before committing it checks
// that each table holds as many rows as the source's, and that the change
// log's newest point (sequence, tag and floor) is the same on both sides;
// after, that dst accepts that point as a hub's cursor (CheckCursor).
func CopyToPostgres(ctx context.Context, src, dst *DB) (*CopyReport, error) {
	if src.dialect != SQLite || dst.dialect != Postgres {
		return nil, fmt.Errorf("copy: from SQLite to PostgreSQL only, not from %s to %s", src.dialect, dst.dialect)
	}
	stx, err := src.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading the SQLite database: %w", err)
	}
	defer stx.Rollback()
	source, err := sqliteTables(ctx, stx)
	if err != nil {
		return nil, fmt.Errorf("reading the SQLite schema: %w", err)
	}
	var replica int64
	if err := stx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM replica_state) + (SELECT count(*) FROM replica_installations)`).Scan(&replica); err != nil {
		return nil, fmt.Errorf("reading the SQLite database: %w", err)
	}
	if replica > 0 {
		return nil, ErrSourceIsReplica
	}

	conn, err := dst.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close()
	// A write transaction: it takes the write lock every writer takes
	// first (dialect.go), so no platform process writes meanwhile, and the
	// emptiness checked below holds until the commit.
	ttx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer ttx.Rollback()
	target, err := postgresTables(ctx, ttx)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the schema: %w", err)
	}
	if err := sameSchema(source, target); err != nil {
		return nil, err
	}
	if err := checkEmpty(ctx, ttx, target); err != nil {
		return nil, err
	}
	order, err := copyOrder(ctx, ttx, source)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the foreign keys: %w", err)
	}

	// DISABLE TRIGGER USER leaves the foreign keys' own triggers on: the
	// rows are still checked. ALTER TABLE is transactional, so a copy that
	// fails leaves the triggers as they were.
	for _, t := range order {
		if _, err := ttx.ExecContext(ctx, "ALTER TABLE "+pgIdent(t)+" DISABLE TRIGGER USER"); err != nil {
			return nil, fmt.Errorf("postgres: disabling the triggers of %s: %w", t, err)
		}
	}
	// The rows a fresh schema starts with (freshRows) make way for the
	// source's, children first.
	for _, t := range slices.Backward(order) {
		if _, err := ttx.ExecContext(ctx, "DELETE FROM "+pgIdent(t)); err != nil {
			return nil, fmt.Errorf("postgres: emptying %s: %w", t, err)
		}
	}
	rep := &CopyReport{}
	for _, t := range order {
		n, err := copyTable(ctx, stx, conn, t, target[t])
		if err != nil {
			return nil, err
		}
		rep.Tables = append(rep.Tables, TableRows{Table: t, Rows: n})
		afterCopyTable(t)
	}
	if rep.NextChange, err = restartSequences(ctx, stx, ttx, order); err != nil {
		return nil, err
	}
	for _, t := range order {
		if _, err := ttx.ExecContext(ctx, "ALTER TABLE "+pgIdent(t)+" ENABLE TRIGGER USER"); err != nil {
			return nil, fmt.Errorf("postgres: enabling the triggers of %s: %w", t, err)
		}
	}

	if err := verifyCopy(ctx, stx, ttx, rep); err != nil {
		return nil, err
	}
	if err := ttx.Commit(); err != nil {
		return nil, fmt.Errorf("postgres: committing the copy: %w", err)
	}
	if err := dst.CheckCursor(ctx, rep.Cursor, rep.CursorTag); err != nil {
		return rep, fmt.Errorf("copied, but PostgreSQL refuses the change log's newest point %d as a hub's cursor (%v): hubs will fetch a snapshot", rep.Cursor, err)
	}
	return rep, nil
}

// column is one column of a table: its name and, on PostgreSQL, its type.
type column struct {
	name, pgType string
}

// sqliteTables lists the SQLite schema's tables (but SQLite's own), in
// the order they were created, each with its columns.
func sqliteTables(ctx context.Context, tx *sql.Tx) ([]sqliteTable, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	var tables []sqliteTable
	for rows.Next() {
		var t sqliteTable
		if err := rows.Scan(&t.name); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range tables {
		cols, err := QueryStrings(ctx, tx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, tables[i].name)
		if err != nil {
			return nil, err
		}
		tables[i].columns = cols
	}
	return tables, nil
}

type sqliteTable struct {
	name    string
	columns []string
}

// postgresTables lists the tables of the current schema with their
// columns.
func postgresTables(ctx context.Context, tx *sql.Tx) (map[string][]column, error) {
	rows, err := tx.QueryContext(ctx, `SELECT c.table_name, c.column_name, c.data_type
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
		ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]column{}
	for rows.Next() {
		var t string
		var c column
		if err := rows.Scan(&t, &c.name, &c.pgType); err != nil {
			return nil, err
		}
		out[t] = append(out[t], c)
	}
	return out, rows.Err()
}

// sameSchema checks that every SQLite table has a PostgreSQL table of the
// same name and columns, and that PostgreSQL has no table SQLite lacks
// but its own: what the copy could not fill, or would drop, means the two
// schemas are of different versions.
func sameSchema(source []sqliteTable, target map[string][]column) error {
	var problems []string
	seen := map[string]bool{}
	for _, t := range source {
		seen[t.name] = true
		cols, ok := target[t.name]
		if !ok {
			problems = append(problems, "table "+t.name+" is missing in PostgreSQL")
			continue
		}
		var pg []string
		for _, c := range cols {
			pg = append(pg, c.name)
		}
		if a, b := slices.Sorted(slices.Values(t.columns)), slices.Sorted(slices.Values(pg)); !slices.Equal(a, b) {
			problems = append(problems, fmt.Sprintf("table %s has columns (%s) in SQLite but (%s) in PostgreSQL", t.name, strings.Join(a, ", "), strings.Join(b, ", ")))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(target)) {
		if !seen[t] && !postgresOnly[t] {
			problems = append(problems, "table "+t+" is missing in SQLite")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the SQLite and PostgreSQL schemas differ (%s): run migrate-storage with the switchbridge that last ran the platform, the version that made the PostgreSQL schema", strings.Join(problems, "; "))
	}
	return nil
}

// checkEmpty refuses a target holding any switchbridge record: any row in
// a table, but the rows a fresh schema starts with (freshRows).
func checkEmpty(ctx context.Context, tx *sql.Tx, target map[string][]column) error {
	for _, t := range slices.Sorted(maps.Keys(target)) {
		if postgresOnly[t] {
			continue
		}
		q := "SELECT count(*) FROM " + pgIdent(t)
		if cond, ok := freshRows[t]; ok {
			q += " WHERE NOT (" + cond + ")"
		}
		var n int64
		if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("postgres: counting the rows of %s: %w", t, err)
		}
		if n > 0 {
			return fmt.Errorf("%w: table %s is not empty (%d rows)", ErrTargetNotEmpty, t, n)
		}
	}
	return nil
}

// copyOrder orders the tables so that every table comes after those its
// foreign keys (PostgreSQL's, which check the copy) point at, and otherwise
// in the order SQLite created them.
func copyOrder(ctx context.Context, tx *sql.Tx, tables []sqliteTable) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT child.relname, parent.relname FROM pg_constraint c
		JOIN pg_class child ON child.oid = c.conrelid
		JOIN pg_class parent ON parent.oid = c.confrelid
		WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace`)
	if err != nil {
		return nil, err
	}
	parents := map[string][]string{}
	for rows.Next() {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			rows.Close()
			return nil, err
		}
		if child != parent {
			parents[child] = append(parents[child], parent)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var order []string
	placed := map[string]bool{}
	for len(order) < len(tables) {
		progress := false
		for _, t := range tables {
			if placed[t.name] {
				continue
			}
			ready := true
			for _, p := range parents[t.name] {
				ready = ready && placed[p]
			}
			if ready {
				order = append(order, t.name)
				placed[t.name] = true
				progress = true
				break // from the first again: creation order among the ready
			}
		}
		if !progress {
			return nil, errors.New("the foreign keys form a cycle")
		}
	}
	return order, nil
}

// copyTable streams one table's rows from the SQLite snapshot into
// PostgreSQL with COPY, on the target transaction's connection, and
// checks the number copied against the source's count.
func copyTable(ctx context.Context, stx *sql.Tx, conn *sql.Conn, table string, cols []column) (int64, error) {
	var want int64
	if err := stx.QueryRowContext(ctx, "SELECT count(*) FROM "+sqliteIdent(table)).Scan(&want); err != nil {
		return 0, fmt.Errorf("reading %s from SQLite: %w", table, err)
	}
	names := make([]string, len(cols))
	quoted := make([]string, len(cols))
	conv := make([]func(any) (any, error), len(cols))
	for i, c := range cols {
		names[i], quoted[i], conv[i] = c.name, sqliteIdent(c.name), converter(c.pgType)
	}
	rows, err := stx.QueryContext(ctx, "SELECT "+strings.Join(quoted, ", ")+" FROM "+sqliteIdent(table))
	if err != nil {
		return 0, fmt.Errorf("reading %s from SQLite: %w", table, err)
	}
	defer rows.Close()
	src := &rowSource{rows: rows, table: table, cols: names, conv: conv}
	var n int64
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*pgConn)
		if !ok {
			return fmt.Errorf("unexpected connection %T", dc)
		}
		var err error
		n, err = pc.Conn.Conn().CopyFrom(ctx, pgx.Identifier{table}, names, src)
		return err
	})
	if src.err != nil {
		return 0, src.err
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: copying %s: %w", table, err)
	}
	if n != want {
		return 0, fmt.Errorf("copying %s: %d rows copied of %d", table, n, want)
	}
	return n, nil
}

// rowSource is a pgx.CopyFromSource over SQLite rows, each value made the
// Go type that PostgreSQL's column takes.
type rowSource struct {
	rows  *sql.Rows
	table string
	cols  []string
	conv  []func(any) (any, error)
	vals  []any
	err   error // a source error; the COPY is aborted with it
}

func (r *rowSource) Next() bool {
	if r.err != nil || !r.rows.Next() {
		return false
	}
	raw := make([]any, len(r.cols))
	ptrs := make([]any, len(r.cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		r.err = fmt.Errorf("reading %s from SQLite: %w", r.table, err)
		return false
	}
	for i, v := range raw {
		c, err := r.conv[i](v)
		if err != nil {
			r.err = fmt.Errorf("copying %s.%s: %w", r.table, r.cols[i], err)
			return false
		}
		raw[i] = c
	}
	r.vals = raw
	return true
}

func (r *rowSource) Values() ([]any, error) { return r.vals, nil }

func (r *rowSource) Err() error {
	if r.err != nil {
		return r.err
	}
	if err := r.rows.Err(); err != nil {
		return fmt.Errorf("reading %s from SQLite: %w", r.table, err)
	}
	return nil
}

// converter returns how a value read from SQLite becomes one of the
// PostgreSQL type: SQLite keeps whatever type a value was written with, so
// a hash written as a string is TEXT there and must be bytes here.
func converter(pgType string) func(any) (any, error) {
	switch pgType {
	case "bigint", "integer", "smallint":
		return func(v any) (any, error) {
			switch x := v.(type) {
			case nil, int64:
				return x, nil
			case float64:
				if x == float64(int64(x)) {
					return int64(x), nil
				}
			case string:
				if n, err := strconv.ParseInt(x, 10, 64); err == nil {
					return n, nil
				}
			case []byte:
				if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
					return n, nil
				}
			}
			return nil, fmt.Errorf("%T %v is not an integer", v, v)
		}
	case "text":
		return func(v any) (any, error) {
			switch x := v.(type) {
			case nil, string:
				return x, nil
			case []byte:
				return string(x), nil
			case int64:
				return strconv.FormatInt(x, 10), nil
			}
			return nil, fmt.Errorf("%T %v is not text", v, v)
		}
	case "bytea":
		return func(v any) (any, error) {
			switch x := v.(type) {
			case nil, []byte:
				return x, nil
			case string:
				return []byte(x), nil
			}
			return nil, fmt.Errorf("%T %v is not bytes", v, v)
		}
	}
	return func(v any) (any, error) { return v, nil }
}

// restartSequences makes each identity column of the copied tables (the
// change log's seq) continue after the highest value SQLite ever gave it:
// the highest copied, the one sqlite_sequence remembers (AUTOINCREMENT
// never reuses a value, even one whose row is gone), and for the change
// log its floor, which compaction may have left above every entry. It
// returns the change log's next sequence.
//
// ALTER TABLE ... RESTART rather than setval: setval is not undone by a
// rollback, RESTART is, so a copy that fails leaves the sequence as well
// as the tables as they were.
func restartSequences(ctx context.Context, stx, ttx *sql.Tx, order []string) (int64, error) {
	rows, err := ttx.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	type ident struct{ table, column string }
	var idents []ident
	for rows.Next() {
		var id ident
		if err := rows.Scan(&id.table, &id.column); err != nil {
			rows.Close()
			return 0, fmt.Errorf("postgres: %w", err)
		}
		if slices.Contains(order, id.table) {
			idents = append(idents, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	var hasSeq bool
	if err := stx.QueryRowContext(ctx, `SELECT count(*) > 0 FROM sqlite_master WHERE name = 'sqlite_sequence'`).Scan(&hasSeq); err != nil {
		return 0, fmt.Errorf("reading SQLite's sequences: %w", err)
	}
	var nextChange int64 = 1
	for _, id := range idents {
		var top int64
		if err := ttx.QueryRowContext(ctx, "SELECT coalesce(max("+pgIdent(id.column)+"), 0) FROM "+pgIdent(id.table)).Scan(&top); err != nil {
			return 0, fmt.Errorf("postgres: %w", err)
		}
		if hasSeq {
			var s sql.NullInt64
			err := stx.QueryRowContext(ctx, `SELECT max(seq) FROM sqlite_sequence WHERE name = ?`, id.table).Scan(&s)
			if err != nil {
				return 0, fmt.Errorf("reading SQLite's sequences: %w", err)
			}
			top = max(top, s.Int64)
		}
		if id.table == "changes" {
			var floor int64
			if err := ttx.QueryRowContext(ctx, `SELECT seq FROM change_floor WHERE id = 1`).Scan(&floor); err != nil {
				return 0, fmt.Errorf("postgres: reading the change log's floor: %w", err)
			}
			top = max(top, floor)
			nextChange = top + 1
		}
		q := fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s RESTART WITH %d", pgIdent(id.table), pgIdent(id.column), top+1)
		if _, err := ttx.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("postgres: continuing the sequence of %s.%s: %w", id.table, id.column, err)
		}
	}
	return nextChange, nil
}

// verifyCopy checks, inside the target's transaction, that every table
// holds as many rows as the source's and that the change log's newest
// point is the same on both sides, and records that point.
func verifyCopy(ctx context.Context, stx, ttx *sql.Tx, rep *CopyReport) error {
	for _, t := range rep.Tables {
		var n int64
		if err := ttx.QueryRowContext(ctx, "SELECT count(*) FROM "+pgIdent(t.Table)).Scan(&n); err != nil {
			return fmt.Errorf("postgres: counting %s: %w", t.Table, err)
		}
		if n != t.Rows {
			return fmt.Errorf("verifying the copy: %s holds %d rows in PostgreSQL, %d in SQLite", t.Table, n, t.Rows)
		}
	}
	newest, floor, tag, err := NewestChange(ctx, stx)
	if err != nil {
		return fmt.Errorf("reading SQLite's change log: %w", err)
	}
	pNewest, pFloor, pTag, err := NewestChange(ctx, ttx)
	if err != nil {
		return fmt.Errorf("postgres: reading the change log: %w", err)
	}
	if newest != pNewest || floor != pFloor || tag != pTag {
		return fmt.Errorf("verifying the copy: the change log ends at %d (tag %s, floor %d) in SQLite but at %d (tag %s, floor %d) in PostgreSQL",
			newest, tag, floor, pNewest, pTag, pFloor)
	}
	rep.Cursor, rep.CursorTag = newest, tag
	return nil
}

// Where says which database db is, for an operator: the SQLite file, or
// the PostgreSQL database, its user and server (never the password).
func (db *DB) Where() string {
	if db.dialect == Postgres {
		return fmt.Sprintf("PostgreSQL database %q as %q at %s", db.pg.Database, db.pg.User, serverName(db.pg))
	}
	return db.path
}

func pgIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

func sqliteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
