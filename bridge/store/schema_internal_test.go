package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// The schema is written twice, once per dialect (migrations/sqlite and
// migrations/postgres). TestSchemasAgree is what keeps the two one
// schema: after every migration, on real SQLite and real PostgreSQL,
// every table both hold has the same columns in the same order, with the
// same types as mapped, the same NOT NULL, the same primary key and the
// same indexes (columns, uniqueness) and the same foreign keys (columns,
// referenced table and column, what a delete does) and the same triggers
// (the change log's: a write one dialect logs, the other must too); and each table only one holds is
// named in onlySQLite or onlyPostgres with the reason.

// onlySQLite are the tables a PostgreSQL database never holds, and why.
var onlySQLite = map[string]string{}

// onlyPostgres are the tables SQLite never holds, and why.
var onlyPostgres = map[string]string{
	"schema_version": "SQLite keeps the number of migrations applied in PRAGMA user_version",
}

// schemaColumn is a column as both dialects can say it.
type schemaColumn struct {
	name    string
	typ     string // the SQLite affinity name: INTEGER, TEXT, REAL, BLOB
	notNull bool
}

// schemaIndex is an index as both dialects can say it.
type schemaIndex struct {
	columns string // comma-separated, in order
	unique  bool
}

// tableSchema is what TestSchemasAgree compares of a table.
type tableSchema struct {
	columns    []schemaColumn
	primaryKey string // comma-separated, in order
	indexes    []schemaIndex
	foreign    []string // "column -> table.column on delete RULE", sorted
	triggers   []string // names, sorted: the change log is written by them
}

func (s tableSchema) String() string {
	var b strings.Builder
	for _, c := range s.columns {
		fmt.Fprintf(&b, "  %s %s notnull=%v\n", c.name, c.typ, c.notNull)
	}
	fmt.Fprintf(&b, "  primary key (%s)\n", s.primaryKey)
	for _, i := range s.indexes {
		fmt.Fprintf(&b, "  schemaIndex (%s) unique=%v\n", i.columns, i.unique)
	}
	return b.String()
}

func TestSchemasAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: PostgreSQL")
	}
	ctx := context.Background()
	lite, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := OpenPostgres(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()

	ls, err := sqliteSchema(ctx, lite)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := postgresSchema(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) < 10 || len(ps) < 10 {
		t.Fatalf("read %d SQLite and %d PostgreSQL tables: the introspection missed the schema", len(ls), len(ps))
	}
	for name, l := range ls {
		p, ok := ps[name]
		if !ok {
			if _, why := onlySQLite[name]; !why {
				t.Errorf("table %s is in SQLite's schema, not in PostgreSQL's (name it in onlySQLite with the reason if it belongs to a hub alone)", name)
			}
			continue
		}
		if l.String() != p.String() {
			t.Errorf("table %s differs:\n--- SQLite\n%s--- PostgreSQL\n%s", name, l, p)
		}
	}
	for name := range ps {
		if _, ok := ls[name]; !ok {
			if _, why := onlyPostgres[name]; !why {
				t.Errorf("table %s is in PostgreSQL's schema, not in SQLite's", name)
			}
		}
	}
}

// sqliteAffinity maps a declared SQLite type to its affinity (SQLite's
// rules, section 3.1 of its datatype page).
func sqliteAffinity(decl string) string {
	d := strings.ToUpper(decl)
	switch {
	case strings.Contains(d, "INT"):
		return "INTEGER"
	case strings.Contains(d, "CHAR"), strings.Contains(d, "CLOB"), strings.Contains(d, "TEXT"):
		return "TEXT"
	case d == "" || strings.Contains(d, "BLOB"):
		return "BLOB"
	case strings.Contains(d, "REAL"), strings.Contains(d, "FLOA"), strings.Contains(d, "DOUB"):
		return "REAL"
	}
	return "NUMERIC:" + d
}

// postgresAffinity maps a PostgreSQL type to the SQLite affinity the
// schema's other half uses for the same values.
func postgresAffinity(typ string) string {
	switch typ {
	case "bigint", "integer", "smallint", "boolean":
		return "INTEGER"
	case "text", "character varying":
		return "TEXT"
	case "bytea":
		return "BLOB"
	case "double precision", "real":
		return "REAL"
	}
	return "UNMAPPED:" + typ
}

func sqliteSchema(ctx context.Context, db *DB) (map[string]tableSchema, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	out := map[string]tableSchema{}
	for _, name := range names {
		var s tableSchema
		pk := map[int]string{}
		cols, err := db.db.QueryContext(ctx, `SELECT name, type, "notnull", pk FROM pragma_table_info(?)`, name)
		if err != nil {
			return nil, err
		}
		for cols.Next() {
			var c schemaColumn
			var decl string
			var pkPos int
			if err := cols.Scan(&c.name, &decl, &c.notNull, &pkPos); err != nil {
				cols.Close()
				return nil, err
			}
			c.typ = sqliteAffinity(decl)
			if pkPos > 0 {
				pk[pkPos] = c.name
				c.notNull = true // PostgreSQL makes every key schemaColumn NOT NULL
			}
			s.columns = append(s.columns, c)
		}
		cols.Close()
		for i := 1; i <= len(pk); i++ {
			s.primaryKey += "," + pk[i]
		}
		s.primaryKey = strings.TrimPrefix(s.primaryKey, ",")

		idx, err := db.db.QueryContext(ctx, `SELECT name, "unique", origin FROM pragma_index_list(?)`, name)
		if err != nil {
			return nil, err
		}
		type named struct {
			name   string
			unique bool
		}
		var list []named
		for idx.Next() {
			var n, origin string
			var u bool
			if err := idx.Scan(&n, &u, &origin); err != nil {
				idx.Close()
				return nil, err
			}
			if origin == "pk" {
				continue // the primary key, compared above
			}
			list = append(list, named{n, u})
		}
		idx.Close()
		for _, ix := range list {
			cs, err := db.db.QueryContext(ctx, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, ix.name)
			if err != nil {
				return nil, err
			}
			var names []string
			for cs.Next() {
				var n string
				if err := cs.Scan(&n); err != nil {
					cs.Close()
					return nil, err
				}
				names = append(names, n)
			}
			cs.Close()
			s.indexes = append(s.indexes, schemaIndex{strings.Join(names, ","), ix.unique})
		}
		sortIndexes(s.indexes)
		fks, err := db.db.QueryContext(ctx, `SELECT "from", "table", coalesce("to", ''), on_delete FROM pragma_foreign_key_list(?)`, name)
		if err != nil {
			return nil, err
		}
		for fks.Next() {
			var from, table, to, rule string
			if err := fks.Scan(&from, &table, &to, &rule); err != nil {
				fks.Close()
				return nil, err
			}
			s.foreign = append(s.foreign, fmt.Sprintf("%s -> %s.%s on delete %s", from, table, to, rule))
		}
		fks.Close()
		slices.Sort(s.foreign)
		out[name] = s
	}
	trs, err := db.db.QueryContext(ctx, `SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'`)
	if err != nil {
		return nil, err
	}
	defer trs.Close()
	for trs.Next() {
		var table, name string
		if err := trs.Scan(&table, &name); err != nil {
			return nil, err
		}
		s := out[table]
		s.triggers = append(s.triggers, name)
		slices.Sort(s.triggers)
		out[table] = s
	}
	return out, trs.Err()
}

func postgresSchema(ctx context.Context, db *DB) (map[string]tableSchema, error) {
	out := map[string]tableSchema{}
	cols, err := db.db.QueryContext(ctx, `SELECT table_name, column_name, data_type, is_nullable = 'NO'
		FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`)
	if err != nil {
		return nil, err
	}
	for cols.Next() {
		var table, typ string
		var c schemaColumn
		if err := cols.Scan(&table, &c.name, &typ, &c.notNull); err != nil {
			cols.Close()
			return nil, err
		}
		c.typ = postgresAffinity(typ)
		s := out[table]
		s.columns = append(s.columns, c)
		out[table] = s
	}
	cols.Close()
	// Indexes, the primary key's among them, with their columns in order.
	idx, err := db.db.QueryContext(ctx, `SELECT t.relname, ix.indisprimary, ix.indisunique,
			array_to_string(ARRAY(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n)
				JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.n), ',')
		FROM pg_index ix JOIN pg_class t ON t.oid = ix.indrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace
		WHERE ns.nspname = current_schema()`)
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	for idx.Next() {
		var table, columns string
		var primary, unique bool
		if err := idx.Scan(&table, &primary, &unique, &columns); err != nil {
			return nil, err
		}
		s, ok := out[table]
		if !ok {
			continue
		}
		if primary {
			s.primaryKey = columns
		} else {
			s.indexes = append(s.indexes, schemaIndex{columns, unique})
		}
		out[table] = s
	}
	if err := idx.Err(); err != nil {
		return nil, err
	}
	fks, err := db.db.QueryContext(ctx, `SELECT kcu.table_name, kcu.column_name, ccu.table_name, ccu.column_name, rc.delete_rule
		FROM information_schema.referential_constraints rc
		JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = rc.constraint_name AND kcu.constraint_schema = rc.constraint_schema
		JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = rc.constraint_name AND ccu.constraint_schema = rc.constraint_schema
		WHERE rc.constraint_schema = current_schema()`)
	if err != nil {
		return nil, err
	}
	defer fks.Close()
	for fks.Next() {
		var table, from, refTable, to, rule string
		if err := fks.Scan(&table, &from, &refTable, &to, &rule); err != nil {
			return nil, err
		}
		if s, ok := out[table]; ok {
			s.foreign = append(s.foreign, fmt.Sprintf("%s -> %s.%s on delete %s", from, refTable, to, rule))
			out[table] = s
		}
	}
	if err := fks.Err(); err != nil {
		return nil, err
	}
	trs, err := db.db.QueryContext(ctx, `SELECT DISTINCT event_object_table, trigger_name FROM information_schema.triggers WHERE trigger_schema = current_schema()`)
	if err != nil {
		return nil, err
	}
	defer trs.Close()
	for trs.Next() {
		var table, name string
		if err := trs.Scan(&table, &name); err != nil {
			return nil, err
		}
		if s, ok := out[table]; ok {
			s.triggers = append(s.triggers, name)
			out[table] = s
		}
	}
	if err := trs.Err(); err != nil {
		return nil, err
	}
	for name, s := range out {
		sortIndexes(s.indexes)
		slices.Sort(s.foreign)
		slices.Sort(s.triggers)
		out[name] = s
	}
	return out, nil
}

func sortIndexes(ix []schemaIndex) {
	slices.SortFunc(ix, func(a, b schemaIndex) int {
		if c := strings.Compare(a.columns, b.columns); c != 0 {
			return c
		}
		if a.unique == b.unique {
			return 0
		}
		if a.unique {
			return 1
		}
		return -1
	})
}
