package main

import (
	"context"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// loadConfig is config.Load for the commands that use the config without
// building its drivers (user, app, install, backup). bridge/config keeps
// the top-level keys it does not know for the drivers, so the sections no
// driver claims are checked here, with the rest, so that every problem is
// listed at once: a misspelt data_dir must not send the command to the
// default data directory without a word.
func loadConfig(path string) (*config.Config, error) {
	cfg, ps, err := config.LoadAll(path)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		ps.Merge(builtin.Registry().CheckSections(cfg), 0)
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// openConfigStore loads the config at path and opens its database, for
// the commands that need both.
func openConfigStore(ctx context.Context, path string) (*config.Config, *store.DB, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	db, err := store.Open(ctx, cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	return cfg, db, nil
}

// openStore loads the config at path and opens the store it names.
func openStore(ctx context.Context, path string) (*store.DB, error) {
	_, db, err := openConfigStore(ctx, path)
	return db, err
}
