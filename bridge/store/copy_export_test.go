package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// AfterCopyTable lets tests make a copy to PostgreSQL fail half way.
var AfterCopyTable = &afterCopyTable

// DumpTables reads every table of the schema (PostgreSQL's schema_version
// aside), each row as one line of its columns in the order of their names,
// the lines sorted: the same records read the same on both dialects.
func (db *DB) DumpTables(ctx context.Context) (map[string][]string, error) {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	tables := map[string][]string{}
	if db.dialect == SQLite {
		ts, err := sqliteTables(ctx, tx)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			tables[t.name] = t.columns
		}
	} else {
		ts, err := postgresTables(ctx, tx)
		if err != nil {
			return nil, err
		}
		for t, cols := range ts {
			if postgresOnly[t] {
				continue
			}
			for _, c := range cols {
				tables[t] = append(tables[t], c.name)
			}
		}
	}
	out := map[string][]string{}
	for t, cols := range tables {
		cols = slices.Sorted(slices.Values(cols))
		rows, err := tx.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+sqliteIdent(t))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		lines := []string{}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			var b strings.Builder
			for i, v := range vals {
				switch x := v.(type) {
				case nil:
					fmt.Fprintf(&b, "%s=NULL ", cols[i])
				case []byte:
					fmt.Fprintf(&b, "%s=x'%x' ", cols[i], x)
				case string:
					fmt.Fprintf(&b, "%s=%q ", cols[i], x)
				default:
					fmt.Fprintf(&b, "%s=%v ", cols[i], x)
				}
			}
			lines = append(lines, b.String())
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		slices.Sort(lines)
		out[t] = lines
	}
	return out, nil
}

// TriggersDisabled lists the PostgreSQL triggers that are not enabled.
func (db *DB) TriggersDisabled(ctx context.Context) ([]string, error) {
	return QueryStrings(ctx, db.db, `SELECT c.relname || '.' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE NOT t.tgisinternal AND t.tgenabled = 'D' AND c.relnamespace = current_schema()::regnamespace ORDER BY 1`)
}

// ExecWithoutForeignKeys runs a statement on one connection with SQLite's foreign
// keys off, so that a test can plant a row the schema would refuse.
func (db *DB) ExecWithoutForeignKeys(ctx context.Context, q string, args ...any) error {
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON")
	_, err = conn.ExecContext(ctx, q, args...)
	return err
}
