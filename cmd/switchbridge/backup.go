package main

// backup: a consistent copy of the database, while the daemon runs.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/switchbridge/switchbridge/bridge/store"
)

func backup(c *invocation) error {
	if c.args[0] == "" {
		return usageErr("backup takes one FILE to write")
	}
	cfg, file := c.cfg, c.args[0]
	b, ok := c.store.(interface {
		Backup(ctx context.Context, dataDir, dst string) (int, error)
	})
	if !ok {
		return errors.New("this storage engine has no backup command of the hub's: use the engine's own tools")
	}
	values, err := b.Backup(c.ctx, cfg.DataDir, file)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(c.stdout, "backup of %s written to %s (%d switch values from the journal folded in)\n",
		filepath.Join(cfg.DataDir, store.FileName), file, values)
	return nil
}
