package main

// backup: a consistent copy of the database, while the daemon runs.

import (
	"fmt"
	"path/filepath"

	"github.com/switchbridge/switchbridge/bridge/store"
)

func backup(c *invocation) error {
	if c.args[0] == "" {
		return usageErr("backup takes one FILE to write")
	}
	cfg, file := c.cfg, c.args[0]
	values, err := c.db.Backup(c.ctx, cfg.DataDir, file)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(c.stdout, "backup of %s written to %s (%d switch values from the journal folded in)\n",
		filepath.Join(cfg.DataDir, store.FileName), file, values)
	return nil
}
