package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/switchbridge/switchbridge/bridge/store"
)

func (c *cli) backup(ctx context.Context, args []string) error {
	f := newFlags("backup")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageErr("backup takes one FILE to write")
	}
	cfg, db, err := openConfigStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	values, err := db.Backup(ctx, cfg.DataDir, pos[0])
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(c.stdout, "backup of %s written to %s (%d switch values from the journal folded in)\n",
		filepath.Join(cfg.DataDir, store.FileName), pos[0], values)
	return nil
}
