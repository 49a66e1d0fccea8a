package main

import (
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// loadConfig loads the config as serve would, for the commands that use
// it without building its drivers (user, app, install, backup). bridge/config keeps
// the top-level keys it does not know for the drivers, so the sections no
// driver claims are checked here, with the rest, so that every problem is
// listed at once: a misspelt data_dir must not send the command to the
// default data directory without a word.
func loadConfig(path string) (*config.Config, error) {
	ps := &config.Problems{}
	cfg, err := config.Load(path, config.ForServe(), config.AllProblems(ps))
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
