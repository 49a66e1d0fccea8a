package daemon

// Choosing the storage engine: the one place that does (serve and the
// admin commands both open the store here).

import (
	"context"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// OpenStore opens the store cfg names: PostgreSQL when storage.postgres is
// set, otherwise SQLite in data_dir.
func OpenStore(ctx context.Context, cfg *config.Config) (*store.DB, error) {
	if pg := cfg.Storage.Postgres; pg != nil {
		dsn, err := pg.ReadDSN()
		if err != nil {
			return nil, err
		}
		return store.OpenPostgres(ctx, dsn)
	}
	return store.Open(ctx, cfg.DataDir)
}
